//! Schedules that run `after` others: a chain A → B → C, each window of B created when A's
//! succeeded and skipped (UPSTREAM_NOT_SUCCEEDED) when A's did not, and C after B.

use super::*;

/// Over a day of hourly windows, A's 05:00 window fails for good: B's and C's 05:00 windows
/// are recorded SKIPPED (UPSTREAM_NOT_SUCCEEDED), and every other window of B and C runs
/// once, after its upstream ended, with trigger DEPENDENCY.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_skips_downstream_windows_of_a_failed_upstream_window_only() {
    let config = SimulationConfig::new(t("2026-03-01T04:30:00Z"), t("2026-03-02T04:30:00Z"));
    let hourly = "0 * * * *";
    let specs = vec![
        spec_with(
            "collect",
            hourly,
            json!({"max_attempts": 1,
                   "job": {"type": "noop", "duration": "10m", "fail_before": "2026-03-01T05:30:00Z"}}),
        ),
        spec_with(
            "aggregate",
            hourly,
            json!({"after": ["collect"], "job": {"type": "noop", "duration": "5m"}}),
        ),
        spec_with("report", hourly, json!({"after": ["aggregate"]})),
    ];
    let report = run(specs, config).await;
    assert_all_accounted(&report);
    assert!(report.stats.errors.is_empty(), "{:?}", report.stats.errors);

    let failed_window = "2026-03-01T05:00:00Z";
    let entries = |id: &str| -> Vec<&SimulatedEntry> {
        report.ledger.iter().filter(|e| e.schedule == id).collect()
    };
    let collect = entries("collect");
    assert_eq!(collect.len(), 24, "{collect:?}");
    for e in &collect {
        let expected = if e.scheduled_for == failed_window {
            RunStatus::Failed
        } else {
            RunStatus::Success
        };
        assert_eq!(e.status, expected, "{e:?}");
    }
    for (id, upstream) in [("aggregate", "collect"), ("report", "aggregate")] {
        let own = entries(id);
        assert_eq!(own.len(), 24, "{id}: {own:?}");
        for e in own {
            assert_eq!(e.trigger, Trigger::Dependency, "{e:?}");
            if e.scheduled_for == failed_window {
                assert_eq!(e.status, RunStatus::Skipped, "{e:?}");
                assert_eq!(e.reason, Some(Reason::UpstreamNotSucceeded), "{e:?}");
                assert_eq!(e.executions, 0, "{e:?}");
                continue;
            }
            assert_eq!(e.status, RunStatus::Success, "{e:?}");
            assert_eq!(e.executions, 1, "{e:?}");
            // It started after its upstream's run for the window had ended (the upstream
            // takes 10 or 5 minutes), within a reconciler pass of that end.
            let upstream_started = report
                .ledger
                .iter()
                .find(|u| u.schedule == upstream && u.scheduled_for == e.scheduled_for)
                .and_then(|u| u.first_started_at.as_deref().map(t))
                .expect("upstream started");
            let took = if upstream == "collect" { 10 } else { 5 };
            let upstream_ended = upstream_started + chrono::TimeDelta::minutes(took);
            let started = e.first_started_at.as_deref().map(t).expect("started");
            assert!(
                upstream_ended <= started
                    && started <= upstream_ended + chrono::TimeDelta::minutes(5),
                "{e:?}: {upstream} ended {upstream_ended}"
            );
        }
    }
}
