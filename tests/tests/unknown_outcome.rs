//! `idempotent: false` on every path where an attempt's outcome is unknown: the worker died
//! mid-job, its completion write was lost, or the job outran `max_runtime`. Such a run is
//! never executed again on its own: the attempt ends STALLED and the run waits for an
//! operator (MANUAL_REQUIRED, reason WORKER_LOST or MAX_RUNTIME_EXCEEDED). A job declared
//! idempotent is tried again, as before.

use std::time::Duration;

use chrono::{DateTime, Duration as Delta, Utc};
use cronledger_app::faults::CrashPoint;
use cronledger_aws::lanes::{LaneSettings, MessageOutcome, Received};
use cronledger_core::attempt::AttemptOutcome;
use cronledger_core::{Lane, Reason, Run, RunKey, RunStatus, Span};
use cronledger_tests::app::{worker_config, AppEnv, CrashAt};
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{spec_with, t};
use serde_json::{json, Value};

const LANE: Lane = Lane::Normal;

fn hour() -> DateTime<Utc> {
    t("2026-03-01T10:00:00Z")
}

/// Redeliveries come back after a second, as SQS shows an unacknowledged message again.
async fn env() -> AppEnv {
    let settings = LaneSettings {
        max_receive_count: 5,
        visibility_timeout: Duration::from_secs(1),
    };
    AppEnv::new(settings, hour()).await
}

async fn fire(env: &AppEnv, hook: &Webhook, id: &str, mut fields: Value) -> RunKey {
    fields["job"] = json!({ "type": "http", "url": hook.url, "timeout": "20s" });
    // Validation refuses an http timeout longer than max_runtime, so an http job outruns
    // max_runtime only if it was stored before that rule: such a schedule is written as is.
    let max_runtime = fields
        .as_object_mut()
        .and_then(|f| f.remove("max_runtime"))
        .and_then(|v| v.as_str().map(|s| s.parse::<Span>().expect("a duration")));
    let mut spec = spec_with(id, "0 * * * *", fields);
    if let Some(max_runtime) = max_runtime {
        spec.max_runtime = max_runtime;
    }
    env.create(spec, hour() - Delta::seconds(30)).await;
    assert_eq!(env.tick(hour()).await.sent, 1);
    RunKey::expected(id, hour())
}

async fn one_message(env: &AppEnv) -> Received {
    let mut got = env.receive(LANE, false, 1, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 1, "one message expected");
    got.remove(0)
}

fn outcomes(report: &cronledger_aws::lanes::BatchReport) -> Vec<MessageOutcome> {
    report.outcomes.iter().map(|(_, o)| o.clone()).collect()
}

/// The run, and how its last attempt ended.
async fn settled(env: &AppEnv, key: &RunKey) -> (Run, Option<AttemptOutcome>) {
    let (run, attempts) = env
        .store
        .get_run_with_attempts(key)
        .await
        .expect("run with attempts");
    let last = attempts
        .last()
        .and_then(|a| a.end.as_ref())
        .map(|e| e.outcome);
    (run, last)
}

#[tokio::test]
async fn a_lost_attempt_of_a_job_that_is_not_idempotent_is_held_at_every_crash_point() {
    for (n, point, calls_before) in [
        (0, CrashPoint::MidJob, 0),
        (1, CrashPoint::BeforeCompletionWrite, 1),
    ] {
        let env = env().await;
        let hook = Webhook::start(Answer::Succeed).await;
        let key = fire(&env, &hook, &format!("lost-{n}"), json!({})).await;

        // Worker A dies at the crash point: no outcome written, the message comes back.
        let a = env
            .worker(worker_config("a"))
            .with_faults(CrashAt::new(point, 1));
        let report = env.deliver(&a, LANE, &[one_message(&env).await]).await;
        assert!(matches!(outcomes(&report)[..], [MessageOutcome::Retry(_)]));
        assert_eq!(hook.arrived(), calls_before, "{}", point.name());

        // The redelivery finds the attempt's lease run out: held, not executed again.
        env.clock.advance(Delta::seconds(31));
        let b = env.worker(worker_config("b"));
        let report = env.deliver(&b, LANE, &[one_message(&env).await]).await;
        assert_eq!(
            outcomes(&report),
            [MessageOutcome::Done],
            "{}",
            point.name()
        );
        let (run, last) = settled(&env, &key).await;
        assert_eq!(
            (run.status, run.reason, run.attempts),
            (RunStatus::ManualRequired, Some(Reason::WorkerLost), 1),
            "{}",
            point.name()
        );
        assert_eq!(last, Some(AttemptOutcome::Stalled), "{}", point.name());

        // Another copy of the message changes nothing and calls nothing.
        env.resend(&run).await;
        let report = env.deliver(&b, LANE, &[one_message(&env).await]).await;
        assert_eq!(outcomes(&report), [MessageOutcome::Done]);
        assert_eq!(env.run(&key).await.status, RunStatus::ManualRequired);
        assert_eq!(hook.arrived(), calls_before, "{}", point.name());
    }
}

#[tokio::test]
async fn a_job_past_max_runtime_is_held_unless_it_is_idempotent() {
    let env = env().await;
    let hook = Webhook::start(Answer::Succeed).await;
    hook.script(&[Answer::Hang, Answer::Hang]);
    let held = fire(&env, &hook, "overrun", json!({"max_runtime": "1s"})).await;
    let worker = env.worker(worker_config("w"));
    let report = env.deliver(&worker, LANE, &[one_message(&env).await]).await;
    assert_eq!(outcomes(&report), [MessageOutcome::Done]);
    let (run, last) = settled(&env, &held).await;
    assert_eq!(
        (run.status, run.reason, run.attempts),
        (
            RunStatus::ManualRequired,
            Some(Reason::MaxRuntimeExceeded),
            1
        )
    );
    assert_eq!(last, Some(AttemptOutcome::Stalled));
    assert_eq!(hook.arrived(), 1);

    // Declared idempotent, the same overrun is a retryable failure: tried again.
    let retried = fire(
        &env,
        &hook,
        "overrun-idempotent",
        json!({"max_runtime": "1s", "idempotent": true}),
    )
    .await;
    let report = env.deliver(&worker, LANE, &[one_message(&env).await]).await;
    assert!(matches!(outcomes(&report)[..], [MessageOutcome::Retry(_)]));
    let (run, last) = settled(&env, &retried).await;
    assert_eq!(run.status, RunStatus::RetryPending);
    assert_eq!(last, Some(AttemptOutcome::FailedRetryable));
    hook.release(2);
}
