//! The ledger on one DynamoDB table.

mod audit;
mod children;
mod expr;
mod fetch;
mod fire;
mod runs;
mod schedules;
mod shards;
pub mod values;

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{ReturnConsumedCapacity, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use chrono::{DateTime, Utc};
use cronledger_core::children::Child;
use cronledger_core::{Attempt, Run, RunKey, RunStatus, ScheduleSpec};

use crate::config::AwsClients;
use crate::engine::ItemEngine;
use crate::error::StoreError;
use crate::item::Item;
use crate::ledger::{
    AuditEntry, ChangeMeta, ChildChange, Created, Fire, FireOutcome, OperatorAction, Page,
    RecentRuns, RunChange, StoredSchedule, StreakChange,
};
use crate::meter::RequestMeter;
use crate::metered::Metered;
use crate::store::{ChildStore, RunStore, ScheduleStore};
use values::item_to_sdk;

pub use expr::{Expr, Render};
pub(crate) use fetch::BATCH_GET_KEYS;

/// The ledger on DynamoDB, each call metered under its operation's name.
pub type DynamoLedger = Metered<DynamoStore>;

impl DynamoLedger {
    pub fn new(clients: &AwsClients, table: impl Into<String>, shards: u32) -> DynamoLedger {
        Metered::wrap(DynamoStore::new(clients, table, shards))
    }
}

/// Where the ledger lives and how it is sharded.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    meter: RequestMeter,
    table: String,
    shards: u32,
}

/// Tries per transaction when DynamoDB cancels it for colliding with a concurrent one
/// (`TransactionConflict`): unlike a failed condition, that says nothing about the data.
const TRANSACTION_TRIES: u32 = 8;

/// Tries of a read-modify-write whose condition failed because a concurrent writer changed
/// a field the caller did not ask about (the ticker moved `next_run_at`).
const CHANGE_TRIES: u32 = 5;

/// Why a transaction did not apply.
pub(crate) enum TxError {
    /// An item's condition failed.
    Canceled,
    Failed(StoreError),
}

impl DynamoStore {
    pub fn new(clients: &AwsClients, table: impl Into<String>, shards: u32) -> DynamoStore {
        DynamoStore {
            client: clients.dynamodb.clone(),
            meter: clients.meter.clone(),
            table: table.into(),
            shards: shards.max(1),
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn shards(&self) -> u32 {
        self.shards
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs one TransactWriteItems, retrying only transaction conflicts.
    pub(crate) async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<(), TxError> {
        for attempt in 0..TRANSACTION_TRIES {
            let sent = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await;
            let err = match sent {
                Ok(out) => {
                    self.meter
                        .record_capacity("TransactWriteItems", out.consumed_capacity());
                    return Ok(());
                }
                Err(err) => err,
            };
            let Some(TransactWriteItemsError::TransactionCanceledException(canceled)) =
                err.as_service_error()
            else {
                return Err(TxError::Failed(crate::error::store_request(
                    "TransactWriteItems",
                    err,
                )));
            };
            let reasons = canceled.cancellation_reasons();
            if reasons
                .iter()
                .any(|r| r.code() == Some("ConditionalCheckFailed"))
            {
                return Err(TxError::Canceled);
            }
            if !reasons
                .iter()
                .any(|r| r.code() == Some("TransactionConflict"))
            {
                return Err(TxError::Failed(crate::error::store_request(
                    "TransactWriteItems",
                    err,
                )));
            }
            tokio::time::sleep(jitter(attempt)).await;
        }
        Err(TxError::Failed(StoreError::Contention(format!(
            "a transaction on `{}` conflicted {TRANSACTION_TRIES} times in a row",
            self.table
        ))))
    }
}

impl DynamoStore {
    /// A conditional put: `Ok(true)` when stored, `Ok(false)` when the condition failed.
    pub(crate) async fn put_if(&self, item: Item, cond: &Expr) -> Result<bool, StoreError> {
        let sent = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item_to_sdk(item)))
            .set_condition_expression(cond.condition())
            .set_expression_attribute_names(cond.names())
            .set_expression_attribute_values(cond.values())
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match sent {
            Ok(out) => {
                self.meter
                    .record_capacity("PutItem", out.consumed_capacity());
                Ok(true)
            }
            Err(err) => unless_condition_failed("PutItem", err),
        }
    }
}

/// A conditional write's error: `Ok(false)` when only its condition failed (another writer
/// got there first), the request error otherwise.
pub(crate) fn unless_condition_failed<E>(
    operation: &'static str,
    err: SdkError<E, HttpResponse>,
) -> Result<bool, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if err.as_service_error().and_then(ProvideErrorMetadata::code)
        == Some("ConditionalCheckFailedException")
    {
        Ok(false)
    } else {
        Err(crate::error::store_request(operation, err))
    }
}

/// Exponential backoff with full jitter, from std's per-instance random hash keys.
fn jitter(attempt: u32) -> Duration {
    let cap_ms = 10u64 << attempt.min(6);
    Duration::from_millis(RandomState::new().hash_one(attempt) % (cap_ms + 1))
}

#[async_trait]
impl ScheduleStore for DynamoStore {
    async fn create_schedule(
        &self,
        spec: ScheduleSpec,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.create_schedule_impl(spec, meta).await
    }

    async fn update_schedule(
        &self,
        spec: ScheduleSpec,
        expected_version: u64,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.update_schedule_impl(spec, expected_version, meta)
            .await
    }

    async fn pause_schedule(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.pause_impl(id, expected_version, meta).await
    }

    async fn resume_schedule(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.resume_impl(id, expected_version, meta).await
    }

    async fn archive_schedule(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.archive_impl(id, expected_version, meta).await
    }

    async fn get_schedule(&self, id: &str) -> Result<StoredSchedule, StoreError> {
        self.get_schedule_impl(id).await
    }

    async fn list_schedules(
        &self,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError> {
        self.list_schedules_impl(limit, cursor).await
    }

    async fn audit_log(&self, id: &str) -> Result<Vec<AuditEntry>, StoreError> {
        self.audit_log_impl(id).await
    }

    async fn schedule_spec_at(&self, id: &str, version: u64) -> Result<ScheduleSpec, StoreError> {
        self.schedule_spec_at_impl(id, version).await
    }

    async fn record_operator_action(
        &self,
        action: &OperatorAction,
    ) -> Result<AuditEntry, StoreError> {
        self.record_operator_action_impl(action).await
    }

    async fn due_schedules(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<StoredSchedule>, StoreError> {
        self.due_schedules_impl(shard, until, limit).await
    }

    async fn due_schedules_page(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError> {
        self.due_schedules_page_impl(shard, until, limit, cursor)
            .await
    }

    async fn advance_watermark(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        through: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.advance_watermark_impl(id, expected, through).await
    }

    async fn set_downstream(&self, id: &str, downstream: &[String]) -> Result<(), StoreError> {
        self.set_downstream_impl(id, downstream).await
    }

    async fn count_failure_streak(
        &self,
        id: &str,
        change: StreakChange,
    ) -> Result<u32, StoreError> {
        self.count_failure_streak_impl(id, change).await
    }
}

#[async_trait]
impl RunStore for DynamoStore {
    async fn fire(&self, fire: &Fire) -> Result<FireOutcome, StoreError> {
        self.fire_impl(fire).await
    }

    async fn fire_all(&self, fires: &[Fire]) -> Result<Vec<FireOutcome>, StoreError> {
        self.fire_all_impl(fires).await
    }

    async fn advance_next_run(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        self.advance_next_run_impl(id, expected, next).await
    }

    async fn create_run(&self, run: &Run) -> Result<Created, StoreError> {
        self.create_run_impl(run).await
    }

    async fn get_run(&self, key: &RunKey) -> Result<Run, StoreError> {
        self.get_run_impl(key).await
    }

    async fn get_run_with_attempts(&self, key: &RunKey) -> Result<(Run, Vec<Attempt>), StoreError> {
        self.get_run_with_attempts_impl(key).await
    }

    async fn transition_run(&self, key: &RunKey, change: &RunChange) -> Result<Run, StoreError> {
        self.transition_run_impl(key, change).await
    }

    async fn active_runs(
        &self,
        shard: u32,
        status: Option<RunStatus>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError> {
        self.active_runs_impl(shard, status, limit, cursor).await
    }

    async fn recent_runs(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<RecentRuns, StoreError> {
        self.recent_runs_impl(schedule_id, limit, at).await
    }

    async fn schedule_with_recent_runs(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<(StoredSchedule, RecentRuns), StoreError> {
        self.schedule_with_recent_runs_impl(schedule_id, limit, at)
            .await
    }

    async fn running_before(
        &self,
        schedule_id: &str,
        before: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError> {
        self.running_before_impl(schedule_id, before).await
    }

    async fn pending_live_runs(
        &self,
        shard: u32,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Run>, StoreError> {
        self.pending_live_runs_impl(shard, from, to, limit).await
    }

    async fn run_history(
        &self,
        schedule_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError> {
        self.run_history_impl(schedule_id, limit, cursor).await
    }

    async fn runs_between(
        &self,
        schedule_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError> {
        self.runs_between_impl(schedule_id, from, to).await
    }
}

#[async_trait]
impl ChildStore for DynamoStore {
    async fn put_children(&self, parent: &RunKey, children: &[Child]) -> Result<(), StoreError> {
        self.put_children_impl(parent, children).await
    }

    async fn get_child(&self, parent: &RunKey, step: u32, index: u32) -> Result<Child, StoreError> {
        self.get_child_impl(parent, step, index).await
    }

    async fn children_of(
        &self,
        parent: &RunKey,
        step: u32,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Child>, StoreError> {
        self.children_of_impl(parent, step, limit, cursor).await
    }

    async fn change_child(
        &self,
        parent: &RunKey,
        change: &ChildChange,
    ) -> Result<Child, StoreError> {
        self.change_child_impl(parent, change).await
    }
}

// Alerts and trackers, backfills, the system's items, release states, health: written once
// over the item engine below.
cronledger_ledger::engine_subjects!(DynamoStore);

/// The store's requests as the port's item engine (see `crate::subjects`).
#[async_trait]
impl ItemEngine for DynamoStore {
    async fn get_item(&self, key: Item) -> Result<Option<Item>, StoreError> {
        DynamoStore::get_item(self, key).await
    }

    async fn put_if(&self, item: Item, cond: &Expr) -> Result<bool, StoreError> {
        DynamoStore::put_if(self, item, cond).await
    }

    async fn query_page(
        &self,
        index: Option<&str>,
        expr: &Expr,
        limit: u32,
        cursor: Option<&str>,
        forward: bool,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        DynamoStore::query_page(self, index, expr, limit, cursor, forward).await
    }

    async fn update_if(&self, key: Item, expr: &Expr) -> Result<bool, StoreError> {
        DynamoStore::update_if(self, key, expr).await
    }

    async fn delete_item(&self, key: Item) -> Result<(), StoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(item_to_sdk(key)))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| crate::error::store_request("DeleteItem", e))?;
        self.meter
            .record_capacity("DeleteItem", out.consumed_capacity());
        Ok(())
    }

    async fn fetch_items(&self, entries: &[Item]) -> Result<Vec<Item>, StoreError> {
        DynamoStore::fetch_items(self, entries).await
    }
}
