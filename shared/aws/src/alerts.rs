//! Where alerts are recorded before they are published, and how they reach people.
//!
//! An alert is recorded with a conditional put keyed by its schedule and [`Alert::key`]
//! before it is published, so racing reconcilers, retries and redeliveries publish it once.
//! A recorded alert sits in an outbox (a sparse index entry) until it is published; a failed
//! publish is retried by the reconciler's next pass.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cronledger_core::alerts::Alert;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// An alert as the ledger holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedAlert {
    pub alert: Alert,
    pub recorded_at: DateTime<Utc>,
    /// `None` while it waits in the outbox.
    pub published_at: Option<DateTime<Utc>>,
}

impl RecordedAlert {
    /// `alert` as recorded at `at`, waiting in the outbox.
    pub fn unpublished(alert: &Alert, at: DateTime<Utc>) -> RecordedAlert {
        RecordedAlert {
            alert: alert.clone(),
            recorded_at: at,
            published_at: None,
        }
    }
}

/// How long an alert's record is kept (its TTL): a condition that recurs after this is a
/// new alert, long after anyone would want it folded into the old one.
pub const ALERT_RECORD_DAYS: i64 = 30;

#[async_trait]
pub trait AlertStore: Send + Sync {
    /// Records `alert` unless its schedule already has one with the same key. `true`: this
    /// call recorded it, so this caller publishes it; `false`: it was there (another writer
    /// recorded it; the outbox publishes it if that writer did not).
    async fn record_alert(&self, alert: &Alert, at: DateTime<Utc>) -> Result<bool, StoreError>;

    /// The alert went out: it leaves the outbox.
    async fn alert_published(&self, alert: &Alert, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Alerts recorded and not yet published, oldest first, at most `limit`.
    async fn unpublished_alerts(&self, limit: u32) -> Result<Vec<RecordedAlert>, StoreError>;

    /// A schedule's alerts, newest first, at most `limit`.
    async fn alerts_of(&self, schedule: &str, limit: u32)
        -> Result<Vec<RecordedAlert>, StoreError>;
}

/// Why a publish failed.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("ALERT_PUBLISH_FAILED: {0}")]
    Publish(String),
}

/// Where alerts go: SNS in AWS, a list in tests and the simulator.
#[async_trait]
pub trait Notifier: Send + Sync {
    /// Publishes one alert as one message: `topic` when the schedule names one, else the
    /// notifier's default topic.
    async fn publish(&self, alert: &Alert, topic: Option<&str>) -> Result<(), NotifyError>;
}
