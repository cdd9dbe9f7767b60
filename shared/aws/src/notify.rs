//! Where alerts go (see [`crate::alerts::Notifier`]): SNS topics in AWS, a list in tests and
//! the simulator.
//!
//! One alert is one SNS message: the subject is [`Alert::headline`], the body the alert's
//! JSON, and `severity`, `owner`, `schedule` and `kind` are message attributes so that teams
//! subscribe with filter policies (`{"owner": ["payments"], "severity": ["critical"]}`).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use aws_sdk_sns::types::MessageAttributeValue;
use aws_smithy_types::error::display::DisplayErrorContext;
use cronledger_core::alerts::Alert;

use crate::alerts::{Notifier, NotifyError};
use crate::config::AwsClients;
use crate::meter::metered;

/// The stack's alert topic, for schedules that name none (`alerts.topic`).
pub const ALERT_TOPIC_ENV: &str = "CRONLEDGER_ALERT_TOPIC_ARN";
/// The console's base URL; alerts link to `{base}/console/schedules/{schedule}`.
pub const CONSOLE_URL_ENV: &str = "CRONLEDGER_CONSOLE_URL";

/// The message attributes subscribers filter on.
pub const SEVERITY_ATTRIBUTE: &str = "severity";
pub const OWNER_ATTRIBUTE: &str = "owner";
pub const SCHEDULE_ATTRIBUTE: &str = "schedule";
pub const KIND_ATTRIBUTE: &str = "kind";

/// The notifier the functions use: SNS, on the deployment's clients, configured from the
/// environment ([`ALERT_TOPIC_ENV`], [`CONSOLE_URL_ENV`]).
pub fn notifier_from_env(clients: &AwsClients) -> Arc<dyn Notifier> {
    Arc::new(SnsNotifier::from_env(clients))
}

/// Publishes alerts to SNS.
#[derive(Debug, Clone)]
pub struct SnsNotifier {
    client: aws_sdk_sns::Client,
    default_topic: Option<String>,
    console_url: Option<String>,
}

impl SnsNotifier {
    /// `default_topic`: where alerts of schedules that name no topic go (none: they are only
    /// logged). `console_url`: the console's base URL, for the alerts' links.
    pub fn new(
        client: aws_sdk_sns::Client,
        default_topic: Option<String>,
        console_url: Option<String>,
    ) -> SnsNotifier {
        let set = |v: Option<String>| v.map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        SnsNotifier {
            client,
            default_topic: set(default_topic),
            console_url: set(console_url).map(|url| url.trim_end_matches('/').to_string()),
        }
    }

    /// On `clients`' SNS client, with the topic and console URL from the environment (empty
    /// values, as the template passes for unset parameters, count as unset).
    pub fn from_env(clients: &AwsClients) -> SnsNotifier {
        SnsNotifier::new(
            clients.sns.clone(),
            std::env::var(ALERT_TOPIC_ENV).ok(),
            std::env::var(CONSOLE_URL_ENV).ok(),
        )
    }

    pub fn default_topic(&self) -> Option<&str> {
        self.default_topic.as_deref()
    }

    /// The message body: the alert's JSON, linked to the console when it has no link.
    pub fn message_body(&self, alert: &Alert) -> Result<String, NotifyError> {
        let mut linked = alert.clone();
        if linked.console_url.is_none() {
            linked.console_url = self
                .console_url
                .as_ref()
                .map(|base| format!("{base}/console/schedules/{}", alert.schedule));
        }
        serde_json::to_string(&linked)
            .map_err(|e| NotifyError::Publish(format!("the alert could not be encoded: {e}")))
    }

    async fn send(&self, alert: &Alert, topic: &str) -> Result<(), NotifyError> {
        let mut publish = self
            .client
            .publish()
            .topic_arn(topic)
            .subject(alert.headline())
            .message(self.message_body(alert)?);
        for (name, value) in message_attributes(alert) {
            publish = publish.message_attributes(name, string_attribute(&value)?);
        }
        publish.send().await.map_err(|e| {
            NotifyError::Publish(format!(
                "SNS Publish to {topic}: {}",
                DisplayErrorContext(&e)
            ))
        })?;
        Ok(())
    }
}

#[async_trait]
impl Notifier for SnsNotifier {
    async fn publish(&self, alert: &Alert, topic: Option<&str>) -> Result<(), NotifyError> {
        let Some(topic) = topic.or(self.default_topic.as_deref()) else {
            // No topic is a deployment's choice, not the caller's failure: the log keeps it.
            tracing::warn!(
                kind = %alert.kind,
                severity = %alert.severity,
                schedule = %alert.schedule,
                subject = %alert.subject,
                message = %alert.message,
                "ALERT_NOT_PUBLISHED: no alert topic ({ALERT_TOPIC_ENV} unset and the schedule \
                 names none); the alert is only logged"
            );
            return Ok(());
        };
        metered("publish_alert", self.send(alert, topic)).await
    }
}

/// The attributes subscribers filter on, by name: `owner` only when the schedule has one.
pub fn message_attributes(alert: &Alert) -> Vec<(&'static str, String)> {
    let mut attributes = vec![
        (SEVERITY_ATTRIBUTE, alert.severity.as_str().to_string()),
        (SCHEDULE_ATTRIBUTE, alert.schedule.clone()),
        (KIND_ATTRIBUTE, alert.kind.as_str().to_string()),
    ];
    // SNS refuses an empty attribute value.
    if let Some(owner) = alert.owner.as_ref().filter(|o| !o.is_empty()) {
        attributes.push((OWNER_ATTRIBUTE, owner.clone()));
    }
    attributes
}

fn string_attribute(value: &str) -> Result<MessageAttributeValue, NotifyError> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| NotifyError::Publish(format!("a message attribute could not be built: {e}")))
}

/// One alert as a [`MemoryNotifier`] received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentAlert {
    /// The topic it went to: the one asked for, else the notifier's default.
    pub topic: Option<String>,
    pub alert: Alert,
}

/// Keeps the alerts it is given, for tests and the simulator; can be told to fail.
#[derive(Debug, Default)]
pub struct MemoryNotifier {
    default_topic: Option<String>,
    state: Mutex<MemoryNotifierState>,
}

#[derive(Debug, Default)]
struct MemoryNotifierState {
    sent: Vec<SentAlert>,
    failures_left: u32,
}

impl MemoryNotifier {
    pub fn new() -> MemoryNotifier {
        MemoryNotifier::default()
    }

    pub fn with_default_topic(topic: impl Into<String>) -> MemoryNotifier {
        MemoryNotifier {
            default_topic: Some(topic.into()),
            ..MemoryNotifier::default()
        }
    }

    /// The alerts published so far, in order.
    pub fn sent(&self) -> Vec<SentAlert> {
        self.state().sent.clone()
    }

    /// The next `count` publishes fail (and send nothing), as an SNS outage would.
    pub fn fail_next(&self, count: u32) {
        self.state().failures_left = count;
    }

    fn state(&self) -> MutexGuard<'_, MemoryNotifierState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl Notifier for MemoryNotifier {
    async fn publish(&self, alert: &Alert, topic: Option<&str>) -> Result<(), NotifyError> {
        let mut state = self.state();
        if state.failures_left > 0 {
            state.failures_left -= 1;
            return Err(NotifyError::Publish(format!(
                "the memory notifier was told to fail ({} more to fail)",
                state.failures_left
            )));
        }
        let topic = topic.map(str::to_string).or(self.default_topic.clone());
        state.sent.push(SentAlert {
            topic,
            alert: alert.clone(),
        });
        Ok(())
    }
}

/// Publishes to `first` and, once that succeeded, to `then`: the simulator on the emulators
/// keeps the list of what reached the topic.
pub struct Tee {
    pub first: Arc<dyn Notifier>,
    pub then: Arc<dyn Notifier>,
}

#[async_trait]
impl Notifier for Tee {
    async fn publish(&self, alert: &Alert, topic: Option<&str>) -> Result<(), NotifyError> {
        self.first.publish(alert, topic).await?;
        self.then.publish(alert, topic).await
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use cronledger_core::alerts::{AlertKind, Severity};

    use super::*;

    fn alert(owner: Option<&str>) -> Alert {
        let at: DateTime<Utc> = "2026-03-01T10:00:00Z".parse().expect("instant");
        Alert {
            kind: AlertKind::DeadlineMissed,
            severity: Severity::Critical,
            schedule: "settle".into(),
            owner: owner.map(str::to_string),
            window: None,
            run: None,
            message: "not done by 06:00".into(),
            console_url: None,
            at,
            subject: "w-1".into(),
        }
    }

    #[test]
    fn attributes_name_severity_schedule_kind_and_an_owner_only_when_there_is_one() {
        let names = |a: &Alert| -> Vec<&str> {
            message_attributes(a).into_iter().map(|(n, _)| n).collect()
        };
        assert_eq!(
            names(&alert(Some("payments"))),
            ["severity", "schedule", "kind", "owner"]
        );
        assert_eq!(names(&alert(None)), ["severity", "schedule", "kind"]);
        assert_eq!(names(&alert(Some(""))), ["severity", "schedule", "kind"]);
        assert_eq!(
            message_attributes(&alert(None))[0],
            ("severity", "critical".to_string())
        );
    }

    /// A client that is never reached: the tests below send nothing.
    fn offline_sns(default_topic: Option<&str>, console_url: Option<&str>) -> SnsNotifier {
        let config = aws_sdk_sns::Config::builder()
            .behavior_version(aws_sdk_sns::config::BehaviorVersion::latest())
            .region(aws_sdk_sns::config::Region::new("us-east-1"))
            .build();
        SnsNotifier::new(
            aws_sdk_sns::Client::from_conf(config),
            default_topic.map(str::to_string),
            console_url.map(str::to_string),
        )
    }

    #[test]
    fn the_body_links_to_the_console_unless_the_alert_has_a_link() {
        let linked = offline_sns(None, Some("https://ops.example.com/ "));
        let body: serde_json::Value =
            serde_json::from_str(&linked.message_body(&alert(None)).expect("body")).expect("json");
        assert_eq!(
            body["console_url"],
            "https://ops.example.com/console/schedules/settle"
        );
        assert_eq!(body["kind"], "DEADLINE_MISSED");
        let mut own = alert(None);
        own.console_url = Some("https://elsewhere/x".into());
        let body: serde_json::Value =
            serde_json::from_str(&linked.message_body(&own).expect("body")).expect("json");
        assert_eq!(body["console_url"], "https://elsewhere/x");
        let unlinked = offline_sns(Some(""), Some(""));
        assert_eq!(unlinked.default_topic(), None, "empty means unset");
        let body: serde_json::Value =
            serde_json::from_str(&unlinked.message_body(&alert(None)).expect("body"))
                .expect("json");
        assert!(body.get("console_url").is_none());
    }

    #[tokio::test]
    async fn with_no_topic_anywhere_an_alert_is_only_logged() {
        offline_sns(None, None)
            .publish(&alert(Some("payments")), None)
            .await
            .expect("never fails the caller");
    }

    #[tokio::test]
    async fn the_memory_notifier_keeps_what_it_sends_and_fails_when_told() {
        let notifier = MemoryNotifier::with_default_topic("arn:default");
        notifier.fail_next(2);
        for _ in 0..2 {
            let failed = notifier.publish(&alert(None), None).await;
            assert!(failed.is_err_and(|e| e.to_string().starts_with("ALERT_PUBLISH_FAILED")));
        }
        notifier.publish(&alert(None), None).await.expect("sent");
        notifier
            .publish(&alert(None), Some("arn:team"))
            .await
            .expect("sent");
        let topics: Vec<Option<String>> = notifier.sent().into_iter().map(|s| s.topic).collect();
        assert_eq!(
            topics,
            [
                Some("arn:default".to_string()),
                Some("arn:team".to_string())
            ]
        );
    }
}
