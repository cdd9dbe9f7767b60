//! Schedule operations: audited, optimistic-locked changes and the ticker's index.

use aws_sdk_dynamodb::types::{Put, ReturnConsumedCapacity, ReturnValue, TransactWriteItem};
use chrono::{DateTime, Utc};
use cronledger_core::ScheduleSpec;

use super::values::{item_to_sdk, items_from_sdk, opt_item};
use super::{unless_condition_failed, DynamoStore, Expr, Render, TxError, CHANGE_TRIES};
use crate::codec::schedule as codec;
use crate::cursor;
use crate::error::StoreError;
use crate::item::{key, n, s, time, Item};
use crate::keys::{self, GSI1PK, GSI1SK, GSI3PK, PK, SK};
use crate::ledger::{AuditAction, AuditEntry, ChangeMeta, Page, StoredSchedule, StreakChange};
use crate::schedule_change as change;
use crate::{fire_plan, schedule_marks};

impl DynamoStore {
    pub(super) async fn create_schedule_impl(
        &self,
        spec: ScheduleSpec,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        let schedule = change::created(spec, &meta, self.shards)?;
        let mut absent = Expr::new();
        absent.not_exists(PK);
        let items = vec![
            self.put(codec::encode(&schedule)?, &absent)?,
            self.audit_put(AuditAction::Create, None, &schedule, &meta)?,
        ];
        match self.transact(items).await {
            Ok(()) => Ok(schedule),
            Err(TxError::Canceled) => {
                Err(StoreError::ScheduleAlreadyExists(schedule.id().to_string()))
            }
            Err(TxError::Failed(e)) => Err(e),
        }
    }

    pub(super) async fn update_schedule_impl(
        &self,
        spec: ScheduleSpec,
        expected_version: u64,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        let id = spec.id.clone();
        self.change(
            &id,
            Some(expected_version),
            &meta,
            AuditAction::Update,
            |current| change::updated(current, &spec, &meta),
        )
        .await
    }

    pub(super) async fn pause_impl(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.change(id, expected_version, &meta, AuditAction::Pause, |current| {
            change::paused(current, &meta)
        })
        .await
    }

    pub(super) async fn resume_impl(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.change(
            id,
            expected_version,
            &meta,
            AuditAction::Resume,
            |current| change::resumed(current, &meta),
        )
        .await
    }

    pub(super) async fn archive_impl(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.change(
            id,
            expected_version,
            &meta,
            AuditAction::Archive,
            change::archived,
        )
        .await
    }

    /// Read, apply, write back at version + 1 with its audit entry, in one transaction.
    ///
    /// The write is conditioned on the version read and on the fields the ticker and the
    /// reconciler move (`next_run_at`, `reconciled_through`), so it can replace the whole
    /// item without undoing their work. When only those moved, the change is re-applied to
    /// the fresh item; when the version moved, it is a `SCHEDULE_VERSION_CONFLICT`.
    async fn change(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: &ChangeMeta,
        action: AuditAction,
        apply: impl Fn(&StoredSchedule) -> Result<StoredSchedule, StoreError>,
    ) -> Result<StoredSchedule, StoreError> {
        for _ in 0..CHANGE_TRIES {
            let current = self.get_schedule_impl(id).await?;
            change::check_changeable(&current, expected_version)?;
            let mut next = apply(&current)?;
            next.version = current.version + 1;
            next.updated_at = meta.at;

            let mut unchanged = Expr::new();
            unchanged
                .eq(codec::VERSION, n(current.version))
                .eq_or_absent(codec::NEXT_RUN_AT, current.next_run_at.map(time))
                .eq(codec::RECONCILED_THROUGH, time(current.reconciled_through));
            let items = vec![
                self.put(codec::encode(&next)?, &unchanged)?,
                self.audit_put(action, Some(&current), &next, meta)?,
            ];
            match self.transact(items).await {
                Ok(()) => return Ok(next),
                // Someone wrote in between: read again and decide which case it is.
                Err(TxError::Canceled) => continue,
                Err(TxError::Failed(e)) => return Err(e),
            }
        }
        Err(StoreError::Contention(format!(
            "schedule `{id}` kept changing under the edit"
        )))
    }

    fn put(&self, item: Item, condition: &Expr) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item_to_sdk(item)))
            .set_condition_expression(condition.condition())
            .set_expression_attribute_names(condition.names())
            .set_expression_attribute_values(condition.values())
            .build()
            .map_err(|e| StoreError::InvalidRequest(e.to_string()))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    fn audit_put(
        &self,
        action: AuditAction,
        before: Option<&StoredSchedule>,
        after: &StoredSchedule,
        meta: &ChangeMeta,
    ) -> Result<TransactWriteItem, StoreError> {
        let entry = change::change_entry(action, before, after, meta);
        // One entry per version, ever: a second writer at the same version fails here too.
        let mut absent = Expr::new();
        absent.not_exists(PK);
        self.put(
            codec::encode_audit(&entry, keys::audit_sk(entry.version))?,
            &absent,
        )
    }

    pub(super) async fn get_schedule_impl(&self, id: &str) -> Result<StoredSchedule, StoreError> {
        match self
            .get_item(key(keys::schedule_pk(id), keys::SCHEDULE_SK))
            .await?
        {
            Some(item) => codec::decode(&item),
            None => Err(StoreError::ScheduleNotFound(id.to_string())),
        }
    }

    pub(super) async fn list_schedules_impl(
        &self,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError> {
        let mut cond = Expr::new();
        cond.eq(GSI3PK, s(keys::CATALOG_PK));
        let (entries, next) = self
            .query_page(Some(keys::CATALOG_INDEX), &cond, limit, cursor, true)
            .await?;
        let items = self.fetch_items(&entries).await?;
        Ok(Page {
            items: items.iter().map(codec::decode).collect::<Result<_, _>>()?,
            next,
        })
    }

    pub(super) async fn audit_log_impl(&self, id: &str) -> Result<Vec<AuditEntry>, StoreError> {
        let mut cond = Expr::new();
        cond.eq(PK, s(keys::schedule_pk(id)))
            .begins_with(SK, s(keys::AUDIT_PREFIX));
        self.query_all(None, &cond)
            .await?
            .iter()
            .map(codec::decode_audit)
            .collect()
    }

    pub(super) async fn due_schedules_impl(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<StoredSchedule>, StoreError> {
        let mut cond = Expr::new();
        cond.eq(GSI1PK, s(keys::due_pk(shard)))
            .lt(GSI1SK, s(keys::due_sk_bound(until)));
        // A query page holds at most 1,000 items (or 1 MB): follow the pages, or every
        // schedule past the first page of a shard would miss its window.
        let mut items = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let want = limit.saturating_sub(items.len() as u32);
            if want == 0 {
                break;
            }
            let (mut page, cursor) = self
                .query_page(Some(keys::DUE_INDEX), &cond, want, next.as_deref(), true)
                .await?;
            items.append(&mut page);
            match cursor {
                Some(c) => next = Some(c),
                None => break,
            }
        }
        self.fetch_due(&items, until).await
    }

    /// The schedules behind `due` entries that are still due by `until` (the index lags
    /// the table: another ticker may have fired one meanwhile).
    async fn fetch_due(
        &self,
        entries: &[Item],
        until: DateTime<Utc>,
    ) -> Result<Vec<StoredSchedule>, StoreError> {
        let bound = keys::due_sk_bound(until);
        let mut due = Vec::with_capacity(entries.len());
        for item in self.fetch_items(entries).await? {
            let stored = codec::decode(&item)?;
            if codec::due_keys(&stored).is_some_and(|(_, sk)| sk < bound) {
                due.push(stored);
            }
        }
        Ok(due)
    }

    pub(super) async fn due_schedules_page_impl(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError> {
        let mut cond = Expr::new();
        cond.eq(GSI1PK, s(keys::due_pk(shard)))
            .lt(GSI1SK, s(keys::due_sk_bound(until)));
        let (entries, next) = self
            .query_page(Some(keys::DUE_INDEX), &cond, limit, cursor, true)
            .await?;
        Ok(Page {
            items: self.fetch_due(&entries, until).await?,
            next,
        })
    }

    pub(super) async fn advance_next_run_impl(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        let expr = fire_plan::advance(id, expected, next, self.shards);
        self.conditional_update(id, &expr).await
    }

    pub(super) async fn advance_watermark_impl(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        through: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let expr = schedule_marks::watermark(id, expected, through)?;
        self.conditional_update(id, &expr).await
    }

    pub(super) async fn set_downstream_impl(
        &self,
        id: &str,
        downstream: &[String],
    ) -> Result<(), StoreError> {
        let expr = schedule_marks::downstream(downstream)?;
        if self.conditional_update(id, &expr).await? {
            Ok(())
        } else {
            Err(StoreError::ScheduleNotFound(id.to_string()))
        }
    }

    /// Failed: one more, answering the new value. Succeeded: `SET
    /// failure_streak = 0` only when the caller's copy of the schedule showed a streak (the
    /// worker passes what it read), so a healthy run writes nothing; here it is written
    /// unconditionally and answers 0.
    pub(super) async fn count_failure_streak_impl(
        &self,
        id: &str,
        change: StreakChange,
    ) -> Result<u32, StoreError> {
        let expr = schedule_marks::failure_streak(change);
        let item_key = key(keys::schedule_pk(id), keys::SCHEDULE_SK);
        match self
            .update_returning(item_key, &expr, ReturnValue::UpdatedNew)
            .await?
        {
            Some(new) => Ok(new
                .get(codec::FAILURE_STREAK)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)),
            None => Err(StoreError::ScheduleNotFound(id.to_string())),
        }
    }

    /// A strongly consistent read of one item.
    pub(crate) async fn get_item(&self, item_key: Item) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item_to_sdk(item_key)))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| crate::error::store_request("GetItem", e))?;
        self.meter
            .record_capacity("GetItem", out.consumed_capacity());
        Ok(opt_item(out.item.as_ref()))
    }

    /// An update of the schedule's item: `true` if applied, `false` if its condition failed.
    pub(super) async fn conditional_update(
        &self,
        id: &str,
        expr: &Expr,
    ) -> Result<bool, StoreError> {
        self.update_if(key(keys::schedule_pk(id), keys::SCHEDULE_SK), expr)
            .await
    }

    /// An update of the item at `item_key`: `true` if applied, `false` if its condition
    /// failed.
    pub(crate) async fn update_if(&self, item_key: Item, expr: &Expr) -> Result<bool, StoreError> {
        Ok(self
            .update_returning(item_key, expr, ReturnValue::None)
            .await?
            .is_some())
    }

    /// An update of the item at `item_key` answering the attributes `returning` asks for;
    /// `None` if its condition failed.
    pub(super) async fn update_returning(
        &self,
        item_key: Item,
        expr: &Expr,
        returning: ReturnValue,
    ) -> Result<Option<Item>, StoreError> {
        let sent = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item_to_sdk(item_key)))
            .set_update_expression(expr.update())
            .set_condition_expression(expr.condition())
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .return_values(returning)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match sent {
            Ok(out) => {
                self.meter
                    .record_capacity("UpdateItem", out.consumed_capacity());
                Ok(Some(opt_item(out.attributes.as_ref()).unwrap_or_default()))
            }
            Err(err) => unless_condition_failed("UpdateItem", err).map(|_| None),
        }
    }

    /// One page of a query, with an opaque cursor for the next.
    pub(crate) async fn query_page(
        &self,
        index: Option<&str>,
        key_condition: &Expr,
        limit: u32,
        cursor: Option<&str>,
        forward: bool,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        let start = cursor::decode(cursor)?;
        let out = self
            .query(index, key_condition, limit, start, forward)
            .await?;
        Ok((out.items, cursor::encode(out.last_key.as_ref())))
    }

    /// One Query request: `expr`'s key condition and filter, `limit` items read (filtered
    /// or not) from `start`, its capacity recorded.
    pub(super) async fn query(
        &self,
        index: Option<&str>,
        expr: &Expr,
        limit: u32,
        start: Option<Item>,
        forward: bool,
    ) -> Result<QueryPage, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .set_index_name(index.map(str::to_string))
            .set_key_condition_expression(expr.condition())
            .set_filter_expression(expr.filter())
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .set_exclusive_start_key(start.map(item_to_sdk))
            .limit(limit.clamp(1, 1000) as i32)
            .scan_index_forward(forward)
            // Indexes only offer eventual consistency; the table's own partitions are
            // read strongly so a caller sees its own writes.
            .consistent_read(index.is_none())
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| crate::error::store_request("Query", e))?;
        self.meter.record_capacity("Query", out.consumed_capacity());
        Ok(QueryPage {
            items: items_from_sdk(out.items()),
            last_key: opt_item(out.last_evaluated_key()),
        })
    }

    /// Every item of a query on the table or `index`, following the pages.
    pub(super) async fn query_all(
        &self,
        index: Option<&str>,
        key_condition: &Expr,
    ) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let (mut page, cursor) = self
                .query_page(index, key_condition, 1000, next.as_deref(), true)
                .await?;
            items.append(&mut page);
            match cursor {
                Some(c) => next = Some(c),
                None => return Ok(items),
            }
        }
    }
}

/// One page a Query read: its items (after the filter) and where it stopped, if before the
/// end (`LastEvaluatedKey`).
pub(super) struct QueryPage {
    pub items: Vec<Item>,
    pub last_key: Option<Item>,
}
