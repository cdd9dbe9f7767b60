//! Children items (see `cronledger_core::children`): conditional puts, one read, a page by
//! index, and changes that move the parent's counters in the same transaction.

use aws_sdk_dynamodb::types::{ReturnValue, TransactWriteItem, Update};
use cronledger_core::children::Child;
use cronledger_core::RunKey;
use futures_util::stream::{self, StreamExt, TryStreamExt};

use super::runs::run_item_key;
use super::values::item_to_sdk;
use super::{DynamoStore, Expr, Render, TxError};
use crate::child_plan;
use crate::codec::child as codec;
use crate::error::StoreError;
use crate::item::{key, s, Item};
use crate::keys::{self, PK, SK};
use crate::ledger::{ChildChange, Page};

/// Conditional puts in flight at once.
const PUTS_AT_ONCE: usize = 16;

fn child_key(parent: &RunKey, step: u32, index: u32) -> Item {
    key(
        keys::schedule_pk(&parent.schedule_id),
        keys::child_sk(parent, step, index),
    )
}

impl DynamoStore {
    pub(super) async fn put_children_impl(
        &self,
        parent: &RunKey,
        children: &[Child],
    ) -> Result<(), StoreError> {
        let puts: Vec<_> = children
            .iter()
            .map(|child| {
                let item = codec::encode(parent, child);
                async move {
                    let mut absent = Expr::new();
                    absent.not_exists(PK);
                    // Kept when present: a child already stored may be running.
                    self.put_if(item, &absent).await
                }
            })
            .collect();
        stream::iter(puts)
            .buffer_unordered(PUTS_AT_ONCE)
            .try_collect::<Vec<bool>>()
            .await?;
        Ok(())
    }

    pub(super) async fn get_child_impl(
        &self,
        parent: &RunKey,
        step: u32,
        index: u32,
    ) -> Result<Child, StoreError> {
        match self.get_item(child_key(parent, step, index)).await? {
            Some(item) => codec::decode(&item),
            None => Err(StoreError::ChildNotFound(keys::child_name(
                parent, step, index,
            ))),
        }
    }

    pub(super) async fn children_of_impl(
        &self,
        parent: &RunKey,
        step: u32,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Child>, StoreError> {
        let mut cond = Expr::new();
        cond.eq(PK, s(keys::schedule_pk(&parent.schedule_id)))
            .begins_with(SK, s(keys::children_prefix(parent, step)));
        let (items, next) = self.query_page(None, &cond, limit, cursor, true).await?;
        Ok(Page {
            items: items.iter().map(codec::decode).collect::<Result<_, _>>()?,
            next,
        })
    }

    pub(super) async fn change_child_impl(
        &self,
        parent: &RunKey,
        change: &ChildChange,
    ) -> Result<Child, StoreError> {
        let name = keys::child_name(parent, change.step, change.index);
        let item_key = child_key(parent, change.step, change.index);
        let expr = child_plan::change(change)?;
        let Some(counters) = child_plan::parent_counters(change) else {
            return match self
                .update_returning(item_key, &expr, ReturnValue::AllNew)
                .await?
            {
                Some(item) => codec::decode(&item),
                None => Err(StoreError::ChildConflict(name)),
            };
        };
        let items = vec![
            update(&self.table, item_key, &expr)?,
            update(&self.table, run_item_key(parent), &counters)?,
        ];
        match self.transact(items).await {
            Ok(()) => self.get_child_impl(parent, change.step, change.index).await,
            Err(TxError::Canceled) => Err(StoreError::ChildConflict(name)),
            Err(TxError::Failed(e)) => Err(e),
        }
    }
}

fn update(table: &str, item_key: Item, expr: &Expr) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(item_to_sdk(item_key)))
        .set_update_expression(expr.update())
        .set_condition_expression(expr.condition())
        .set_expression_attribute_names(expr.names())
        .set_expression_attribute_values(expr.values())
        .build()
        .map_err(|e| StoreError::InvalidRequest(e.to_string()))?;
    Ok(TransactWriteItem::builder().update(update).build())
}
