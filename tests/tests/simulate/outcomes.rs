//! Outcomes counted in one place: whoever writes a run's end (the ticker's SKIPPED windows,
//! paused windows, the worker's successes, failures, overlaps and dependents' skips, the
//! reconciler's missed and coalesced windows), each schedule's health counters hold exactly what its ledger holds.

use std::sync::Arc;

use cronledger_app::simulate::{
    simulate, Outage, ScheduleAt, SimQueues, SimulationConfig, SimulationEnv,
};
use cronledger_aws::{HealthStore, MemoryStore, RequestMeter};
use cronledger_core::health::DayTally;
use cronledger_core::RunStatus;
use serde_json::json;

use super::{spec_with, t};
use cronledger_aws::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ended_window_is_counted_once_on_its_schedules_health() {
    let mut config = SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T03:00:00Z"));
    config.outages =
        vec![Outage::parse("2026-11-29T00:30:00Z..2026-11-29T01:10:00Z").expect("an outage")];
    let specs = vec![
        // Its live windows meet the running one (the ticker skips them), its missed ones
        // are the reconciler's.
        spec_with(
            "slow",
            "*/5 * * * *",
            json!({"misfire": "SKIP", "overlap": "SKIP_NEW",
                   "job": {"type": "noop", "duration": "7m"}}),
        ),
        // Fails for good before 01:30, then succeeds.
        spec_with(
            "flaky",
            "*/10 * * * *",
            json!({"max_attempts": 1, "misfire": "SKIP",
                   "job": {"type": "noop", "fail_before": "2026-11-29T01:30:00Z"}}),
        ),
        // Its dependent is skipped where it failed and runs where it succeeded.
        spec_with("after-flaky", "*/10 * * * *", json!({"after": ["flaky"]})),
        // The gap coalesced into one catch-up run.
        spec_with(
            "once",
            "*/5 * * * *",
            json!({"misfire": "RUN_ONCE", "side_effects": false}),
        ),
    ];
    // Paused for half an hour: the ticker records its windows SKIPPED (PAUSED) as they fire.
    config.pauses = vec![ScheduleAt::parse("pause", "once@2026-11-29T02:00:00Z").expect("pause")];
    config.resumes =
        vec![ScheduleAt::parse("resume", "once@2026-11-29T02:30:00Z").expect("resume")];
    let ids: Vec<String> = specs.iter().map(|s| s.id.clone()).collect();
    let memory = Arc::new(MemoryStore::new(1, RequestMeter::new()));
    let env = SimulationEnv::on(memory.clone(), SimQueues::memory(), 1, None);
    let report = simulate(&env, specs, &config)
        .await
        .expect("simulation in memory");
    assert!(report.stats.settled_at.is_some(), "{:?}", report.stats);

    let day = config.from.date_naive();
    let mut seen = DayTally::default();
    for id in &ids {
        // Every entry the schedule has, inside the range or fired past its end.
        let runs = memory
            .runs_between(id, config.from, config.to + chrono::TimeDelta::days(1))
            .await
            .expect("the schedule's runs");
        let mut ledger = DayTally::default();
        for run in &runs {
            match run.status {
                RunStatus::Success | RunStatus::PartialSuccess => ledger.succeeded += 1,
                RunStatus::Failed => ledger.failed += 1,
                RunStatus::Skipped | RunStatus::Coalesced | RunStatus::Cancelled => {
                    ledger.skipped += u64::from(run.count.max(1))
                }
                _ => {}
            }
        }
        let tallies = memory.outcome_days(id, day, day).await.expect("counters");
        let counted = DayTally {
            day: None,
            succeeded: tallies.iter().map(|d| d.succeeded).sum(),
            failed: tallies.iter().map(|d| d.failed).sum(),
            skipped: tallies.iter().map(|d| d.skipped).sum(),
            fresh: 0,
        };
        assert_eq!(counted, ledger, "{id}: counters against the ledger");
        seen.succeeded += ledger.succeeded;
        seen.failed += ledger.failed;
        seen.skipped += ledger.skipped;
    }
    // Every kind of end happened somewhere.
    assert!(
        seen.succeeded > 0 && seen.failed > 0 && seen.skipped > 0,
        "{seen:?}"
    );
    let reasons: std::collections::BTreeSet<String> = report
        .ledger
        .iter()
        .filter_map(|e| e.entry.reason.map(|r| r.to_string()))
        .collect();
    for reason in [
        "OVERLAP",
        "MISSED",
        "UPSTREAM_NOT_SUCCEEDED",
        "COALESCED",
        "PAUSED",
    ] {
        assert!(reasons.contains(reason), "no {reason} end: {reasons:?}");
    }
}
