//! Child batches: a job answers children, each runs from its own message with its own
//! attempts, and the run ends by the counts under `max_failed_children`.

use super::*;
use cronledger_app::simulate::ScheduleAt;

fn children_of(e: &SimulatedEntry) -> (u32, u32, u32) {
    let c = e.children.expect("the entry has children");
    (c.total, c.succeeded, c.failed)
}

/// 1,000 children under duplicate deliveries, crashes and racing tickers: the counts are
/// exact (each child's end counted once), and no child succeeded twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_children_under_duplicate_deliveries_give_exact_counts() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T01:00:00Z"));
    config.duplicate_deliveries = true;
    config.tickers = 2;
    config.crashes = vec![CrashPoint::MidJob, CrashPoint::BeforeCompletionWrite];
    config.crash_every = 50;
    let specs = vec![spec_with(
        "fan-out",
        "0 * * * *",
        json!({"idempotent": true, "job": {"type": "noop", "children": 1000}}),
    )];
    let report = run(specs, config).await;
    assert!(report.stats.errors.is_empty(), "{:?}", report.stats.errors);
    assert_accounted(&report, |s| s.reexecuted_after_lost_completion);
    let e = &report.ledger[0];
    assert_eq!(e.status, RunStatus::Success, "{e:?}");
    assert_eq!(children_of(e), (1000, 1000, 0), "{e:?}");
}

/// The first K children fail on every attempt: within `max_failed_children` the run is
/// PARTIAL_SUCCESS, past it FAILED; each failed child used its attempts and no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_children_within_the_budget_are_partial_success_and_past_it_failed() {
    let config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T01:00:00Z"));
    let job = |fail: u32| json!({"type": "noop", "children": 40, "fail_children": fail});
    let specs = vec![
        spec_with(
            "within-count",
            "0 * * * *",
            json!({"max_failed_children": 3, "job": job(3)}),
        ),
        spec_with(
            "past-count",
            "0 * * * *",
            json!({"max_failed_children": 3, "job": job(4)}),
        ),
        spec_with(
            "within-share",
            "0 * * * *",
            json!({"max_failed_children": "10%", "job": job(4)}),
        ),
        spec_with("no-budget", "0 * * * *", json!({"job": job(1)})),
        spec_with("all-fine", "0 * * * *", json!({"job": job(0)})),
    ];
    let report = run(specs, config).await;
    assert!(report.stats.errors.is_empty(), "{:?}", report.stats.errors);
    assert_all_accounted(&report);
    let entry = |id: &str| {
        report
            .ledger
            .iter()
            .find(|e| e.schedule == id)
            .expect("an entry")
    };
    let expect = [
        ("within-count", RunStatus::PartialSuccess, 3),
        ("past-count", RunStatus::Failed, 4),
        ("within-share", RunStatus::PartialSuccess, 4),
        ("no-budget", RunStatus::Failed, 1),
        ("all-fine", RunStatus::Success, 0),
    ];
    for (id, status, failed) in expect {
        let e = entry(id);
        assert_eq!(e.status, status, "{e:?}");
        assert_eq!(children_of(e), (40, 40 - failed, failed), "{e:?}");
        // One generator call, one call per good child, three (max_attempts) per failed one.
        assert_eq!(e.executions, 1 + (40 - failed) + 3 * failed, "{e:?}");
    }
    assert_eq!(entry("past-count").reason, Some(Reason::PermanentError));
}

/// Paused while the job that answers children runs: the children's messages are
/// acknowledged and the children wait PENDING; after the resume the reconciler sends them
/// and the run ends SUCCESS with every child counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_of_a_paused_schedule_wait_and_run_after_the_resume() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:30:00Z"), t("2026-03-01T01:30:00Z"));
    config.pauses = vec![ScheduleAt::parse("pause", "fan@2026-03-01T01:05:00Z").unwrap()];
    config.resumes = vec![ScheduleAt::parse("resume", "fan@2026-03-01T01:20:00Z").unwrap()];
    let job = json!({"job": {"type": "noop", "duration": "10m", "children": 5}});
    let report = run(vec![spec_with("fan", "0 * * * *", job)], config).await;
    assert!(report.stats.errors.is_empty(), "{:?}", report.stats.errors);
    assert_all_accounted(&report);
    let e = &report.ledger[0];
    assert_eq!(e.status, RunStatus::Success, "{e:?}");
    assert_eq!(children_of(e), (5, 5, 0), "{e:?}");
    // The job once and each child once: the deliveries met while paused ran nothing.
    assert_eq!(e.executions, 6, "{e:?}");
}
