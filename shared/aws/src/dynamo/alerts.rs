//! Recorded alerts and the trackers of held work on DynamoDB: `subjects::alerts` over the
//! store's requests.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cronledger_core::alerts::Alert;

use super::DynamoStore;
use crate::alerts::{AlertStore, Awaiting, RecordedAlert};
use crate::error::StoreError;
use crate::subjects::alerts;

#[async_trait]
impl AlertStore for DynamoStore {
    async fn record_alert(&self, alert: &Alert, at: DateTime<Utc>) -> Result<bool, StoreError> {
        alerts::record(self, alert, at).await
    }

    async fn alert_published(&self, alert: &Alert, at: DateTime<Utc>) -> Result<(), StoreError> {
        alerts::published(self, alert, at).await
    }

    async fn unpublished_alerts(&self, limit: u32) -> Result<Vec<RecordedAlert>, StoreError> {
        alerts::unpublished(self, limit).await
    }

    async fn alerts_of(
        &self,
        schedule: &str,
        limit: u32,
    ) -> Result<Vec<RecordedAlert>, StoreError> {
        alerts::of_schedule(self, schedule, limit).await
    }

    async fn track_awaiting(
        &self,
        awaiting: &Awaiting,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        alerts::track(self, awaiting, at).await
    }

    async fn awaiting_due(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Awaiting>, StoreError> {
        alerts::due(self, now, limit).await
    }

    async fn remind_awaiting(
        &self,
        awaiting: &Awaiting,
        next: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        alerts::remind(self, awaiting, next).await
    }
}
