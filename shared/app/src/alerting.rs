//! Raising alerts: recorded once in the ledger, then published, with an outbox for the
//! publishes that failed.
//!
//! The record comes first (a conditional put keyed by the alert's schedule and key), so of
//! the racing reconcilers, retried handlers and redelivered messages that see one condition,
//! exactly one publishes it. A publish that fails leaves the alert in the outbox; the
//! reconciler's next pass publishes it. Raising never fails its caller: an alert is about a
//! state change that has already happened.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::{AlertStore, LedgerStore, Notifier};
use cronledger_core::alerts::Alert;
use serde::Serialize;

use crate::metrics::{Metric, Metrics};

mod held;
pub use held::{gap_watch, is_gap_watch, Held, ReminderReport};

/// How old an outbox entry must be before a pass publishes it: younger ones may still be
/// in the hands of the writer that recorded them.
const OUTBOX_MIN_AGE: TimeDelta = TimeDelta::seconds(60);
/// Outbox entries published per pass.
const OUTBOX_PER_PASS: u32 = 100;

/// What became of one raised alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertFate {
    Published,
    /// Recorded before, by this or another writer: not published again.
    AlreadyRaised,
    /// Recorded, the publish failed: the outbox retries it.
    Queued,
    /// The ledger could not record it; published anyway (a duplicate is better than
    /// silence), without the outbox's retry.
    Unrecorded,
}

/// What one outbox pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OutboxReport {
    pub published: u32,
    pub failed: u32,
}

pub struct Alerter {
    store: Arc<dyn AlertStore>,
    notifier: Arc<dyn Notifier>,
    /// Where `AlertsRaised` is counted: the metrics of the component raising (see
    /// [`Alerter::counting_into`]); a collector of its own, never published, otherwise.
    metrics: Metrics,
}

impl Alerter {
    pub fn new(store: Arc<dyn AlertStore>, notifier: Arc<dyn Notifier>) -> Alerter {
        Alerter {
            store,
            notifier,
            metrics: Metrics::new(),
        }
    }

    /// Counts the alerts it raises into `metrics`, the raising component's (which its
    /// function flushes after each invocation).
    pub fn counting_into(mut self, metrics: Metrics) -> Alerter {
        self.metrics = metrics;
        self
    }

    /// Where it counts what it raises.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Records `alert` and, when this call recorded it, publishes it (to `topic`, the
    /// schedule's own, or the default one).
    pub async fn raise(&self, alert: &Alert, topic: Option<&str>) -> AlertFate {
        let fate = match self.store.record_alert(alert, alert.at).await {
            Ok(false) => AlertFate::AlreadyRaised,
            Ok(true) => match self.notifier.publish(alert, topic).await {
                Ok(()) => {
                    if let Err(e) = self.store.alert_published(alert, alert.at).await {
                        // Published: at worst the outbox publishes it a second time.
                        tracing::warn!(alert = %alert.key(), error = %e, "could not mark the alert published");
                    }
                    AlertFate::Published
                }
                Err(e) => {
                    tracing::warn!(alert = %alert.key(), error = %e, "alert publish failed; the outbox retries it");
                    AlertFate::Queued
                }
            },
            Err(e) => {
                tracing::warn!(alert = %alert.key(), error = %e, "could not record the alert; publishing it unrecorded");
                match self.notifier.publish(alert, topic).await {
                    Ok(()) => AlertFate::Unrecorded,
                    Err(e) => {
                        tracing::error!(alert = %alert.key(), error = %e, "alert lost: neither recorded nor published");
                        AlertFate::Unrecorded
                    }
                }
            }
        };
        if fate != AlertFate::AlreadyRaised {
            tracing::warn!(
                kind = %alert.kind,
                severity = %alert.severity,
                schedule = %alert.schedule,
                owner = alert.owner.as_deref(),
                key = %alert.key(),
                fate = ?fate,
                message = %alert.message,
                "alert"
            );
            self.metrics.count(Metric::AlertsRaised, 1);
        }
        fate
    }

    /// Publishes the alerts whose publish failed (recorded at least a minute before `now`),
    /// each to its schedule's topic as the ledger has it now.
    pub async fn publish_outbox(
        &self,
        ledger: &dyn LedgerStore,
        now: DateTime<Utc>,
    ) -> OutboxReport {
        let mut report = OutboxReport::default();
        let waiting = match self.store.unpublished_alerts(OUTBOX_PER_PASS).await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the alert outbox");
                report.failed += 1;
                return report;
            }
        };
        for recorded in waiting
            .into_iter()
            .filter(|r| now - r.recorded_at >= OUTBOX_MIN_AGE)
        {
            let alert = &recorded.alert;
            let topic = ledger
                .get_schedule(&alert.schedule)
                .await
                .ok()
                .and_then(|s| s.spec.alerts.topic);
            match self.notifier.publish(alert, topic.as_deref()).await {
                Ok(()) => {
                    report.published += 1;
                    if let Err(e) = self.store.alert_published(alert, now).await {
                        tracing::warn!(alert = %alert.key(), error = %e, "could not mark the alert published");
                    }
                    tracing::info!(alert = %alert.key(), schedule = %alert.schedule, "alert published from the outbox");
                }
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(alert = %alert.key(), error = %e, "alert publish failed again");
                }
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use cronledger_aws::notify::MemoryNotifier;
    use cronledger_aws::{ChangeMeta, MemoryStore, RequestMeter};
    use cronledger_core::alerts::{self, About, AlertSettings, RunRef};
    use cronledger_core::{Priority, Window};
    use cronledger_ledger::prelude::*;

    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("test instants are valid")
    }

    fn failure_alert(now: DateTime<Utc>) -> Alert {
        let about = About {
            schedule: "nightly",
            owner: Some("team-a"),
            priority: Priority::Critical,
        };
        let run = RunRef {
            key: "nightly/RUN#2026-12-01T02:00:00Z",
            window: Window::new(at("2026-12-01T01:00:00Z"), at("2026-12-01T02:00:00Z")),
        };
        alerts::failures_in_a_row(&about, &AlertSettings::default(), 1, &run, now)
            .expect("CRITICAL alerts at the first failure")
    }

    async fn store_with_schedule(now: DateTime<Utc>) -> Arc<MemoryStore> {
        let store = Arc::new(MemoryStore::new(1, RequestMeter::new()));
        let spec = cronledger_core::spec::parse_manifest(
            r#"{"schedules": [{"id": "nightly", "cron": "0 2 * * *", "timezone": "UTC",
                "job": {"type": "noop"}}]}"#,
            &cronledger_core::ValidationRules::default(),
            now,
        )
        .expect("a valid manifest")
        .remove(0);
        let meta = ChangeMeta {
            actor: "test".into(),
            reason: "test".into(),
            at: now,
            details: None,
        };
        store.create_schedule(spec, meta).await.expect("create");
        store
    }

    #[tokio::test]
    async fn a_condition_seen_twice_is_published_once() {
        let now = at("2026-12-01T02:00:30Z");
        let store = store_with_schedule(now).await;
        let notifier = Arc::new(MemoryNotifier::new());
        let alerter = Alerter::new(store.clone(), notifier.clone());
        let alert = failure_alert(now);
        assert_eq!(alerter.raise(&alert, None).await, AlertFate::Published);
        assert_eq!(alerter.raise(&alert, None).await, AlertFate::AlreadyRaised);
        assert_eq!(notifier.sent().len(), 1);
        let outbox = alerter
            .publish_outbox(store.as_ref(), now + TimeDelta::hours(1))
            .await;
        assert_eq!(
            outbox,
            OutboxReport::default(),
            "a published alert is not in the outbox"
        );
    }

    #[tokio::test]
    async fn a_failed_publish_goes_out_from_the_outbox_on_a_later_pass_once() {
        let now = at("2026-12-01T02:00:30Z");
        let store = store_with_schedule(now).await;
        let notifier = Arc::new(MemoryNotifier::new());
        let alerter = Alerter::new(store.clone(), notifier.clone());
        let alert = failure_alert(now);
        notifier.fail_next(1);
        assert_eq!(alerter.raise(&alert, None).await, AlertFate::Queued);
        assert!(notifier.sent().is_empty());
        // A pass right after leaves it to the writer that may still be publishing it.
        let early = alerter
            .publish_outbox(store.as_ref(), now + TimeDelta::seconds(10))
            .await;
        assert_eq!(early.published, 0);
        let later = alerter
            .publish_outbox(store.as_ref(), now + TimeDelta::minutes(5))
            .await;
        assert_eq!(
            later,
            OutboxReport {
                published: 1,
                failed: 0
            }
        );
        let again = alerter
            .publish_outbox(store.as_ref(), now + TimeDelta::minutes(10))
            .await;
        assert_eq!(again.published, 0, "published once");
        let sent = notifier.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].alert, alert);
    }
}
