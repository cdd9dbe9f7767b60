//! Steps jobs: each step its own attempt from its own message, checkpoints on the run, a
//! failed step retried by itself, and a crash between two steps recovered without running
//! any succeeded step again.

use super::*;
use cronledger_app::simulate::ScheduleAt;

/// collect → generate → save → upload, where `save` fails its first two attempts: every
/// window ends SUCCESS with save attempted three times and every other step executed once.
fn report_steps(save_fails: u32) -> serde_json::Value {
    json!({"job": {"type": "steps", "steps": [
        {"name": "collect", "type": "noop", "duration": "1m", "payload": {"output": {"rows": 120}}},
        {"name": "generate", "type": "noop", "duration": "5m", "max_attempts": 2},
        {"name": "save", "type": "noop", "duration": "1m", "fail_times": save_fails, "max_attempts": 4},
        {"name": "upload", "type": "noop", "duration": "1m"}
    ]}})
}

fn steps_of(e: &SimulatedEntry) -> Vec<(String, StepStatus, u32, u32)> {
    e.steps
        .iter()
        .map(|s| (s.name.clone(), s.status, s.attempts, s.executions))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_failing_twice_then_succeeding_leaves_earlier_steps_executed_once() {
    let config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T03:00:00Z"));
    let specs = vec![spec_with("nightly-report", "0 * * * *", report_steps(2))];
    let report = run(specs, config).await;
    assert_all_accounted(&report);
    assert!(report.stats.errors.is_empty(), "{:?}", report.stats.errors);
    assert_eq!(report.ledger.len(), 3, "{:?}", report.ledger);
    for e in &report.ledger {
        assert_eq!(e.status, RunStatus::Success, "{e:?}");
        let ok = StepStatus::Success;
        assert_eq!(
            steps_of(e),
            vec![
                ("collect".into(), ok, 1, 1),
                ("generate".into(), ok, 1, 1),
                ("save".into(), ok, 3, 3),
                ("upload".into(), ok, 1, 1),
            ],
            "{e:?}"
        );
        // One ledger attempt per step attempt, each from its own message.
        assert_eq!(e.attempts, 6, "{e:?}");
        assert_eq!(e.executions, 6, "{e:?}");
    }
}

/// A step out of attempts fails the run; the steps before it stay succeeded and are not
/// executed again, and the steps after it never ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_out_of_attempts_fails_the_run_at_that_step() {
    let config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T01:00:00Z"));
    let specs = vec![spec_with("nightly-report", "0 * * * *", report_steps(9))];
    let report = run(specs, config).await;
    assert_all_accounted(&report);
    let e = &report.ledger[0];
    assert_eq!(e.status, RunStatus::Failed, "{e:?}");
    assert_eq!(e.reason, Some(Reason::RetriesExhausted), "{e:?}");
    let ok = StepStatus::Success;
    assert_eq!(
        steps_of(e),
        vec![
            ("collect".into(), ok, 1, 1),
            ("generate".into(), ok, 1, 1),
            ("save".into(), StepStatus::Failed, 4, 4),
            ("upload".into(), StepStatus::Pending, 0, 0),
        ],
        "{e:?}"
    );
}

/// Crashes between a step's checkpoint and the next step's send, mid-step and before a
/// step's completion write, with duplicate deliveries and racing tickers: every window ends
/// SUCCESS, and no step that succeeded ran again (an idempotent job's lost completion write
/// excepted, which re-runs that one step only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_between_steps_are_recovered_without_running_a_succeeded_step_again() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T04:00:00Z"));
    config.crashes = vec![
        CrashPoint::BetweenSteps,
        CrashPoint::MidJob,
        CrashPoint::BeforeCompletionWrite,
    ];
    config.crash_every = 2;
    config.tickers = 2;
    config.duplicate_deliveries = true;
    let mut fields = report_steps(0);
    fields["idempotent"] = json!(true);
    fields["grace"] = json!("10m");
    let specs = vec![spec_with("hourly-steps", "0 * * * *", fields)];
    let report = run(specs, config).await;
    assert!(
        report
            .stats
            .crashes
            .iter()
            .any(|c| c.starts_with(CrashPoint::BetweenSteps.name())),
        "{:?}",
        report.stats.crashes
    );
    assert_accounted(&report, |s| s.reexecuted_after_lost_completion);
    assert!(report.stats.errors.is_empty(), "{:?}", report.stats.errors);
    for e in &report.ledger {
        assert_eq!(e.status, RunStatus::Success, "{e:?}");
        for step in &e.steps {
            assert_eq!(step.status, StepStatus::Success, "{e:?}");
        }
    }
}

/// Paused while a step runs: the step finishes, the run parks PENDING (PAUSED) between the
/// steps instead of starting the next, and the resume sends it on at the next step; no
/// step runs twice and the window ends SUCCESS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_between_steps_parks_the_run_and_the_resume_goes_on_at_the_next_step() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:30:00Z"), t("2026-03-01T01:50:00Z"));
    config.pauses = vec![ScheduleAt::parse("pause", "stepped@2026-03-01T01:05:00Z").unwrap()];
    config.resumes = vec![ScheduleAt::parse("resume", "stepped@2026-03-01T01:40:00Z").unwrap()];
    let job = json!({"job": {"type": "steps", "steps": [
        {"name": "collect", "type": "noop", "duration": "10m"},
        {"name": "upload", "type": "noop", "duration": "10m"}
    ]}});
    let report = run(vec![spec_with("stepped", "0 * * * *", job)], config).await;
    assert!(report.stats.errors.is_empty(), "{:?}", report.stats.errors);
    assert_all_accounted(&report);
    let e = &report.ledger[0];
    assert_eq!(e.status, RunStatus::Success, "{e:?}");
    let ok = StepStatus::Success;
    assert_eq!(
        steps_of(e),
        vec![("collect".into(), ok, 1, 1), ("upload".into(), ok, 1, 1)],
        "{e:?}"
    );
    // Two attempts: collect's, and upload's after the resume (the parked hand-over opened none).
    assert_eq!(e.attempts, 2, "{e:?}");
    // Unpaused it would have ended at 01:20; upload started only after the 01:40 resume.
    let ended = e.completed_at.as_deref().map(t).expect("ended");
    assert!(ended >= t("2026-03-01T01:50:00Z"), "{e:?}");
}
