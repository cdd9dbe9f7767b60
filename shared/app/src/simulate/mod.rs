//! The simulator behind `cronledger simulate`: the real ticker, worker and reconciler
//! handlers against real (emulated) DynamoDB and SQS, on a virtual clock, with injected
//! faults. It answers "what happens to my schedules if the scheduler is down six hours?"
//! with the ledger that would result.
//!
//! Virtual time jumps from event to event: a tick at every minute boundary (N tickers at
//! once), a reconciler pass every 5 minutes (event time as "now"), the SQS event source
//! draining every lane after each instant, jobs finishing, held delayed sends and hidden
//! messages coming due. Everything the handlers read as "now" is the virtual clock; what SQS
//! times by the wall clock is moved onto it (see [`lanes`]). Inside an outage no ticker,
//! reconciler or worker runs; SQS keeps its messages. Inside a worker outage the tickers and
//! the reconciler run and no worker takes a message, so the lanes fill up. While the kill
//! switch is on, the same stops as in an outage. An operator's levers (pause, resume, the kill
//! switch, approving what awaits approval) are pulled at their instants (see [`levers`]).
//!
//! After `to` the system keeps running (no more outages) until every window of the range is
//! settled (a terminal or held entry, nothing in flight) or `settle_limit` passes; the report
//! covers the windows in `(from, to]` only.

mod agenda;
mod bill;
mod config;
mod costing;
mod crash;
mod entries;
mod job;
mod lanes;
mod levers;
mod queues;
mod summary;
mod time;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::notify::{MemoryNotifier, Tee};
use cronledger_aws::MeterSnapshot;
use cronledger_aws::{AlertStore, HealthStore, Notifier};
use cronledger_aws::{
    Backfill, LaneError, LedgerStore, OpsStore, ReleaseStateStore, RequestMeter, StoreError,
};
use cronledger_contract::CompletenessReport;
use cronledger_core::alerts::Alert;
use cronledger_core::run::Origin;
use cronledger_core::{JobSpec, Lane, Run, Schedule, ScheduleSpec, Span};
use cronledger_ledger::ledger::ChangeMeta;
use futures_util::future::join_all;
use serde::Serialize;
use tokio::task::JoinSet;
use tracing::instrument::WithSubscriber;
use tracing::Instrument;

use crate::audit::{completeness, AuditPage, AuditRange};
use crate::clock::Clock;
use crate::faults::CrashPoint;
use crate::jobs::{HttpJob, JobTargets};
use crate::kill_switch::KillSwitchCheck;
use crate::reconciler::{ReconcileError, ReconcileEvent, ReconcilerConfig, Signals};
use crate::ticker::{DueSchedules, TickEvent, Ticker, TickerConfig};
use crate::wiring::{Components, Deps};
use crate::worker::{Worker, WorkerConfig};

use agenda::{Agenda, MINUTE, PASS_EVERY};
pub use bill::{Bill, FunctionUsage, MEMORY_MB};
pub use config::{parse_instant, BackfillAt, Outage, ScheduleAt, SimulationConfig};
pub use costing::{CostDetail, Costing};
pub use crash::{Crash, SimFaults};
pub use entries::SimulatedEntry;
pub use job::{Execution, ExecutionLog, VirtualNoop};
pub use lanes::{SimLanes, QUEUE_VISIBILITY};
pub use levers::SIMULATOR_ACTOR;
pub use queues::{MemoryQueues, SimQueues};
pub use summary::ScheduleSummary;
pub use time::{VirtualClock, VirtualTime};

/// The simulator's errors, with stable codes.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("SIMULATE_INVALID: {0}")]
    Invalid(String),
    #[error("SIMULATE_STORE: {0}")]
    Store(#[from] StoreError),
    #[error("SIMULATE_LANES: {0}")]
    Lanes(#[from] LaneError),
}

impl SimulateError {
    pub fn code(&self) -> &'static str {
        match self {
            SimulateError::Invalid(_) => "SIMULATE_INVALID",
            SimulateError::Store(_) => "SIMULATE_STORE",
            SimulateError::Lanes(_) => "SIMULATE_LANES",
        }
    }
}

/// Where the simulation runs: a fresh table, and fresh lanes (SQS queues created with
/// [`lane_settings`], or [`SimQueues::memory`]).
#[derive(Clone)]
pub struct SimulationEnv {
    pub store: Arc<dyn LedgerStore>,
    pub control: Arc<dyn ReleaseStateStore>,
    /// Backfills: the ones the reconciler proposes for long gaps, released in its pass.
    pub ops: Arc<dyn OpsStore>,
    /// Where alerts are recorded before they are published (to a list: see
    /// [`SimulationReport::alerts`]).
    pub alerts: Arc<dyn AlertStore>,
    /// The schedules' outcome counters.
    pub health: Arc<dyn HealthStore>,
    /// The lanes' messages: the emulator's SQS or in-process queues (see [`queues`]).
    pub queues: SimQueues,
    /// Shards of the table's `due` and `active` indexes (as the ledger was built with).
    pub shards: u32,
    /// The store's and lanes' request meter, if they share one: the report then counts
    /// the emulator calls by operation (where a simulation's wall time goes).
    pub meter: Option<RequestMeter>,
    /// Where alerts are published besides the report's list (an SNS topic on the
    /// emulator); an alert is listed once this notifier took it.
    pub notifier: Option<Arc<dyn Notifier>>,
    /// Whether an index read is current (the conformance suite's memory store, DynamoDB
    /// Local): the simulator then skips idle minutes to the next `due` entry. With lagging
    /// indexes it ticks every minute, as EventBridge Scheduler does, since an empty read
    /// may be one the index has not caught up with.
    pub indexes_current: bool,
}

impl SimulationEnv {
    /// Every store on one ledger (as deployed: one table), with these queues.
    pub fn on<S>(
        ledger: Arc<S>,
        queues: SimQueues,
        shards: u32,
        meter: Option<RequestMeter>,
    ) -> Self
    where
        S: LedgerStore + ReleaseStateStore + OpsStore + AlertStore + HealthStore + 'static,
    {
        SimulationEnv {
            store: ledger.clone(),
            control: ledger.clone(),
            ops: ledger.clone(),
            alerts: ledger.clone(),
            health: ledger,
            queues,
            shards,
            meter,
            notifier: None,
            indexes_current: true,
        }
    }

    /// A ledger whose indexes trail its table (see [`SimulationEnv::indexes_current`]).
    pub fn with_lagging_indexes(mut self) -> Self {
        self.indexes_current = false;
        self
    }

    /// Alerts published to `notifier` too (see [`SimulationEnv::notifier`]).
    pub fn with_notifier(mut self, notifier: Arc<dyn Notifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }
}

/// How the simulator's queues must be created: wall-clock visibility out of the way (see
/// [`lanes`]), the usual redrive.
pub fn lane_settings() -> LaneSettings {
    LaneSettings {
        visibility_timeout: QUEUE_VISIBILITY,
        ..LaneSettings::default()
    }
}

/// What happened, as `cronledger simulate` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct SimulationReport {
    /// Every ledger entry of the range's windows (range records included), by schedule and
    /// window, with how often its job ran and when it first started.
    pub ledger: Vec<SimulatedEntry>,
    pub summary: Vec<ScheduleSummary>,
    /// The backfills the reconciler proposed for long gaps and those the configuration asked
    /// for, as they ended.
    pub backfills: Vec<Backfill>,
    /// Every alert published during the range, in order (what the schedules' owners would
    /// have been told).
    pub alerts: Vec<Alert>,
    /// The completeness audit of `[from, to)` on the simulation's ledger: the same engine as
    /// `GET /v1/audit/completeness` and the auditor, every missing window listed.
    pub audit: CompletenessReport,
    pub stats: SimulationStats,
}

impl SimulationReport {
    /// Windows accounted for more than once or executed more than once, over all schedules.
    pub fn duplicates(&self) -> u32 {
        self.summary.iter().map(|s| s.duplicates).sum()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SimulationStats {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub outages: Vec<Outage>,
    pub worker_outages: Vec<Outage>,
    /// The windows the kill switch was on.
    pub kill_switches: Vec<Outage>,
    /// The operator's levers as they were pulled: instant and what each did.
    pub levers: Vec<String>,
    pub tickers: u32,
    /// When every window of the range was settled (`None`: not within the settle limit).
    pub settled_at: Option<DateTime<Utc>>,
    pub ticks: u32,
    pub reconciler_passes: u32,
    pub messages_sent: u64,
    pub duplicate_messages_sent: u64,
    pub deliveries: u64,
    pub redeliveries: u64,
    pub crashes: Vec<String>,
    /// Schedules whose job was not `noop`: simulated as an instant, successful noop.
    pub jobs_replaced: Vec<String>,
    /// Errors the handlers reported (first 50).
    pub errors: Vec<String>,
    /// Emulator calls by store or lane operation (empty without a meter).
    pub calls: BTreeMap<String, u64>,
    pub wall_ms: u64,
    /// `capacity`, `cost_per_million_runs`, `cost_per_million_runs_provisioned`, `prices`,
    /// `monthly_fixed_usd`, `cost_detail`.
    #[serde(flatten)]
    pub cost: Costing,
}

/// Queue depths straight from the queues; no CloudWatch alarms.
struct QueueSignals(SimQueues);

#[async_trait]
impl Signals for QueueSignals {
    async fn visible_backlog(&self, lane: Lane) -> Result<u64, ReconcileError> {
        Ok(self.0.depth(lane, false).await?.visible)
    }

    async fn dlq_depth(&self, lane: Lane) -> Result<u64, ReconcileError> {
        let d = self.0.depth(lane, true).await?;
        Ok(d.visible + d.in_flight + d.delayed)
    }

    async fn alarms_firing(&self, _names: &[String]) -> Result<Vec<String>, ReconcileError> {
        Ok(Vec::new())
    }
}

const MAX_ERRORS: usize = 50;

/// The components as the simulator runs them: wired as deployed on the env's stores and the
/// simulated lanes, the workers on `worker_clock`; `kill_switch` only with kill-switch
/// windows (without, nothing is read for it).
pub(crate) fn components(
    env: &SimulationEnv,
    lanes: Arc<SimLanes>,
    notifier: Arc<dyn Notifier>,
    worker_clock: Arc<dyn Clock>,
    kill_switch: Option<Arc<KillSwitchCheck>>,
) -> Components {
    Components::build(Deps {
        store: env.store.clone(),
        control: env.control.clone(),
        ops: env.ops.clone(),
        alerts: env.alerts.clone(),
        health: env.health.clone(),
        lanes,
        notifier,
        clock: worker_clock,
        kill_switch,
    })
}

/// Loads `specs` at `config.from` into the env's (empty) table and runs the simulation.
pub async fn simulate(
    env: &SimulationEnv,
    specs: Vec<ScheduleSpec>,
    config: &SimulationConfig,
) -> Result<SimulationReport, SimulateError> {
    config.check(&specs)?;
    if specs.is_empty() {
        return Err(SimulateError::Invalid("the file has no schedules".into()));
    }
    let started = Instant::now();
    let (specs, jobs_replaced) = simulated_jobs(specs);
    let mut schedules = Vec::with_capacity(specs.len());
    for spec in &specs {
        let schedule = Schedule::new(spec.clone()).map_err(|i| {
            SimulateError::Invalid(format!("{}: {}: {}", spec.id, i.code, i.message))
        })?;
        schedules.push(schedule);
    }

    let time = VirtualTime::new(config.from);
    for (name, calendar) in &config.calendars.0 {
        let meta = ChangeMeta {
            actor: "simulate".into(),
            reason: "loaded by the simulator".into(),
            at: config.from,
            details: None,
        };
        env.store
            .put_calendar(name, calendar.clone(), None, meta)
            .await?;
    }
    for spec in specs.iter().cloned() {
        let meta = ChangeMeta {
            actor: "simulate".into(),
            reason: "loaded by the simulator".into(),
            at: config.from,
            details: None,
        };
        env.store.create_schedule(spec, meta).await?;
    }

    // The deployed lease and heartbeat, beating on the virtual clock (see
    // [`VirtualTime::worker_clock`]); a message kept without a visibility of its own (a crash)
    // comes back after the lease has run out.
    let worker_config = WorkerConfig::default();
    let visibility = worker_config.lease.as_delta() + TimeDelta::minutes(1);

    let faults = Arc::new(SimFaults::new(
        config.crashes.iter().copied(),
        config.crash_every,
        time.clone(),
        config.to,
    ));
    let log = ExecutionLog::default();
    let lanes = Arc::new(SimLanes::new(
        env.queues.clone(),
        time.clone(),
        config.duplicate_deliveries,
        visibility,
    ));
    let http = HttpJob::new().map_err(|e| SimulateError::Invalid(e.to_string()))?;
    let targets = JobTargets::new(http).with_noop(Arc::new(VirtualNoop {
        time: time.clone(),
        log: log.clone(),
    }));
    // With kill-switch windows, every function checks the stored flag as deployed (the loop
    // also stops invoking them, as disabled schedules and event sources do); without, no
    // check is made and nothing is read for it.
    let kill_switch =
        (!config.kill_switches.is_empty()).then(|| Arc::new(KillSwitchCheck::new(env.ops.clone())));
    let notifier = Arc::new(MemoryNotifier::new());
    let publish: Arc<dyn Notifier> = match &env.notifier {
        Some(first) => Arc::new(Tee {
            first: first.clone(),
            then: notifier.clone(),
        }),
        None => notifier.clone(),
    };
    let components = components(
        env,
        lanes.clone(),
        publish,
        Arc::new(time.worker_clock()),
        kill_switch,
    );
    let workers: Vec<Arc<Worker>> = ["sim-worker-a", "sim-worker-b"]
        .into_iter()
        .map(|owner| {
            let config = WorkerConfig {
                owner: owner.into(),
                ..worker_config.clone()
            };
            Arc::new(
                components
                    .worker(targets.clone(), config)
                    .with_faults(faults.clone()),
            )
        })
        .collect();
    let tickers: Vec<Ticker> = (0..config.tickers)
        .map(|_| {
            let config = TickerConfig {
                shards: env.shards,
                ..TickerConfig::default()
            };
            components
                .ticker(config)
                .with_send_clock(Arc::new(time.clock()))
                .with_faults(faults.clone())
        })
        .collect();
    let signals: Arc<dyn Signals> = Arc::new(QueueSignals(env.queues.clone()));
    let reconciler = components.reconciler(
        signals.clone(),
        ReconcilerConfig {
            shards: env.shards,
            ..ReconcilerConfig::default()
        },
    );
    // The reconciler function's second step, as deployed.
    let releaser = components.backfill_releaser(Some(signals.clone()));
    let mut proposed: Vec<String> = Vec::new();
    let mut levers = levers::Levers::new(
        env.store.clone(),
        env.ops.clone(),
        lanes.clone(),
        Arc::new(time.clock()),
        signals.clone(),
        specs.iter().map(|s| s.id.clone()).collect(),
        config.from,
    );
    levers.backfills = config.backfills.clone();

    let mut agenda = Agenda::new(config);
    let lookahead = TickerConfig::default().lookahead.as_delta();
    let hard_end = config.to + config.settle_limit.as_delta();
    let within = |outages: &[Outage], t: DateTime<Utc>| {
        t <= config.to && outages.iter().any(|o| o.covers(t))
    };
    let down = |t| within(&config.outages, t);
    let workers_down = |t| within(&config.worker_outages, t);
    let mut stats = SimulationStats {
        from: config.from,
        to: config.to,
        outages: config.outages.clone(),
        worker_outages: config.worker_outages.clone(),
        kill_switches: config.kill_switches.clone(),
        levers: Vec::new(),
        tickers: config.tickers,
        settled_at: None,
        ticks: 0,
        reconciler_passes: 0,
        messages_sent: 0,
        duplicate_messages_sent: 0,
        deliveries: 0,
        redeliveries: 0,
        crashes: Vec::new(),
        jobs_replaced,
        errors: Vec::new(),
        calls: BTreeMap::new(),
        wall_ms: 0,
        cost: Costing::default(),
    };
    let calls_before = env.meter.as_ref().map(RequestMeter::snapshot);
    if let Some(meter) = &env.meter {
        // Units by virtual second, for the provisioned-capacity plan.
        let clock = time.clock();
        meter.timed_by(Arc::new(move || clock.now().timestamp()));
    }
    let mut errors: Vec<String> = Vec::new();
    let mut tasks: JoinSet<()> = JoinSet::new();
    let bill = lanes.counters.bill.clone();

    // The handlers' log lines are counted as the deployed functions would write them.
    let looped: Result<(), SimulateError> = async {
        loop {
            let t = [Some(agenda.next()), time.next_timer(), lanes.next_event()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(agenda.next());
            if t > hard_end {
                break;
            }
            time.set(t);
            time.wake_due().await;
            lanes.release_due().await?;
            for lever in agenda.levers_due(t) {
                levers.pull(lever, t, &mut errors).await?;
            }
            // The kill switch stops what an outage stops; it differs in why (and in the report).
            let up = !down(t) && !levers.kill_switch_on();
            let working = up && !workers_down(t);
            let is_tick = t == agenda.next_tick;
            let is_pass = t == agenda.next_pass;
            if is_tick {
                agenda.next_tick += MINUTE;
                if up {
                    let event = TickEvent {
                        time: t,
                        shards: None,
                    };
                    let invocation = bill::invocation_span();
                    let ticked = std::time::Instant::now();
                    let due = join_all(tickers.iter().map(|ticker| ticker.due(&event)))
                        .instrument(invocation.clone())
                        .await;
                    // Firing windows inside the lookahead touches nothing a worker reads or
                    // writes, so it goes alongside this instant's deliveries (about a third of a
                    // simulated minute's round trips). A window already due is checked against
                    // the schedule's running work, and a reconciler pass reads the whole ledger:
                    // those wait, so the simulation stays repeatable.
                    let alongside =
                        working && !is_pass && !due.iter().any(DueSchedules::fires_due_windows);
                    let fire = join_all(
                        tickers
                            .iter()
                            .zip(due)
                            .map(|(ticker, due)| ticker.fire(due)),
                    )
                    .instrument(invocation);
                    let reports = if alongside {
                        let (reports, drained) =
                            tokio::join!(fire, lanes.drain(&workers, &mut tasks));
                        drained?;
                        reports
                    } else {
                        fire.await
                    };
                    stats.ticks += 1;
                    // Alongside deliveries, the measured time includes theirs: an upper bound.
                    let each = ticked.elapsed() / tickers.len().max(1) as u32;
                    for ticker in &tickers {
                        bill.invocation("ticker", std::time::Duration::ZERO, each);
                        bill.flush_metrics(ticker.metrics(), "ticker");
                    }
                    let idle = reports
                        .iter()
                        .all(|r| r.due_schedules == 0 && r.errors.is_empty());
                    let next_fire_at = reports.iter().filter_map(|r| r.next_fire_at).min();
                    let resend_at = reports.iter().filter_map(|r| r.resend_at).min();
                    errors.extend(reports.into_iter().flat_map(|r| r.errors));
                    if idle && env.indexes_current {
                        agenda.skip_idle_ticks(next_fire_at, resend_at, lookahead, hard_end);
                    }
                }
            }
            if is_pass {
                agenda.next_pass += PASS_EVERY;
                if up {
                    let passed = std::time::Instant::now();
                    let (report, released) = async {
                        let report = reconciler.reconcile(&ReconcileEvent::at(t)).await;
                        (report, releaser.pass(t).await)
                    }
                    .instrument(bill::invocation_span())
                    .await;
                    bill.invocation("reconciler", std::time::Duration::ZERO, passed.elapsed());
                    bill.flush_metrics(reconciler.metrics(), "reconciler");
                    stats.reconciler_passes += 1;
                    errors.extend(report.errors);
                    proposed.extend(report.backfills_proposed);
                    errors.extend(released.errors);
                }
            }
            if working {
                lanes.drain(&workers, &mut tasks).await?;
            }
            lanes.flush_finished(false).await?;
            while tasks.try_join_next().is_some() {}
            if is_pass && t >= config.to && up {
                let entries = read_ledger(env.store.as_ref(), &schedules, config).await?;
                if summary::settled(&schedules, &entries, config.from, config.to) {
                    stats.settled_at = Some(t);
                    break;
                }
            }
        }
        Ok(())
    }
    .with_subscriber(bill.log_dispatch())
    .await;
    looped?;
    tasks.abort_all();
    lanes.flush_finished(true).await?;

    let entries = read_ledger(env.store.as_ref(), &schedules, config).await?;
    let crashes = faults.crashes();
    let lost: BTreeSet<_> = crashes
        .iter()
        // Its lease taken over, a cut-off heartbeat's attempt loses its completion write too.
        .filter(|c| {
            matches!(
                c.point,
                CrashPoint::BeforeCompletionWrite | CrashPoint::Heartbeat
            )
        })
        .map(|c| (c.run.clone(), c.attempt))
        .collect();
    let executions = log.snapshot();
    let summary = schedules
        .iter()
        .zip(&entries)
        .map(|(s, runs)| summary::summarize(s, runs, &executions, &lost, config.from, config.to))
        .collect();
    stats.messages_sent = lanes.counters.sent.load(Ordering::Relaxed);
    stats.duplicate_messages_sent = lanes.counters.duplicates_sent.load(Ordering::Relaxed);
    stats.deliveries = lanes.counters.deliveries.load(Ordering::Relaxed);
    stats.redeliveries = lanes.counters.redelivered.load(Ordering::Relaxed);
    stats.crashes = crashes
        .iter()
        .map(|c| format!("{} {} attempt {}", c.point.name(), c.run, c.attempt))
        .collect();
    errors.truncate(MAX_ERRORS);
    stats.errors = errors;
    if let (Some(meter), Some(before)) = (&env.meter, calls_before) {
        let after = meter.snapshot();
        stats.calls = calls_since(&before, &after);
        let runs = executions.values().map(|e| e.len() as u64).sum();
        let hours = (time.now() - config.from).num_seconds().max(0) as f64 / 3600.0;
        let profile = costing::Profile {
            from: config.from.timestamp(),
            to: time.now().timestamp(),
            seconds: meter.units_by_second(),
        };
        stats.cost = costing::costing(&bill, &before, &after, runs, hours, &profile);
    }
    stats.levers = levers.pulled;
    proposed.extend(levers.created_backfills);
    // After the call count: the report's own reads are not the simulation's.
    let ledger = entries::simulated_entries(env.store.as_ref(), &entries, &executions).await?;
    let audited = AuditRange {
        from: config.from,
        to: config.to,
        schedule: None,
    };
    let every_missing = AuditPage {
        max_missing: usize::MAX,
        after: None,
    };
    let audit = completeness(env.store.as_ref(), audited, every_missing).await?;
    stats.wall_ms = started.elapsed().as_millis() as u64;
    let mut backfills = Vec::with_capacity(proposed.len());
    for id in &proposed {
        backfills.push(env.ops.get_backfill(id).await?);
    }
    Ok(SimulationReport {
        ledger,
        summary,
        backfills,
        alerts: notifier.sent().into_iter().map(|s| s.alert).collect(),
        audit,
        stats,
    })
}

/// The simulator never calls out: jobs other than `noop` become an instant, successful noop
/// (with their payload), and the schedules that had one are listed.
fn simulated_jobs(specs: Vec<ScheduleSpec>) -> (Vec<ScheduleSpec>, Vec<String>) {
    let mut replaced = Vec::new();
    let specs = specs
        .into_iter()
        .map(|mut spec| {
            let mut changed = false;
            spec.job = simulated_target(spec.job, &mut changed);
            if changed {
                replaced.push(spec.id.clone());
            }
            spec
        })
        .collect();
    (specs, replaced)
}

/// `job` as the simulator runs it: a noop stays, a steps job keeps its steps with each
/// step's target simulated, anything else becomes an instant noop (`changed` says so).
fn simulated_target(job: JobSpec, changed: &mut bool) -> JobSpec {
    match job {
        JobSpec::Noop { .. } => job,
        JobSpec::Steps { mut steps } => {
            for step in &mut steps {
                step.target = simulated_target(step.target.clone(), changed);
            }
            JobSpec::Steps { steps }
        }
        other => {
            *changed = true;
            // A guard stays: without an `affected` answer, its dry run is refused.
            JobSpec::Noop {
                duration: Span::ZERO,
                duration_ms: 0,
                fail_times: 0,
                fail_before: None,
                payload: other.payload().clone(),
                affected: None,
                guard: other.guard().copied(),
                children: 0,
                fail_children: 0,
                count: None,
                count_sequence: Vec::new(),
            }
        }
    }
}

/// The expected-occurrence entries of each schedule's windows in `(from, to]`.
async fn read_ledger(
    store: &dyn LedgerStore,
    schedules: &[Schedule],
    config: &SimulationConfig,
) -> Result<Vec<Vec<Run>>, SimulateError> {
    let mut all = Vec::with_capacity(schedules.len());
    for schedule in schedules {
        let runs = store
            .runs_between(schedule.id(), config.from, config.to)
            .await?
            .into_iter()
            .filter(|r| r.key.origin == Origin::Expected && r.key.scheduled_for > config.from)
            .collect();
        all.push(runs);
    }
    Ok(all)
}

/// Calls per scope (store or lane operation) made between two snapshots.
fn calls_since(before: &MeterSnapshot, after: &MeterSnapshot) -> BTreeMap<String, u64> {
    // Calls outside any store or lane operation are named by their AWS operation.
    let name = |scope: &String, op: &String| match scope.as_str() {
        cronledger_aws::meter::UNSCOPED => op.clone(),
        _ => scope.clone(),
    };
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    for ((scope, op), usage) in &after.usage {
        *calls.entry(name(scope, op)).or_default() += usage.calls;
    }
    for ((scope, op), usage) in &before.usage {
        if let Some(n) = calls.get_mut(&name(scope, op)) {
            *n = n.saturating_sub(usage.calls);
        }
    }
    calls.retain(|_, n| *n > 0);
    calls
}
