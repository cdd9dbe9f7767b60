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

use crate::metrics::Metrics;

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
            self.metrics.count("AlertsRaised", 1);
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
        self.metrics
            .count("AlertsPublishedFromOutbox", u64::from(report.published));
        report
    }
}
