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

mod fire;
mod redispatch;
mod send;

use chrono::{DateTime, Utc};
use cronledger_aws::{HealthStore, LaneQueue, LedgerStore, StoreError};
use cronledger_core::overlap::ActiveRun;
use cronledger_core::{Run, Span};
use cronledger_ledger::ledger::StoredSchedule;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::alerting::Alerter;
use crate::clock::{Clock, SystemClock};
use crate::faults::{CrashPoint, Faults};
use crate::kill_switch::KillSwitchCheck;
use crate::metrics::{Metric, Metrics};
use crate::runs::ScheduleCache;

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
    /// Where the windows it records SKIPPED at their fire are counted for health.
    health: Option<Arc<dyn HealthStore>>,
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
            health: None,
            metrics: Metrics::new(),
        }
    }

    /// Records an AWAITING_APPROVAL for each window held for approval (`approval: every_run`).
    pub fn with_alerts(mut self, alerter: Arc<Alerter>) -> Ticker {
        self.alerts = Some(alerter);
        self
    }

    /// Counts the windows it records SKIPPED (overlap, pause) on their schedules' health.
    pub fn with_health(mut self, health: Arc<dyn HealthStore>) -> Ticker {
        self.health = Some(health);
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

    /// What it is wired with (see [`crate::wiring`]).
    pub fn features(&self) -> std::collections::BTreeSet<crate::wiring::Feature> {
        let kill_switch = self.kill_switch.is_some();
        let health = (crate::wiring::Feature::Health, self.health.is_some());
        crate::wiring::features_of(&self.metrics, kill_switch, self.alerts.as_ref(), &[health])
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
    ) -> Result<cronledger_ledger::ledger::Page<StoredSchedule>, StoreError> {
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
        self.metrics
            .count(Metric::TickErrors, report.errors.len() as u64);
        if !kill_switch_engaged {
            for shard in shards {
                self.redispatch_lost(shard, now, &mut report).await;
            }
        }
        report
    }

    /// Fires one page of due schedules.
    fn crashes(&self, point: CrashPoint, run: &Run) -> bool {
        self.faults
            .as_ref()
            .is_some_and(|f| f.crash_at(point, &run.key, run.attempts))
    }

    async fn active_runs_of(&self, schedule_id: &str) -> Result<Vec<ActiveRun>, StoreError> {
        crate::overlap::active_runs_of(self.store.as_ref(), schedule_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronledger_core::ScheduleSpec;
    use cronledger_ledger::ledger::ScheduleState;

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
