//! Where alerts are recorded before they are published, and how they reach people.
//!
//! An alert is recorded with a conditional put keyed by its schedule and [`Alert::key`]
//! before it is published, so racing reconcilers, retries and redeliveries publish it once.
//! A recorded alert sits in an outbox (a sparse index entry) until it is published; a failed
//! publish is retried by the reconciler's next pass.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cronledger_core::alerts::Alert;
use cronledger_core::RunKey;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::layer::store_trait;

/// An alert as the ledger holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

store_trait! {
    pub trait AlertStore {
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

    /// Starts reminding about held work, unless its (schedule, group) is tracked already
    /// (the first tracker keeps its `since`). `true`: this call started it.
    async fn track_awaiting(
        &self,
        awaiting: &Awaiting,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Trackers whose reminder is due at `now` (whole seconds), soonest first, at most `limit`.
    async fn awaiting_due(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Awaiting>, StoreError>;

    /// The tracker's next reminder at `next`; `None`: nothing waits any more, the tracker goes.
    async fn remind_awaiting(
        &self,
        awaiting: &Awaiting,
        next: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError>;
}
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

/// What waits for an operator, for its reminders (`AWAITING_APPROVAL`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HeldWork {
    /// One run held MANUAL_REQUIRED (a window of an `approval: every_run` schedule, a run
    /// whose outcome nobody knows, a guarded run over its limit).
    Run { key: RunKey },
    /// The held windows of one gap, scheduled in `[first, last]`.
    Windows {
        first: DateTime<Utc>,
        last: DateTime<Utc>,
    },
}

/// A reminder tracker: work that started waiting for an operator at `since` and has been
/// told about; at `remind_at` the reconciler looks whether it still waits and, if so,
/// reminds and moves `remind_at` on, else drops the tracker. One per (schedule, group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Awaiting {
    pub schedule: String,
    /// What the alerts name as waiting: a replay group or a run key.
    pub group: String,
    pub held: HeldWork,
    pub since: DateTime<Utc>,
    pub remind_at: DateTime<Utc>,
}

/// How long a reminder tracker is kept (its TTL): held work older than this is long past
/// every `approval_timeout`, and its reminders stop.
pub const AWAITING_RECORD_DAYS: i64 = 30;
