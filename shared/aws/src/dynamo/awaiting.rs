//! Reminder trackers of held work (see [`crate::alerts::Awaiting`] and
//! [`crate::codec::awaiting`]): one item per (schedule, group) in the schedule's partition,
//! listed in the `active` index's `ALERTS#AWAITING` partition by next reminder time, so a
//! reconciler pass finds the due ones with one query that is empty on most passes.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use chrono::{DateTime, Utc};

use super::values::item_to_sdk;
use super::{DynamoStore, Expr};
use crate::alerts::Awaiting;
use crate::codec::awaiting as codec;
use crate::error::StoreError;
use crate::item::s;
use crate::keys::{self, GSI2PK, GSI2SK, PK};

/// Most trackers one `awaiting_due` reads (DynamoDB's Query limit).
pub(crate) const AWAITING_PAGE_MAX: u32 = 1000;

impl DynamoStore {
    pub(super) async fn track_awaiting_impl(
        &self,
        awaiting: &Awaiting,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.put_unless_live(codec::encode(awaiting)?, at).await
    }

    /// One index page of the due trackers, then their items (keys-only index).
    pub(super) async fn awaiting_due_impl(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Awaiting>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut cond = Expr::new();
        cond.eq(GSI2PK, s(keys::ALERTS_AWAITING_PK))
            .lt(GSI2SK, s(keys::due_sk_bound(now)));
        let out = self
            .query(
                Some(keys::ACTIVE_INDEX),
                &cond,
                limit.min(AWAITING_PAGE_MAX),
                None,
                true,
            )
            .await?;
        let items = self.fetch_items(&out.items).await?;
        let mut due = items
            .iter()
            .map(codec::decode)
            .collect::<Result<Vec<_>, _>>()?;
        // The items are as fresh as the table: one moved on meanwhile is not due.
        due.retain(|a| a.remind_at <= now);
        due.sort_by_key(codec::index_sk);
        Ok(due)
    }

    /// The next reminder: the item put again with its new time, only while it is there (a
    /// racing pass that dropped it wins). No next one: the item goes.
    pub(super) async fn remind_awaiting_impl(
        &self,
        awaiting: &Awaiting,
        next: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        let Some(next) = next else {
            let out = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(item_to_sdk(codec::awaiting_key(
                    &awaiting.schedule,
                    &awaiting.group,
                ))))
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await
                .map_err(|e| crate::error::store_request("DeleteItem", e))?;
            self.meter
                .record_capacity("DeleteItem", out.consumed_capacity());
            return Ok(());
        };
        let moved = Awaiting {
            remind_at: next,
            ..awaiting.clone()
        };
        let names = HashMap::from([("#pk".to_string(), PK.to_string())]);
        let condition = Some("attribute_exists(#pk)".to_string());
        self.put_conditional(codec::encode(&moved)?, condition, Some(names), None)
            .await
            .map(|_| ())
    }
}
