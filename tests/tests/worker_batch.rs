//! The worker's SQS batches against the emulator: the messages of one batch are handled
//! concurrently (a batch takes as long as its slowest run, not the sum), and each ends on its
//! own (one failing message is reported alone; its batch-mates are acknowledged).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Duration as Delta, Utc};
use cronledger_aws::lanes::{LaneSettings, MessageOutcome, Received, BATCH_CONCURRENCY};
use cronledger_aws::LaneMessage;
use cronledger_core::{Lane, RunKey, RunStatus};
use cronledger_tests::app::{worker_config, AppEnv};
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{spec_with, t};
use serde_json::json;

const LANE: Lane = Lane::Normal;

/// One test at a time: the log test sets a subscriber for its own thread, and tracing caches
/// each log callsite's interest process-wide when it is first hit; another test hitting the
/// worker's callsites at that moment, with no subscriber, can leave them switched off for it.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn hour(h: i64) -> DateTime<Utc> {
    t("2026-03-01T10:00:00Z") + Delta::hours(h)
}

/// `count` hourly `http` schedules on `hook`, named `{prefix}-{i}`.
async fn schedules_on(env: &AppEnv, hook: &Webhook, prefix: &str, count: usize) {
    for i in 0..count {
        let job = json!({ "job": { "type": "http", "url": hook.url, "timeout": "20s" } });
        let spec = spec_with(&format!("{prefix}-{i}"), "0 * * * *", job);
        env.create(spec, hour(0) - Delta::seconds(30)).await;
    }
}

/// The 10:00 tick's messages, all of them, as one batch.
async fn one_batch(env: &AppEnv, count: usize) -> Vec<Received> {
    assert_eq!(env.tick(hour(0)).await.sent as usize, count);
    let batch = env
        .receive(LANE, false, count, Duration::from_secs(15))
        .await;
    assert_eq!(batch.len(), count, "every run's message received");
    batch
}

fn schedule_of(received: &Received) -> String {
    LaneMessage::parse(&received.body)
        .expect("a lane message")
        .run
        .schedule_id
}

#[tokio::test]
async fn a_batch_of_ten_slow_jobs_runs_them_all_at_once() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let env = AppEnv::new(LaneSettings::default(), hour(0)).await;
    let hook = Webhook::start(Answer::Hang).await;
    schedules_on(&env, &hook, "slow", BATCH_CONCURRENCY).await;
    let batch = one_batch(&env, BATCH_CONCURRENCY).await;

    let worker = Arc::new(env.worker(worker_config("w")));
    let handling = {
        let (worker, env_batch) = (worker.clone(), batch.clone());
        let records: Vec<_> = env_batch
            .iter()
            .map(cronledger_aws::lanes::SqsRecord::from)
            .collect();
        tokio::spawn(async move { worker.handle_batch(LANE, &records).await })
    };
    // Every job of the batch reaches its target while none has answered: one after another,
    // the second would only arrive after the first was released.
    hook.wait_arrived(BATCH_CONCURRENCY, Duration::from_secs(30))
        .await;
    assert_eq!(hook.max_in_flight(), BATCH_CONCURRENCY);
    assert!(hook.calls().is_empty(), "no job answered yet");
    hook.release(BATCH_CONCURRENCY);

    let report = handling.await.expect("batch task");
    assert!(report
        .outcomes
        .iter()
        .all(|(_, outcome)| *outcome == MessageOutcome::Done));
    assert!(report.response().batch_item_failures.is_empty());
    for received in &batch {
        let run = env
            .run(&RunKey::expected(schedule_of(received), hour(0)))
            .await;
        assert_eq!(run.status, RunStatus::Success);
    }
}

#[tokio::test]
async fn one_failing_message_is_reported_alone_and_its_batch_mates_succeed() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let env = AppEnv::new(LaneSettings::default(), hour(0)).await;
    let healthy = Webhook::start(Answer::Succeed).await;
    let broken = Webhook::start(Answer::Fail(503)).await;
    schedules_on(&env, &healthy, "healthy", 9).await;
    schedules_on(&env, &broken, "broken", 1).await;
    let batch = one_batch(&env, 10).await;

    let worker = env.worker(worker_config("w"));
    let report = env.deliver(&worker, LANE, &batch).await;

    let broken_id = batch
        .iter()
        .find(|r| schedule_of(r) == "broken-0")
        .map(|r| r.message_id.clone())
        .expect("the broken schedule's message");
    let failures: Vec<String> = report
        .response()
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect();
    assert_eq!(failures, std::slice::from_ref(&broken_id));
    for ((id, outcome), received) in report.outcomes.iter().zip(&batch) {
        assert_eq!(
            id, &received.message_id,
            "the report keeps the batch's order"
        );
        let run = env
            .run(&RunKey::expected(schedule_of(received), hour(0)))
            .await;
        if *id == broken_id {
            assert!(matches!(outcome, MessageOutcome::Retry(_)), "{outcome:?}");
            assert_eq!(run.status, RunStatus::RetryPending);
        } else {
            assert_eq!(outcome, &MessageOutcome::Done);
            assert_eq!(run.status, RunStatus::Success);
        }
    }
    assert_eq!(healthy.executions().len(), 9);
}

/// What a subscriber wrote, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_run_writes_one_info_line_without_the_span_list() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let captured = Captured::default();
    let writer = captured.clone();
    let logs = cronledger_app::logging::function_logs(
        true,
        tracing_subscriber::filter::LevelFilter::INFO,
        move || writer.clone(),
    );
    let env = AppEnv::new(LaneSettings::default(), hour(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    schedules_on(&env, &hook, "logged", BATCH_CONCURRENCY).await;
    let batch = one_batch(&env, BATCH_CONCURRENCY).await;
    let worker = env.worker(worker_config("w"));
    let records: Vec<_> = batch
        .iter()
        .map(cronledger_aws::lanes::SqsRecord::from)
        .collect();
    let report = {
        // The worker's lines only (the ticker above wrote before this).
        let _logging = tracing::subscriber::set_default(logs);
        worker
            .handle_invocation(LANE, &records, Some("req-1"), &|_, _| {})
            .await
    };
    assert!(report.response().batch_item_failures.is_empty());

    let text = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), BATCH_CONCURRENCY, "one line per run: {text}");
    for line in &lines {
        assert!(line.get("spans").is_none(), "no span list: {line}");
        let fields = &line["fields"];
        assert_eq!(fields["message"], "run attempt finished");
        for field in ["window_start", "window_end", "lane", "status"] {
            assert!(fields[field].is_string(), "{field} in {line}");
        }
        // The run's span names it; the line does not repeat those fields.
        for field in ["schedule", "run", "attempt"] {
            assert!(fields[field].is_null(), "{field} twice in {line}");
        }
        assert!(line["span"]["schedule"].is_string(), "{line}");
        assert!(line["span"]["run"].is_string(), "{line}");
        assert_eq!(fields["status"], "SUCCESS");
        assert!(fields["duration_ms"].is_number(), "{line}");
        // The request id comes with the run's span, for correlation.
        assert_eq!(line["span"]["request_id"], "req-1");
        assert_eq!(line["span"]["attempt"], 1);
    }
    eprintln!(
        "worker log bytes per run at INFO: {}",
        text.len() / BATCH_CONCURRENCY
    );
}

/// A run answering 1,000 children, their messages taken by four workers at once and every
/// batch handed to two of them (a duplicate delivery racing the first): each child starts
/// once, and the run counts each child's end once and ends SUCCESS with the exact counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_workers_and_duplicate_deliveries_count_a_thousand_children_exactly() {
    const CHILDREN: u32 = 1000;
    const WORKERS: usize = 4;
    let _alone = ONE_AT_A_TIME.lock().await;
    let env = AppEnv::new(LaneSettings::default(), hour(0)).await;
    let job = json!({"idempotent": true, "overlap": "ALLOW",
                     "job": {"type": "noop", "children": CHILDREN}});
    env.create(
        spec_with("fan", "0 * * * *", job),
        hour(0) - Delta::seconds(30),
    )
    .await;
    assert_eq!(env.tick(hour(0)).await.sent, 1);
    let workers: Vec<_> = (0..WORKERS)
        .map(|i| env.worker(worker_config(&format!("w{i}"))))
        .collect();
    let drain = |me: usize| {
        let (env, workers) = (&env, &workers);
        async move {
            let mut idle = 0;
            while idle < 3 {
                let got = env
                    .receive(LANE, false, 10, Duration::from_millis(500))
                    .await;
                if got.is_empty() {
                    idle += 1;
                    continue;
                }
                idle = 0;
                let twin = &workers[(me + 1) % WORKERS];
                tokio::join!(
                    env.deliver(&workers[me], LANE, &got),
                    env.deliver(twin, LANE, &got)
                );
            }
        }
    };
    futures_util::future::join_all((0..WORKERS).map(drain)).await;

    let key = RunKey::expected("fan", hour(0));
    let run = env.store.get_run(&key).await.expect("the run");
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    let counts = run.children.expect("children counted");
    assert_eq!(
        (counts.total, counts.succeeded, counts.failed),
        (CHILDREN, CHILDREN, 0)
    );
    // Each child reported a count of one: they add up into the run's.
    assert_eq!(run.result.and_then(|r| r.count), Some(u64::from(CHILDREN)));
    let mut seen = 0;
    let mut cursor: Option<String> = None;
    loop {
        let page = env
            .store
            .children_of(&key, 0, 1000, cursor.as_deref())
            .await
            .expect("children");
        for child in &page.items {
            assert_eq!(child.attempts, 1, "started once: {child:?}");
            seen += 1;
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, CHILDREN);
}
