//! Windows of schedules that run `after` upstreams. The ticker never fires them; each pass
//! decides their windows from the upstreams' runs for the same window:
//!
//! - every upstream succeeded: the window's run is created PENDING (trigger DEPENDENCY) and
//!   sent to its lane;
//! - an upstream ended without succeeding (FAILED, SKIPPED, COALESCED, CANCELLED, ...): the
//!   window is recorded SKIPPED (UPSTREAM_NOT_SUCCEEDED), so it stays accounted, and its own
//!   downstreams are skipped the same way on the pass that reads it;
//! - an upstream has not ended the window yet: nothing; the watermark stays before it.
//!
//! The create is conditional on the run's key, so racing reconcilers record each window
//! once; a window's run created but not sent (a crash in between) is sent by the next pass.
//! The watermark moves past every window decided, up to the first that still waits.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::ledger::StoredSchedule;
use cronledger_aws::Created;
use cronledger_core::dependency::{decide_windows, Readiness};
use cronledger_core::run::Origin;
use cronledger_core::{Reason, Run, RunStatus, Schedule, Trigger};

use super::{ReconcileError, ReconcileReport, Reconciler};

/// Most windows of one schedule decided in one pass: a minutely schedule's day.
const MAX_WINDOWS_PER_PASS: usize = 1_440;

/// How long a created run may wait unsent before a pass sends it: the creator sends it at
/// once, so one older than this lost its send.
const UNSENT_AFTER: TimeDelta = TimeDelta::minutes(1);

impl Reconciler {
    /// Decides the windows of `stored` (a schedule with `after`) up to `now`; see the
    /// module docs.
    pub(super) async fn follow_upstreams(
        &self,
        stored: &StoredSchedule,
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) -> Result<(), ReconcileError> {
        let schedule = self
            .schedules
            .get(stored)
            .map_err(|e| ReconcileError::Plan(e.to_string()))?;
        let from = stored.reconciled_through;
        let windows: Vec<DateTime<Utc>> = schedule
            .timing()
            .between(from, now)
            .take(MAX_WINDOWS_PER_PASS)
            .collect();
        let (Some(&first), Some(&last)) = (windows.first(), windows.last()) else {
            return Ok(());
        };
        let mut upstream_runs: BTreeMap<String, Vec<Run>> = BTreeMap::new();
        for upstream in &stored.spec.after {
            let runs = self.store.runs_between(upstream, first, last).await?;
            upstream_runs.insert(upstream.clone(), runs);
        }
        let own: BTreeMap<DateTime<Utc>, Run> = self
            .store
            .runs_between(stored.id(), first, last)
            .await?
            .into_iter()
            .filter(|r| r.key.origin == Origin::Expected)
            .map(|r| (r.key.scheduled_for, r))
            .collect();

        let mut through = from;
        let mut waiting = false;
        for (at, readiness) in decide_windows(&stored.spec, &windows, &upstream_runs) {
            let decided = match own.get(&at) {
                Some(run) => {
                    if lost_its_send(run, now) {
                        self.send_dependent(run, now, report).await;
                    }
                    true
                }
                None => {
                    self.record_window(stored, &schedule, at, &readiness, now, report)
                        .await?
                }
            };
            waiting |= !decided;
            if !waiting {
                through = at;
            }
        }
        if through > from {
            if self
                .store
                .advance_watermark(stored.id(), from, through)
                .await?
            {
                report.watermarks_advanced += 1;
            } else {
                report.watermark_races += 1;
            }
        }
        Ok(())
    }

    /// Records the window at `at` as `readiness` says; `false` while it waits.
    async fn record_window(
        &self,
        stored: &StoredSchedule,
        schedule: &Schedule,
        at: DateTime<Utc>,
        readiness: &Readiness,
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) -> Result<bool, ReconcileError> {
        let mut run = schedule.pending_run(
            at,
            schedule.window_for(at),
            Origin::Expected,
            Trigger::Dependency,
            now,
            stored.version,
        );
        match readiness {
            Readiness::Waiting { .. } => return Ok(false),
            Readiness::Ready => {}
            Readiness::Skip { upstream, status } => {
                run.status = RunStatus::Skipped;
                run.reason = Some(Reason::UpstreamNotSucceeded);
                tracing::info!(run = %run.key, %upstream, upstream_status = %status,
                    "window skipped: an upstream did not succeed");
            }
        }
        match self.store.create_run(&run).await? {
            Created::New(run) => {
                report.entries_written += 1;
                if run.status == RunStatus::Skipped {
                    self.metrics.count_for(stored.id(), "UpstreamSkipped", 1);
                    self.count_skipped_for_health(&run).await;
                } else {
                    self.metrics.count_for(stored.id(), "DependencyRuns", 1);
                    self.send_dependent(&run, now, report).await;
                }
            }
            // Another reconciler recorded it first; it sends what it created.
            Created::Existing(_) => report.already_recorded += 1,
        }
        Ok(true)
    }

    /// Claims and sends a dependent run; the claim is conditional, so of two senders one
    /// sends.
    async fn send_dependent(&self, run: &Run, now: DateTime<Utc>, report: &mut ReconcileReport) {
        let lane = super::lane_of(run);
        match self.dispatch(run, lane, now).await {
            Ok(true) => tracing::info!(run = %run.key, %lane, "dependent run sent"),
            Ok(false) => {}
            Err(e) => report.error(&format!("send {}", run.key), &e),
        }
    }
}

/// A dependent run still PENDING and never started after its creator had time to send it.
fn lost_its_send(run: &Run, now: DateTime<Utc>) -> bool {
    run.trigger == Trigger::Dependency
        && run.status == RunStatus::Pending
        && run.attempts == 0
        && run.created_at + UNSENT_AFTER <= now
}
