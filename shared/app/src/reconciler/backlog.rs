//! Late backlogs: live runs of CATCH_UP_ALL schedules that reached a worker past their grace
//! (a worker outage, a backed-up lane) and were parked PENDING with reason
//! LATE_AWAITING_PLAN instead of running in the live lane (see
//! [`cronledger_core::planned_with_its_gap`]). Here each schedule's parked runs are planned
//! as one gap with [`plan_backlog`], exactly as the same windows found missing would be:
//! the first `max_auto_catch_up` become catch-up runs (trigger CATCH_UP, the gap's replay
//! group, the correction or backfill lane) for the throttled release, the rest wait for
//! approval, and a long gap gets its backfill proposal. Without this a six-hour worker
//! outage replayed every window at once in the live lane, uncapped.
//!
//! A schedule's parked runs are planned once no more of the gap is on its way: while the
//! schedule has live runs past their grace still waiting for a worker (QUEUED, never
//! started), they will be parked too, and planning the gap in parts would count the cap
//! once per part. The ledger says this, not the lane's depth: a busy lane is never empty.
//! The wait is bounded by `backlog_wait` from the oldest parked run's parking: a lane that
//! stays behind (late runs always still queued) would otherwise keep the gap open and the
//! schedule from running at all. Past it, what is parked is planned as a part, and each
//! part counts its own cap.
//! (A late run whose message was lost is re-sent by the stuck-run scan, then parked like
//! the rest; parking is one write, so workers drain a backlog fast.) Each change is
//! conditional on the run still being a PENDING live run, so racing reconcilers plan each
//! run once.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cronledger_aws::StoreError;
use cronledger_core::planner::{Action, PlannedEntry};
use cronledger_core::{plan_backlog, Reason, Run, RunEvent, RunStatus, Trigger};
use cronledger_ledger::ledger::{RunChange, Transition};
use serde::Serialize;

use super::{ReconcileError, ReconcileReport, Reconciler};
use crate::metrics::Metric;

/// What planning the late backlogs did this pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BacklogReport {
    /// Late runs made catch-up runs of their gap, for the throttled release.
    pub fired: u32,
    /// Late runs held for approval (beyond the cap, side effects, too long a gap).
    pub held: u32,
    pub skipped: u32,
    pub coalesced: u32,
    /// Late runs left parked because more of their gap is still waiting for a worker.
    pub deferred: u32,
    /// Schedules whose parked runs were planned while more of their gap was still queued
    /// (they had waited `backlog_wait`): the lane stays behind.
    pub planned_in_part: u32,
}

impl BacklogReport {
    pub(super) fn merge(&mut self, o: &BacklogReport) {
        self.fired += o.fired;
        self.held += o.held;
        self.skipped += o.skipped;
        self.coalesced += o.coalesced;
        self.deferred += o.deferred;
        self.planned_in_part += o.planned_in_part;
    }
}

/// A run a worker parked for this plan.
pub(super) fn awaits_plan(run: &Run) -> bool {
    run.status == RunStatus::Pending
        && run.trigger == Trigger::Scheduled
        && run.reason == Some(Reason::LateAwaitingPlan)
}

impl Reconciler {
    /// Plans every schedule's parked late runs whose gap is complete. Returns the runs it
    /// made catch-up runs, for this pass's release.
    pub(super) async fn plan_backlogs(
        &self,
        now: DateTime<Utc>,
        active: &[Run],
        report: &mut ReconcileReport,
    ) -> Vec<Run> {
        // Each schedule's oldest parked window: its runs are read from there.
        let mut oldest: BTreeMap<&str, DateTime<Utc>> = BTreeMap::new();
        for run in active.iter().filter(|r| awaits_plan(r)) {
            let at = run.key.scheduled_for;
            oldest
                .entry(run.key.schedule_id.as_str())
                .and_modify(|t| *t = (*t).min(at))
                .or_insert(at);
        }
        let mut planned = Vec::new();
        for (id, oldest) in oldest {
            match self.plan_backlog_of(id, oldest, now, report).await {
                Ok(fired) => planned.extend(fired),
                Err(e) => report.error(&format!("late backlog of {id}"), &e),
            }
        }
        planned
    }

    /// Plans the parked runs of schedule `id` from its oldest parked window on. The runs
    /// are read from the schedule's own partition, not taken from the active scan, which
    /// is eventually consistent: a gap planned in parts would count its cap once per part.
    async fn plan_backlog_of(
        &self,
        id: &str,
        oldest: DateTime<Utc>,
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) -> Result<Vec<Run>, ReconcileError> {
        let stored = self.store.get_schedule(id).await?;
        let schedule = self
            .schedules
            .get(&stored)
            .map_err(|e| ReconcileError::Plan(format!("schedule {id}: {e}")))?;
        let since = self.store.runs_between(id, oldest, now).await?;
        let late_since = now - stored.spec.grace.as_delta();
        let still_arriving = since.iter().any(|r| {
            r.status == RunStatus::Queued
                && r.trigger == Trigger::Scheduled
                && r.attempts == 0
                && r.key.scheduled_for < late_since
        });
        let runs: Vec<&Run> = since.iter().filter(|r| awaits_plan(r)).collect();
        let parked_since = runs.iter().map(|r| r.updated_at).min();
        let waited_out =
            parked_since.is_some_and(|t| now - t >= self.config.backlog_wait.as_delta());
        if still_arriving && !waited_out {
            report.backlog.deferred += runs.len() as u32;
            return Ok(Vec::new());
        }
        if still_arriving {
            // A lane that stays behind: plan what is parked; the rest is the next part.
            tracing::warn!(
                schedule = id,
                runs = runs.len(),
                "late backlog still arriving after the wait; planning the part parked so far"
            );
            report.backlog.planned_in_part += 1;
            self.metrics
                .count_for(id, Metric::LateBacklogPlannedInPart, 1);
        }
        let waiting: Vec<_> = runs
            .iter()
            .map(|r| (r.key.scheduled_for, r.window))
            .collect();
        let plan = plan_backlog(&schedule, &waiting, now);
        tracing::warn!(
            schedule = id,
            runs = runs.len(),
            tier = ?plan.tier,
            fire = plan.totals.fire,
            manual = plan.totals.manual,
            "late backlog planned as a gap"
        );
        let late: u32 = plan.entries.iter().map(|e| e.count).sum();
        self.announce_gap(&schedule, &plan, late, &[], now, report);
        if plan.backfill.is_some() {
            // Before the runs change, as for missed windows (see [`super::proposals`]).
            self.propose_backfill(&stored, &schedule, &plan, &[], now, report)
                .await?;
        }
        let mut fired = Vec::new();
        for (run, entry) in runs.iter().zip(&plan.entries) {
            let change = catch_up_change(run, entry, plan.replay_group_id.clone(), now);
            let changed = match self.store.transition_run(&run.key, &change).await {
                Ok(changed) => changed,
                // Started by a stray copy of its message, or planned by another reconciler.
                Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            let counter = match entry.action {
                Action::Fire { .. } => &mut report.backlog.fired,
                Action::Hold { .. } => &mut report.backlog.held,
                Action::Skip { .. } => &mut report.backlog.skipped,
                Action::Coalesce { .. } => &mut report.backlog.coalesced,
            };
            *counter += 1;
            if matches!(entry.action, Action::Fire { .. }) {
                fired.push(changed);
            }
        }
        self.metrics
            .count_for(id, Metric::LateRunsPlanned, plan.entries.len() as u64);
        Ok(fired)
    }
}

/// The change that applies the plan's action to one parked run, making it a catch-up run
/// of the gap's replay group.
fn catch_up_change(
    run: &Run,
    entry: &PlannedEntry,
    replay_group: Option<String>,
    now: DateTime<Utc>,
) -> RunChange {
    let (event, lane, coalesced_into) = match entry.action {
        Action::Fire { lane, .. } => (RunEvent::PlanCatchUp, Some(lane), None),
        Action::Hold { .. } => (RunEvent::HoldForApproval, None, None),
        Action::Skip { .. } => (RunEvent::Skip, None, None),
        Action::Coalesce { into } => (RunEvent::Coalesce, None, Some(into)),
    };
    let plan = Transition::Plan {
        event,
        reason: entry.action.reason(),
        replay_group,
        lane,
        coalesced_into,
    };
    RunChange::new(run.status, run.lease_epoch, now, plan)
}
