//! Heartbeats on the virtual clock: a job ten times as long as the lease runs once, its lease
//! and its message's visibility renewed by the worker's own heartbeat; with the heartbeat cut
//! off (the `heartbeat` fault) the run is reclaimed by the rules of `idempotent`.

use cronledger_app::faults::CrashPoint;
use cronledger_app::simulate::{SimulatedEntry, SimulationConfig, SimulationReport};
use cronledger_app::worker::WorkerConfig;
use cronledger_core::{Reason, RunStatus, ScheduleSpec};
use cronledger_tests::{spec_with, t};
use serde_json::json;

use super::stores::on_memory;
use super::{assert_accounted, run};

/// An hourly job that runs ten leases long (the worker's deployed lease).
fn long_job(id: &str, idempotent: bool) -> ScheduleSpec {
    let lease = WorkerConfig::default().lease.as_std();
    let duration = format!("{}s", 10 * lease.as_secs());
    spec_with(
        id,
        "0 * * * *",
        json!({"idempotent": idempotent, "misfire": "SKIP",
               "job": {"type": "noop", "duration": duration}}),
    )
}

/// One window, 01:00, and the system running on until it is settled.
fn one_window() -> SimulationConfig {
    SimulationConfig::new(t("2026-03-01T00:30:00Z"), t("2026-03-01T01:30:00Z"))
}

fn entry<'a>(report: &'a SimulationReport, id: &str) -> &'a SimulatedEntry {
    report
        .ledger
        .iter()
        .find(|e| e.schedule == id && e.scheduled_for == "2026-03-01T01:00:00Z")
        .unwrap_or_else(|| panic!("no 01:00 entry of {id}"))
}

/// The heartbeats keep a job of ten leases alive: one delivery, one attempt, one execution,
/// no reconciler pass stalls it (not idempotent, a stall would hold it WORKER_LOST), and its
/// message never comes back while it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_ten_times_the_lease_runs_once_on_its_heartbeats() {
    let report = on_memory(vec![long_job("long", false)], &one_window()).await;
    assert_accounted(&report, |_| 0);
    let long = entry(&report, "long");
    assert_eq!(
        (long.status, long.reason),
        (RunStatus::Success, None),
        "{long:?}"
    );
    assert_eq!((long.attempts, long.executions), (1, 1), "{long:?}");
    assert_eq!(
        long.first_started_at.as_deref(),
        Some("2026-03-01T01:00:00Z")
    );
    assert_eq!(long.completed_at.as_deref(), Some("2026-03-01T01:10:00Z"));
    // A beat every 20 s renewed the lease to the end: the last one a beat before the job ended
    // (the beat due as it ended is not written), well past the first lease's 01:01.
    assert_eq!(
        long.last_heartbeat_at.as_deref(),
        Some("2026-03-01T01:09:40Z"),
        "{long:?}"
    );
    // Reconciler passes at 01:05 and 01:10 met it running.
    assert!(report.stats.reconciler_passes >= 2, "{:?}", report.stats);
    assert_eq!(report.stats.deliveries, 1, "{:?}", report.stats);
    assert_eq!(report.stats.redeliveries, 0, "{:?}", report.stats);
    assert!(report.stats.errors.is_empty(), "{:?}", report.stats.errors);
}

/// The heartbeat writes of both schedules' first attempt fail from the first beat: neither
/// the lease nor the message's visibility is renewed, and the job goes on. The message
/// comes back once its visibility ran out (01:02), its lease long expired: the idempotent job
/// is reclaimed and runs again (two executions, the first one's completion write lost to
/// the reclaim); the other is held for an operator (WORKER_LOST) and never runs again on its
/// own. The first attempt's job still runs to its end on the cut-off worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_cut_off_is_reclaimed_by_the_rules_of_idempotent() {
    let (specs, config) = heartbeats_cut_off();
    let report = on_memory(specs, &config).await;
    assert_heartbeat_cut_off_reclaimed(&report);
}

/// The same cut-off on the emulator's table gives the same ledger as in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_cut_off_gives_the_same_ledger_on_both_stores() {
    let (specs, config) = heartbeats_cut_off();
    let (memory, dynamodb) = tokio::join!(
        on_memory(specs.clone(), &config),
        run(specs, config.clone())
    );
    assert_heartbeat_cut_off_reclaimed(&dynamodb);
    assert_eq!(
        serde_json::to_value(&memory.ledger).expect("json"),
        serde_json::to_value(&dynamodb.ledger).expect("json")
    );
}

/// An idempotent long job and one that is not, each with its first attempt's heartbeat cut
/// off.
fn heartbeats_cut_off() -> (Vec<ScheduleSpec>, SimulationConfig) {
    let mut config = one_window();
    config.crashes = vec![CrashPoint::Heartbeat];
    config.crash_every = 1;
    let specs = vec![long_job("retried", true), long_job("held", false)];
    (specs, config)
}

fn assert_heartbeat_cut_off_reclaimed(report: &SimulationReport) {
    for id in ["retried", "held"] {
        let cut = format!("heartbeat {id}");
        assert!(
            report.stats.crashes.iter().any(|c| c.starts_with(&cut)),
            "{:?}",
            report.stats.crashes
        );
    }
    // Only the idempotent window ran twice, and the summary says why.
    assert_accounted(report, |s| u32::from(s.schedule == "retried"));

    let retried = entry(report, "retried");
    assert_eq!(
        (retried.status, retried.reason),
        (RunStatus::Success, None),
        "{retried:?}"
    );
    assert_eq!(
        (retried.attempts, retried.executions),
        (2, 2),
        "{retried:?}"
    );
    // Reclaimed at 01:02 by the message's return, it ran its ten minutes again.
    assert_eq!(
        retried.completed_at.as_deref(),
        Some("2026-03-01T01:12:00Z")
    );
    let summary = super::summary(report, "retried");
    assert_eq!(summary.reexecuted_after_lost_completion, 1, "{summary:?}");

    let held = entry(report, "held");
    assert_eq!(
        (held.status, held.reason),
        (RunStatus::ManualRequired, Some(Reason::WorkerLost)),
        "{held:?}"
    );
    assert_eq!((held.attempts, held.executions), (1, 1), "{held:?}");
    // The cut-off attempt never wrote a beat: the start's is the last.
    assert_eq!(held.last_heartbeat_at, held.first_started_at, "{held:?}");
}
