//! `cronledger simulate`'s engine against the emulator: the real ticker, worker and reconciler
//! on a virtual clock, with outages, racing tickers, crashes and duplicate deliveries; the
//! operator's levers in [`levers`].

#[path = "simulate/alerts.rs"]
mod alerts;
#[path = "simulate/budget.rs"]
mod budget;
#[path = "simulate/children.rs"]
mod children;
#[path = "simulate/cost.rs"]
mod cost;
#[path = "simulate/dependencies.rs"]
mod dependencies;
#[path = "simulate/heartbeats.rs"]
mod heartbeats;
#[path = "simulate/levers.rs"]
mod levers;
#[path = "simulate/matrix.rs"]
mod matrix;
#[path = "simulate/outcomes.rs"]
mod outcomes;
#[path = "simulate/quality.rs"]
mod quality;
#[path = "simulate/safety.rs"]
mod safety;
#[path = "simulate/steps.rs"]
mod steps;
#[path = "simulate/stores.rs"]
mod stores;

use std::sync::Arc;

use cronledger_app::faults::CrashPoint;
use cronledger_app::simulate::{
    lane_settings, simulate, Outage, ScheduleSummary, SimQueues, SimulatedEntry, SimulationConfig,
    SimulationEnv, SimulationReport,
};
use cronledger_aws::{BackfillState, DynamoLedger, IndexLag, MemoryStore, RequestMeter};
use cronledger_core::steps::StepStatus;
use cronledger_core::{Reason, RunStatus, ScheduleSpec, Trigger};
use cronledger_tests::{spec_with, t, TestLanes, TestLedger};
use serde_json::json;

/// Where a test simulation's lanes keep their messages.
#[derive(Clone, Copy, PartialEq)]
enum Queues {
    Memory,
    Sqs,
}

async fn run(specs: Vec<ScheduleSpec>, config: SimulationConfig) -> SimulationReport {
    run_on(Queues::Memory, specs, config).await
}

async fn run_on(
    queues: Queues,
    specs: Vec<ScheduleSpec>,
    config: SimulationConfig,
) -> SimulationReport {
    let ledger = TestLedger::new().await;
    let lanes = match queues {
        Queues::Memory => None,
        Queues::Sqs => Some(TestLanes::with_clients(ledger.clients.clone(), lane_settings()).await),
    };
    // One shard, as `cronledger simulate` runs it: one `due` query per tick.
    let one_shard = DynamoLedger::new(&ledger.clients, &ledger.table, 1);
    let queues = lanes.as_ref().map_or_else(SimQueues::memory, |lanes| {
        SimQueues::Sqs(Arc::new(lanes.lanes.clone()))
    });
    let env = SimulationEnv::on(
        Arc::new(one_shard),
        queues,
        1,
        Some(ledger.clients.meter.clone()),
    );
    let report = simulate(&env, specs, &config).await.expect("simulation");
    println!(
        "{}",
        serde_json::to_string_pretty(&report.summary).unwrap_or_default()
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&report.stats).unwrap_or_default()
    );
    report
}

/// A simulation on the in-memory store whose indexes (`due`, `active`, `catalog`) trail its
/// table by `lag`, as DynamoDB's global secondary indexes do: what trusts an index read to be
/// current fails here.
async fn run_lagging(
    specs: Vec<ScheduleSpec>,
    config: SimulationConfig,
    lag: IndexLag,
) -> SimulationReport {
    let meter = RequestMeter::new();
    let store = Arc::new(MemoryStore::with_index_lag(1, meter.clone(), lag));
    let env = SimulationEnv::on(store, SimQueues::memory(), 1, Some(meter)).with_lagging_indexes();
    simulate(&env, specs, &config).await.expect("simulation")
}

fn summary<'a>(report: &'a SimulationReport, id: &str) -> &'a ScheduleSummary {
    report
        .summary
        .iter()
        .find(|s| s.schedule == id)
        .unwrap_or_else(|| panic!("no summary for {id}"))
}

fn schedules() -> Vec<ScheduleSpec> {
    vec![
        spec_with("every-5-skip", "*/5 * * * *", json!({"misfire": "SKIP"})),
        // side_effects defaults to true: past the 5-minute tier the latest window awaits approval.
        spec_with(
            "every-10-once",
            "*/10 * * * *",
            json!({"misfire": "RUN_ONCE"}),
        ),
        spec_with(
            "hourly-catch-up",
            "0 * * * *",
            json!({"misfire": "CATCH_UP_ALL", "max_auto_catch_up": 10, "side_effects": false}),
        ),
        spec_with(
            "quarter-manual",
            "*/15 * * * *",
            json!({"misfire": "MANUAL"}),
        ),
        spec_with(
            "minutely-flaky",
            "* * * * *",
            json!({"misfire": "SKIP", "job": {"type": "noop", "fail_times": 1}}),
        ),
    ]
}

/// Windows strictly inside the outage: none of them can run on time.
fn inside(report: &SimulationReport, step_minutes: i64) -> u32 {
    let outage = report.stats.outages[0];
    let minutes = (outage.to - outage.from).num_minutes();
    (minutes / step_minutes - 1) as u32
}

fn six_hour_outage() -> SimulationConfig {
    let mut config = SimulationConfig::new(t("2026-03-01T01:00:00Z"), t("2026-03-01T08:30:00Z"));
    config.outages = vec![Outage::parse("2026-03-01T02:00:00Z..2026-03-01T08:00:00Z").unwrap()];
    config
}

/// The in-process queues stand in for SQS without changing an entry of the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_queues_and_sqs_give_the_same_ledger() {
    let (memory, sqs) = tokio::join!(
        run_on(Queues::Memory, schedules(), six_hour_outage()),
        run_on(Queues::Sqs, schedules(), six_hour_outage())
    );
    assert_all_accounted(&sqs);
    let json = |r: &SimulationReport| serde_json::to_value(&r.ledger).unwrap_or_default();
    assert_eq!(json(&memory), json(&sqs));
    assert_eq!(memory.stats.deliveries, sqs.stats.deliveries);
    assert_eq!(memory.stats.redeliveries, sqs.stats.redeliveries);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_hour_outage_accounts_for_every_window_once() {
    let report = run(schedules(), six_hour_outage()).await;
    for e in report
        .ledger
        .iter()
        .filter(|e| e.schedule == "hourly-catch-up")
    {
        println!("{}", serde_json::to_string(e).unwrap_or_default());
    }
    assert_all_accounted(&report);
    assert_complete(&report);

    // The counts (see COLUMNS), derived from the policies. Every schedule's 02:00 window was
    // fired into the ticker's lookahead at 01:59, so its live run sat QUEUED through the
    // outage and is delivered at 08:00, six hours past its grace period: the worker judges
    // it as the planner judges a missed window of that age (see `first_windows_late`).
    // The first pass after the outage (08:00, horizon 07:58) plans the windows in between.
    //
    // SKIP: 02:00 SKIPPED (GRACE_EXPIRED), 02:05..07:55 (71 = inside) SKIPPED (MISSED); 08:00
    // is fired by the 08:00 tick, nothing overlaps it.
    assert_eq!(counts(&report, "every-5-skip"), [90, 18, 0, 72, 0, 0, 0]);
    assert_eq!(inside(&report, 5), 71);
    // RUN_ONCE, side effects, a 5h50m gap (1h-24h tier): the latest missed window (07:50)
    // awaits approval, the 34 before it are COALESCED into it, and so is the late 02:00 run.
    assert_eq!(counts(&report, "every-10-once"), [45, 9, 0, 0, 35, 1, 0]);
    assert_eq!(inside(&report, 10) - 1, 34);
    // CATCH_UP_ALL, no side effects, cap 10: the late 02:00 run runs (a missed window of
    // its age would fire too); 03:00..07:00 (a 5-hour gap, backfill tier) all fire on the
    // backfill lane and run as CATCH_UP; none is SKIPPED (OVERLAP): overlap is for live work
    // only. Only 5 windows behind, the ticker reaches 08:00 at the 08:00 tick, while the live
    // 02:00 run is still QUEUED: waiting, not running, so SKIP_NEW lets 08:00 run (issue 17).
    assert_eq!(counts(&report, "hourly-catch-up"), [7, 7, 5, 0, 0, 0, 0]);
    let hourly: Vec<_> = report
        .ledger
        .iter()
        .filter(|e| e.schedule == "hourly-catch-up")
        .map(|e| (e.scheduled_for.as_str(), e.trigger, e.status, e.reason))
        .collect();
    assert_eq!(
        hourly.last(),
        Some(&(
            "2026-03-01T08:00:00Z",
            Trigger::Scheduled,
            RunStatus::Success,
            None
        )),
        "{hourly:?}"
    );
    assert!(
        hourly
            .iter()
            .filter(|(_, trigger, ..)| *trigger == Trigger::CatchUp)
            .all(|(_, _, status, _)| *status == RunStatus::Success),
        "{hourly:?}"
    );
    // The gap is the backfill tier's, every window fires: the reconciler stores one RUNNING
    // backfill tracking its catch-up runs (nothing held, so never PAUSED).
    let proposed: Vec<_> = report
        .backfills
        .iter()
        .map(|b| (b.id.as_str(), b.from, b.to, b.planned, b.state))
        .collect();
    assert_eq!(proposed.len(), 1, "{proposed:?}");
    let (id, from, to, planned, state) = proposed[0];
    assert_eq!(
        (id, from, to, planned),
        (
            "gap-hourly-catch-up-20260301T030000Z",
            t("2026-03-01T03:00:00Z"),
            t("2026-03-01T07:00:00Z"),
            5
        )
    );
    assert_ne!(state, BackfillState::Paused);
    // MANUAL: 02:00 (late) and 02:15..07:45 (23 = inside) await an operator.
    assert_eq!(counts(&report, "quarter-manual"), [30, 6, 0, 0, 0, 24, 0]);
    assert_eq!(inside(&report, 15), 23);
    // SKIP, minutely: 02:00 SKIPPED (GRACE_EXPIRED), 02:01..07:57 (357) SKIPPED (MISSED) by
    // the 08:00 pass; the 08:00 tick fires the windows inside their grace from its shard's
    // mark, 07:58 (exactly 2 minutes late) through 08:01, and those due behind a run that is
    // only QUEUED (not running) run too: SKIP_NEW skips nothing behind a waiting run (issue
    // 17). (The ticker used to walk each schedule's windows 10 at a time from its
    // `next_run_at`, so 07:58 was still behind it when the pass judged it.)
    assert_eq!(
        counts(&report, "minutely-flaky"),
        [450, 92, 0, 358, 0, 0, 0]
    );
    // The 02:00 windows, fired before the outage and delivered after it.
    assert_eq!(
        first_windows_late(&report),
        [
            (
                "every-10-once",
                RunStatus::Coalesced,
                Some(Reason::Coalesced)
            ),
            (
                "every-5-skip",
                RunStatus::Skipped,
                Some(Reason::GraceExpired)
            ),
            ("hourly-catch-up", RunStatus::Success, None),
            (
                "minutely-flaky",
                RunStatus::Skipped,
                Some(Reason::GraceExpired)
            ),
            (
                "quarter-manual",
                RunStatus::ManualRequired,
                Some(Reason::PolicyManual)
            ),
        ]
    );
    // Each window that ran failed its first attempt and succeeded on the retry.
    let flaky = summary(&report, "minutely-flaky");
    assert_eq!(flaky.executions, 2 * flaky.ran, "{flaky:?}");
}

/// Each schedule's 02:00 entry (the live run fired just before the outage): status, reason.
fn first_windows_late(report: &SimulationReport) -> Vec<(&str, RunStatus, Option<Reason>)> {
    report
        .ledger
        .iter()
        .filter(|e| e.scheduled_for == "2026-03-01T02:00:00Z")
        .inspect(|e| assert_eq!(e.trigger, Trigger::Scheduled, "{e:?}"))
        .map(|e| (e.schedule.as_str(), e.status, e.reason))
        .collect()
}

/// The summary's columns the assertions pin, in this order.
const COLUMNS: [&str; 7] = [
    "expected",
    "ran",
    "caught_up",
    "skipped",
    "coalesced",
    "manual",
    "failed",
];

fn counts(report: &SimulationReport, id: &str) -> [u64; 7] {
    let summary = serde_json::to_value(summary(report, id)).unwrap_or_default();
    COLUMNS.map(|column| summary[column].as_u64().unwrap_or(u64::MAX))
}

/// Every window has exactly one outcome, nothing is left in flight, nothing ran twice.
fn assert_all_accounted(report: &SimulationReport) {
    assert_accounted(report, |_| 0);
}

/// The completeness audit, which recomputes the windows from the schedules' audit logs and
/// reads only the ledger, finds every window accounted for exactly once and nothing
/// unexplained.
fn assert_complete(report: &SimulationReport) {
    let audit = &report.audit;
    assert_eq!(audit.completeness, 1.0, "{audit:#?}");
    let expected: u64 = audit.schedules.iter().map(|s| s.expected).sum();
    let summarized: u32 = report.summary.iter().map(|s| s.expected).sum();
    assert!(
        expected > 0 && expected <= u64::from(summarized),
        "{audit:#?}"
    );
    assert!(
        audit.schedules.iter().all(|s| s.unexplained.is_empty()),
        "{audit:#?}"
    );
}

/// Every window has exactly one outcome and nothing is left in flight; `duplicates` says how
/// many windows of a schedule may have run twice.
/// Each crash point crashed something in the simulation.
fn assert_every_crash_point_hit(report: &SimulationReport) {
    for point in CrashPoint::ALL {
        assert!(
            report
                .stats
                .crashes
                .iter()
                .any(|c| c.starts_with(point.name())),
            "no {} crash: {:?}",
            point.name(),
            report.stats.crashes
        );
    }
}

fn assert_accounted(report: &SimulationReport, duplicates: impl Fn(&ScheduleSummary) -> u32) {
    let in_flight: Vec<_> = report
        .ledger
        .iter()
        .filter(|e| e.completed_at.is_none())
        .map(|e| serde_json::to_string(&e.entry).unwrap_or_default())
        .collect();
    assert!(
        report.stats.settled_at.is_some(),
        "unsettled; in flight: {in_flight:#?}\n{:?}",
        report.summary
    );
    for s in &report.summary {
        assert_eq!(s.duplicates, duplicates(s), "{s:?}");
        assert_eq!(s.unaccounted, 0, "{s:?}");
        assert_eq!(s.unfinished, 0, "{s:?}");
        assert_eq!(
            s.ran + s.skipped + s.coalesced + s.manual + s.failed,
            s.expected,
            "{s:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_racing_tickers_and_duplicate_deliveries_run_nothing_twice() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T01:30:00Z"));
    config.outages = vec![Outage::parse("2026-03-01T00:30:00Z..2026-03-01T00:50:00Z").unwrap()];
    config.tickers = 3;
    config.crashes = CrashPoint::ALL.to_vec();
    config.crash_every = 4;
    config.duplicate_deliveries = true;
    let specs = vec![
        spec_with(
            "minutely-idempotent",
            "* * * * *",
            json!({"misfire": "RUN_ONCE", "idempotent": true, "side_effects": false}),
        ),
        spec_with(
            "minutely-catch-up",
            "* * * * *",
            json!({"misfire": "CATCH_UP_ALL", "max_auto_catch_up": 50, "side_effects": false,
                   "idempotent": true}),
        ),
        spec_with(
            "five-minutely-slow",
            "*/5 * * * *",
            json!({"misfire": "SKIP", "overlap": "SKIP_NEW",
                   "job": {"type": "noop", "duration": "7m"}}),
        ),
    ];
    let report = run(specs, config).await;
    assert_every_crash_point_hit(&report);
    assert!(report.stats.duplicate_messages_sent > 0);
    // An idempotent job whose completion write was lost runs again (its idempotency key
    // absorbs it): those windows, and only those, ran twice.
    assert_accounted(&report, |s| s.reexecuted_after_lost_completion);
}

/// Workers down for an hour while the ticker keeps firing: the lane fills with live runs
/// that all arrive late. RUN_ONCE folds them into one run of the latest late window (moved
/// ahead of the backlog), SKIP skips them; nothing is replayed window by window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_outage_backlog_follows_the_misfire_policy() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:30:00Z"), t("2026-03-01T02:30:00Z"));
    config.worker_outages =
        vec![Outage::parse("2026-03-01T01:00:00Z..2026-03-01T02:00:00Z").unwrap()];
    let specs = vec![
        spec_with(
            "minutely-once",
            "* * * * *",
            json!({"misfire": "RUN_ONCE", "side_effects": false}),
        ),
        spec_with("minutely-skip", "* * * * *", json!({"misfire": "SKIP"})),
        spec_with(
            "minutely-replay",
            "* * * * *",
            json!({"misfire": "CATCH_UP_ALL", "side_effects": false, "max_auto_catch_up": 10}),
        ),
        spec_with(
            "minutely-replay-effects",
            "* * * * *",
            json!({"misfire": "CATCH_UP_ALL", "side_effects": true}),
        ),
    ];
    let report = run(specs, config).await;
    assert_all_accounted(&report);
    // Fired 01:00..01:57 and waiting at 02:00, past the 2-minute grace; 01:58 is the latest
    // window past it.
    let late = |e: &&SimulatedEntry| {
        ("2026-03-01T01:00:00Z".."2026-03-01T01:58:00Z").contains(&e.scheduled_for.as_str())
    };
    for e in report
        .ledger
        .iter()
        .filter(late)
        .filter(|e| !e.schedule.starts_with("minutely-replay"))
    {
        let expected = match e.schedule.as_str() {
            "minutely-once" => (RunStatus::Coalesced, Some(Reason::Coalesced)),
            _ => (RunStatus::Skipped, Some(Reason::GraceExpired)),
        };
        assert_eq!((e.status, e.reason), expected, "{e:?}");
    }
    let not_late = |id: &str| -> Vec<String> {
        report
            .ledger
            .iter()
            .filter(|e| e.schedule == id && !late(e) && e.status != RunStatus::Success)
            .map(|e| format!("{e:?}"))
            .collect()
    };
    assert_eq!(
        summary(&report, "minutely-once").coalesced,
        58,
        "{:#?}",
        not_late("minutely-once")
    );
    assert_eq!(
        summary(&report, "minutely-skip").skipped,
        58,
        "{:#?}",
        not_late("minutely-skip")
    );
    let latest = report
        .ledger
        .iter()
        .find(|e| e.schedule == "minutely-once" && e.scheduled_for == "2026-03-01T01:58:00Z")
        .expect("01:58");
    assert_eq!(latest.status, RunStatus::Success);

    // CATCH_UP_ALL: the runs more than 5 minutes late (the immediate tier) waited for the
    // reconciler, which planned them as one gap as it plans missed windows: the cap's 10
    // replayed as catch-up runs, the rest held for approval, a paused backfill proposed for
    // the gap; none replayed in the live lane, none skipped for overlapping each other.
    let gap_of = |id: &str| -> Vec<&SimulatedEntry> {
        report
            .ledger
            .iter()
            .filter(|e| e.schedule == id)
            .filter(|e| {
                ("2026-03-01T01:00:00Z".."2026-03-01T01:55:00Z").contains(&e.scheduled_for.as_str())
            })
            .collect()
    };
    let proposal_of = |id: &str| {
        report
            .backfills
            .iter()
            .find(|b| b.schedule_id == id)
            .map(|b| (b.state, b.planned, b.from))
    };
    let replay = gap_of("minutely-replay");
    assert_eq!(replay.len(), 55);
    let caught_up: Vec<_> = replay
        .iter()
        .filter(|e| e.trigger == Trigger::CatchUp && e.status == RunStatus::Success)
        .map(|e| e.scheduled_for.as_str())
        .collect();
    // The oldest ten, as the planner's cap counts them.
    assert_eq!(caught_up.first(), Some(&"2026-03-01T01:00:00Z"));
    assert_eq!(caught_up.last(), Some(&"2026-03-01T01:09:00Z"));
    assert_eq!(caught_up.len(), 10);
    let held = replay
        .iter()
        .filter(|e| e.status == RunStatus::ManualRequired && e.reason == Some(Reason::CapExceeded))
        .count();
    assert_eq!(held, 45);
    assert!(report
        .ledger
        .iter()
        .all(|e| e.reason != Some(Reason::Overlap)));
    let paused_gap = Some((BackfillState::Paused, 55, t("2026-03-01T01:00:00Z")));
    assert_eq!(proposal_of("minutely-replay"), paused_gap);
    // With side effects every window of the gap waits for approval, as one replay group
    // behind one paused backfill (resuming it approves them all), not 55 separate holds.
    let effects = gap_of("minutely-replay-effects");
    assert_eq!(effects.len(), 55);
    assert!(
        effects.iter().all(|e| e.status == RunStatus::ManualRequired
            && e.reason == Some(Reason::SideEffects)
            && e.trigger == Trigger::CatchUp),
        "{effects:?}"
    );
    assert_eq!(proposal_of("minutely-replay-effects"), paused_gap);
}
