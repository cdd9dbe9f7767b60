//! Schedules that run `after` others: a chain A → B → C, each window of B created when A's
//! succeeded and skipped (UPSTREAM_NOT_SUCCEEDED) when A's did not, and C after B.

use super::*;

/// Over a day of hourly windows, A's 05:00 window fails for good: B's and C's 05:00 windows
/// are recorded SKIPPED (UPSTREAM_NOT_SUCCEEDED), and every other window of B and C runs
/// once, as soon as its upstream ended, with trigger DEPENDENCY.
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
            // It started as its upstream's run for the window ended (the upstream takes 10
            // or 5 minutes): the worker that ended it created and sent it.
            let upstream_started = report
                .ledger
                .iter()
                .find(|u| u.schedule == upstream && u.scheduled_for == e.scheduled_for)
                .and_then(|u| u.first_started_at.as_deref().map(t))
                .expect("upstream started");
            let took = if upstream == "collect" { 10 } else { 5 };
            let upstream_ended = upstream_started + chrono::TimeDelta::minutes(took);
            let started = e.first_started_at.as_deref().map(t).expect("started");
            assert_eq!(started, upstream_ended, "{e:?}");
        }
    }
}

/// A five-minutely chain under crashes at every point, duplicate deliveries, three racing
/// tickers and a scheduler outage: every window of every schedule is accounted for once,
/// a dependent window runs only after its upstream's succeeded, and none runs twice except
/// where a lost completion write made an idempotent job run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_under_crashes_and_duplicate_deliveries_runs_each_window_once() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T02:00:00Z"));
    config.outages = vec![Outage::parse("2026-03-01T00:40:00Z..2026-03-01T00:55:00Z").unwrap()];
    config.tickers = 3;
    config.crashes = CrashPoint::ALL.to_vec();
    config.crash_every = 4;
    config.duplicate_deliveries = true;
    let every_five = "*/5 * * * *";
    let fields = |after: &[&str]| {
        json!({"misfire": "CATCH_UP_ALL", "max_auto_catch_up": 50, "side_effects": false,
               "idempotent": true, "after": after})
    };
    let specs = vec![
        spec_with("collect", every_five, fields(&[])),
        spec_with("aggregate", every_five, fields(&["collect"])),
        spec_with("report", every_five, fields(&["aggregate"])),
    ];
    let report = run(specs, config).await;
    assert_every_crash_point_hit(&report);
    assert_accounted(&report, |s| s.reexecuted_after_lost_completion);
    assert!(report.stats.errors.is_empty(), "{:?}", report.stats.errors);
    for (id, upstream) in [("aggregate", "collect"), ("report", "aggregate")] {
        for e in report.ledger.iter().filter(|e| e.schedule == id) {
            let up = report
                .ledger
                .iter()
                .find(|u| u.schedule == upstream && u.scheduled_for == e.scheduled_for)
                .expect("the upstream's window");
            if e.status == RunStatus::Success {
                assert_eq!(up.status, RunStatus::Success, "{e:?} after {up:?}");
            } else if e.reason == Some(Reason::Overlap) {
                // A dependent's in-time window is its live window: under SKIP_NEW it is
                // skipped when it meets a run of its own still executing (one reclaimed
                // after a crash, a late window caught up).
                // Recorded at its upstream's end: after its window, before the next.
                let from = t(&e.scheduled_for);
                let to = from + chrono::TimeDelta::minutes(5);
                let busy = report.ledger.iter().any(|o| {
                    o.schedule == id
                        && o.scheduled_for != e.scheduled_for
                        && o.first_started_at
                            .as_deref()
                            .map(t)
                            .is_some_and(|s| s <= to)
                        && o.completed_at.as_deref().map(t).is_none_or(|c| c >= from)
                });
                assert!(busy, "{e:?} skipped with nothing of its own running");
                assert_eq!(up.status, RunStatus::Success, "{e:?} after {up:?}");
            } else {
                assert_eq!(e.reason, Some(Reason::UpstreamNotSucceeded), "{e:?}");
                assert_ne!(up.status, RunStatus::Success, "{e:?} after {up:?}");
            }
        }
    }
}
