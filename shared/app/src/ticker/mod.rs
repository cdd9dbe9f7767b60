//! The ticker: once a minute (EventBridge Scheduler), fire every due window exactly once.
//!
//! For each due schedule, one transaction writes the run (if absent) and advances
//! `next_run_at` (if unchanged): racing tickers produce one run and one advance, and the
//! loser learns it lost. Windows inside the lookahead go many schedules to a transaction
//! (the same writes and conditions; if any fails, nothing is written and each is fired
//! alone). Windows older than their grace period are not fired here; the ticker only moves
//! past them and leaves them to the reconciler's misfire policy.
//!
//! `next_run_at` is a fire time: the occurrence plus the schedule's jitter offset (zero
//! without `jitter`). The run is recorded under the occurrence (its window and key do not
//! move); the message is due, and the grace counts, from the fire time.

mod redispatch;
mod send;

use chrono::{DateTime, Utc};
use cronledger_aws::ledger::{Fire, FireOutcome, StoredSchedule, MAX_FIRES_PER_TRANSACTION};
use cronledger_aws::{LaneQueue, LedgerStore, StoreError};
use cronledger_core::overlap::{decide_overlap, ActiveRun, OverlapDecision};
use cronledger_core::spec::Approval;
use cronledger_core::{OverlapPolicy, Reason, Run, RunStatus, Span, Trigger};
use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tracing::Instrument;

use crate::alerting::{Alerter, Held};
use crate::clock::{Clock, SystemClock};
use crate::faults::{CrashPoint, Faults};
use crate::kill_switch::KillSwitchCheck;
use crate::metrics::Metrics;
use crate::runs::{new_run, ScheduleCache};

/// The ticker's input: the time it fires for (EventBridge's scheduled time, never the wall
/// clock) and optionally the shards it owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickEvent {
    pub time: DateTime<Utc>,
    #[serde(default)]
    pub shards: Option<Vec<u32>>,
}

impl TickEvent {
    /// Reads an EventBridge Scheduler input (`{"time": ..., "shards": [...]}`) or a classic
    /// EventBridge rule event (`time` at the top, shards under `detail`).
    pub fn from_json(value: &serde_json::Value) -> Result<TickEvent, String> {
        let time = value
            .get("time")
            .and_then(serde_json::Value::as_str)
            .ok_or("the event has no `time`")?;
        let time = DateTime::parse_from_rfc3339(time)
            .map_err(|e| format!("`time` {time} is not RFC3339: {e}"))?
            .with_timezone(&Utc);
        let shards = value
            .get("shards")
            .or_else(|| value.get("detail").and_then(|d| d.get("shards")))
            .filter(|s| !s.is_null())
            .map(|s| serde_json::from_value::<Vec<u32>>(s.clone()))
            .transpose()
            .map_err(|e| format!("`shards` must be a list of shard numbers: {e}"))?;
        Ok(TickEvent { time, shards })
    }
}

#[derive(Debug, Clone)]
pub struct TickerConfig {
    /// Shards the table's schedules are spread over (all of them unless the event names some).
    pub shards: u32,
    /// Fire windows due up to this far ahead, with an SQS delay so they start on time.
    pub lookahead: Span,
    /// Due schedules processed at once.
    pub concurrency: usize,
    /// Due schedules read per query (one page; DynamoDB returns at most 1,000). A tick
    /// follows the pages until the shard has none left, firing each page before reading the
    /// next, so no due schedule waits behind a read limit and memory stays one page deep.
    pub due_page_size: u32,
    /// Windows fired per schedule per tick at most (a schedule far behind catches up over
    /// several ticks; anything past its grace is the reconciler's anyway).
    pub max_windows_per_schedule: usize,
}

impl Default for TickerConfig {
    fn default() -> Self {
        TickerConfig {
            shards: 1,
            lookahead: Span::seconds(60),
            concurrency: 16,
            due_page_size: 1_000,
            max_windows_per_schedule: 10,
        }
    }
}

/// What one tick did, for logs, metrics and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TickReport {
    pub due_schedules: u32,
    /// Runs this tick created (PENDING, SKIPPED for overlap, or waiting behind QUEUE_NEW).
    pub created: u32,
    /// Windows another ticker or the reconciler recorded first.
    pub lost_race: u32,
    pub skipped_overlap: u32,
    pub queued_behind: u32,
    /// Windows past their grace period, left to the reconciler.
    pub left_for_reconciler: u32,
    pub sent: u32,
    /// Runs left PENDING because the send failed or the ticker "crashed"; the reconciler
    /// sends them.
    pub unsent: u32,
    /// Live runs found still PENDING past their send deadline (the ticker that wrote them
    /// died before sending, or could not send) and sent now, within their grace.
    pub redispatched: u32,
    /// The kill switch was on: nothing was read or fired.
    pub kill_switch_engaged: bool,
    pub errors: Vec<String>,
}

impl TickReport {
    fn merge(&mut self, other: TickReport) {
        self.due_schedules += other.due_schedules;
        self.created += other.created;
        self.lost_race += other.lost_race;
        self.skipped_overlap += other.skipped_overlap;
        self.queued_behind += other.queued_behind;
        self.left_for_reconciler += other.left_for_reconciler;
        self.sent += other.sent;
        self.unsent += other.unsent;
        self.redispatched += other.redispatched;
        self.kill_switch_engaged |= other.kill_switch_engaged;
        self.errors.extend(other.errors);
    }

    /// A schedule this tick could not fire, and why.
    fn error(&mut self, schedule_id: &str, e: impl std::fmt::Display) {
        self.errors.push(format!("{schedule_id}: {e}"));
    }

    /// A created run's send: made, or left PENDING for the reconciler.
    fn count_send(&mut self, sent: bool) {
        if sent {
            self.sent += 1;
        } else {
            self.unsent += 1;
        }
    }
}

/// What a tick found due (see [`Ticker::due`]).
#[derive(Debug, Clone)]
pub struct DueSchedules {
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    schedules: Vec<StoredSchedule>,
    /// Shards with further pages of due schedules, and where each continues.
    more: Vec<(u32, String)>,
    shards: Vec<u32>,
    kill_switch_engaged: bool,
    errors: Vec<String>,
}

impl DueSchedules {
    /// Whether a window is due already rather than inside the lookahead: only such a window
    /// is checked against the schedule's running work when it is fired (its overlap
    /// policy), so only then does the firing depend on what workers do meanwhile.
    /// Pages not read yet may hold such windows: then it answers yes.
    pub fn fires_due_windows(&self) -> bool {
        !self.more.is_empty()
            || self
                .schedules
                .iter()
                .any(|s| s.next_run_at.is_some_and(|t| t <= self.now))
    }
}

pub struct Ticker {
    store: Arc<dyn LedgerStore>,
    lanes: Arc<dyn LaneQueue>,
    config: TickerConfig,
    schedules: ScheduleCache,
    faults: Option<Arc<dyn Faults>>,
    /// Only for the SQS delay: when the message must become visible is physical time, not a
    /// scheduling decision, and a tick that runs late must not make every run late with it.
    send_clock: Arc<dyn Clock>,
    kill_switch: Option<Arc<KillSwitchCheck>>,
    /// Records the AWAITING_APPROVAL of `approval: every_run` windows (published by the
    /// reconciler's outbox pass: a tick never waits on a publish).
    alerts: Option<Arc<Alerter>>,
    metrics: Metrics,
}

impl Ticker {
    pub fn new(
        store: Arc<dyn LedgerStore>,
        lanes: Arc<dyn LaneQueue>,
        config: TickerConfig,
    ) -> Ticker {
        Ticker {
            store,
            lanes,
            config,
            schedules: ScheduleCache::default(),
            faults: None,
            send_clock: Arc::new(SystemClock),
            kill_switch: None,
            alerts: None,
            metrics: Metrics::new(),
        }
    }

    /// Records an AWAITING_APPROVAL for each window held for approval (`approval: every_run`).
    pub fn with_alerts(mut self, alerter: Arc<Alerter>) -> Ticker {
        self.alerts = Some(alerter);
        self
    }

    /// Fires nothing while the kill switch is on (its EventBridge schedule is disabled too;
    /// this covers a tick already under way, and the local runner and the simulator).
    pub fn with_kill_switch(mut self, check: Arc<KillSwitchCheck>) -> Ticker {
        self.kill_switch = Some(check);
        self
    }

    /// [`Self::with_kill_switch`] when there is a check.
    pub fn with_kill_switch_opt(mut self, check: Option<Arc<KillSwitchCheck>>) -> Ticker {
        self.kill_switch = check;
        self
    }

    /// The metrics collected so far (the function flushes them after each tick).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn with_faults(mut self, faults: Arc<dyn Faults>) -> Ticker {
        self.faults = Some(faults);
        self
    }

    /// The clock that times SQS delays (the simulator's virtual clock; the system clock by default).
    pub fn with_send_clock(mut self, clock: Arc<dyn Clock>) -> Ticker {
        self.send_clock = clock;
        self
    }

    pub async fn tick(&self, event: &TickEvent) -> TickReport {
        let due = self.due(event).await;
        self.fire(due).await
    }

    /// The tick's first half: the first page per shard of the schedules with a window due
    /// by the end of the lookahead ([`Self::fire`] reads the rest, page by page).
    pub async fn due(&self, event: &TickEvent) -> DueSchedules {
        let now = event.time;
        let until = now + self.config.lookahead.as_delta();
        let shards: Vec<u32> = match &event.shards {
            Some(s) => s.clone(),
            None => (0..self.config.shards).collect(),
        };
        let mut due = DueSchedules {
            now,
            until,
            schedules: Vec::new(),
            more: Vec::new(),
            shards: shards.clone(),
            kill_switch_engaged: false,
            errors: Vec::new(),
        };
        if let Some(check) = &self.kill_switch {
            if check.engaged(now).await {
                tracing::warn!("kill switch engaged: this tick fires nothing");
                due.kill_switch_engaged = true;
                return due;
            }
        }
        for &shard in &shards {
            match self.due_page(shard, until, None).await {
                Ok(mut page) => {
                    due.schedules.append(&mut page.items);
                    due.more.extend(page.next.map(|next| (shard, next)));
                }
                Err(e) => due.errors.push(format!("shard {shard}: {e}")),
            }
        }
        due
    }

    async fn due_page(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        cursor: Option<&str>,
    ) -> Result<cronledger_aws::ledger::Page<StoredSchedule>, StoreError> {
        self.store
            .due_schedules_page(shard, until, self.config.due_page_size, cursor)
            .await
    }

    /// The tick's second half: fires the due windows, oldest first per schedule, then reads
    /// and fires the shards' further pages one at a time until every shard is done.
    pub async fn fire(&self, due: DueSchedules) -> TickReport {
        let DueSchedules {
            now,
            until,
            schedules,
            more,
            shards,
            kill_switch_engaged,
            errors,
        } = due;
        let mut report = TickReport {
            kill_switch_engaged,
            errors,
            ..TickReport::default()
        };
        report.merge(self.fire_found(schedules, now, until).await);
        for (shard, cursor) in more {
            let mut cursor = Some(cursor);
            while let Some(at) = cursor.take() {
                match self.due_page(shard, until, Some(&at)).await {
                    Ok(page) => {
                        cursor = page.next;
                        report.merge(self.fire_found(page.items, now, until).await);
                    }
                    Err(e) => report.error(&format!("shard {shard}"), e),
                }
            }
        }
        self.metrics.count("TickErrors", report.errors.len() as u64);
        if !kill_switch_engaged {
            for shard in shards {
                self.redispatch_lost(shard, now, &mut report).await;
            }
        }
        report
    }

    /// Fires one page of due schedules.
    async fn fire_found(
        &self,
        schedules: Vec<StoredSchedule>,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> TickReport {
        let mut report = TickReport {
            due_schedules: schedules.len() as u32,
            ..TickReport::default()
        };
        let concurrency = self.config.concurrency.max(1);
        // A window inside the lookahead is not due yet, so nothing about it needs a read
        // (overlap is judged by the worker when it starts): those fires go in batches, their
        // runs sent 10 to a request. Windows already due go one by one.
        let (ahead, mut one_by_one): (Vec<_>, Vec<_>) = schedules
            .into_iter()
            .partition(|s| s.next_run_at.is_some_and(|t| t > now && t <= until));
        let mut batches: Vec<Vec<StoredSchedule>> = Vec::new();
        let mut ahead = ahead.into_iter().peekable();
        while ahead.peek().is_some() {
            batches.push(ahead.by_ref().take(MAX_FIRES_PER_TRANSACTION).collect());
        }
        let batched: Vec<(TickReport, Vec<StoredSchedule>)> = stream::iter(batches)
            .map(|batch| self.fire_batch(batch, now, until))
            .buffer_unordered(concurrency)
            .collect()
            .await;
        for (r, rest) in batched {
            report.merge(r);
            one_by_one.extend(rest);
        }
        let reports: Vec<TickReport> = stream::iter(one_by_one)
            .map(|schedule| {
                let span = tracing::info_span!("schedule", schedule = %schedule.id());
                self.fire_schedule(schedule, now, until).instrument(span)
            })
            .buffer_unordered(concurrency)
            .collect()
            .await;
        for r in reports {
            report.merge(r);
        }
        report
    }

    /// Fires the first window of each schedule (all inside the lookahead, distinct schedules)
    /// side by side, then sends the runs 10 to a request. Returns the schedules left for the
    /// one-by-one path: those with a further window inside the lookahead, and those whose
    /// fire could not be written (a store error: singly, each tries again).
    async fn fire_batch(
        &self,
        batch: Vec<StoredSchedule>,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> (TickReport, Vec<StoredSchedule>) {
        let mut report = TickReport::default();
        let mut prepared: Vec<(StoredSchedule, Fire, bool)> = Vec::with_capacity(batch.len());
        for stored in batch {
            let schedule = match self.schedules.get(&stored) {
                Ok(s) => s,
                Err(e) => {
                    report.error(stored.id(), e);
                    continue;
                }
            };
            let Some(expected) = stored.next_run_at else {
                continue;
            };
            let (run, send) = match self.window_run(&stored, &schedule, expected, now).await {
                Ok(planned) => planned,
                Err(e) => {
                    report.error(stored.id(), e);
                    continue;
                }
            };
            let fire = Fire {
                run,
                expected_next_run_at: expected,
                next_run_at: next_fire(&schedule, expected),
            };
            prepared.push((stored, fire, send));
        }
        let fires: Vec<Fire> = prepared.iter().map(|(_, fire, _)| fire.clone()).collect();
        let outcomes = match self.store.fire_all(&fires).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                tracing::warn!(error = %e, fires = fires.len(), "batched fire failed; firing one by one");
                let rest = prepared.into_iter().map(|(stored, ..)| stored).collect();
                return (report, rest);
            }
        };
        let mut rest = Vec::new();
        let mut to_send = Vec::new();
        for ((mut stored, fire, send), outcome) in prepared.into_iter().zip(outcomes) {
            let created = match outcome {
                FireOutcome::Created => true,
                FireOutcome::Lost {
                    schedule_moved: true,
                    ..
                } => {
                    report.lost_race += 1;
                    continue;
                }
                FireOutcome::Lost { .. } => {
                    // Recorded first by the reconciler (or another ticker): move on alone.
                    report.lost_race += 1;
                    let expected = fire.expected_next_run_at;
                    match self
                        .store
                        .advance_next_run(stored.id(), expected, fire.next_run_at)
                        .await
                    {
                        Ok(true) => false,
                        Ok(false) => continue,
                        Err(e) => {
                            report.error(stored.id(), e);
                            continue;
                        }
                    }
                }
            };
            if created {
                self.count_created(stored.id(), &fire.run, &mut report);
                self.announce_hold(&stored, &fire.run).await;
            }
            if fire.next_run_at.is_some_and(|next| next <= until) {
                stored.next_run_at = fire.next_run_at;
                rest.push(stored);
            }
            if created && send {
                to_send.push((fire.run, fire.expected_next_run_at));
            }
        }
        for ok in self.enqueue_all(&to_send, now).await {
            report.count_send(ok);
        }
        (report, rest)
    }

    /// Fires the due windows of one schedule, oldest first.
    async fn fire_schedule(
        &self,
        stored: StoredSchedule,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> TickReport {
        let mut report = TickReport::default();
        let schedule = match self.schedules.get(&stored) {
            Ok(s) => s,
            Err(e) => {
                report.error(stored.id(), e);
                return report;
            }
        };
        let grace = schedule.spec.grace.as_delta();
        let mut expected = match stored.next_run_at {
            Some(t) => t,
            None => return report,
        };
        for _ in 0..self.config.max_windows_per_schedule {
            if expected > until {
                break;
            }
            let next = next_fire(&schedule, expected);
            if now - expected > grace {
                // Too late to fire on time: the reconciler applies the misfire policy.
                match self
                    .store
                    .advance_next_run(stored.id(), expected, next)
                    .await
                {
                    Ok(true) => {
                        report.left_for_reconciler += 1;
                        self.metrics
                            .count_for(stored.id(), "WindowsLeftForReconciler", 1);
                    }
                    Ok(false) => break,
                    Err(e) => {
                        report.error(stored.id(), e);
                        break;
                    }
                }
            } else {
                let outcome = self
                    .fire_window(&stored, &schedule, expected, next, now, &mut report)
                    .await;
                match outcome {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        report.error(stored.id(), e);
                        break;
                    }
                }
            }
            match next {
                Some(n) => expected = n,
                None => break,
            }
        }
        report
    }

    /// The run the window fired at `fire_at` gets (recorded under its occurrence): PENDING
    /// for its lane, SKIPPED while paused, and for a window already due the overlap policy's
    /// word (SKIPPED, or waiting behind QUEUE_NEW). The flag says whether it is sent.
    async fn window_run(
        &self,
        stored: &StoredSchedule,
        schedule: &cronledger_core::Schedule,
        fire_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(Run, bool), StoreError> {
        let scheduled_for = schedule.occurrence_at(fire_at);
        let mut run = new_run(
            schedule,
            stored.version,
            scheduled_for,
            Trigger::Scheduled,
            now,
        );
        let mut send = true;
        if stored.paused_at(scheduled_for) {
            run.status = RunStatus::Skipped;
            run.reason = Some(Reason::Paused);
            send = false;
        } else if schedule.spec.approval == Approval::EveryRun {
            // A destructive job's window runs only once an operator approves it (onto the
            // manual lane); unapproved past `approval_timeout` the reconciler skips it.
            run.status = RunStatus::ManualRequired;
            run.reason = Some(Reason::ApprovalRequired);
            send = false;
        } else if schedule.spec.overlap != OverlapPolicy::Allow && fire_at <= now {
            // Only a window already due can overlap anything now; a window inside the
            // lookahead is judged by the worker when it starts, when the earlier run may be done.
            let active = self.active_runs_of(stored.id()).await?;
            match decide_overlap(schedule.spec.overlap, &run.key, &active) {
                OverlapDecision::Proceed => {}
                OverlapDecision::Skip { .. } => {
                    run.status = RunStatus::Skipped;
                    run.reason = Some(Reason::Overlap);
                    send = false;
                }
                OverlapDecision::Queue { .. } => {
                    run.reason = Some(Reason::QueuedBehind);
                    send = false;
                }
            }
        }
        Ok((run, send))
    }

    fn count_created(&self, schedule_id: &str, run: &Run, report: &mut TickReport) {
        report.created += 1;
        self.metrics.count_for(schedule_id, "RunsCreated", 1);
        if run.status == RunStatus::Skipped {
            self.metrics.count_for(schedule_id, "RunsSkipped", 1);
        }
        match run.reason {
            Some(Reason::Overlap) => report.skipped_overlap += 1,
            Some(Reason::QueuedBehind) => report.queued_behind += 1,
            _ => {}
        }
        tracing::debug!(run = %run.key, status = %run.status, "run created");
    }

    /// Records the window fired at `fire_at` and hands it to its lane. `Ok(false)` when
    /// another ticker moved the schedule first (it owns the rest of this schedule's tick).
    async fn fire_window(
        &self,
        stored: &StoredSchedule,
        schedule: &cronledger_core::Schedule,
        fire_at: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        report: &mut TickReport,
    ) -> Result<bool, StoreError> {
        let (run, send) = self.window_run(stored, schedule, fire_at, now).await?;
        let fire = Fire {
            run,
            expected_next_run_at: fire_at,
            next_run_at: next,
        };
        match self.store.fire(&fire).await? {
            FireOutcome::Created => {
                self.count_created(stored.id(), &fire.run, report);
                self.announce_hold(stored, &fire.run).await;
            }
            FireOutcome::Lost {
                schedule_moved: true,
                ..
            } => {
                tracing::debug!("another ticker fired this window");
                report.lost_race += 1;
                return Ok(false);
            }
            FireOutcome::Lost { .. } => {
                // The reconciler (or an operator) recorded this window first: move on.
                report.lost_race += 1;
                return self
                    .store
                    .advance_next_run(stored.id(), fire_at, next)
                    .await;
            }
        }
        if send {
            report.count_send(self.enqueue(&fire.run, fire_at, now).await);
        }
        Ok(true)
    }

    /// A window created MANUAL_REQUIRED (it awaits an operator's approval): its alert and
    /// reminders.
    async fn announce_hold(&self, stored: &StoredSchedule, run: &Run) {
        if run.status != RunStatus::ManualRequired {
            return;
        }
        if let Some(alerter) = &self.alerts {
            alerter
                .record_hold(&Held::run(&stored.spec, run, run.created_at))
                .await;
        }
    }

    fn crashes(&self, point: CrashPoint, run: &Run) -> bool {
        self.faults
            .as_ref()
            .is_some_and(|f| f.crash_at(point, &run.key, run.attempts))
    }

    async fn active_runs_of(&self, schedule_id: &str) -> Result<Vec<ActiveRun>, StoreError> {
        crate::overlap::active_runs_of(self.store.as_ref(), schedule_id).await
    }
}

/// The fire time after the one at `fire_at`: the next occurrence plus the offset.
fn next_fire(
    schedule: &cronledger_core::Schedule,
    fire_at: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    schedule.next_fire_after(schedule.occurrence_at(fire_at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronledger_aws::ledger::ScheduleState;
    use cronledger_core::ScheduleSpec;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("instant")
    }

    fn due_at(id: &str, next_run_at: Option<&str>) -> StoredSchedule {
        let spec: ScheduleSpec = serde_json::from_value(serde_json::json!({
            "id": id, "cron": "* * * * *", "timezone": "UTC", "job": {"type": "noop"}
        }))
        .expect("spec");
        StoredSchedule {
            spec,
            version: 1,
            state: ScheduleState::Active,
            shard: 0,
            next_run_at: next_run_at.map(t),
            reconciled_through: t("2026-03-01T00:00:00Z"),
            pauses: Vec::new(),
            past_timings: Vec::new(),
            created_at: t("2026-03-01T00:00:00Z"),
            updated_at: t("2026-03-01T00:00:00Z"),
            failure_streak: 0,
            downstream: Vec::new(),
        }
    }

    fn due(schedules: Vec<StoredSchedule>) -> DueSchedules {
        DueSchedules {
            now: t("2026-03-01T10:00:00Z"),
            until: t("2026-03-01T10:01:00Z"),
            schedules,
            more: Vec::new(),
            shards: vec![0],
            kill_switch_engaged: false,
            errors: Vec::new(),
        }
    }

    #[test]
    fn only_a_window_due_by_now_is_a_due_window_not_one_inside_the_lookahead() {
        let ahead = due_at("ahead", Some("2026-03-01T10:01:00Z"));
        assert!(!due(vec![ahead.clone()]).fires_due_windows());
        assert!(!due(vec![]).fires_due_windows());
        for behind in ["2026-03-01T10:00:00Z", "2026-03-01T09:20:00Z"] {
            let behind = due_at("behind", Some(behind));
            assert!(due(vec![ahead.clone(), behind]).fires_due_windows());
        }
    }
}
