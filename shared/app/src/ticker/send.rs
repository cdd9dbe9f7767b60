//! Sending fired runs to their lanes, batched (`SendMessageBatch`, 10 a request), each due
//! at its fire time through the SQS delay. The runs were written QUEUED: nothing is written
//! after a send. A failed send is sent again by the next tick (its shard's `sent_through`
//! stays behind).

use std::time::Duration;

use chrono::{DateTime, Utc};
use cronledger_aws::LaneMessage;
use cronledger_core::Run;

use super::Ticker;

impl Ticker {
    /// Sends many runs (`SendMessageBatch`, 10 a request); each run's send fails or
    /// succeeds alone. Each run comes with its fire time (its window, or later when
    /// jittered). `true` per run sent.
    pub(super) async fn enqueue_all(&self, runs: &[(Run, DateTime<Utc>)]) -> Vec<bool> {
        let sends: Vec<Option<(LaneMessage, Duration)>> = runs
            .iter()
            .map(|(run, fire_at)| self.send_of(run, *fire_at))
            .collect();
        let batch: Vec<(LaneMessage, Duration)> = sends.iter().flatten().cloned().collect();
        let mut results = self.lanes.send_many(&batch).await.into_iter();
        // A run without a send was refused before it (no lane, a crash point).
        runs.iter()
            .zip(&sends)
            .map(|((run, _), send)| match send.as_ref().and_then(|_| results.next()) {
                Some(Ok(_)) => true,
                Some(Err(e)) => {
                    tracing::warn!(run = %run.key, error = %e, "send failed; the next tick sends it again");
                    false
                }
                None => false,
            })
            .collect()
    }

    /// The message and SQS delay of a run's send (visible at its fire time), or nothing
    /// when it has no lane.
    pub(super) fn send_of(
        &self,
        run: &Run,
        fire_at: DateTime<Utc>,
    ) -> Option<(LaneMessage, Duration)> {
        let lane = run.lane?;
        let delay = (fire_at - self.send_clock.now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        Some((LaneMessage::next_attempt(run, lane), delay))
    }
}
