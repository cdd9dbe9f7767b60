//! Issue-level guarantees replayed from outside, through the simulator: a job that is not
//! idempotent never runs twice under any crash point, a lost dispatch still runs within its
//! grace, a pause at any instant stops the schedule's starts at once, and retries under
//! SKIP_NEW never strand a window. The first two hold as well on the in-memory store with
//! its indexes lagging the table (every index for the first, `active` for the second).

use cronledger_app::faults::CrashPoint;
use cronledger_app::simulate::{ScheduleAt, SimulationConfig, SimulationReport};
use cronledger_aws::IndexLag;
use cronledger_core::ScheduleSpec;
use cronledger_core::{Reason, RunStatus};
use cronledger_tests::{spec_with, t};
use serde_json::json;

use super::{
    assert_all_accounted, assert_complete, assert_every_crash_point_hit, run, run_lagging, summary,
};

/// Every crash point, racing tickers and duplicate deliveries on jobs not declared
/// idempotent (the default): no window's job is executed twice; a window whose attempt was
/// lost waits for an operator (WORKER_LOST) and is accounted as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_that_are_not_idempotent_never_run_twice_under_any_crash_point() {
    let (specs, config) = crash_points();
    assert_exactly_once(&run(specs, config).await);
}

/// The same with every index lagging its table, as DynamoDB's indexes do: no reader
/// that starts, releases or reclaims a run may trust an index entry to be current.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_holds_while_every_index_lags() {
    let (specs, config) = crash_points();
    assert_exactly_once(&run_lagging(specs, config, INDEX_LAG).await);
}

/// How far the lagging scenarios' index trails: more store operations than one tick of
/// these fleets makes, so an entry is often a whole pass late.
const INDEX_LAG: IndexLag = IndexLag::all(40);

/// Only the `active` index lagging as far. A `due` entry that trails a whole tick makes a new
/// schedule's first window fire a tick late, which a SKIP schedule rightly skips as MISSED
/// (DynamoDB's lag is well under the minute between ticks, so that is the simulation's
/// artefact, not a lost dispatch).
const ACTIVE_INDEX_LAG: IndexLag = IndexLag::only(cronledger_aws::keys::ACTIVE_INDEX, 40);

fn crash_points() -> (Vec<ScheduleSpec>, SimulationConfig) {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T00:40:00Z"));
    config.tickers = 2;
    config.crashes = CrashPoint::ALL.to_vec();
    config.crash_every = 3;
    config.duplicate_deliveries = true;
    let specs = vec![
        spec_with("once", "* * * * *", json!({"misfire": "RUN_ONCE"})),
        spec_with("skip", "* * * * *", json!({"misfire": "SKIP"})),
        spec_with(
            "catch-up",
            "* * * * *",
            json!({"misfire": "CATCH_UP_ALL", "side_effects": false}),
        ),
    ];
    (specs, config)
}

fn assert_exactly_once(report: &SimulationReport) {
    assert_every_crash_point_hit(report);
    // Every window accounted, and `duplicates` (no exemption) 0 for every schedule.
    assert_all_accounted(report);
    assert_complete(report);
    for e in &report.ledger {
        assert!(e.executions <= 1, "{e:?}");
    }
    let held: Vec<_> = report
        .ledger
        .iter()
        .filter(|e| e.reason == Some(Reason::WorkerLost))
        .collect();
    assert!(!held.is_empty(), "a worker crash held some window");
    assert!(held.iter().all(|e| e.status == RunStatus::ManualRequired));
}

/// The ticker dies between writing a run and sending it, every 5th fire, under SKIP: each
/// such window is sent by the next tick and runs within its 2-minute grace, so every window
/// succeeds (none GRACE_EXPIRED).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lost_dispatch_runs_within_its_grace() {
    let (specs, config) = lost_dispatches();
    assert_lost_dispatches_ran_in_grace(&run(specs, config).await);
}

/// The same while the `active` index the ticker finds lost dispatches in lags its table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_dispatches_run_within_their_grace_while_the_active_index_lags() {
    let (specs, config) = lost_dispatches();
    assert_lost_dispatches_ran_in_grace(&run_lagging(specs, config, ACTIVE_INDEX_LAG).await);
}

fn lost_dispatches() -> (Vec<ScheduleSpec>, SimulationConfig) {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T00:30:00Z"));
    config.crashes = vec![CrashPoint::AfterRunWrite];
    config.crash_every = 5;
    let specs: Vec<_> = (0..6)
        .map(|i| {
            spec_with(
                &format!("skip-{i}"),
                "* * * * *",
                json!({"misfire": "SKIP"}),
            )
        })
        .collect();
    (specs, config)
}

fn assert_lost_dispatches_ran_in_grace(report: &SimulationReport) {
    assert!(
        report.stats.crashes.len() >= 5,
        "{:?}",
        report.stats.crashes
    );
    assert_all_accounted(report);
    for e in &report.ledger {
        assert_eq!(e.status, RunStatus::Success, "{e:?}");
        let started = e.first_started_at.as_deref().map(t).expect("started");
        assert!(
            started - t(&e.scheduled_for) <= chrono::Duration::minutes(2),
            "started within grace: {e:?}"
        );
    }
}

/// Paused between minutes, while the next window was already in its lane (fired inside the
/// lookahead): nothing of the schedule starts after the pause; resumed, it runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_at_any_instant_stops_the_starts_already_in_a_lane() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T00:20:00Z"));
    let (paused, resumed) = (t("2026-03-01T00:09:30Z"), t("2026-03-01T00:15:00Z"));
    config.pauses = vec![ScheduleAt::parse("pause", "minutely@2026-03-01T00:09:30Z").unwrap()];
    config.resumes = vec![ScheduleAt::parse("resume", "minutely@2026-03-01T00:15:00Z").unwrap()];
    let specs = vec![spec_with(
        "minutely",
        "* * * * *",
        json!({"misfire": "SKIP"}),
    )];
    let report = run(specs, config).await;
    assert_all_accounted(&report);
    super::levers::assert_paused_between(&report, "minutely", paused, resumed);
    // 00:10 was fired at 00:09, before the pause, and stopped by the worker.
    let ten = report
        .ledger
        .iter()
        .find(|e| e.scheduled_for == "2026-03-01T00:10:00Z")
        .expect("00:10");
    assert_eq!(ten.executions, 0);
}

/// A `*/2` SKIP_NEW schedule whose job fails 4 times (30 s each) before succeeding: a retry
/// that meets the next window running ends FAILED (OVERLAP); every window ends, none is left
/// RETRY_PENDING, and the lanes deliver a bounded number of messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_under_skip_new_leave_no_window_unfinished() {
    let config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T01:00:00Z"));
    let specs = vec![spec_with(
        "flaky",
        "*/2 * * * *",
        json!({"overlap": "SKIP_NEW", "max_attempts": 5, "side_effects": false,
               "job": {"type": "noop", "duration": "30s", "fail_times": 4}}),
    )];
    let report = run(specs, config).await;
    assert_all_accounted(&report);
    let s = summary(&report, "flaky");
    assert_eq!(s.expected, 30);
    assert!(s.ran > 0, "{s:?}");
    assert!(
        report.stats.deliveries < 30 * 20,
        "bounded deliveries: {:?}",
        report.stats
    );
}
