//! The auditor against the emulators: on DynamoDB Local and on the memory store, a ledger
//! with a deleted entry raises LEDGER_INCOMPLETE (recorded in the ledger, published once to
//! the SNS topic on moto) and publishes `LedgerCompleteness` below 1; a complete one 1 and no
//! alert. `POST /v1/audit/runs` answers the report and publishes the same way, and the local
//! runner's daily loop runs the pass at the auditor's time.

use std::sync::Arc;
use std::time::Duration;

use cronledger_app::alerting::Alerter;
use cronledger_app::auditor::{AuditEvent, AuditOutcome, Auditor, AuditorConfig};
use cronledger_app::clock::ManualClock;
use cronledger_app::kill_switch::KillSwitchCheck;
use cronledger_aws::prelude::*;
use cronledger_aws::{
    AlertStore, LedgerStore, MemoryNotifier, MemoryStore, Notifier, RequestMeter, SnsNotifier,
};
use cronledger_core::{Run, RunStatus, ScheduleSpec};
use cronledger_tests::api::{ApiEnv, OPERATOR, VIEWER};
use cronledger_tests::sns::TestTopic;
use cronledger_tests::{scheduled_run, spec_with, t, TestLedger, SHARDS};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(5);
/// The audited day, and the daily pass after it.
const DAY: &str = "2026-03-09T00:00:00Z";
const NEXT_DAY: &str = "2026-03-10T00:00:00Z";
const PASS: &str = "2026-03-10T01:00:00Z";

fn hourly() -> ScheduleSpec {
    spec_with(
        "audited",
        "0 * * * *",
        json!({"owner": "team-audit", "priority": "HIGH"}),
    )
}

/// `spec` created before the day, and one entry per window of the day (00:00 to 23:00,
/// QUEUED).
async fn recorded_day(store: &dyn LedgerStore, spec: &ScheduleSpec) -> Vec<Run> {
    let meta = cronledger_aws::ledger::ChangeMeta {
        actor: "tests".into(),
        reason: "test schedule".into(),
        at: t(DAY) - chrono::Duration::minutes(5),
        details: None,
    };
    store
        .create_schedule(spec.clone(), meta)
        .await
        .expect("create");
    let mut runs = Vec::new();
    for h in 0..24 {
        let at = t(DAY) + chrono::Duration::hours(h);
        let mut run = scheduled_run(spec, at, at, "tests");
        run.status = RunStatus::Queued;
        store.create_run(&run).await.expect("run");
        runs.push(run);
    }
    runs
}

/// The auditor as the components wire it (kill switch, alerts through `notifier`), its
/// metric kept for the test.
fn auditor<S>(store: Arc<S>, notifier: Arc<dyn Notifier>) -> Auditor
where
    S: LedgerStore + AlertStore + cronledger_aws::OpsStore + 'static,
{
    Auditor::new(
        store.clone(),
        Arc::new(ManualClock::new(t(PASS))),
        AuditorConfig::default(),
    )
    .with_kill_switch_opt(Some(Arc::new(KillSwitchCheck::new(store.clone()))))
    .with_alerts(Arc::new(Alerter::new(store, notifier)))
    .keeping_metrics()
}

/// The `LedgerCompleteness` values the pass published, as its EMF documents carry them.
fn published(auditor: &Auditor) -> Vec<f64> {
    auditor
        .metrics()
        .drain("auditor", t(PASS))
        .iter()
        .filter_map(|doc| {
            assert_eq!(doc["Function"], "auditor");
            assert_eq!(
                doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
                json!([["Function"]]),
                "no per-schedule dimension"
            );
            doc["LedgerCompleteness"].as_f64()
        })
        .collect()
}

async fn daily(auditor: &Auditor) -> AuditOutcome {
    auditor
        .run(&AuditEvent::Daily { time: t(PASS) })
        .await
        .expect("the daily pass")
}

/// One store's whole story: a deleted entry alerts once (recorded, published to the topic)
/// and reads below 1; the same day again publishes nothing new.
async fn a_deleted_entry_alerts_once<S>(store: Arc<S>)
where
    S: LedgerStore + AlertStore + cronledger_aws::OpsStore + 'static,
{
    let mut topic = TestTopic::new().await;
    let queue = topic.subscribe_queue(None).await;
    let notifier: Arc<dyn Notifier> = Arc::new(SnsNotifier::new(
        topic.clients.sns.clone(),
        Some(topic.arn.clone()),
        None,
    ));
    let spec = hourly();
    let runs = recorded_day(store.as_ref(), &spec).await;
    // The 07:00 entry is gone from the ledger.
    assert!(store.take_back_run(&runs[7]).await.expect("deleted"));
    let auditor = auditor(store.clone(), notifier);

    let outcome = daily(&auditor).await;
    let summary = outcome.summary();
    assert_eq!(
        (summary.from, summary.to),
        (t(DAY), t(NEXT_DAY)),
        "the previous UTC day"
    );
    assert_eq!(
        (summary.expected, summary.accounted, summary.missing),
        (24, 23, 1)
    );
    assert_eq!(summary.incomplete, ["audited"]);
    assert_eq!(summary.alerts_raised, 1);
    let completeness = published(&auditor);
    assert_eq!(completeness.len(), 1, "one metric a pass");
    assert!(completeness[0] < 1.0, "{completeness:?}");
    assert!((completeness[0] - 23.0 / 24.0).abs() < 1e-9);

    let delivered = topic.received(&queue, 1, WAIT).await;
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    let message = &delivered[0];
    assert_eq!(message.body["kind"], "LEDGER_INCOMPLETE");
    assert_eq!(message.body["schedule"], "audited");
    assert_eq!(message.body["owner"], "team-audit");
    assert_eq!(message.body["severity"], "critical");
    assert_eq!(
        message.body["subject"],
        format!("audit:{DAY}/{NEXT_DAY}").as_str()
    );
    assert_eq!(
        message.body["window"],
        json!({"start": DAY, "end": NEXT_DAY})
    );
    let text = message.body["message"].as_str().unwrap_or_default();
    assert!(
        text.contains("1 missing (2026-03-09T07:00:00Z)"),
        "the window is named: {text}"
    );
    for (name, value) in [
        ("kind", "LEDGER_INCOMPLETE"),
        ("schedule", "audited"),
        ("owner", "team-audit"),
        ("severity", "critical"),
    ] {
        assert_eq!(message.attribute(name), Some(value), "attribute {name}");
    }
    // Recorded in the schedule's partition, published (not waiting in the outbox).
    let recorded = store.alerts_of("audited", 10).await.expect("alerts");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert!(recorded[0].published_at.is_some());
    assert!(store
        .unpublished_alerts(10)
        .await
        .expect("outbox")
        .is_empty());

    // The same day again (a retry): the metric again, the alert not.
    let again = daily(&auditor).await;
    assert_eq!(again.summary().alerts_already_raised, 1);
    assert_eq!(again.summary().alerts_raised, 0);
    assert_eq!(published(&auditor).len(), 1);
    let more = topic.received(&queue, 2, Duration::from_secs(2)).await;
    assert!(more.is_empty(), "published once: {more:?}");
}

/// A complete day: 1, no alert.
async fn a_complete_ledger_reads_1<S>(store: Arc<S>)
where
    S: LedgerStore + AlertStore + cronledger_aws::OpsStore + 'static,
{
    let notifier = Arc::new(MemoryNotifier::new());
    recorded_day(store.as_ref(), &hourly()).await;
    let auditor = auditor(store.clone(), notifier.clone());
    let summary = daily(&auditor).await.summary().clone();
    assert_eq!(summary.completeness, Some(1.0));
    assert_eq!((summary.expected, summary.accounted), (24, 24));
    assert!(summary.incomplete.is_empty());
    assert_eq!(published(&auditor), [1.0]);
    assert!(notifier.sent().is_empty());
    assert!(store
        .alerts_of("audited", 10)
        .await
        .expect("alerts")
        .is_empty());
}

fn memory() -> Arc<MemoryStore> {
    Arc::new(MemoryStore::new(SHARDS, RequestMeter::new()))
}

#[tokio::test]
async fn dynamodb_a_deleted_entry_raises_ledger_incomplete_once_and_completeness_below_1() {
    let ledger = TestLedger::new().await;
    a_deleted_entry_alerts_once(Arc::new(ledger.ledger.clone())).await;
}

#[tokio::test]
async fn memory_a_deleted_entry_raises_ledger_incomplete_once_and_completeness_below_1() {
    a_deleted_entry_alerts_once(memory()).await;
}

#[tokio::test]
async fn dynamodb_a_complete_ledger_publishes_1_and_no_alert() {
    let ledger = TestLedger::new().await;
    a_complete_ledger_reads_1(Arc::new(ledger.ledger.clone())).await;
}

#[tokio::test]
async fn memory_a_complete_ledger_publishes_1_and_no_alert() {
    a_complete_ledger_reads_1(memory()).await;
}

/// `POST /v1/audit/runs` through the router: an operator's audit answers the report (checked
/// against the OpenAPI document like every answer), publishes the metric and the alert as
/// the function does; a viewer may not; bad ranges are refused with their codes.
#[tokio::test]
async fn an_operators_audit_run_answers_the_report_and_publishes_it() {
    let env = ApiEnv::new(t(PASS)).await;
    let runs = recorded_day(env.env.store.as_ref(), &hourly()).await;
    assert!(env
        .env
        .store
        .take_back_run(&runs[7])
        .await
        .expect("deleted"));
    let body = json!({"from": DAY, "to": NEXT_DAY});

    let forbidden = env.post(VIEWER, "/v1/audit/runs", Some(body.clone())).await;
    assert_eq!(forbidden.status, 403, "{:?}", forbidden.body);

    let answer = env
        .post(OPERATOR, "/v1/audit/runs", Some(body.clone()))
        .await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let audited = &answer.body["schedules"][0];
    assert_eq!(audited["schedule"], "audited");
    assert_eq!(audited["missing"], json!(["2026-03-09T07:00:00Z"]));
    assert_eq!(audited["missing_count"], 1);
    let completeness = answer.body["completeness"].as_f64().unwrap_or(1.0);
    assert!((completeness - 23.0 / 24.0).abs() < 1e-9, "{}", answer.body);
    let docs = env.auditor.metrics().drain("auditor", t(PASS));
    let values: Vec<Value> = docs
        .iter()
        .filter_map(|d| d.get("LedgerCompleteness").cloned())
        .collect();
    assert_eq!(values, [json!(completeness)]);
    let sent = env.notifier.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].alert.kind.as_str(), "LEDGER_INCOMPLETE");
    // An operator's audit of the same day again: the same alert, not published again.
    let again = env.post(OPERATOR, "/v1/audit/runs", Some(body)).await;
    assert_eq!(again.status, 200);
    assert_eq!(env.notifier.sent().len(), 1);

    // One schedule: unknown is 404, not an id is 422; a bad range is 422 with its code.
    let unknown = env
        .post(
            OPERATOR,
            "/v1/audit/runs",
            Some(json!({"from": DAY, "to": NEXT_DAY, "schedule": "nope"})),
        )
        .await;
    assert_eq!(
        (unknown.status.as_u16(), unknown.code()),
        (404, "SCHEDULE_NOT_FOUND")
    );
    for (body, code) in [
        (
            json!({"from": DAY, "to": NEXT_DAY, "schedule": "Not An Id"}),
            "AUDIT_RANGE_INVALID",
        ),
        (json!({"from": NEXT_DAY, "to": DAY}), "AUDIT_RANGE_INVALID"),
        (
            json!({"from": DAY, "to": "2026-03-11T00:00:00Z"}),
            "AUDIT_RANGE_INVALID",
        ),
        (
            json!({"from": "2026-01-01T00:00:00Z", "to": DAY}),
            "AUDIT_RANGE_TOO_LONG",
        ),
    ] {
        let refused = env
            .post(OPERATOR, "/v1/audit/runs", Some(body.clone()))
            .await;
        assert_eq!(
            (refused.status.as_u16(), refused.code()),
            (422, code),
            "{body}"
        );
    }
    let unknown_field = env
        .post(
            OPERATOR,
            "/v1/audit/runs",
            Some(json!({"from": DAY, "to": NEXT_DAY, "schedules": ["a"]})),
        )
        .await;
    assert_eq!(unknown_field.status, 422, "{:?}", unknown_field.body);
}

/// The local runner's loop runs the daily pass at the auditor's time (here every minute),
/// with that time as the event's, and its alert goes out.
#[tokio::test]
async fn the_local_runner_runs_the_daily_pass_at_its_time() {
    let store = memory();
    let runs = recorded_day(store.as_ref(), &hourly()).await;
    assert!(store.take_back_run(&runs[7]).await.expect("deleted"));
    let notifier = Arc::new(MemoryNotifier::new());
    let clock = ManualClock::new(t("2026-03-10T00:59:59Z"));
    let every_minute = AuditorConfig {
        daily_at: "* * * * *".into(),
        ..AuditorConfig::default()
    };
    let auditor = Auditor::new(store.clone(), Arc::new(clock.clone()), every_minute)
        .with_alerts(Arc::new(Alerter::new(store.clone(), notifier.clone())))
        .keeping_metrics();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let pass = tokio::spawn(cronledger_app::local::auditor::audit_daily(
        auditor,
        Arc::new(clock),
        stopped,
    ));
    let deadline = std::time::Instant::now() + WAIT;
    while notifier.sent().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(true);
    pass.await.expect("the loop stops");
    let sent = notifier.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0].alert.subject,
        format!("audit:{DAY}/{NEXT_DAY}"),
        "the pass at 01:00 audits the day before"
    );
}
