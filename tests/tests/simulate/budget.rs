//! A budget pausing a backfill (issue 35, point 3): the simulated operator asks for a
//! backfill of 12 windows capped at 12 target calls (its estimate: one call a run, so it is
//! accepted), but every run fails its first attempt and succeeds on the retry, two calls a run.
//! Its measured spend reaches the cap after six runs: the release pass pauses it (PAUSED,
//! pause_reason BUDGET, a BACKFILL_PAUSED alert) with six windows never written. On the
//! emulator's table and on the in-memory store.

use cronledger_app::simulate::{BackfillAt, SimulationConfig, SimulationReport};
use cronledger_aws::ops::BackfillPauseReason;
use cronledger_aws::BackfillState;
use cronledger_core::alerts::AlertKind;
use cronledger_tests::{spec_with, t};
use serde_json::json;

use super::run;
use super::stores::on_memory;

fn scenario() -> (Vec<cronledger_core::ScheduleSpec>, SimulationConfig) {
    let retried = spec_with(
        "retried",
        "0 * * * *",
        json!({"overlap": "ALLOW", "side_effects": false, "max_attempts": 2, "max_runtime": "5m",
               "job": {"type": "noop", "duration": "30s", "fail_times": 1}}),
    );
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T03:00:00Z"));
    let request = serde_json::from_value(json!({
        "from": "2026-02-28T12:00:00Z", "to": "2026-02-28T23:00:00Z",
        "max_target_calls": 12, "note": "refill the 28th"
    }))
    .expect("a backfill request");
    config.backfills = vec![BackfillAt {
        at: t("2026-03-01T00:01:00Z"),
        schedule: "retried".into(),
        request,
    }];
    (vec![retried], config)
}

fn assert_paused_by_its_budget(report: &SimulationReport) {
    let [b] = report.backfills.as_slice() else {
        panic!("one backfill: {:?}", report.backfills);
    };
    assert_eq!(b.planned, 12, "{b:?}");
    let estimate = b.budget.estimate.as_ref().expect("priced at creation");
    assert_eq!(estimate.target_calls, 12);
    assert_eq!(b.state, BackfillState::Paused, "{b:?}");
    assert_eq!(b.budget.pause_reason, Some(BackfillPauseReason::Budget));
    let spent = b.budget.spent.as_ref().expect("measured");
    assert_eq!((spent.runs, spent.target_calls), (6, 12), "{spent:?}");
    assert!(spent.cost_usd > 0.0);
    // Paused before finishing: half its windows were never written.
    assert_eq!(b.written, 6);
    let paused: Vec<_> = report
        .alerts
        .iter()
        .filter(|a| a.kind == AlertKind::BackfillPaused && a.message.contains("BUDGET"))
        .collect();
    assert_eq!(paused.len(), 1, "{:?}", report.alerts);
    assert!(
        report.stats.levers.iter().any(|l| l.contains(&b.id)),
        "{:?}",
        report.stats.levers
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_pauses_a_backfill_before_it_finishes_on_dynamodb() {
    let (specs, config) = scenario();
    assert_paused_by_its_budget(&run(specs, config).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_pauses_a_backfill_before_it_finishes_in_memory() {
    let (specs, config) = scenario();
    assert_paused_by_its_budget(&on_memory(specs, &config).await);
}
