//! The ticker: once a minute (EventBridge Scheduler), fire every due window exactly once.
//!
//! Per shard, a tick reads the shard's fire mark and its catalog of schedules (both strongly
//! consistent, the catalog cached while its version holds), plans the windows whose fire
//! times fall in (`fired_through`, now + lookahead], writes each window's run where no item
//! is, moves the mark conditioned on what it read, then sends the runs (see [`shard`]). A
//! fire writes the run and nothing else: no schedule item moves, no index entry either.
//! Windows older than their grace period are not fired here; the ticker only moves past
//! them and leaves them to the reconciler's misfire policy.
//!
//! A fire time is the occurrence plus the schedule's jitter offset (zero without `jitter`).
//! The run is recorded under the occurrence (its window and key do not move); the message
//! is due, and the grace counts, from the fire time.

mod fire;
mod send;
mod shard;
mod windows;

use chrono::{DateTime, Utc};
use cronledger_aws::{HealthStore, LaneQueue, LedgerStore, StoreError};
use cronledger_core::overlap::ActiveRun;
use cronledger_core::{Run, Span};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::alerting::Alerter;
use crate::clock::{Clock, SystemClock};
use crate::faults::{CrashPoint, Faults};
use crate::kill_switch::KillSwitchCheck;
use crate::metrics::{Metric, Metrics};
use crate::runs::ScheduleCache;
use shard::{CatalogCache, ShardTick};

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
    /// Runs written at once.
    pub concurrency: usize,
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
            max_windows_per_schedule: 10,
        }
    }
}

/// What one tick did, for logs, metrics and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TickReport {
    /// Schedules with a window this tick fired.
    pub due_schedules: u32,
    /// Runs this tick created (QUEUED, SKIPPED for overlap, or waiting behind QUEUE_NEW).
    pub created: u32,
    /// Windows another ticker or the reconciler recorded first.
    pub lost_race: u32,
    pub skipped_overlap: u32,
    pub queued_behind: u32,
    /// Windows past their grace period, left to the reconciler.
    pub left_for_reconciler: u32,
    pub sent: u32,
    /// Runs whose send failed: the next tick sends them again (its shard's `sent_through`
    /// stays behind).
    pub unsent: u32,
    /// Runs a ticker wrote and may not have sent (it died sending, or lost a race and died),
    /// never started, sent again.
    pub redispatched: u32,
    /// The first fire time after this tick's range, over its shards (`None`: nothing fires).
    pub next_fire_at: Option<DateTime<Utc>>,
    /// When a tick should look again at runs this one could not confirm sent (the first of
    /// them past its send deadline); `None`: none.
    pub resend_at: Option<DateTime<Utc>>,
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
        self.next_fire_at = match (self.next_fire_at, other.next_fire_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.resend_at = match (self.resend_at, other.resend_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.kill_switch_engaged |= other.kill_switch_engaged;
        self.errors.extend(other.errors);
    }

    /// A schedule this tick could not fire, and why.
    fn error(&mut self, schedule_id: &str, e: impl std::fmt::Display) {
        self.errors.push(format!("{schedule_id}: {e}"));
    }

    /// A created run's send: made, or left for the next tick.
    fn count_send(&mut self, sent: bool) {
        if sent {
            self.sent += 1;
        } else {
            self.unsent += 1;
        }
    }
}

/// What a tick found due (see [`Ticker::due`]).
#[derive(Clone)]
pub struct DueSchedules {
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    shards: Vec<ShardTick>,
    kill_switch_engaged: bool,
    errors: Vec<String>,
}

impl DueSchedules {
    /// Whether a window is due already rather than inside the lookahead: only such a window
    /// is checked against the schedule's running work when it is fired (its overlap
    /// policy), so only then does the firing depend on what workers do meanwhile. Runs a
    /// dead ticker may not have sent count too (they are sent at once).
    pub fn fires_due_windows(&self) -> bool {
        self.shards.iter().any(|s| s.fires_due_windows(self.now))
    }
}

pub struct Ticker {
    store: Arc<dyn LedgerStore>,
    lanes: Arc<dyn LaneQueue>,
    config: TickerConfig,
    schedules: ScheduleCache,
    catalogs: CatalogCache,
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
            catalogs: CatalogCache::default(),
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

    /// The tick's first half: each shard's mark and catalog read and its windows planned.
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
            shards: Vec::new(),
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
        for shard in shards {
            match self.plan_shard(shard, now, until, &mut due.errors).await {
                Ok(tick) => due.shards.push(tick),
                Err(e) => due.errors.push(format!("shard {shard}: {e}")),
            }
        }
        due
    }

    /// The tick's second half: fires each shard's planned windows.
    pub async fn fire(&self, due: DueSchedules) -> TickReport {
        let DueSchedules {
            now,
            until,
            shards,
            kill_switch_engaged,
            errors,
        } = due;
        let mut report = TickReport {
            kill_switch_engaged,
            errors,
            ..TickReport::default()
        };
        for tick in shards {
            report.merge(self.fire_shard(tick, now, until).await);
        }
        self.metrics
            .count(Metric::TickErrors, report.errors.len() as u64);
        report
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
