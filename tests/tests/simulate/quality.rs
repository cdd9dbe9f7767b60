//! Runs that succeed but are wrong: an upstream whose `count` falls outside its `expect`
//! band succeeds SUSPECT, raises SUSPECT_RESULT once, and holds its dependent's window
//! (MANUAL_REQUIRED, UPSTREAM_SUSPECT) unless the dependent says `accept_suspect`; on both
//! stores.

use super::*;
use cronledger_core::alerts::AlertKind;
use cronledger_core::quality::{Quality, QualityReason};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspect_upstream_holds_its_dependent_on_both_stores() {
    let hourly = "0 * * * *";
    let specs = || {
        vec![
            spec_with(
                "extract",
                hourly,
                json!({"expect": {"min_count": 50, "max_count": 500},
                       "job": {"type": "noop", "count_sequence": [100, 120, 5, 110]}}),
            ),
            spec_with(
                "load",
                hourly,
                json!({"after": ["extract"], "job": {"type": "noop"}}),
            ),
            spec_with(
                "load-anyway",
                hourly,
                json!({"after": ["extract"], "accept_suspect": true, "job": {"type": "noop"}}),
            ),
        ]
    };
    let config = || SimulationConfig::new(t("2026-03-01T00:30:00Z"), t("2026-03-01T04:30:00Z"));
    let memory = Arc::new(MemoryStore::new(1, RequestMeter::new()));
    let in_memory = SimulationEnv::on(memory, SimQueues::memory(), 1, None);
    let table = TestLedger::new().await;
    let dynamo = Arc::new(DynamoLedger::new(&table.clients, &table.table, 1));
    let on_dynamo = SimulationEnv::on(dynamo, SimQueues::memory(), 1, None);
    for (store, env) in [("memory", in_memory), ("dynamodb", on_dynamo)] {
        let report = simulate(&env, specs(), &config())
            .await
            .expect("simulation");
        assert!(
            report.stats.errors.is_empty(),
            "{store}: {:?}",
            report.stats.errors
        );
        let entry = |id: &str, at: &str| -> &SimulatedEntry {
            report
                .ledger
                .iter()
                .find(|e| e.schedule == id && e.scheduled_for == at)
                .unwrap_or_else(|| panic!("{store}: no entry {id} {at}"))
        };
        let suspect_at = "2026-03-01T03:00:00Z";
        for at in [
            "2026-03-01T01:00:00Z",
            "2026-03-01T02:00:00Z",
            suspect_at,
            "2026-03-01T04:00:00Z",
        ] {
            let upstream = entry("extract", at);
            // SUSPECT keeps its status: the run succeeded.
            assert_eq!(upstream.status, RunStatus::Success, "{store}: {upstream:?}");
            let held = at == suspect_at;
            assert_eq!(
                upstream.quality,
                held.then_some(Quality::Suspect),
                "{store}: {upstream:?}"
            );
            assert_eq!(
                upstream.quality_reason,
                held.then_some(QualityReason::BelowMin),
                "{store}: {upstream:?}"
            );
            let load = entry("load", at);
            if held {
                assert_eq!(load.status, RunStatus::ManualRequired, "{store}: {load:?}");
                assert_eq!(
                    load.reason,
                    Some(Reason::UpstreamSuspect),
                    "{store}: {load:?}"
                );
                assert_eq!(load.executions, 0, "{store}: {load:?}");
            } else {
                assert_eq!(load.status, RunStatus::Success, "{store}: {load:?}");
            }
            let anyway = entry("load-anyway", at);
            assert_eq!(anyway.status, RunStatus::Success, "{store}: {anyway:?}");
            assert_eq!(anyway.executions, 1, "{store}: {anyway:?}");
        }
        let suspect: Vec<_> = report
            .alerts
            .iter()
            .filter(|a| a.kind == AlertKind::SuspectResult)
            .collect();
        assert_eq!(suspect.len(), 1, "{store}: {suspect:?}");
        assert_eq!(suspect[0].schedule, "extract");
        assert!(
            suspect[0]
                .run
                .as_deref()
                .is_some_and(|r| r.contains(suspect_at)),
            "{store}: {suspect:?}"
        );
    }
}

/// SLOW_RUN: a run past twice the p95 of the schedule's last successes' durations (ten at
/// least) alerts once, keyed by the run; fewer successes judge nothing; a SUSPECT result's
/// count stays out of the learned band's history.
#[test]
fn a_run_past_twice_the_p95_is_slow_once_there_are_ten_successes() {
    use chrono::TimeDelta;
    use cronledger_app::outcomes::{judged_alerts, History};
    use cronledger_core::run::RunResult;

    let spec = spec_with("etl", "0 * * * *", json!({}));
    let ended = |hour: i64, took_s: i64, count: u64, suspect: bool| {
        let at = t("2026-03-01T00:00:00Z") + TimeDelta::hours(hour);
        let mut run = cronledger_tests::scheduled_run(&spec, at, at, "ticker");
        run.status = RunStatus::Success;
        run.started_at = Some(at);
        run.completed_at = Some(at + TimeDelta::seconds(took_s));
        run.result = Some(RunResult {
            count: Some(count),
            quality: suspect.then_some(Quality::Suspect),
            quality_reason: suspect.then_some(QualityReason::BelowMin),
            ..RunResult::default()
        });
        run
    };
    // Newest first: ten successes of 60 s each (one of them SUSPECT).
    let before: Vec<_> = (1..=10).rev().map(|h| ended(h, 60, 100, h == 5)).collect();
    let slow = ended(11, 121, 100, false);
    let history = History::of(&before, &slow.key);
    assert_eq!(history.durations_ms.len(), 10);
    assert_eq!(history.counts.len(), 9, "the SUSPECT count is left out");
    let alerts = judged_alerts(&spec, &slow, &history, t("2026-03-01T11:02:01Z"));
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0].kind, AlertKind::SlowRun);
    assert_eq!(alerts[0].subject, slow.key.to_string());
    // Exactly twice the p95 is not slow; nine successes judge nothing.
    let on_the_line = ended(11, 120, 100, false);
    assert!(judged_alerts(&spec, &on_the_line, &history, t("2026-03-01T12:00:00Z")).is_empty());
    let nine = History::of(&before[..9], &slow.key);
    assert!(judged_alerts(&spec, &slow, &nine, t("2026-03-01T12:00:00Z")).is_empty());
    // Under the one-minute floor nothing is slow (its end reads no history): ten 5 s
    // successes and a 50 s run, ten times their p95.
    let quick: Vec<_> = (1..=10).rev().map(|h| ended(h, 5, 100, false)).collect();
    let longer = ended(11, 50, 100, false);
    let quick_history = History::of(&quick, &longer.key);
    assert!(judged_alerts(&spec, &longer, &quick_history, t("2026-03-01T12:00:00Z")).is_empty());
    assert!(!cronledger_core::quality::needs_history(false, 50_000));
    assert!(cronledger_core::quality::needs_history(true, 50));
}
