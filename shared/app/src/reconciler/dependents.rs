//! The reconciler's part in dependencies (see [`crate::dependents`] for the rules): each
//! pass decides the windows of schedules that run `after` others, up to now, from their
//! upstreams' runs (range records included).
//!
//! The decision is shared with the worker, which makes it first as
//! an upstream's run ends; a pass records what the worker did not get to. A window's run
//! created but not sent (a crash in between) is sent by the next pass. The watermark moves
//! past every window decided, up to the first that still waits.
//!
//! Each pass also keeps every schedule's `downstream` list (who the worker looks at when a
//! run ends) in step with the specs' `after`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_core::dependency::{decide_windows, due_from, entry_at, Readiness};
use cronledger_core::run::Origin;
use cronledger_core::{Run, RunStatus, Schedule, Trigger};
use cronledger_ledger::ledger::{ScheduleState, StoredSchedule};

use crate::dependents::Recorded;

use super::{ReconcileError, ReconcileReport, Reconciler};
use crate::metrics::Metric;

/// The dependency graph a pass reads from the schedules it lists.
#[derive(Debug, Default)]
pub(super) struct Graph {
    /// Upstream -> the schedules (not archived) that run after it.
    downstream: BTreeMap<String, BTreeSet<String>>,
    /// This pass's schedules and the `downstream` lists they keep.
    kept: Vec<(String, Vec<String>)>,
}

impl Graph {
    pub(super) fn add_edges(&mut self, schedules: &[StoredSchedule]) {
        for s in schedules
            .iter()
            .filter(|s| s.state != ScheduleState::Archived)
        {
            for upstream in &s.spec.after {
                self.downstream
                    .entry(upstream.clone())
                    .or_default()
                    .insert(s.id().to_string());
            }
        }
    }

    pub(super) fn keep(&mut self, schedules: &[StoredSchedule]) {
        self.kept.extend(
            schedules
                .iter()
                .filter(|s| s.state != ScheduleState::Archived)
                .map(|s| (s.id().to_string(), s.downstream.clone())),
        );
    }
}

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
                    let entries = upstream_runs.values().filter_map(|runs| entry_at(runs, at));
                    let due = due_from(at, entries);
                    self.record_window(stored, &schedule, at, (&readiness, due), now, report)
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
                self.listing
                    .update(stored.id(), |kept| kept.reconciled_through = through);
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
        readiness: (&Readiness, DateTime<Utc>),
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) -> Result<bool, ReconcileError> {
        let recorded = crate::dependents::record_window(
            self.store.as_ref(),
            stored,
            schedule,
            at,
            readiness,
            now,
        )
        .await?;
        match recorded {
            Recorded::Waiting => return Ok(false),
            Recorded::Created { run, send } => {
                report.entries_written += 1;
                if run.status == RunStatus::Skipped {
                    self.metrics
                        .count_for(stored.id(), Metric::UpstreamSkipped, 1);
                    self.ended(&run, now).await;
                } else {
                    self.metrics
                        .count_for(stored.id(), Metric::DependencyRuns, 1);
                    if send {
                        self.send_dependent(&run, now, report).await;
                    }
                }
            }
            // Another decider recorded it first; it sends what it created.
            Recorded::Existing(_) => report.already_recorded += 1,
        }
        Ok(true)
    }

    /// Brings the `downstream` list of each schedule of this pass in step with the specs'
    /// `after` (one write per schedule whose list changed: rare).
    pub(super) async fn sync_downstream(&self, graph: &Graph, report: &mut ReconcileReport) {
        for (id, stored) in &graph.kept {
            let wanted: Vec<String> = graph
                .downstream
                .get(id)
                .map(|d| d.iter().cloned().collect())
                .unwrap_or_default();
            if *stored == wanted {
                continue;
            }
            match self.store.set_downstream(id, &wanted).await {
                Ok(()) => {
                    // Written beside the catalog, not through it: the kept listing is stale.
                    self.listing.clear();
                    tracing::info!(schedule = %id, downstream = ?wanted, "downstream list updated")
                }
                Err(e) => report.error(&format!("downstream of {id}"), &e.into()),
            }
        }
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

/// A dependent run still PENDING and never started after its creator had time to send it:
/// not one waiting for its turn or the resume (a reason says so) or for the throttled
/// release of a late window (a catch-up lane).
fn lost_its_send(run: &Run, now: DateTime<Utc>) -> bool {
    run.trigger == Trigger::Dependency
        && run.status == RunStatus::Pending
        && run.reason.is_none()
        && !run
            .lane
            .is_some_and(cronledger_core::admission::is_catch_up_lane)
        && run.attempts == 0
        && run.created_at + UNSENT_AFTER <= now
}
