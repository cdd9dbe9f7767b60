//! Alerts through SNS on the emulator (moto): one message per alert with the headline as
//! subject, the alert's JSON as body and the attributes subscribers filter on. moto applies
//! subscription filter policies to message attributes, so the owner filter is tested too.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronledger_app::alerting::Alerter;
use cronledger_app::reconciler::{ReconcileEvent, Reconciler};
use cronledger_app::simulate::{simulate, Outage, SimQueues, SimulationConfig, SimulationEnv};
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::{DynamoLedger, Notifier, SnsNotifier};
use cronledger_core::alerts::{Alert, AlertKind, Severity};
use cronledger_core::Window;
use cronledger_tests::app::AppEnv;
use cronledger_tests::reconcile::{reconciler, reconciler_config, FakeSignals};
use cronledger_tests::sns::TestTopic;
use cronledger_tests::{spec_with, t, TestLedger};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(5);

fn alert(owner: Option<&str>, subject: &str, at: DateTime<Utc>) -> Alert {
    Alert {
        kind: AlertKind::ConsecutiveFailures,
        severity: Severity::Critical,
        schedule: "settle".into(),
        owner: owner.map(str::to_string),
        window: Some(Window::new(at - chrono::Duration::hours(1), at)),
        run: Some("settle/RUN#2026-03-01T10:00:00Z".into()),
        message: "failed 2 times in a row (alerts at 1)".into(),
        console_url: None,
        at,
        subject: subject.into(),
    }
}

fn notifier(topic: &TestTopic, console: Option<&str>) -> SnsNotifier {
    SnsNotifier::new(
        topic.clients.sns.clone(),
        Some(topic.arn.clone()),
        console.map(str::to_string),
    )
}

#[tokio::test]
async fn an_alert_arrives_as_one_message_with_its_subject_body_and_attributes() {
    let mut topic = TestTopic::new().await;
    let queue = topic.subscribe_queue(None).await;
    let at = t("2026-03-01T10:00:00Z");
    let sent = alert(Some("payments"), "settle/RUN#1", at);
    notifier(&topic, Some("https://ops.example.com"))
        .publish(&sent, None)
        .await
        .expect("published to the default topic");

    let delivered = topic.received(&queue, 1, WAIT).await;
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    let message = &delivered[0];
    assert_eq!(message.subject.as_deref(), Some(sent.headline().as_str()));
    let body = &message.body;
    assert_eq!(body["kind"], "CONSECUTIVE_FAILURES");
    assert_eq!(body["severity"], "critical");
    assert_eq!(body["schedule"], "settle");
    assert_eq!(body["owner"], "payments");
    assert_eq!(
        body["window"],
        json!({"start": "2026-03-01T09:00:00Z", "end": "2026-03-01T10:00:00Z"})
    );
    assert_eq!(body["run"], "settle/RUN#2026-03-01T10:00:00Z");
    assert_eq!(body["message"], "failed 2 times in a row (alerts at 1)");
    assert_eq!(
        body["console_url"],
        "https://ops.example.com/console/schedules/settle"
    );
    let mut linked = sent.clone();
    linked.console_url = Some("https://ops.example.com/console/schedules/settle".into());
    let parsed: Alert = serde_json::from_value(body.clone()).expect("the body is an Alert");
    assert_eq!(parsed, linked);
    for (name, value) in [
        ("severity", "critical"),
        ("owner", "payments"),
        ("schedule", "settle"),
        ("kind", "CONSECUTIVE_FAILURES"),
    ] {
        assert_eq!(message.attribute(name), Some(value), "attribute {name}");
    }
}

#[tokio::test]
async fn a_subscription_filtered_by_owner_receives_only_that_owners_alerts() {
    let mut topic = TestTopic::new().await;
    let everything = topic.subscribe_queue(None).await;
    let payments = topic
        .subscribe_queue(Some(r#"{"owner": ["payments"]}"#))
        .await;
    let notifier = notifier(&topic, None);
    let at = t("2026-03-01T10:00:00Z");
    for (owner, subject) in [(Some("payments"), "a"), (Some("search"), "b"), (None, "c")] {
        notifier
            .publish(&alert(owner, subject, at), None)
            .await
            .expect("published");
    }

    let all = topic.received(&everything, 3, WAIT).await;
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(
        all.iter()
            .any(|m| m.body["subject"] == "c" && m.attribute("owner").is_none()),
        "no owner attribute without an owner: {all:?}"
    );
    let filtered = topic.received(&payments, 1, WAIT).await;
    let subjects: Vec<&str> = filtered
        .iter()
        .filter_map(|m| m.body["subject"].as_str())
        .collect();
    assert_eq!(subjects, ["a"]);
}

#[tokio::test]
async fn a_schedules_own_topic_wins_and_a_missing_topic_is_a_publish_error() {
    let default = TestTopic::new().await;
    let mut own = TestTopic::new().await;
    let queue = own.subscribe_queue(None).await;
    let notifier = notifier(&default, None);
    let sent = alert(Some("payments"), "own", t("2026-03-01T10:00:00Z"));
    notifier
        .publish(&sent, Some(&own.arn))
        .await
        .expect("published to the schedule's topic");
    let delivered = own.received(&queue, 1, WAIT).await;
    assert_eq!(delivered.len(), 1, "{delivered:?}");

    let missing = format!("{}-gone", own.arn);
    let err = notifier
        .publish(&sent, Some(&missing))
        .await
        .expect_err("no such topic");
    assert!(
        err.to_string().starts_with("ALERT_PUBLISH_FAILED: "),
        "{err}"
    );
}

/// Every kind end to end on the emulators: a simulated stretch on the DynamoDB table with
/// its alerts published to the SNS topic. The queue subscribed to the topic receives exactly
/// the alerts the simulation reports, each once, and every kind but BACKFILL_PAUSED is among
/// them (a live signal pausing a release needs a lane backlog of 100; that kind goes through
/// the topic in `reconciler_stuck::catch_up_pauses_*`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_reaches_the_topic_once_per_condition() {
    let mut topic = TestTopic::new().await;
    let queue = topic.subscribe_queue(None).await;
    let ledger = TestLedger::new().await;
    let one_shard = DynamoLedger::new(&ledger.clients, &ledger.table, 1);
    let env = SimulationEnv::on(Arc::new(one_shard), SimQueues::memory(), 1, None)
        .with_notifier(Arc::new(notifier(&topic, None)));
    let mut config = SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T03:00:00Z"));
    config.outages =
        vec![Outage::parse("2026-11-29T00:30:00Z..2026-11-29T01:10:00Z").expect("an outage")];
    config.worker_outages =
        vec![Outage::parse("2026-11-29T01:30:00Z..2026-11-29T02:00:00Z").expect("an outage")];
    let specs = vec![
        // Fails twice (HIGH: alerts at 2 and 4), then recovers.
        spec_with(
            "flaky",
            "*/10 * * * *",
            json!({"owner": "team-a", "priority": "HIGH", "max_attempts": 1, "misfire": "SKIP",
                   "job": {"type": "noop", "fail_before": "2026-11-29T02:20:00Z"}}),
        ),
        spec_with(
            "pauses",
            "*/10 * * * *",
            json!({"owner": "team-b", "max_attempts": 1, "misfire": "SKIP",
                   "alerts": {"pause_after_failures": 2},
                   "job": {"type": "noop", "fail_times": 99}}),
        ),
        spec_with(
            "slow",
            "0 * * * *",
            json!({"owner": "team-c", "deadline": "5m", "misfire": "SKIP",
                   "job": {"type": "noop", "duration": "10m"}}),
        ),
        spec_with(
            "asks",
            "*/10 * * * *",
            json!({"owner": "team-d", "misfire": "MANUAL"}),
        ),
        spec_with(
            "replays",
            "* * * * *",
            json!({"owner": "team-e", "misfire": "CATCH_UP_ALL", "side_effects": false,
                   "max_auto_catch_up": 10}),
        ),
    ];
    let report = simulate(&env, specs, &config).await.expect("simulation");
    let kinds: BTreeSet<AlertKind> = report.alerts.iter().map(|a| a.kind).collect();
    let expected = report.alerts.len();
    let delivered = topic.received(&queue, expected, WAIT).await;
    let key = |kind: &Value, schedule: &Value, subject: &Value| {
        format!(
            "{}|{}|{}",
            kind.as_str().unwrap_or_default(),
            schedule.as_str().unwrap_or_default(),
            subject.as_str().unwrap_or_default()
        )
    };
    let mut got: Vec<String> = delivered
        .iter()
        .map(|m| key(&m.body["kind"], &m.body["schedule"], &m.body["subject"]))
        .collect();
    let mut reported: Vec<String> = report
        .alerts
        .iter()
        .map(|a| {
            let v = serde_json::to_value(a).expect("json");
            key(&v["kind"], &v["schedule"], &v["subject"])
        })
        .collect();
    got.sort();
    reported.sort();
    assert_eq!(
        got, reported,
        "the topic received what the simulation reports"
    );
    let unique: BTreeSet<&String> = got.iter().collect();
    assert_eq!(unique.len(), got.len(), "each condition once: {got:#?}");
    assert_eq!(
        kinds,
        BTreeSet::from([
            AlertKind::MissedWindows,
            AlertKind::ConsecutiveFailures,
            AlertKind::DeadlineMissed,
            AlertKind::AwaitingApproval,
            AlertKind::Recovered,
            AlertKind::PausedOnFailure,
        ]),
        "every kind"
    );
}

/// Several reconcilers passing over the same gap at once: each of its alerts reaches the
/// topic once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_reconcilers_publish_each_alert_once() {
    const RECONCILERS: usize = 4;
    let mut topic = TestTopic::new().await;
    let queue = topic.subscribe_queue(None).await;
    let now = t("2026-03-07T12:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), now).await;
    env.create(
        spec_with(
            "raced",
            "*/10 * * * *",
            json!({"misfire": "MANUAL", "owner": "team-r"}),
        ),
        t("2026-03-07T10:55:00Z"),
    )
    .await;
    let notifier: Arc<dyn Notifier> = Arc::new(notifier(&topic, None));
    let reconcilers: Vec<Arc<Reconciler>> = (0..RECONCILERS)
        .map(|_| {
            let alerter = Alerter::new(Arc::new(env.ledger.ledger.clone()), notifier.clone());
            Arc::new(
                reconciler(&env, Arc::new(FakeSignals::default()), reconciler_config())
                    .with_alerts(Arc::new(alerter)),
            )
        })
        .collect();
    let passes = reconcilers.iter().map(|r| {
        let r = r.clone();
        tokio::spawn(async move { r.reconcile(&ReconcileEvent::at(now)).await })
    });
    let mut published = 0;
    for pass in passes {
        published += pass.await.expect("pass").alerts_published;
    }
    let delivered = topic.received(&queue, 2, WAIT).await;
    let mut kinds: Vec<&str> = delivered
        .iter()
        .filter_map(|m| m.body["kind"].as_str())
        .collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        ["AWAITING_APPROVAL", "MISSED_WINDOWS"],
        "{delivered:#?}"
    );
    assert_eq!(published, 2, "one publisher each");
}
