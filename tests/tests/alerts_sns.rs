//! Alerts through SNS on the emulator (moto): one message per alert with the headline as
//! subject, the alert's JSON as body and the attributes subscribers filter on. moto applies
//! subscription filter policies to message attributes, so the owner filter is tested too.

use std::time::Duration;

use chrono::{DateTime, Utc};
use cronledger_aws::{Notifier, SnsNotifier};
use cronledger_core::alerts::{Alert, AlertKind, Severity};
use cronledger_core::Window;
use cronledger_tests::sns::TestTopic;
use cronledger_tests::t;
use serde_json::json;

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
