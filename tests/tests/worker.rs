//! The worker against the emulator, fed by the real ticker: duplicate deliveries and expired
//! leases, overlap policies with jobs that outlive their interval, retries with backoff, the
//! DLQ, poison messages, and what one run costs in AWS requests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Duration as Delta, Utc};
use cronledger_app::faults::CrashPoint;
use cronledger_app::overlap::RECENT_RUNS;
use cronledger_app::ticker::{TickEvent, Ticker, TickerConfig};
use cronledger_app::worker::{Worker, WorkerConfig};
use cronledger_aws::lanes::sqs::ERROR_CODE_ATTRIBUTE;
use cronledger_aws::lanes::{BatchReport, LaneSettings, MessageOutcome, Received};
use cronledger_aws::{LaneMessage, MeterSnapshot, Usage};
use cronledger_core::{Lane, Reason, Run, RunEvent, RunKey, RunStatus, Span};
use cronledger_tests::app::{
    spawn_poller, ticker_config, worker_config, AppEnv, CrashAt, ObservedStore,
};
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{spec_with, t};
use serde_json::{json, Value};

const LANE: Lane = Lane::Normal;

fn created_at() -> DateTime<Utc> {
    t("2026-03-01T09:59:30Z")
}

fn minute(m: i64) -> DateTime<Utc> {
    t("2026-03-01T10:00:00Z") + Delta::minutes(m)
}

/// An `http` schedule on the receiver, with more fields; returns nothing, the runs are keyed
/// by `(id, minute)`.
async fn http_schedule(env: &AppEnv, hook: &Webhook, id: &str, cron: &str, mut fields: Value) {
    fields["job"] = json!({ "type": "http", "url": hook.url, "timeout": "20s" });
    env.create(spec_with(id, cron, fields), created_at()).await;
}

/// Receives exactly one message of the lane.
async fn one_message(env: &AppEnv) -> Received {
    let mut got = env.receive(LANE, false, 1, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 1, "one message expected");
    got.remove(0)
}

/// A copy of a run's message, received.
async fn send_copy(env: &AppEnv, run: &Run) -> Received {
    env.resend(run).await;
    one_message(env).await
}

fn outcomes(report: &BatchReport) -> Vec<MessageOutcome> {
    report.outcomes.iter().map(|(_, o)| o.clone()).collect()
}

/// Runs a worker's batch in the background (it may hang in the webhook).
fn spawn_delivery(worker: Arc<Worker>, received: Received) -> tokio::task::JoinHandle<BatchReport> {
    let record = cronledger_aws::lanes::SqsRecord::from(&received);
    tokio::spawn(async move { worker.handle_batch(LANE, &[record]).await })
}

async fn wait_for_status(env: &AppEnv, key: &RunKey, status: RunStatus) -> Run {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let run = env.run(key).await;
        if run.status == status {
            return run;
        }
        assert!(Instant::now() < deadline, "{key} stayed {}", run.status);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_redelivery_after_the_lease_expired_reclaims_the_run_with_a_new_epoch_and_attempt() {
    // The queue shows an unacknowledged message again after one second.
    let settings = LaneSettings {
        max_receive_count: 5,
        visibility_timeout: Duration::from_secs(1),
    };
    let env = AppEnv::new(settings, minute(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    // Declared idempotent: a lost attempt is tried again on its own (see unknown_outcome.rs
    // for a job that is not).
    http_schedule(
        &env,
        &hook,
        "mid-job",
        "0 * * * *",
        json!({"idempotent": true}),
    )
    .await;
    assert_eq!(env.tick(minute(0)).await.sent, 1);
    let key = RunKey::expected("mid-job", minute(0));

    // Worker A takes the run and dies while the job runs: no outcome, no acknowledgement.
    let a = env
        .worker(worker_config("a"))
        .with_faults(CrashAt::new(CrashPoint::MidJob, 1));
    let first = one_message(&env).await;
    let report = env.deliver(&a, LANE, &[first]).await;
    assert!(matches!(outcomes(&report)[..], [MessageOutcome::Retry(_)]));
    let taken = env.run(&key).await;
    assert_eq!(
        (taken.status, taken.attempts, taken.lease_epoch),
        (RunStatus::Running, 1, 1)
    );
    assert_eq!(hook.arrived(), 0);

    // SQS delivers it again; by then A's lease has run out.
    env.clock.advance(Delta::seconds(31));
    let again = one_message(&env).await;
    assert_eq!(again.receive_count, 2);
    let b = env.worker(worker_config("b"));
    let report = env.deliver(&b, LANE, &[again]).await;
    assert_eq!(outcomes(&report), [MessageOutcome::Done]);
    let done = env.run(&key).await;
    assert_eq!(
        (done.status, done.attempts, done.lease_epoch),
        (RunStatus::Success, 2, 2)
    );
    assert_eq!(done.lease.map(|l| l.owner), Some("b".to_string()));
    assert_eq!(done.result.and_then(|r| r.count), Some(1));

    // The receiver ran the key once, on attempt 2; a later duplicate changes nothing.
    let copy = send_copy(&env, &env.run(&key).await).await;
    assert_eq!(
        outcomes(&env.deliver(&b, LANE, &[copy]).await),
        [MessageOutcome::Done]
    );
    let calls = hook.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].idempotency_key.as_str(), calls[0].attempt),
        (taken.idempotency_key.as_str(), 2)
    );
    assert_eq!(env.run(&key).await.attempts, 2);
}

#[tokio::test]
async fn duplicates_are_acknowledged_and_a_stale_worker_cannot_complete_the_run() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    hook.script(&[Answer::Hang]);
    http_schedule(
        &env,
        &hook,
        "stale",
        "0 * * * *",
        json!({"idempotent": true}),
    )
    .await;
    assert_eq!(env.tick(minute(0)).await.sent, 1);
    let key = RunKey::expected("stale", minute(0));

    // Worker A starts attempt 1 and hangs in the webhook; its heartbeats stall (none are due).
    let a_store = ObservedStore::new(env.store.clone());
    let a = Arc::new(env.worker_on(a_store.clone(), worker_config("a")));
    let a_batch = spawn_delivery(a, one_message(&env).await);
    hook.wait_arrived(1, Duration::from_secs(10)).await;
    let running = env.run(&key).await;
    assert_eq!(
        (running.status, running.attempts, running.lease_epoch),
        (RunStatus::Running, 1, 1)
    );

    // A duplicate while A's lease is live: acknowledged, the webhook is not called.
    let b = env.worker(worker_config("b"));
    let copy = send_copy(&env, &running).await;
    assert_eq!(
        outcomes(&env.deliver(&b, LANE, &[copy]).await),
        [MessageOutcome::Done]
    );
    assert_eq!(hook.arrived(), 1);
    assert_eq!(env.run(&key).await, running, "a duplicate changes nothing");

    // The lease expires; a redelivery reclaims the run (epoch 2, attempt 2) and succeeds.
    env.clock.advance(Delta::seconds(31));
    let copy = send_copy(&env, &running).await;
    assert_eq!(
        outcomes(&env.deliver(&b, LANE, &[copy]).await),
        [MessageOutcome::Done]
    );
    let done = env.run(&key).await;
    assert_eq!(
        (done.status, done.attempts, done.lease_epoch),
        (RunStatus::Success, 2, 2)
    );

    // A's webhook call returns at last; its completion write is refused and changes nothing.
    hook.release(1);
    let a_report = a_batch.await.expect("worker A");
    assert_eq!(outcomes(&a_report), [MessageOutcome::Done]);
    let a_writes: Vec<_> = a_store
        .transitions()
        .into_iter()
        .map(|t| (t.event, t.epoch, t.outcome))
        .collect();
    assert_eq!(
        a_writes,
        [
            (RunEvent::Start, 0, Ok(())),
            (RunEvent::Succeed, 1, Err("RUN_LEASE_LOST".to_string())),
        ]
    );
    assert_eq!(env.run(&key).await, done);

    // A duplicate after success: acknowledged without a call.
    let copy = send_copy(&env, &done).await;
    assert_eq!(
        outcomes(&env.deliver(&b, LANE, &[copy]).await),
        [MessageOutcome::Done]
    );
    assert_eq!(env.run(&key).await, done);

    // Two attempts reached the receiver with the run's key; it executed the key once.
    let calls = hook.calls();
    let attempts: Vec<(u64, bool)> = calls.iter().map(|c| (c.attempt, c.executed)).collect();
    assert_eq!(attempts, [(2, true), (1, false)], "answered in this order");
    assert!(calls
        .iter()
        .all(|c| c.idempotency_key == done.idempotency_key.as_str()));
    assert_eq!(hook.by_key()[done.idempotency_key.as_str()], (2, 1));
}

#[tokio::test]
async fn a_run_is_queued_before_its_message_exists_so_a_fast_worker_starts_it_at_once() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    http_schedule(&env, &hook, "fast", "0 * * * *", json!({})).await;
    // The ticker writes the run QUEUED and only then sends its message: no mark follows the
    // send for a fast worker to race (that race existed while runs were written PENDING).
    assert_eq!(env.tick(minute(0)).await.sent, 1);
    let key = RunKey::expected("fast", minute(0));
    assert_eq!(env.run(&key).await.status, RunStatus::Queued);

    let store = ObservedStore::new(env.store.clone());
    let worker = env.worker_on(store.clone(), worker_config("w"));
    let report = env.deliver(&worker, LANE, &[one_message(&env).await]).await;
    assert_eq!(outcomes(&report), [MessageOutcome::Done]);
    let done = env.run(&key).await;
    assert_eq!((done.status, done.attempts), (RunStatus::Success, 1));
    assert_eq!(hook.calls().len(), 1);
    let starts: Vec<_> = store
        .transitions()
        .into_iter()
        .filter(|t| t.event == RunEvent::Start)
        .map(|t| (t.from, t.outcome))
        .collect();
    assert_eq!(starts, [(RunStatus::Queued, Ok(()))]);
}

/// A worker whose lease outlasts the virtual minutes the test ticks through.
fn long_lease(owner: &str) -> WorkerConfig {
    WorkerConfig {
        lease: Span::minutes(10),
        ..worker_config(owner)
    }
}

/// A ticker that fires only windows already due, so the ticker judges overlap itself and no
/// message is delayed (the test moves through virtual minutes in real seconds).
fn due_only(env: &AppEnv) -> Ticker {
    env.ticker_with(TickerConfig {
        lookahead: Span::ZERO,
        ..ticker_config()
    })
}

/// An every-minute schedule with an overlap policy on a receiver whose calls hang.
async fn every_minute(id: &str, overlap: &str) -> (AppEnv, Webhook) {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Hang).await;
    http_schedule(&env, &hook, id, "* * * * *", json!({ "overlap": overlap })).await;
    (env, hook)
}

/// An every-minute SKIP_NEW schedule whose 10:00 run is running (its receiver hangs), fired
/// by a ticker that judges overlap itself; the worker, and the delivery still running.
async fn skip_new_job_running(id: &str) -> (AppEnv, Webhook, Ticker, Arc<Worker>, Running) {
    let (env, hook) = every_minute(id, "SKIP_NEW").await;
    let ticker = due_only(&env);
    assert_eq!(env.tick_with(&ticker, minute(0)).await.sent, 1);
    let worker = Arc::new(env.worker(long_lease("w")));
    let running = spawn_delivery(worker.clone(), one_message(&env).await);
    hook.wait_arrived(1, Duration::from_secs(10)).await;
    (env, hook, ticker, worker, running)
}

/// Delivers a copy of `ahead`'s message at `at` while the hanging job runs: the worker
/// records it SKIPPED (OVERLAP) without calling the receiver again.
async fn delivered_at_and_skipped(
    env: &AppEnv,
    worker: &Worker,
    hook: &Webhook,
    ahead: &Run,
    at: DateTime<Utc>,
) {
    env.clock.set(at);
    let report = env
        .deliver(worker, LANE, &[send_copy(env, ahead).await])
        .await;
    assert_eq!(outcomes(&report), [MessageOutcome::Done]);
    let skipped = env.run(&ahead.key).await;
    assert_eq!(
        (skipped.status, skipped.reason, skipped.attempts),
        (RunStatus::Skipped, Some(Reason::Overlap), 0)
    );
    assert_eq!(hook.arrived(), 1);
}

type Running = tokio::task::JoinHandle<BatchReport>;

#[tokio::test]
async fn skip_new_records_windows_that_overlap_a_running_job_as_skipped() {
    let id = "skip-new";
    let (env, hook, ticker, worker, running) = skip_new_job_running(id).await;

    // The job outlives two intervals: both windows are recorded SKIPPED (OVERLAP), unsent.
    for m in [1, 2] {
        let report = env.tick_with(&ticker, minute(m)).await;
        assert_eq!(
            (report.created, report.skipped_overlap, report.sent),
            (1, 1, 0)
        );
    }
    hook.set_default(Answer::Succeed);
    hook.release(1);
    assert_eq!(
        outcomes(&running.await.expect("worker")),
        [MessageOutcome::Done]
    );

    // The next window after the job ended runs normally.
    assert_eq!(env.tick_with(&ticker, minute(3)).await.sent, 1);
    let report = env.deliver(&worker, LANE, &[one_message(&env).await]).await;
    assert_eq!(outcomes(&report), [MessageOutcome::Done]);

    let mut history = env
        .store
        .run_history(id, 10, None)
        .await
        .expect("history")
        .items;
    history.reverse();
    let seen: Vec<_> = history
        .iter()
        .map(|r| (r.key.scheduled_for, r.status, r.reason, r.attempts))
        .collect();
    assert_eq!(
        seen,
        [
            (minute(0), RunStatus::Success, None, 1),
            (minute(1), RunStatus::Skipped, Some(Reason::Overlap), 0),
            (minute(2), RunStatus::Skipped, Some(Reason::Overlap), 0),
            (minute(3), RunStatus::Success, None, 1),
        ]
    );
    let called: Vec<String> = hook.calls().into_iter().map(|c| c.scheduled_for).collect();
    assert_eq!(called, ["2026-03-01T10:00:00Z", "2026-03-01T10:03:00Z"]);
}

/// The overlap check reads a schedule's newest runs; a job that outlives more windows than
/// that page holds (each one recorded SKIPPED behind it) must still be seen running.
#[tokio::test]
async fn skip_new_sees_a_job_that_outlived_more_windows_than_the_newest_runs_page() {
    let id = "skip-new-long";
    let (env, hook, ticker, worker, running) = skip_new_job_running(id).await;

    let windows = i64::from(RECENT_RUNS) + 5;
    for m in 1..=windows {
        let report = env.tick_with(&ticker, minute(m)).await;
        assert_eq!(
            (report.created, report.skipped_overlap, report.sent),
            (1, 1, 0),
            "window {m} overlaps the job started at 10:00"
        );
    }
    // The next window, fired ahead (the ticker does not judge those), is judged by the worker.
    let report = env.tick(minute(windows)).await;
    assert_eq!((report.created, report.sent), (1, 1));
    // (A copy stands in for its message, which SQS holds until the window's second.)
    let ahead = env.run(&RunKey::expected(id, minute(windows + 1))).await;
    delivered_at_and_skipped(&env, &worker, &hook, &ahead, minute(windows + 1)).await;

    hook.set_default(Answer::Succeed);
    hook.release(1);
    assert_eq!(
        outcomes(&running.await.expect("worker")),
        [MessageOutcome::Done]
    );
}

#[tokio::test]
async fn skip_new_windows_fired_ahead_are_judged_by_the_worker_when_they_start() {
    let id = "skip-ahead";
    let (env, hook) = every_minute(id, "SKIP_NEW").await;

    // The tick at 10:00 fires 10:00 and, inside its lookahead, 10:01: both go out, though
    // 10:00 has not even started (whether it still runs at 10:01 is unknown at 10:00).
    let report = env.tick(minute(0)).await;
    assert_eq!(
        (report.created, report.sent, report.skipped_overlap),
        (2, 2, 0)
    );
    let ahead = env.run(&RunKey::expected(id, minute(1))).await;
    assert_eq!((ahead.status, ahead.reason), (RunStatus::Queued, None));

    let worker = Arc::new(env.worker(long_lease("w")));
    let running = spawn_delivery(worker.clone(), one_message(&env).await);
    hook.wait_arrived(1, Duration::from_secs(10)).await;
    // 10:01 arrives while 10:00 still runs (a copy stands in for the delayed message).
    delivered_at_and_skipped(&env, &worker, &hook, &ahead, minute(1)).await;
    hook.release(1);
    assert_eq!(
        outcomes(&running.await.expect("worker")),
        [MessageOutcome::Done]
    );
    let first = env.run(&RunKey::expected(id, minute(0))).await;
    assert_eq!(first.status, RunStatus::Success);
}

#[tokio::test]
async fn queue_new_runs_wait_and_execute_strictly_in_order() {
    let id = "queue-new";
    let (env, hook) = every_minute(id, "QUEUE_NEW").await;
    let key = |m| RunKey::expected(id, minute(m));
    let ticker = due_only(&env);

    // Two workers poll the lane, as concurrent Lambda invocations would.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let pollers: Vec<_> = ["w1", "w2"]
        .iter()
        .map(|owner| {
            let worker = Arc::new(env.worker(long_lease(owner)));
            spawn_poller(env.lanes.lanes.clone(), worker, LANE, stopped.clone())
        })
        .collect();

    assert_eq!(env.tick_with(&ticker, minute(0)).await.sent, 1);
    hook.wait_arrived(1, Duration::from_secs(10)).await;
    for m in [1, 2] {
        let report = env.tick_with(&ticker, minute(m)).await;
        assert_eq!(
            (report.created, report.queued_behind, report.sent),
            (1, 1, 0)
        );
        let waiting = env.run(&key(m)).await;
        assert_eq!(
            (waiting.status, waiting.reason, waiting.job_id),
            (RunStatus::Pending, Some(Reason::QueuedBehind), None)
        );
    }

    // Each finishing run releases the next one, and only the next one.
    hook.release(1);
    hook.wait_arrived(2, Duration::from_secs(10)).await;
    assert_eq!(env.run(&key(0)).await.status, RunStatus::Success);
    assert_eq!(env.run(&key(1)).await.status, RunStatus::Running);
    let third = env.run(&key(2)).await;
    assert_eq!(
        (third.status, third.reason),
        (RunStatus::Pending, Some(Reason::QueuedBehind))
    );
    hook.release(1);
    hook.wait_arrived(3, Duration::from_secs(10)).await;
    hook.release(1);
    wait_for_status(&env, &key(2), RunStatus::Success).await;
    stop.send(true).expect("stop");
    for poller in pollers {
        poller.await.expect("poller");
    }

    let called: Vec<String> = hook.calls().into_iter().map(|c| c.scheduled_for).collect();
    assert_eq!(
        called,
        [
            "2026-03-01T10:00:00Z",
            "2026-03-01T10:01:00Z",
            "2026-03-01T10:02:00Z"
        ]
    );
    assert_eq!(hook.max_in_flight(), 1, "never two at once");
    // The ticker sent the first; the finishing workers sent the others, in order.
    assert_eq!(env.queue.sends(), [key(0), key(1), key(2)]);
    for m in 0..3 {
        let run = env.run(&key(m)).await;
        assert_eq!((run.status, run.attempts), (RunStatus::Success, 1));
    }
}

#[tokio::test]
async fn retryable_failures_back_off_longer_each_time_then_fail_to_the_dlq() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Fail(503)).await;
    http_schedule(
        &env,
        &hook,
        "flaky",
        "0 * * * *",
        json!({ "max_attempts": 4 }),
    )
    .await;
    assert_eq!(env.tick(minute(0)).await.sent, 1);
    let key = RunKey::expected("flaky", minute(0));
    let config = worker_config("w");
    let backoff = config.backoff;
    let worker = env.worker(config);

    let mut hidden_until: Option<Instant> = None;
    for attempt in 1..=4u32 {
        let message = one_message(&env).await;
        if let Some(until) = hidden_until {
            assert!(
                Instant::now() >= until,
                "attempt {attempt} was delivered before its backoff ended"
            );
        }
        let report = env.deliver(&worker, LANE, &[message]).await;
        let run = env.run(&key).await;
        assert_eq!(run.attempts, attempt);
        if attempt < 4 {
            assert!(matches!(outcomes(&report)[..], [MessageOutcome::Retry(_)]));
            assert_eq!(run.status, RunStatus::RetryPending);
            let delay = backoff.delay(&key, attempt);
            assert_eq!(env.queue.visibility_timeouts().last(), Some(&delay));
            hidden_until = Some(Instant::now() + delay);
        } else {
            assert_eq!(
                outcomes(&report),
                [MessageOutcome::DeadLettered {
                    code: "RUN_RETRIES_EXHAUSTED".into()
                }]
            );
            assert_eq!(
                (run.status, run.reason),
                (RunStatus::Failed, Some(Reason::RetriesExhausted))
            );
            assert_eq!(
                run.result.and_then(|r| r.error_code).as_deref(),
                Some("HTTP_503")
            );
        }
    }
    let delays = env.queue.visibility_timeouts();
    assert_eq!(delays.len(), 3);
    assert!(
        delays.windows(2).all(|w| w[0] < w[1]),
        "the delays grow: {delays:?}"
    );

    let dead = env.receive(LANE, true, 1, Duration::from_secs(5)).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].attributes[ERROR_CODE_ATTRIBUTE],
        "RUN_RETRIES_EXHAUSTED"
    );
    assert_eq!(
        LaneMessage::parse(&dead[0].body).expect("the envelope").run,
        key
    );
    assert!(env
        .receive(LANE, false, 1, Duration::from_secs(1))
        .await
        .is_empty());
    let attempts: Vec<u64> = hook.calls().iter().map(|c| c.attempt).collect();
    assert_eq!(attempts, [1, 2, 3, 4]);
    assert!(hook.calls().iter().all(|c| c.status == 503 && !c.executed));
}

#[tokio::test]
async fn a_permanent_failure_fails_at_once_with_one_attempt() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Fail(400)).await;
    http_schedule(&env, &hook, "rejected", "0 * * * *", json!({})).await;
    assert_eq!(env.tick(minute(0)).await.sent, 1);
    let key = RunKey::expected("rejected", minute(0));

    let worker = env.worker(worker_config("w"));
    let report = env.deliver(&worker, LANE, &[one_message(&env).await]).await;
    assert_eq!(
        outcomes(&report),
        [MessageOutcome::DeadLettered {
            code: "HTTP_400".into()
        }]
    );
    let run = env.run(&key).await;
    assert_eq!(
        (run.status, run.reason, run.attempts),
        (RunStatus::Failed, Some(Reason::PermanentError), 1)
    );
    assert!(env.queue.visibility_timeouts().is_empty(), "no backoff");
    assert_eq!(hook.calls().len(), 1);
    // The EMF documents: per-schedule counts under [Function, Schedule].
    let docs = worker.metrics().drain("worker", minute(1));
    let doc = docs
        .iter()
        .find(|d| d["Schedule"] == "rejected")
        .expect("a per-schedule EMF document");
    assert_eq!(doc["Function"], "worker");
    assert_eq!(doc["RunsStarted"], 1.0);
    assert_eq!(doc["RunsFailed"], 1.0);
    assert!(doc.get("RunsSucceeded").is_none());
    assert!(doc["StartDelay"].as_f64().is_some(), "{doc}");
    assert!(doc["RunDuration"].as_f64().is_some(), "{doc}");
    assert!(
        worker.metrics().drain("worker", minute(1)).is_empty(),
        "drained"
    );
    let dead = env.receive(LANE, true, 1, Duration::from_secs(5)).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attributes[ERROR_CODE_ATTRIBUTE], "HTTP_400");
}

#[tokio::test]
async fn a_poison_message_does_not_fail_its_batch_mates() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    http_schedule(&env, &hook, "healthy", "0 * * * *", json!({})).await;
    assert_eq!(env.tick(minute(0)).await.sent, 1);
    let key = RunKey::expected("healthy", minute(0));

    let run = env.run(&key).await;
    let message = LaneMessage::new(key.clone(), run.idempotency_key, run.window, LANE, 1);
    let mut future = serde_json::to_value(&message).expect("json");
    future["v"] = 0.into(); // no release writes 0; a later version is kept, not poison
    for body in [future.to_string(), "{not json".to_string()] {
        env.send_raw(LANE, body).await;
    }
    let batch = env.receive(LANE, false, 3, Duration::from_secs(10)).await;
    assert_eq!(batch.len(), 3);

    let worker = env.worker(worker_config("w"));
    let report = env.deliver(&worker, LANE, &batch).await;
    assert!(report.response().batch_item_failures.is_empty());
    let mut codes: Vec<String> = outcomes(&report)
        .into_iter()
        .map(|o| match o {
            MessageOutcome::Done => "DONE".to_string(),
            MessageOutcome::DeadLettered { code } => code,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    codes.sort();
    assert_eq!(
        codes,
        [
            "DONE",
            "LANE_MESSAGE_MALFORMED",
            "LANE_MESSAGE_UNKNOWN_VERSION"
        ]
    );
    assert_eq!(env.run(&key).await.status, RunStatus::Success);
    assert_eq!(hook.calls().len(), 1);
    assert_eq!(
        env.receive(LANE, true, 2, Duration::from_secs(5))
            .await
            .len(),
        2
    );
}

/// Requests made by a function between two snapshots, by `Service.Operation`.
fn requests(before: &MeterSnapshot, after: &MeterSnapshot) -> Vec<(String, u64)> {
    let mut by_op: std::collections::BTreeMap<String, u64> = Default::default();
    for ((scope, op), usage) in &after.usage {
        let earlier = before
            .usage
            .get(&(scope.clone(), op.clone()))
            .map_or(0, |u: &Usage| u.attempts);
        if usage.attempts > earlier {
            *by_op.entry(op.clone()).or_default() += usage.attempts - earlier;
        }
    }
    by_op.into_iter().collect()
}

#[tokio::test]
async fn requests_per_fired_run_end_to_end() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    let meter = &env.ledger.clients.meter;
    let worker = env.worker(worker_config("w"));
    for overlap in ["ALLOW", "SKIP_NEW", "QUEUE_NEW"] {
        let id = overlap.to_lowercase().replace('_', "-");
        http_schedule(&env, &hook, &id, "0 * * * *", json!({ "overlap": overlap })).await;
        // The tick reads only this schedule's shard: one due query, as one of N shards would.
        let shard = cronledger_aws::keys::shard_of(&id, cronledger_tests::SHARDS);
        // The usual path: the 09:59 tick fires 10:00 ahead, the message shows at 10:00.
        env.clock.set(minute(0));
        let before = meter.snapshot();
        let report = env
            .ticker()
            .tick(&TickEvent {
                time: minute(-1),
                shards: Some(vec![shard]),
            })
            .await;
        assert_eq!(report.sent, 1);
        let ticked = meter.snapshot();
        let received = env.receive(LANE, false, 1, Duration::from_secs(5)).await;
        let polled = meter.snapshot();
        let records: Vec<_> = received
            .iter()
            .map(cronledger_aws::lanes::SqsRecord::from)
            .collect();
        let batch = worker.handle_batch(LANE, &records).await;
        assert_eq!(outcomes(&batch), [MessageOutcome::Done]);
        let worked = meter.snapshot();
        let run = env.run(&RunKey::expected(id.as_str(), minute(0))).await;
        assert_eq!(run.status, RunStatus::Success);

        let ticker = requests(&before, &ticked);
        let worker_requests = requests(&polled, &worked);
        let all: Vec<&(String, u64)> = ticker.iter().chain(&worker_requests).collect();
        assert!(
            all.iter().all(|(op, _)| op != "unknown"),
            "every request is named: {all:?}"
        );
        let total: u64 = all.iter().map(|(_, n)| n).sum();
        eprintln!("{overlap}: ticker {ticker:?}; worker {worker_requests:?}; total {total}");
        // Per tick and shard, whatever it fires: the due query, the fetch of the due
        // schedules' items (the index projects keys only) and the lost-dispatch query (live
        // runs still PENDING past their send deadline). Per run: the ticker's two fire
        // writes (the run, then the schedule: plain writes cost half a transaction's units),
        // send and QUEUED mark; the worker's one query that reads the schedule
        // with what ALREADY_DONE, the overlap check and the levers (its state) need (its
        // newest runs, which hold a live run's instant), START and outcome writes, and the
        // release query (SKIP_NEW and QUEUE_NEW: overlap is mutual exclusion, so a run that
        // ends releases whatever waits behind it, a catch-up or a retry under SKIP_NEW too).
        // Any change here is a cost change.
        let per_tick = 3;
        let per_run = match overlap {
            "ALLOW" => 7,
            _ => 8,
        };
        assert_eq!(total, per_tick + per_run, "{overlap}: {all:?}");
    }
}
