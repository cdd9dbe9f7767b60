//! The port's item engine on DynamoDB: each request the subjects make, rendered and sent
//! once, its consumed capacity recorded from DynamoDB's answer.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    Delete, Put, ReturnConsumedCapacity, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use super::expr::Rendered;
use super::values::{item_to_sdk, items_from_sdk, opt_item};
use super::{jitter, DynamoStore};
use crate::engine::{ItemEngine, QueryPage, Returning, Write, Written};
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::Item;

/// Tries per transaction when DynamoDB cancels it for colliding with a concurrent one
/// (`TransactionConflict`): unlike a failed condition, that says nothing about the data.
const TRANSACTION_TRIES: u32 = 8;

fn return_value(returning: Returning) -> ReturnValue {
    match returning {
        Returning::Nothing => ReturnValue::None,
        Returning::AllNew => ReturnValue::AllNew,
        Returning::UpdatedNew => ReturnValue::UpdatedNew,
    }
}

fn on_refusal(old_on_refusal: bool) -> ReturnValuesOnConditionCheckFailure {
    if old_on_refusal {
        ReturnValuesOnConditionCheckFailure::AllOld
    } else {
        ReturnValuesOnConditionCheckFailure::None
    }
}

/// A conditional write's error: `Refused` (with the stored item, when it came back) when
/// only its condition failed, the request error otherwise.
fn refused_or<E>(
    operation: &'static str,
    err: SdkError<E, HttpResponse>,
    old: impl FnOnce(&E) -> Option<Item>,
) -> Result<Written, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match err.as_service_error() {
        Some(service) if service.code() == Some("ConditionalCheckFailedException") => {
            Ok(Written::Refused(old(service)))
        }
        _ => Err(crate::error::store_request(operation, err)),
    }
}

/// A request builder with an expression's condition and placeholders set.
macro_rules! with_expr {
    ($builder:expr, $rendered:expr) => {
        $builder
            .set_condition_expression($rendered.condition.clone())
            .set_expression_attribute_names($rendered.names())
            .set_expression_attribute_values($rendered.values())
    };
}

fn build_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::InvalidRequest(e.to_string())
}

impl DynamoStore {
    fn transact_item(&self, write: &Write) -> Result<TransactWriteItem, StoreError> {
        let item = TransactWriteItem::builder();
        Ok(match write {
            Write::Put { item: put, cond } => {
                let r = Rendered::of(cond);
                item.put(
                    with_expr!(Put::builder(), r)
                        .table_name(&self.table)
                        .set_item(Some(item_to_sdk(put.clone())))
                        .build()
                        .map_err(build_error)?,
                )
            }
            Write::Update { key, expr } => {
                let r = Rendered::of(expr);
                item.update(
                    with_expr!(Update::builder(), r)
                        .table_name(&self.table)
                        .set_key(Some(item_to_sdk(key.clone())))
                        .set_update_expression(r.update.clone())
                        .build()
                        .map_err(build_error)?,
                )
            }
            Write::Delete { key, cond } => {
                let r = Rendered::of(cond);
                item.delete(
                    with_expr!(Delete::builder(), r)
                        .table_name(&self.table)
                        .set_key(Some(item_to_sdk(key.clone())))
                        .build()
                        .map_err(build_error)?,
                )
            }
        }
        .build())
    }
}

#[async_trait]
impl ItemEngine for DynamoStore {
    fn shards(&self) -> u32 {
        self.shards
    }

    async fn get_item(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item_to_sdk(key)))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| crate::error::store_request("GetItem", e))?;
        self.meter
            .record_capacity("GetItem", out.consumed_capacity());
        Ok(opt_item(out.item.as_ref()))
    }

    async fn write(
        &self,
        write: Write,
        returning: Returning,
        old_on_refusal: bool,
    ) -> Result<Written, StoreError> {
        match write {
            Write::Put { item, cond } => {
                let r = Rendered::of(&cond);
                let sent = with_expr!(self.client.put_item(), r)
                    .table_name(&self.table)
                    .set_item(Some(item_to_sdk(item.clone())))
                    .return_values_on_condition_check_failure(on_refusal(old_on_refusal))
                    .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                    .send()
                    .await;
                match sent {
                    Ok(out) => {
                        self.meter
                            .record_capacity("PutItem", out.consumed_capacity());
                        // A put's new item is the one sent.
                        Ok(Written::Applied(
                            (returning != Returning::Nothing).then_some(item),
                        ))
                    }
                    Err(err) => refused_or("PutItem", err, |e| {
                        use aws_sdk_dynamodb::operation::put_item::PutItemError;
                        match e {
                            PutItemError::ConditionalCheckFailedException(f) => opt_item(f.item()),
                            _ => None,
                        }
                    }),
                }
            }
            Write::Update { key, expr } => {
                let r = Rendered::of(&expr);
                let sent = with_expr!(self.client.update_item(), r)
                    .table_name(&self.table)
                    .set_key(Some(item_to_sdk(key)))
                    .set_update_expression(r.update.clone())
                    .return_values(return_value(returning))
                    .return_values_on_condition_check_failure(on_refusal(old_on_refusal))
                    .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                    .send()
                    .await;
                match sent {
                    Ok(out) => {
                        self.meter
                            .record_capacity("UpdateItem", out.consumed_capacity());
                        Ok(Written::Applied(opt_item(out.attributes.as_ref())))
                    }
                    Err(err) => refused_or("UpdateItem", err, |e| {
                        use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
                        match e {
                            UpdateItemError::ConditionalCheckFailedException(f) => {
                                opt_item(f.item())
                            }
                            _ => None,
                        }
                    }),
                }
            }
            Write::Delete { key, cond } => {
                let r = Rendered::of(&cond);
                let sent = with_expr!(self.client.delete_item(), r)
                    .table_name(&self.table)
                    .set_key(Some(item_to_sdk(key)))
                    .return_values_on_condition_check_failure(on_refusal(old_on_refusal))
                    .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                    .send()
                    .await;
                match sent {
                    Ok(out) => {
                        self.meter
                            .record_capacity("DeleteItem", out.consumed_capacity());
                        Ok(Written::Applied(None))
                    }
                    Err(err) => refused_or("DeleteItem", err, |e| {
                        use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
                        match e {
                            DeleteItemError::ConditionalCheckFailedException(f) => {
                                opt_item(f.item())
                            }
                            _ => None,
                        }
                    }),
                }
            }
        }
    }

    /// Runs one TransactWriteItems, retrying only transaction conflicts.
    async fn transact(&self, writes: Vec<Write>) -> Result<bool, StoreError> {
        let items = writes
            .iter()
            .map(|w| self.transact_item(w))
            .collect::<Result<Vec<_>, _>>()?;
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
                    return Ok(true);
                }
                Err(err) => err,
            };
            let Some(TransactWriteItemsError::TransactionCanceledException(canceled)) =
                err.as_service_error()
            else {
                return Err(crate::error::store_request("TransactWriteItems", err));
            };
            let reasons = canceled.cancellation_reasons();
            if reasons
                .iter()
                .any(|r| r.code() == Some("ConditionalCheckFailed"))
            {
                return Ok(false);
            }
            if !reasons
                .iter()
                .any(|r| r.code() == Some("TransactionConflict"))
            {
                return Err(crate::error::store_request("TransactWriteItems", err));
            }
            tokio::time::sleep(jitter(attempt)).await;
        }
        Err(StoreError::Contention(format!(
            "a transaction on `{}` conflicted {TRANSACTION_TRIES} times in a row",
            self.table
        )))
    }

    async fn query(
        &self,
        index: Option<&str>,
        expr: &Expr,
        limit: u32,
        start: Option<Item>,
        forward: bool,
    ) -> Result<QueryPage, StoreError> {
        let r = Rendered::of(expr);
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .set_index_name(index.map(str::to_string))
            .set_key_condition_expression(r.condition.clone())
            .set_filter_expression(r.filter.clone())
            .set_expression_attribute_names(r.names())
            .set_expression_attribute_values(r.values())
            .set_exclusive_start_key(start.map(item_to_sdk))
            .limit(limit.clamp(1, 1000) as i32)
            .scan_index_forward(forward)
            // Indexes only offer eventual consistency; the table's own partitions are read
            // strongly so a caller sees its own writes.
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

    async fn fetch_items(&self, entries: &[Item]) -> Result<Vec<Item>, StoreError> {
        DynamoStore::fetch_items(self, entries).await
    }
}
