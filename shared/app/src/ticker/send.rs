//! Sending fired runs to their lanes: one by one or batched (`SendMessageBatch`), each due
//! at its fire time through the SQS delay, then marked QUEUED. A failed send leaves the run
//! PENDING for the reconciler to send; it never loses the run.

use std::time::Duration;

use chrono::{DateTime, Utc};
use cronledger_aws::{LaneError, LaneMessage, StoreError};
use cronledger_core::{Run, RunStatus};
use cronledger_ledger::ledger::{RunChange, Transition};

use super::Ticker;
use crate::faults::CrashPoint;

/// Writes of a sent run's QUEUED mark before the ticker leaves it to the next tick.
const MARK_TRIES: u32 = 3;

impl Ticker {
    /// Sends a PENDING run to its lane, due at `fire_at`, and marks it QUEUED. A failure
    /// leaves it PENDING for the reconciler to send; it never loses the run.
    pub(super) async fn enqueue(
        &self,
        run: &Run,
        fire_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> bool {
        let Some(send) = self.send_of(run, fire_at) else {
            return false;
        };
        let sent = self.lanes.send(&send.0, send.1).await;
        self.after_send(run, sent, now).await
    }

    /// [`Self::enqueue`] for many runs with batched sends (`SendMessageBatch`, 10 a request);
    /// each run's send fails or succeeds alone and is handled as a single one would be.
    /// Each run comes with its fire time (its window, or later when jittered).
    pub(super) async fn enqueue_all(
        &self,
        runs: &[(Run, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> Vec<bool> {
        let sends: Vec<Option<(LaneMessage, Duration)>> = runs
            .iter()
            .map(|(run, fire_at)| self.send_of(run, *fire_at))
            .collect();
        let batch: Vec<(LaneMessage, Duration)> = sends.iter().flatten().cloned().collect();
        let mut results = self.lanes.send_many(&batch).await.into_iter();
        // A run without a send was refused before it (no lane, a crash point).
        let marks: Vec<(&Run, Option<Result<String, LaneError>>)> = runs
            .iter()
            .zip(&sends)
            .map(|((run, _), send)| (run, send.as_ref().and_then(|_| results.next())))
            .collect();
        // At most a transaction's worth of fires: marked all at once.
        futures_util::future::join_all(
            marks
                .into_iter()
                .map(|(run, sent)| self.mark_sent(run, sent, now)),
        )
        .await
    }

    pub(super) async fn mark_sent(
        &self,
        run: &Run,
        sent: Option<Result<String, LaneError>>,
        now: DateTime<Utc>,
    ) -> bool {
        match sent {
            Some(sent) => self.after_send(run, sent, now).await,
            None => false,
        }
    }

    /// The message and SQS delay of a run's send (visible at its fire time), or nothing
    /// when it is not to be sent now (no lane; an injected crash after the run's write).
    pub(super) fn send_of(
        &self,
        run: &Run,
        fire_at: DateTime<Utc>,
    ) -> Option<(LaneMessage, Duration)> {
        if self.crashes(CrashPoint::AfterRunWrite, run) {
            return None;
        }
        let lane = run.lane?;
        let delay = (fire_at - self.send_clock.now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        Some((LaneMessage::next_attempt(run, lane), delay))
    }

    /// After a run's send: a failure leaves it PENDING for a later tick or the reconciler;
    /// a message sent gets its QUEUED mark with the message id.
    pub(super) async fn after_send(
        &self,
        run: &Run,
        sent: Result<String, LaneError>,
        now: DateTime<Utc>,
    ) -> bool {
        let job_id = match sent {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(run = %run.key, error = %e, "send failed; the reconciler will resend");
                return false;
            }
        };
        if self.crashes(CrashPoint::AfterSend, run) {
            return true;
        }
        let sent = Transition::Enqueue {
            lane: run.lane,
            lane_was: None,
            job_id: Some(job_id),
            reason: None,
        };
        let change = RunChange::new(RunStatus::Pending, 0, now, sent);
        // A mark lost to a passing store error would leave the run PENDING with its message
        // on the way: try again. A conflict means a fast worker took the run first: fine.
        for attempt in 1..=MARK_TRIES {
            match self.store.transition_run(&run.key, &change).await {
                Ok(_) => break,
                Err(
                    StoreError::StatusConflict { .. }
                    | StoreError::LeaseLost { .. }
                    | StoreError::InvalidTransition(_),
                ) => break,
                Err(e) if attempt < MARK_TRIES => {
                    tracing::debug!(run = %run.key, error = %e, "QUEUED mark failed; again");
                }
                Err(e) => {
                    // The next tick finds it PENDING past its send deadline and sends again.
                    tracing::warn!(run = %run.key, error = %e, "not marked QUEUED");
                }
            }
        }
        true
    }
}
