//! Lost dispatches: a live run the ticker wrote but never sent (it died between the write
//! and the send, or the send failed) is found by a later tick and sent within its grace.

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_core::jitter::MAX_JITTER;
use cronledger_core::{Lane, Run};

use super::{TickReport, Ticker};
use crate::metrics::Metric;
use crate::runs::{claim, send_claimed};

/// A live run still PENDING this long after its window was not sent (see
/// [`Ticker::redispatch_lost`]).
const SEND_DEADLINE: TimeDelta = TimeDelta::seconds(30);
/// How far back a tick looks for lost dispatches (by window, so a jittered run's fire time
/// is up to [`MAX_JITTER`] later); older ones are the reconciler's.
const REDISPATCH_HORIZON: TimeDelta = TimeDelta::hours(1);
/// Runs read per shard per tick for that check.
const REDISPATCH_LIMIT: u32 = 100;

impl Ticker {
    /// Sends the shard's live runs that are still PENDING past their send deadline: the
    /// ticker that wrote one died before sending it (or its send failed), and waiting for
    /// the reconciler's stuck-run pass would start it past its grace. One small query per
    /// shard and tick, over the last hour of windows (older ones are the reconciler's). The
    /// send is claimed first (PENDING -> QUEUED), so racing tickers send it once; a message
    /// that was sent after all and only its mark lost becomes a duplicate delivery, which
    /// the worker acknowledges.
    pub(super) async fn redispatch_lost(
        &self,
        shard: u32,
        now: DateTime<Utc>,
        report: &mut TickReport,
    ) {
        // A ticker sends a run right after writing it: one written SEND_DEADLINE ago and
        // still unsent was lost, whatever its window. Windows due by now are sent at once
        // (one fired ahead waits for the tick at its window, so no send goes out early).
        let from = now - REDISPATCH_HORIZON - MAX_JITTER.as_delta();
        let to = now;
        let written_by = now - SEND_DEADLINE;
        let pending = match self
            .store
            .pending_live_runs(shard, from, to, REDISPATCH_LIMIT)
            .await
        {
            Ok(runs) => runs,
            Err(e) => {
                report.error(&format!("shard {shard}"), e);
                return;
            }
        };
        let mut claimed: Vec<(Run, Lane)> = Vec::new();
        for run in pending {
            // Parked on purpose (QUEUE_NEW, a backlog's plan, a pause) or sent already.
            if run.reason.is_some() || run.job_id.is_some() || run.created_at > written_by {
                continue;
            }
            // A jittered run is due at its fire time, not its window: not lost before then.
            let due = self
                .schedules
                .last_seen(&run.key.schedule_id)
                .map_or(run.key.scheduled_for, |s| {
                    s.fire_time(run.key.scheduled_for)
                });
            if due > to {
                continue;
            }
            let Some(lane) = run.lane else { continue };
            match claim(self.store.as_ref(), &run, lane, now).await {
                Ok(true) => claimed.push((run, lane)),
                Ok(false) => {}
                Err(e) => report.error(&run.key.schedule_id, e),
            }
        }
        // One request per 10 runs; a failed send leaves its run QUEUED without a message,
        // for the reconciler's QUEUED-too-long rule, as a failed single send did.
        let sent = send_claimed(self.store.as_ref(), self.lanes.as_ref(), &claimed, now).await;
        for ((run, _), sent) in claimed.iter().zip(sent) {
            match sent {
                Ok(()) => {
                    report.redispatched += 1;
                    self.metrics
                        .count_for(&run.key.schedule_id, Metric::LostDispatchesResent, 1);
                    tracing::warn!(run = %run.key, "lost dispatch sent again");
                }
                Err(e) => report.error(&run.key.schedule_id, e),
            }
        }
    }
}
