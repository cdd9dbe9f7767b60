//! Children items (see `cronledger_core::children`), written once over the item engine:
//! conditional puts, one read, a page of a step's children, and changes that move the
//! parent's counters in the same transaction.

use cronledger_core::children::Child;
use cronledger_core::RunKey;
use futures_util::stream::{self, StreamExt, TryStreamExt};

use super::runs::run_item_key;
use crate::child_plan;
use crate::codec::child as codec;
use crate::engine::{ItemEngine, Returning, Write, Written};
use crate::error::StoreError;
use crate::expr::Expr;
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

pub async fn put<E: ItemEngine + ?Sized>(
    engine: &E,
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
                engine.put_if(item, &absent).await
            }
        })
        .collect();
    stream::iter(puts)
        .buffer_unordered(PUTS_AT_ONCE)
        .try_collect::<Vec<bool>>()
        .await?;
    Ok(())
}

pub async fn get<E: ItemEngine + ?Sized>(
    engine: &E,
    parent: &RunKey,
    step: u32,
    index: u32,
) -> Result<Child, StoreError> {
    match engine.get_item(child_key(parent, step, index)).await? {
        Some(item) => codec::decode(&item),
        None => Err(StoreError::ChildNotFound(keys::child_name(
            parent, step, index,
        ))),
    }
}

pub async fn of_step<E: ItemEngine + ?Sized>(
    engine: &E,
    parent: &RunKey,
    step: u32,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<Child>, StoreError> {
    let mut cond = Expr::new();
    cond.eq(PK, s(keys::schedule_pk(&parent.schedule_id)))
        .begins_with(SK, s(keys::children_prefix(parent, step)));
    let (items, next) = engine.query_page(None, &cond, limit, cursor, true).await?;
    Ok(Page {
        items: items.iter().map(codec::decode).collect::<Result<_, _>>()?,
        next,
    })
}

pub async fn change<E: ItemEngine + ?Sized>(
    engine: &E,
    parent: &RunKey,
    change: &ChildChange,
) -> Result<Child, StoreError> {
    let name = keys::child_name(parent, change.step, change.index);
    let item_key = child_key(parent, change.step, change.index);
    let expr = child_plan::change(change)?;
    let Some(counters) = child_plan::parent_counters(change) else {
        let update = Write::Update {
            key: item_key,
            expr,
        };
        return match engine.write(update, Returning::AllNew, false).await? {
            Written::Applied(Some(item)) => codec::decode(&item),
            Written::Applied(None) => get(engine, parent, change.step, change.index).await,
            Written::Refused(_) => Err(StoreError::ChildConflict(name)),
        };
    };
    let writes = vec![
        Write::Update {
            key: item_key,
            expr,
        },
        Write::Update {
            key: run_item_key(parent),
            expr: counters,
        },
    ];
    if engine.transact(writes).await? {
        get(engine, parent, change.step, change.index).await
    } else {
        Err(StoreError::ChildConflict(name))
    }
}
