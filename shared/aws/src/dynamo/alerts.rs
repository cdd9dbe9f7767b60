//! Recorded alerts (see [`crate::alerts`] and [`crate::codec::alert`]): one item per alert in
//! its schedule's partition, recorded by a put that only takes a free (or expired) key, and
//! listed in the `active` index's `ALERTS#OUTBOX` partition until published.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cronledger_core::alerts::Alert;

use super::{DynamoStore, Expr};
use crate::alerts::{AlertStore, Awaiting, RecordedAlert};
use crate::codec::alert as codec;
use crate::error::StoreError;
use crate::item::{s, time};
use crate::keys::{self, GSI2PK, GSI2SK, PK, SK};

/// Most outbox entries one `unpublished_alerts` reads (DynamoDB's Query limit).
pub(crate) const OUTBOX_PAGE_MAX: u32 = 1000;

impl DynamoStore {
    async fn record_alert_impl(
        &self,
        alert: &Alert,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let recorded = RecordedAlert::unpublished(alert, at);
        self.put_unless_live(codec::encode(&recorded)?, at).await
    }

    /// Sets `published_at` once and takes the outbox entry away. A record that is gone
    /// (never made, or expired and deleted) is left gone: the condition keeps the update
    /// from creating a bare item.
    async fn alert_published_impl(
        &self,
        alert: &Alert,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut expr = Expr::new();
        expr.set_if_absent(codec::PUBLISHED_AT, time(at))
            .remove(GSI2PK)
            .remove(GSI2SK)
            .exists(PK);
        self.update_if(codec::alert_key(alert), &expr).await?;
        Ok(())
    }

    /// One page of the outbox, oldest first; the index projects keys only, so the records
    /// are then read (eventually consistent, as fresh as the index) and those published or
    /// gone meanwhile are left out.
    async fn unpublished_alerts_impl(&self, limit: u32) -> Result<Vec<RecordedAlert>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut cond = Expr::new();
        cond.eq(GSI2PK, s(keys::ALERTS_OUTBOX_PK));
        let out = self
            .query(
                Some(keys::ACTIVE_INDEX),
                &cond,
                limit.min(OUTBOX_PAGE_MAX),
                None,
                true,
            )
            .await?;
        let items = self.fetch_items(&out.items).await?;
        let mut waiting = Vec::with_capacity(items.len());
        for item in &items {
            let recorded = codec::decode(item)?;
            if recorded.published_at.is_none() {
                waiting.push(recorded);
            }
        }
        Ok(waiting)
    }

    /// Every alert of the schedule (a schedule has few: one per condition, kept 30 days),
    /// then newest first.
    async fn alerts_of_impl(
        &self,
        schedule: &str,
        limit: u32,
    ) -> Result<Vec<RecordedAlert>, StoreError> {
        let mut cond = Expr::new();
        cond.eq(PK, s(keys::schedule_pk(schedule)))
            .begins_with(SK, s(keys::ALERT_PREFIX));
        let items = self.query_all(None, &cond).await?;
        let alerts = items
            .iter()
            .map(codec::decode)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(codec::newest_first(alerts, limit))
    }
}

#[async_trait]
impl AlertStore for DynamoStore {
    async fn record_alert(&self, alert: &Alert, at: DateTime<Utc>) -> Result<bool, StoreError> {
        self.record_alert_impl(alert, at).await
    }

    async fn alert_published(&self, alert: &Alert, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.alert_published_impl(alert, at).await
    }

    async fn unpublished_alerts(&self, limit: u32) -> Result<Vec<RecordedAlert>, StoreError> {
        self.unpublished_alerts_impl(limit).await
    }

    async fn alerts_of(
        &self,
        schedule: &str,
        limit: u32,
    ) -> Result<Vec<RecordedAlert>, StoreError> {
        self.alerts_of_impl(schedule, limit).await
    }

    async fn track_awaiting(
        &self,
        awaiting: &Awaiting,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.track_awaiting_impl(awaiting, at).await
    }

    async fn awaiting_due(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Awaiting>, StoreError> {
        self.awaiting_due_impl(now, limit).await
    }

    async fn remind_awaiting(
        &self,
        awaiting: &Awaiting,
        next: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        self.remind_awaiting_impl(awaiting, next).await
    }
}
