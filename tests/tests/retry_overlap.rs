//! A retry that meets a later window running under SKIP_NEW: overlap is mutual exclusion,
//! so it waits for that run (PENDING, QUEUED_BEHIND), acknowledged and not called, and runs
//! as soon as the later window ends, instead of running alongside it or failing.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Duration as Delta, Utc};
use cronledger_app::ticker::TickerConfig;
use cronledger_aws::lanes::{LaneSettings, MessageOutcome, SqsRecord};
use cronledger_core::{Lane, Reason, RunKey, RunStatus, Span};
use cronledger_tests::app::{ticker_config, worker_config, AppEnv};
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{spec_with, t};
use serde_json::json;

const LANE: Lane = Lane::Normal;

fn minute(m: i64) -> DateTime<Utc> {
    t("2026-03-01T10:00:00Z") + Delta::minutes(m)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_behind_a_running_later_window_waits_for_it_then_runs_under_skip_new() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    // 10:00's first attempt fails; 10:01 hangs (still running when 10:00's retry comes).
    hook.script(&[Answer::Fail(500), Answer::Hang]);
    let job = json!({"overlap": "SKIP_NEW", "max_attempts": 5,
                     "job": {"type": "http", "url": hook.url, "timeout": "20s"}});
    env.create(
        spec_with("every-minute", "* * * * *", job),
        minute(0) - Delta::seconds(30),
    )
    .await;
    let ticker = env.ticker_with(TickerConfig {
        lookahead: Span::ZERO,
        ..ticker_config()
    });
    let worker = Arc::new(env.worker(worker_config("w")));
    let first = RunKey::expected("every-minute", minute(0));

    assert_eq!(env.tick_with(&ticker, minute(0)).await.sent, 1);
    let got = env.receive(LANE, false, 1, Duration::from_secs(5)).await;
    let report = env.deliver(&worker, LANE, &got).await;
    assert!(matches!(report.outcomes[0].1, MessageOutcome::Retry(_)));
    assert_eq!(env.run(&first).await.status, RunStatus::RetryPending);

    // 10:01 is fired half a second ahead (inside the lookahead: judged by the worker when
    // it starts), starts (a run waiting to retry is not running) and hangs in the job.
    let ahead = env.ticker();
    assert_eq!(
        env.tick_with(&ahead, minute(1) - Delta::milliseconds(500))
            .await
            .sent,
        1
    );
    env.clock.set(minute(1));
    let mut got = env.receive(LANE, false, 2, Duration::from_secs(5)).await;
    let at_1001 = got
        .iter()
        .position(|m| m.body.contains("10:01:00"))
        .expect("10:01's message");
    let later = SqsRecord::from(&got.remove(at_1001));
    let hanging = {
        let worker = worker.clone();
        tokio::spawn(async move { worker.handle_batch(LANE, &[later]).await })
    };
    hook.wait_arrived(2, Duration::from_secs(10)).await;

    // 10:00's retry arrives while 10:01 runs: it waits its turn, acknowledged, not called.
    let mut retry = got;
    if retry.is_empty() {
        retry = env.receive(LANE, false, 1, Duration::from_secs(5)).await;
    }
    let report = env.deliver(&worker, LANE, &retry).await;
    assert_eq!(report.outcomes[0].1, MessageOutcome::Done);
    let waiting = env.run(&first).await;
    assert_eq!(
        (waiting.status, waiting.reason, waiting.attempts),
        (RunStatus::Pending, Some(Reason::QueuedBehind), 1)
    );
    assert_eq!(hook.arrived(), 2);
    hook.release(1);
    hanging.await.expect("10:01's worker");
    assert_eq!(
        env.run(&RunKey::expected("every-minute", minute(1)))
            .await
            .status,
        RunStatus::Success
    );

    // 10:01's end released it: its second attempt runs, alone.
    let released = env.receive(LANE, false, 1, Duration::from_secs(5)).await;
    assert_eq!(released.len(), 1, "10:00 released as 10:01 ended");
    let report = env.deliver(&worker, LANE, &released).await;
    assert_eq!(report.outcomes[0].1, MessageOutcome::Done);
    let ended = env.run(&first).await;
    assert_eq!((ended.status, ended.attempts), (RunStatus::Success, 2));
    assert_eq!(hook.arrived(), 3);
}
