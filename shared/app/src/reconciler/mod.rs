//! The reconciler: every few minutes (EventBridge Scheduler), account for every expected
//! window, resolve stuck runs, and release catch-up work gradually.
//!
//! One pass, with the event's time as "now" (never the wall clock, so the simulator can drive
//! it on a virtual clock):
//! 1. checks that the ticker's own EventBridge schedules exist and are ENABLED;
//! 2. reads the active runs of its shards (the `active` index) once;
//! 3. decides per catch-up lane whether release is paused (realtime backlog, DLQ growth,
//!    catch-up error rate, CloudWatch alarms), recording pauses and resumes with their cause;
//! 4. takes the schedules (listed again only when a shard's catalog version moved, see
//!    [`listing`]), fences each shard's fire mark past the windows it is about to judge, then
//!    per schedule with a window due since its watermark: reads the runs since the watermark
//!    with one query, plans the missed windows with the core's misfire planner, writes the
//!    plan with conditional puts, then advances the watermark (conditional on its old value)
//!    — see [`missed`];
//! 5. plans the late runs workers parked in a backlog, one gap per schedule once no more of
//!    it is queued (CATCH_UP_ALL's cap, approvals and catch-up lanes apply to a worker
//!    outage too) — see [`backlog`];
//! 6. resolves stuck runs (PENDING without a message, QUEUED too long, RUNNING with a stale
//!    lease or past `max_runtime`, STALLED) — see [`stuck`];
//! 7. releases PENDING catch-up runs into their lane within the per-schedule and per-lane
//!    budgets — see [`release`].

mod alerts;
mod backlog;
pub mod config;
mod dependents;
pub mod error;
mod listing;
mod missed;
mod proposals;
mod release;
pub mod signals;
mod stuck;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::{
    HealthStore, LaneQueue, LedgerStore, OpsStore, ReleaseStateStore, StoreError,
};
use cronledger_core::spec::Approval;
use cronledger_core::ScheduleSpec;
use cronledger_core::{Lane, Reason, Run, RunEvent, RunStatus};
use cronledger_ledger::keys::shard_of;
use cronledger_ledger::ledger::{RunChange, StoredSchedule};
use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};

use crate::alerting::Alerter;
use crate::kill_switch::KillSwitchCheck;
use crate::metrics::{Metric, Metrics};
use crate::runs::ScheduleCache;
use crate::ticker::TickEvent;

pub use backlog::BacklogReport;
pub use config::{PauseConfig, ReconcilerConfig, ReleaseConfig, StuckConfig};
pub use error::ReconcileError;
pub use proposals::proposed_backfill_id;
pub use release::LaneGate;
pub use signals::{AwsSignals, QuietSignals, SchedulerTickers, Signals, TickerSchedules};

/// The reconciler's input: the time it runs for, and optionally the shards it owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileEvent {
    pub time: DateTime<Utc>,
    #[serde(default)]
    pub shards: Option<Vec<u32>>,
}

impl ReconcileEvent {
    pub fn at(time: DateTime<Utc>) -> ReconcileEvent {
        ReconcileEvent { time, shards: None }
    }

    /// The same event shapes the ticker reads (Scheduler input or a classic rule event).
    pub fn from_json(value: &serde_json::Value) -> Result<ReconcileEvent, ReconcileError> {
        let tick = TickEvent::from_json(value).map_err(ReconcileError::Event)?;
        Ok(ReconcileEvent {
            time: tick.time,
            shards: tick.shards,
        })
    }
}

/// What the stuck-run scan did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StuckReport {
    /// PENDING live runs without a message, sent.
    pub pending_sent: u32,
    /// QUEUE_NEW runs left waiting with nothing ahead of them, sent.
    pub queued_behind_released: u32,
    /// QUEUED runs re-sent with the same message identity.
    pub queued_resent: u32,
    /// RETRY_PENDING runs whose message was lost, re-sent.
    pub retry_resent: u32,
    /// QUEUED or RETRY_PENDING runs past their threshold not re-sent because their lane has
    /// messages waiting: a backed-up lane (a worker outage) most likely still holds theirs,
    /// and a copy per pass would multiply the backlog the workers come back to.
    pub resend_deferred: u32,
    /// RUNNING runs marked STALLED.
    pub stalled: u32,
    /// STALLED runs of idempotent jobs sent back for a new attempt.
    pub retried: u32,
    /// STALLED runs held for an operator (not idempotent, or out of attempts).
    pub held: u32,
    /// Steps runs between two steps whose next step's message was lost, sent again.
    pub steps_resent: u32,
    /// Children's messages sent again for runs waiting on them (see `stuck::watch_children`).
    pub children_resent: u32,
}

impl StuckReport {
    fn merge(&mut self, o: &StuckReport) {
        self.pending_sent += o.pending_sent;
        self.queued_behind_released += o.queued_behind_released;
        self.queued_resent += o.queued_resent;
        self.retry_resent += o.retry_resent;
        self.resend_deferred += o.resend_deferred;
        self.stalled += o.stalled;
        self.retried += o.retried;
        self.held += o.held;
        self.steps_resent += o.steps_resent;
        self.children_resent += o.children_resent;
    }
}

/// What one pass did, for logs, metrics, tests and the simulator.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReconcileReport {
    /// Schedules looked at.
    pub schedules: u32,
    /// Expected windows past their grace period that had no ledger entry (paused and
    /// disabled stretches excluded): the silent-failure signal.
    pub missed_windows: u32,
    /// Ledger entries written (a range record counts once).
    pub entries_written: u32,
    pub windows_fired: u32,
    pub windows_skipped: u32,
    pub windows_coalesced: u32,
    pub windows_held: u32,
    /// Planned entries whose window another writer had recorded first (left untouched).
    pub already_recorded: u32,
    pub watermarks_advanced: u32,
    /// Watermarks another reconciler moved first.
    pub watermark_races: u32,
    /// Watermarks left where they were: nothing to write, and not far behind (see
    /// `missed::watermark_due`).
    pub watermarks_deferred: u32,
    /// Schedules with no window due for judgement since their watermark: none of their runs
    /// read, nothing written.
    pub schedules_idle: u32,
    /// Shards whose fire mark this pass moved past the windows it judges, so no lagging
    /// ticker can fire them after they were judged.
    pub fenced: u32,
    /// Catch-up runs sent to their lane.
    pub released: u32,
    /// Backfills this pass created for long gaps, by id (see [`proposals`]).
    pub backfills_proposed: Vec<String>,
    pub lanes: Vec<LaneGate>,
    pub stuck: StuckReport,
    /// Late runs parked by workers behind a backlog, planned as gaps (see [`backlog`]).
    pub backlog: BacklogReport,
    /// The ticker's EventBridge schedules that are missing, disabled or unreadable.
    pub ticker_problems: Vec<String>,
    pub alerts: Vec<String>,
    /// Alerts this pass published (recorded by it, not before), and from the outbox.
    pub alerts_published: u32,
    pub alerts_from_outbox: u32,
    /// Alerts decided and not yet raised, with the schedule's own topic (raised once at the
    /// end of the pass, see [`alerts`]).
    #[serde(skip)]
    pub to_raise: Vec<(cronledger_core::alerts::Alert, Option<String>)>,
    /// Held work whose approval reminders start with this pass's alerts.
    #[serde(skip)]
    pub to_track: Vec<cronledger_aws::Awaiting>,
    /// AWAITING_APPROVAL reminders raised for work still held.
    pub approval_reminders: u32,
    /// Windows that waited for approval past `approval_timeout`, now SKIPPED.
    pub approvals_expired: u32,
    /// The kill switch was on: the pass planned, released and resolved nothing (and the
    /// backfill release after it must not run either).
    pub kill_switch_engaged: bool,
    pub errors: Vec<String>,
}

impl ReconcileReport {
    fn merge(&mut self, o: ReconcileReport) {
        self.schedules += o.schedules;
        self.missed_windows += o.missed_windows;
        self.entries_written += o.entries_written;
        self.windows_fired += o.windows_fired;
        self.windows_skipped += o.windows_skipped;
        self.windows_coalesced += o.windows_coalesced;
        self.windows_held += o.windows_held;
        self.already_recorded += o.already_recorded;
        self.watermarks_advanced += o.watermarks_advanced;
        self.watermark_races += o.watermark_races;
        self.watermarks_deferred += o.watermarks_deferred;
        self.schedules_idle += o.schedules_idle;
        self.fenced += o.fenced;
        self.released += o.released;
        self.backfills_proposed.extend(o.backfills_proposed);
        self.lanes.extend(o.lanes);
        self.stuck.merge(&o.stuck);
        self.backlog.merge(&o.backlog);
        self.ticker_problems.extend(o.ticker_problems);
        self.alerts.extend(o.alerts);
        self.alerts_published += o.alerts_published;
        self.alerts_from_outbox += o.alerts_from_outbox;
        self.to_raise.extend(o.to_raise);
        self.to_track.extend(o.to_track);
        self.approval_reminders += o.approval_reminders;
        self.kill_switch_engaged |= o.kill_switch_engaged;
        self.approvals_expired += o.approvals_expired;
        self.errors.extend(o.errors);
    }

    fn error(&mut self, context: &str, e: &ReconcileError) {
        tracing::warn!(context, code = e.code(), error = %e, "reconciler error");
        self.errors.push(format!("{context}: {e}"));
    }
}

pub struct Reconciler {
    store: Arc<dyn LedgerStore>,
    control: Arc<dyn ReleaseStateStore>,
    lanes: Arc<dyn LaneQueue>,
    signals: Arc<dyn Signals>,
    tickers: Option<Arc<dyn TickerSchedules>>,
    /// Where proposed backfills are stored; without it they are only logged.
    backfills: Option<Arc<dyn OpsStore>>,
    config: ReconcilerConfig,
    metrics: Metrics,
    schedules: ScheduleCache,
    kill_switch: Option<Arc<KillSwitchCheck>>,
    /// Where the pass's alerts go; `None`: they are only logged.
    alerter: Option<Arc<Alerter>>,
    /// Where the windows it records SKIPPED are counted for health; `None`: not counted.
    health: Option<Arc<dyn HealthStore>>,
    /// The schedules as last listed, kept while no catalog moves (see [`listing`]).
    listing: listing::ListingCache,
}

impl Reconciler {
    pub fn new(
        store: Arc<dyn LedgerStore>,
        control: Arc<dyn ReleaseStateStore>,
        lanes: Arc<dyn LaneQueue>,
        signals: Arc<dyn Signals>,
        config: ReconcilerConfig,
    ) -> Reconciler {
        Reconciler {
            store,
            control,
            lanes,
            signals,
            tickers: None,
            backfills: None,
            config,
            metrics: Metrics::new(),
            schedules: ScheduleCache::default(),
            kill_switch: None,
            alerter: None,
            health: None,
            listing: listing::ListingCache::default(),
        }
    }

    /// Counts the windows it records SKIPPED or COALESCED on their schedules' health.
    pub fn with_health(mut self, health: Arc<dyn HealthStore>) -> Reconciler {
        self.health = Some(health);
        self
    }

    /// Raises the pass's alerts (missed windows, awaiting approval, deadlines, paused
    /// catch-up) through `alerter`, and publishes its outbox every pass.
    pub fn with_alerts(mut self, alerter: Arc<Alerter>) -> Reconciler {
        self.alerter = Some(alerter);
        self
    }

    /// Does nothing while the kill switch is on: no missed window is planned, no catch-up
    /// released, no stuck run re-sent or retried. Windows missed meanwhile are planned by the
    /// first pass after the release, by their misfire policy.
    pub fn with_kill_switch(mut self, check: Arc<KillSwitchCheck>) -> Reconciler {
        self.kill_switch = Some(check);
        self
    }

    /// [`Self::with_kill_switch`] when there is a check.
    pub fn with_kill_switch_opt(mut self, check: Option<Arc<KillSwitchCheck>>) -> Reconciler {
        self.kill_switch = check;
        self
    }

    /// Checks these ticker schedules (`config.ticker_schedules`) on every pass.
    pub fn with_ticker_check(mut self, tickers: Arc<dyn TickerSchedules>) -> Reconciler {
        self.tickers = Some(tickers);
        self
    }

    /// Stores the backfills the planner proposes for long gaps (see [`proposals`]).
    pub fn with_backfills(mut self, ops: Arc<dyn OpsStore>) -> Reconciler {
        self.backfills = Some(ops);
        self
    }

    /// The metrics collected so far (flush them once per invocation).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// What it is wired with (see [`crate::wiring`]).
    pub fn features(&self) -> std::collections::BTreeSet<crate::wiring::Feature> {
        use crate::wiring::Feature;
        let others = [
            (Feature::Health, self.health.is_some()),
            (Feature::Backfills, self.backfills.is_some()),
        ];
        let kill_switch = self.kill_switch.is_some();
        crate::wiring::features_of(&self.metrics, kill_switch, self.alerter.as_ref(), &others)
    }

    pub fn config(&self) -> &ReconcilerConfig {
        &self.config
    }

    pub async fn reconcile(&self, event: &ReconcileEvent) -> ReconcileReport {
        let now = event.time;
        let shards: Vec<u32> = match &event.shards {
            Some(s) => s.clone(),
            None => (0..self.config.shards).collect(),
        };
        let mut report = ReconcileReport::default();
        if let Some(check) = &self.kill_switch {
            if check.engaged(now).await {
                tracing::warn!("kill switch engaged: this pass does nothing");
                report.kill_switch_engaged = true;
                return report;
            }
        }
        self.check_tickers(&mut report).await;

        let active = self.scan_active(&shards, &mut report).await;
        let mut gates = self.gates(now, &active, &mut report).await;
        let correction_open = gates.get(&Lane::Correction).is_some_and(|g| !g.paused);

        // Missed windows, schedule by schedule.
        let mut created: Vec<Run> = Vec::new();
        let listing = self.listing(&mut report).await;
        let fresh = listing.fresh;
        // Who runs after whom, over every schedule (not only this pass's shards), and the
        // `downstream` lists this pass's schedules keep: kept in step after the listing.
        let mut graph = dependents::Graph::default();
        graph.add_edges(&listing.schedules);
        let listed: Vec<StoredSchedule> = listing
            .schedules
            .into_iter()
            .filter(|s| shards.contains(&shard_of(s.id(), self.config.shards)))
            .collect();
        // Paused, archived or disabled: their catch-up runs wait, unreleased.
        let stopped: BTreeSet<String> = listed
            .iter()
            .filter(|s| s.stopped().is_some())
            .map(|s| s.id().to_string())
            .collect();
        // `approval: every_run`: their unapproved windows expire after `approval_timeout`.
        let approvals: Vec<StoredSchedule> = listed
            .iter()
            .filter(|s| s.spec.approval == Approval::EveryRun)
            .cloned()
            .collect();
        graph.keep(&listed);
        // Schedules with a `deadline`: their active runs are checked against it.
        let deadlines: BTreeMap<String, ScheduleSpec> = listed
            .iter()
            .filter(|s| s.spec.deadline.is_some())
            .map(|s| (s.id().to_string(), s.spec.clone()))
            .collect();
        // The fire marks first, so no ticker that read one before fires a window the plans
        // below judge (see `missed`).
        self.fence_fire_marks(&shards, &listed, now, &mut report)
            .await;
        let outcomes: Vec<(ReconcileReport, Vec<Run>)> = stream::iter(listed)
            .map(|s| self.reconcile_schedule(s, fresh, now, correction_open))
            .buffer_unordered(self.config.concurrency.max(1))
            .collect()
            .await;
        for (r, runs) in outcomes {
            report.merge(r);
            created.extend(runs);
        }
        if listing.complete {
            self.sync_downstream(&graph, &mut report).await;
        }

        for stored in &approvals {
            self.expire_approvals(stored, now, &mut report).await;
        }
        let late = self.plan_backlogs(now, &active, &mut report).await;
        created.extend(late);
        self.resolve_stuck(now, &active, &mut report).await;
        self.release(now, &active, created, &stopped, &mut gates, &mut report)
            .await;
        report.lanes = gates.into_values().collect();
        self.deadline_alerts(&deadlines, &active, now, &mut report);
        self.approval_reminders(now, &mut report).await;
        self.raise_alerts(now, &mut report).await;

        self.metrics
            .count(Metric::CatchUpReleased, u64::from(report.released));
        self.metrics
            .count(Metric::ReconcileErrors, report.errors.len() as u64);
        report
    }

    /// Ends the windows of an `approval: every_run` schedule still awaiting approval past
    /// `approval_timeout` (from their window): SKIPPED (APPROVAL_TIMEOUT). One query per such
    /// schedule and pass, over the day before the timeout (older ones were expired by
    /// earlier passes).
    async fn expire_approvals(
        &self,
        stored: &StoredSchedule,
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) {
        let due = now - stored.spec.approval_timeout.as_delta();
        let runs = match self
            .store
            .runs_between(stored.id(), due - TimeDelta::days(1), due)
            .await
        {
            Ok(runs) => runs,
            Err(e) => return report.error(&format!("approvals of {}", stored.id()), &e.into()),
        };
        for run in runs.iter().filter(|r| {
            r.status == RunStatus::ManualRequired && r.reason == Some(Reason::ApprovalRequired)
        }) {
            let change = RunChange::decide(
                RunEvent::Skip,
                run.status,
                run.lease_epoch,
                now,
                Some(Reason::ApprovalTimeout),
            );
            match self.store.transition_run(&run.key, &change).await {
                Ok(expired) => {
                    self.ended(&expired, now).await;
                    report.approvals_expired += 1;
                    tracing::warn!(run = %run.key, "approval timed out: skipped");
                }
                // Approved, rejected or expired by a racing pass meanwhile.
                Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => {}
                Err(e) => report.error(&format!("expire {}", run.key), &e.into()),
            }
        }
    }

    /// Every active run of the shards, in index order per shard (status, then window),
    /// following the pages to the end: no fixed limit leaves a run unseen.
    async fn scan_active(&self, shards: &[u32], report: &mut ReconcileReport) -> Vec<Run> {
        let mut runs = Vec::new();
        for &shard in shards {
            let mut cursor: Option<String> = None;
            loop {
                match self
                    .store
                    .active_runs(
                        shard,
                        None,
                        self.config.stuck.scan_page_size,
                        cursor.as_deref(),
                    )
                    .await
                {
                    Ok(page) => {
                        runs.extend(page.items);
                        match page.next {
                            Some(n) => cursor = Some(n),
                            None => break,
                        }
                    }
                    Err(e) => {
                        report.error(&format!("active runs of shard {shard}"), &e.into());
                        break;
                    }
                }
            }
        }
        runs
    }

    async fn check_tickers(&self, report: &mut ReconcileReport) {
        let Some(tickers) = &self.tickers else {
            return;
        };
        for name in &self.config.ticker_schedules {
            let problem = match tickers.enabled(name).await {
                Ok(Some(true)) => continue,
                Ok(Some(false)) => format!("TICKER_SCHEDULE_DISABLED: {name}"),
                Ok(None) => format!("TICKER_SCHEDULE_MISSING: {name}"),
                Err(e) => format!("TICKER_SCHEDULE_UNREADABLE: {name}: {e}"),
            };
            tracing::error!(ticker_schedule = %name, problem = %problem, "the ticker is not scheduled: nothing fires on time");
            self.metrics.count(Metric::TickerScheduleUnhealthy, 1);
            report.ticker_problems.push(problem);
        }
    }

    /// Claims a PENDING run and sends it (see [`crate::runs::claim_and_send`]).
    async fn dispatch(
        &self,
        run: &Run,
        lane: Lane,
        now: DateTime<Utc>,
    ) -> Result<bool, ReconcileError> {
        crate::runs::claim_and_send(self.store.as_ref(), self.lanes.as_ref(), run, lane, now).await
    }

    /// Sends the run's message and records its id (see [`crate::runs::send_run`]).
    async fn send(
        &self,
        run: &Run,
        status: RunStatus,
        lane: Lane,
        now: DateTime<Utc>,
    ) -> Result<(), ReconcileError> {
        crate::runs::send_run(
            self.store.as_ref(),
            self.lanes.as_ref(),
            run,
            status,
            lane,
            now,
        )
        .await?;
        Ok(())
    }
}

/// The lane a run's message goes to: the rule book's (its own, never a live one for
/// catch-up).
fn lane_of(run: &Run) -> Lane {
    cronledger_core::admission::lane_of(run.trigger, run.lane, Lane::Normal)
}

/// Catch-up runs in flight, per lane and per schedule.
#[derive(Debug, Default)]
struct InFlight {
    lanes: BTreeMap<Lane, usize>,
    schedules: BTreeMap<(Lane, String), usize>,
}

impl InFlight {
    fn add(&mut self, lane: Lane, schedule: &str) {
        *self.lanes.entry(lane).or_default() += 1;
        *self
            .schedules
            .entry((lane, schedule.to_string()))
            .or_default() += 1;
    }

    fn lane(&self, lane: Lane) -> usize {
        self.lanes.get(&lane).copied().unwrap_or(0)
    }

    fn schedule(&self, lane: Lane, schedule: &str) -> usize {
        self.schedules
            .get(&(lane, schedule.to_string()))
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_scheduler_and_rule_events_and_refuses_garbage() {
        let e = ReconcileEvent::from_json(&serde_json::json!({"time": "2026-03-01T10:05:00Z"}))
            .unwrap();
        assert_eq!(
            e,
            ReconcileEvent::at("2026-03-01T10:05:00Z".parse().unwrap())
        );
        let e = ReconcileEvent::from_json(
            &serde_json::json!({"time": "2026-03-01T10:05:00Z", "detail": {"shards": [1, 3]}}),
        )
        .unwrap();
        assert_eq!(e.shards, Some(vec![1, 3]));
        let err = ReconcileEvent::from_json(&serde_json::json!({"when": 1})).unwrap_err();
        assert_eq!(err.code(), "RECONCILE_EVENT_INVALID");
    }
}
