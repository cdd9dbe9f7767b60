//! The lever x path matrix: each lever an operator or a manifest pulls (pause, kill switch,
//! `approval: every_run`, SKIP_NEW, QUEUE_NEW, `idempotent: false`) against each path the
//! simulator drives that creates or starts a run (the ticker's fire, the reconciler's
//! catch-up and coalescing, a dependency, an automatic retry, a steps hand-over), on both
//! stores, asserted from the ledger: `executions`, `first_started_at`, `completed_at`,
//! status and reason, and the lane each run was given.
//!
//! The api's paths (backfill, manual run and run-at, an operator's retry, archive,
//! disable) have their cells in the api and backfill suites; the README's path x lever
//! table says where each cell is tested.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cronledger_app::faults::CrashPoint;
use cronledger_app::simulate::{
    simulate, Outage, ScheduleAt, SimQueues, SimulatedEntry, SimulationConfig, SimulationEnv,
    SimulationReport,
};
use cronledger_aws::{DynamoLedger, LedgerStore, MemoryStore, RequestMeter};
use cronledger_core::admission::is_catch_up_lane;
use cronledger_core::{Reason, Run, RunStatus, ScheduleSpec, Trigger};
use cronledger_tests::{spec_with, t, TestLedger};
use serde_json::{json, Value};

/// The two stores every cell runs on.
#[derive(Debug, Clone, Copy)]
enum Store {
    Memory,
    DynamoDb,
}

const STORES: [Store; 2] = [Store::Memory, Store::DynamoDb];

/// One simulated run of a cell, with the store it wrote (the lanes are read from it).
struct Cell {
    store: Store,
    report: SimulationReport,
    ledger: Arc<dyn LedgerStore>,
    // Keeps the emulator's table named for the cell's reads.
    _table: Option<TestLedger>,
}

async fn cell(store: Store, specs: Vec<ScheduleSpec>, config: &SimulationConfig) -> Cell {
    let (ledger, table, env): (Arc<dyn LedgerStore>, _, _) = match store {
        Store::Memory => {
            let memory = Arc::new(MemoryStore::new(1, RequestMeter::new()));
            let env = SimulationEnv::on(memory.clone(), SimQueues::memory(), 1, None);
            (memory, None, env)
        }
        Store::DynamoDb => {
            let table = TestLedger::new().await;
            let one_shard = Arc::new(DynamoLedger::new(&table.clients, &table.table, 1));
            let env = SimulationEnv::on(one_shard.clone(), SimQueues::memory(), 1, None);
            (one_shard, Some(table), env)
        }
    };
    let report = simulate(&env, specs, config).await.expect("simulation");
    assert!(
        report.stats.settled_at.is_some(),
        "{store:?}: unsettled {:?}",
        report.stats
    );
    Cell {
        store,
        report,
        ledger,
        _table: table,
    }
}

fn at(text: &str) -> DateTime<Utc> {
    t(text)
}

fn config(from: &str, to: &str) -> SimulationConfig {
    SimulationConfig::new(at(from), at(to))
}

/// The README's outage of the issue: 00:20:10 to 00:27:30.
fn with_outage(mut config: SimulationConfig) -> SimulationConfig {
    config.outages =
        vec![Outage::parse("2026-03-01T00:20:10Z..2026-03-01T00:27:30Z").expect("outage")];
    config
}

fn minutely(id: &str, fields: Value) -> ScheduleSpec {
    spec_with(id, "* * * * *", fields)
}

impl Cell {
    fn entries(&self, id: &str) -> Vec<&SimulatedEntry> {
        self.report
            .ledger
            .iter()
            .filter(|e| e.schedule == id)
            .collect()
    }

    fn executions(&self, id: &str) -> u32 {
        self.entries(id).iter().map(|e| e.executions).sum()
    }

    /// Every run of `id` the store holds, past the range's end included.
    async fn runs(&self, id: &str) -> Vec<Run> {
        self.ledger
            .runs_between(
                id,
                self.report.stats.from,
                self.report.stats.to + chrono::TimeDelta::days(1),
            )
            .await
            .expect("runs")
    }

    /// No execution of `id` overlaps another: each executed entry's first start is at or
    /// after the previous one's end.
    fn one_at_a_time(&self, id: &str) {
        let mut spans: Vec<(DateTime<Utc>, DateTime<Utc>, &str)> = self
            .entries(id)
            .into_iter()
            .filter(|e| e.executions > 0)
            .filter_map(|e| {
                let start = at(e.first_started_at.as_deref()?);
                let end = at(e.completed_at.as_deref()?);
                Some((start, end, e.scheduled_for.as_str()))
            })
            .collect();
        spans.sort();
        assert!(
            spans.len() > 1,
            "{:?} {id}: too little ran to judge",
            self.store
        );
        for pair in spans.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1,
                "{:?} {id}: {} started at {} while {} ran until {}",
                self.store,
                pair[1].2,
                pair[1].0,
                pair[0].2,
                pair[0].1
            );
        }
    }

    /// Nothing of `id` started inside `[from, to)`.
    fn nothing_started_within(&self, id: &str, from: &str, to: &str) {
        for e in self.entries(id) {
            if let Some(started) = e.first_started_at.as_deref().map(at) {
                assert!(
                    started < at(from) || started >= at(to),
                    "{:?} {id}: {} started at {started}, inside {from}..{to}",
                    self.store,
                    e.scheduled_for
                );
            }
        }
    }

    /// No run of `id` executed, and each entry is held for approval or expired waiting.
    fn nothing_ran_unapproved(&self, id: &str) {
        assert_eq!(
            self.executions(id),
            0,
            "{:?} {id}: {:#?}",
            self.store,
            self.entries(id)
        );
        for e in self.entries(id) {
            let held =
                e.status == RunStatus::ManualRequired && e.reason == Some(Reason::ApprovalRequired);
            let expired =
                e.status == RunStatus::Skipped && e.reason == Some(Reason::ApprovalTimeout);
            let accounted_otherwise = matches!(e.status, RunStatus::Skipped | RunStatus::Coalesced);
            assert!(
                held || expired || accounted_otherwise,
                "{:?} {id}: {e:?}",
                self.store
            );
        }
    }
}

/// `approval: every_run` x the ticker's fire, RUN_ONCE coalescing and CATCH_UP_ALL after an
/// outage, and a dependency: nothing runs that nobody approved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_run_holds_on_the_fire_the_catch_up_the_coalesce_and_a_dependency() {
    let careful = |misfire: &str| {
        json!({"misfire": misfire, "approval": "every_run",
                                        "side_effects": false, "max_auto_catch_up": 50})
    };
    let specs = vec![
        minutely("every-once", careful("RUN_ONCE")),
        minutely("every-all", careful("CATCH_UP_ALL")),
        minutely(
            "u1",
            json!({"misfire": "CATCH_UP_ALL", "side_effects": false}),
        ),
        minutely("d1", json!({"after": ["u1"], "approval": "every_run"})),
    ];
    let config = with_outage(config("2026-03-01T00:00:00Z", "2026-03-01T00:40:00Z"));
    for store in STORES {
        let c = cell(store, specs.clone(), &config).await;
        for id in ["every-once", "every-all", "d1"] {
            c.nothing_ran_unapproved(id);
        }
        assert!(c.executions("u1") > 30, "{store:?}: the upstream runs");
        // The outage's windows were caught up or coalesced for approval, not dropped.
        let all = c.entries("every-all");
        assert!(
            all.iter().any(|e| e.trigger == Trigger::CatchUp),
            "{all:#?}"
        );
    }
}

/// `approval: every_run` x an automatic retry: once approved (an admin's approve-all at
/// 00:10), a run retries by itself; nothing starts before the approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_run_approved_once_then_retries_by_itself() {
    let specs = vec![spec_with(
        "flaky-careful",
        "*/5 * * * *",
        json!({"approval": "every_run", "max_attempts": 3, "approval_timeout": "6h",
               "job": {"type": "noop", "fail_times": 1}}),
    )];
    let mut config = config("2026-03-01T00:00:00Z", "2026-03-01T00:30:00Z");
    config.approve_all_at = vec![at("2026-03-01T00:10:30Z")];
    for store in STORES {
        let c = cell(store, specs.clone(), &config).await;
        c.nothing_started_within(
            "flaky-careful",
            "2026-03-01T00:00:00Z",
            "2026-03-01T00:10:30Z",
        );
        let approved: Vec<_> = c
            .entries("flaky-careful")
            .into_iter()
            .filter(|e| at(&e.scheduled_for) <= at("2026-03-01T00:10:30Z"))
            .collect();
        assert!(approved.len() >= 2, "{approved:?}");
        for e in approved {
            // Failed once, retried by itself (no second hold), then succeeded.
            assert_eq!(
                (e.status, e.attempts, e.executions),
                (RunStatus::Success, 2, 2),
                "{store:?} {e:?}"
            );
        }
        // Windows after the approval wait for their own.
        for e in c.entries("flaky-careful") {
            if at(&e.scheduled_for) > at("2026-03-01T00:10:30Z") {
                assert_eq!(e.executions, 0, "{store:?} {e:?}");
            }
        }
    }
}

/// SKIP_NEW and QUEUE_NEW x the fire, CATCH_UP_ALL's catch-up and a dependency: one run of
/// the schedule executes at a time, whatever created it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_is_mutual_exclusion_on_the_fire_the_catch_up_and_a_dependency() {
    let slow = json!({"type": "noop", "duration": "12m"});
    let specs = vec![
        spec_with(
            "u2",
            "*/5 * * * *",
            json!({"misfire": "CATCH_UP_ALL", "side_effects": false}),
        ),
        spec_with(
            "d2",
            "*/5 * * * *",
            json!({"after": ["u2"], "overlap": "SKIP_NEW", "job": slow}),
        ),
        spec_with(
            "d3",
            "*/5 * * * *",
            json!({"after": ["u2"], "overlap": "QUEUE_NEW", "job": slow}),
        ),
        spec_with(
            "caught-skip",
            "*/5 * * * *",
            json!({"misfire": "CATCH_UP_ALL", "overlap": "SKIP_NEW", "side_effects": false,
                   "max_auto_catch_up": 50, "job": {"type": "noop", "duration": "7m"}}),
        ),
        spec_with(
            "caught-queue",
            "*/5 * * * *",
            json!({"misfire": "CATCH_UP_ALL", "overlap": "QUEUE_NEW", "side_effects": false,
                   "max_auto_catch_up": 50, "job": {"type": "noop", "duration": "7m"}}),
        ),
    ];
    let mut config = config("2026-03-01T00:00:00Z", "2026-03-01T01:30:00Z");
    config.outages =
        vec![Outage::parse("2026-03-01T00:20:10Z..2026-03-01T00:42:30Z").expect("outage")];
    for store in STORES {
        let c = cell(store, specs.clone(), &config).await;
        for id in ["d2", "d3", "caught-skip", "caught-queue"] {
            c.one_at_a_time(id);
        }
        // SKIP_NEW skipped the dependent's live windows that met its running one.
        assert!(
            c.entries("d2")
                .iter()
                .any(|e| e.reason == Some(Reason::Overlap)),
            "{store:?}: {:#?}",
            c.entries("d2")
        );
        // Catch-up ran (it waited its turn, it was not dropped).
        for id in ["caught-skip", "caught-queue"] {
            assert!(
                c.entries(id)
                    .iter()
                    .any(|e| e.trigger == Trigger::CatchUp && e.executions == 1),
                "{store:?} {id}: {:#?}",
                c.entries(id)
            );
        }
    }
}

/// A dependency x the upstream's catch-up: the dependent's windows created late are catch-up
/// work of its own, on the correction lane (throttled), never its live lane; and its
/// in-time windows stay on the live lane.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependents_late_windows_go_to_the_correction_lane() {
    let specs = vec![
        minutely(
            "u",
            json!({"misfire": "CATCH_UP_ALL", "side_effects": false, "max_auto_catch_up": 50}),
        ),
        minutely(
            "d",
            json!({"after": ["u"], "misfire": "CATCH_UP_ALL", "side_effects": false,
                             "max_auto_catch_up": 50}),
        ),
    ];
    let config = with_outage(config("2026-03-01T00:00:00Z", "2026-03-01T00:40:00Z"));
    for store in STORES {
        let c = cell(store, specs.clone(), &config).await;
        let upstream = c.runs("u").await;
        let caught_up: Vec<DateTime<Utc>> = upstream
            .iter()
            .filter(|r| r.trigger == Trigger::CatchUp)
            .map(|r| r.key.scheduled_for)
            .collect();
        assert!(!caught_up.is_empty(), "{store:?}: the upstream caught up");
        let mut late = 0;
        for run in c
            .runs("d")
            .await
            .iter()
            .filter(|r| r.trigger == Trigger::Dependency)
        {
            let lane = run.lane.expect("a lane");
            if caught_up.contains(&run.key.scheduled_for) {
                late += 1;
                assert!(is_catch_up_lane(lane), "{store:?} {}: {lane}", run.key);
            } else if run.status.is_success() {
                assert!(!is_catch_up_lane(lane), "{store:?} {}: {lane}", run.key);
            }
        }
        assert!(late > 0, "{store:?}: the dependent followed the catch-up");
        assert_eq!(
            c.executions("d") as usize,
            c.entries("d")
                .iter()
                .filter(|e| e.status.is_success())
                .count()
        );
    }
}

/// Pause and the kill switch x the fire, the catch-up and a dependency: nothing of a paused
/// schedule, and nothing at all under the switch, starts while it holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_the_kill_switch_hold_on_the_fire_the_catch_up_and_a_dependency() {
    let catch_up =
        json!({"misfire": "CATCH_UP_ALL", "side_effects": false, "max_auto_catch_up": 50});
    let specs = vec![
        minutely("paused-up", catch_up.clone()),
        minutely("paused-down", json!({"after": ["paused-up"]})),
        minutely("free", catch_up),
    ];
    let mut config = with_outage(config("2026-03-01T00:00:00Z", "2026-03-01T00:50:00Z"));
    config.pauses = vec![
        ScheduleAt::parse("pause", "paused-up@2026-03-01T00:15:00Z").expect("pause"),
        ScheduleAt::parse("pause", "paused-down@2026-03-01T00:15:00Z").expect("pause"),
    ];
    config.resumes = vec![
        ScheduleAt::parse("resume", "paused-up@2026-03-01T00:30:00Z").expect("resume"),
        ScheduleAt::parse("resume", "paused-down@2026-03-01T00:30:00Z").expect("resume"),
    ];
    config.kill_switches =
        vec![Outage::parse("2026-03-01T00:38:00Z..2026-03-01T00:44:00Z").expect("switch")];
    for store in STORES {
        let c = cell(store, specs.clone(), &config).await;
        for id in ["paused-up", "paused-down"] {
            c.nothing_started_within(id, "2026-03-01T00:15:00Z", "2026-03-01T00:30:00Z");
        }
        for id in ["paused-up", "paused-down", "free"] {
            c.nothing_started_within(id, "2026-03-01T00:38:00Z", "2026-03-01T00:44:00Z");
        }
        assert!(
            c.executions("paused-down") > 10,
            "{store:?}: the dependent runs outside the pause"
        );
    }
}

/// `idempotent: false` x crashes at every point (the fire, the send, mid-job, the completion
/// write) with duplicate deliveries: no window of a non-idempotent job executes twice; one
/// whose outcome is unknown waits for an operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_false_never_executes_a_window_twice_under_crashes() {
    let specs = vec![
        minutely(
            "once-only",
            json!({"idempotent": false, "misfire": "CATCH_UP_ALL",
                                     "max_auto_catch_up": 50}),
        ),
        spec_with(
            "once-only-steps",
            "*/2 * * * *",
            json!({"idempotent": false, "job": {"type": "steps", "steps": [
                {"name": "a", "type": "noop"}, {"name": "b", "type": "noop"}]}}),
        ),
    ];
    let mut config = with_outage(config("2026-03-01T00:00:00Z", "2026-03-01T00:40:00Z"));
    config.crashes = CrashPoint::ALL.to_vec();
    config.crash_every = 3;
    config.duplicate_deliveries = true;
    for store in STORES {
        let c = cell(store, specs.clone(), &config).await;
        for id in ["once-only", "once-only-steps"] {
            for e in c.entries(id) {
                // A steps run's executions are its steps' calls: each step at most once.
                assert!(
                    e.executions <= 1 || !e.steps.is_empty(),
                    "{store:?} {id}: {e:?}"
                );
                for step in &e.steps {
                    assert!(step.executions <= 1, "{store:?} {id}: {e:?}");
                }
            }
        }
        assert!(
            c.entries("once-only")
                .iter()
                .any(|e| e.status == RunStatus::ManualRequired
                    && e.reason == Some(Reason::WorkerLost)),
            "{store:?}: a lost outcome waits for an operator"
        );
    }
}

/// An excluded date (`exclude`) x the ticker's fire, the reconciler's catch-up over an
/// outage that crosses midnight, and a dependency: every window of the excluded day is
/// recorded SKIPPED (EXCLUDED) whoever wrote it, none executes, and the day before runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_excluded_day_is_skipped_on_the_fire_the_catch_up_and_a_dependency() {
    let holiday = json!(["2026-03-02"]);
    let specs = vec![
        minutely("fire", json!({"exclude": holiday})),
        minutely(
            "catch-up",
            json!({"exclude": holiday, "misfire": "CATCH_UP_ALL", "side_effects": false,
                   "max_auto_catch_up": 50}),
        ),
        minutely(
            "up",
            json!({"misfire": "CATCH_UP_ALL", "side_effects": false}),
        ),
        minutely("down", json!({"after": ["up"], "exclude": holiday})),
    ];
    let mut config = config("2026-03-01T23:40:00Z", "2026-03-02T00:20:00Z");
    config.outages =
        vec![Outage::parse("2026-03-01T23:55:10Z..2026-03-02T00:05:30Z").expect("outage")];
    let holiday_starts = at("2026-03-02T00:00:00Z");
    for store in STORES {
        let c = cell(store, specs.clone(), &config).await;
        for id in ["fire", "catch-up", "down"] {
            let entries = c.entries(id);
            let on_holiday: Vec<_> = entries
                .iter()
                .filter(|e| at(&e.entry.scheduled_for) >= holiday_starts)
                .collect();
            assert!(on_holiday.len() >= 15, "{store:?} {id}: {on_holiday:#?}");
            for e in &on_holiday {
                assert_eq!(
                    (e.entry.status, e.entry.reason, e.executions),
                    (RunStatus::Skipped, Some(Reason::Excluded), 0),
                    "{store:?} {id}: {e:#?}"
                );
            }
            assert!(
                entries
                    .iter()
                    .filter(|e| at(&e.entry.scheduled_for) < holiday_starts)
                    .any(|e| e.executions > 0),
                "{store:?} {id}: the day before runs"
            );
        }
        // The outage's windows of the excluded day were written by the reconciler's plan.
        assert!(
            c.entries("catch-up").iter().any(|e| {
                e.entry.trigger == Trigger::CatchUp
                    && at(&e.entry.scheduled_for) >= holiday_starts
                    && e.entry.reason == Some(Reason::Excluded)
            }),
            "{store:?}: {:#?}",
            c.entries("catch-up")
        );
        assert!(c.executions("up") > 30, "{store:?}: the upstream runs");
    }
}
