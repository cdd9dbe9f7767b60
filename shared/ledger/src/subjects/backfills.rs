//! Backfills (see [`crate::ops`]), written once over the item engine. Each is stored
//! whole as one JSON document (read and written whole, under a version condition); open
//! ones carry the `active` index keys under a partition of their own (`BACKFILLS`), so the
//! release step lists them without a scan.

use cronledger_core::window::utc_text;

use crate::engine::ItemEngine;
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{key, n, s, Item, ItemReader, ItemWriter};
use crate::keys::{self, GSI2PK, GSI2SK, PK, SK};
use crate::ops::Backfill;

const TYPE: &str = "type";
const BACKFILL_TYPE: &str = "BACKFILL";
const STATE_SK: &str = "STATE";
const DOC: &str = "doc";
const VERSION: &str = "version";
const STATE: &str = "state";
const SCHEDULE_ID: &str = "schedule_id";
/// The `active` index partition of open backfills.
pub const OPEN_BACKFILLS_PK: &str = "BACKFILLS";

fn backfill_item(b: &Backfill) -> Result<Item, StoreError> {
    let mut w = ItemWriter::new()
        .s(PK, keys::backfill_pk(&b.id))
        .s(SK, STATE_SK)
        .s(TYPE, BACKFILL_TYPE)
        .s(SCHEDULE_ID, &b.schedule_id)
        .s(STATE, b.state.as_str())
        .n(VERSION, b.version)
        .s(DOC, to_json(b)?);
    if b.state.is_open() {
        w = w
            .s(GSI2PK, OPEN_BACKFILLS_PK)
            .s(GSI2SK, format!("{}#{}", utc_text(b.created_at), b.id));
    }
    Ok(w.build())
}

fn decode_backfill(item: &Item) -> Result<Backfill, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, BACKFILL_TYPE)?;
    let mut b: Backfill = r.json(DOC)?;
    // The attribute is the truth the conditions test.
    b.version = r.n(VERSION)?;
    Ok(b)
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::InvalidRequest(e.to_string()))
}

/// Stores a new backfill at version 1; `BACKFILL_ALREADY_EXISTS` if its id is taken.
pub async fn create<E: ItemEngine + ?Sized>(
    engine: &E,
    b: &Backfill,
) -> Result<Backfill, StoreError> {
    let mut stored = b.clone();
    stored.version = 1;
    let mut cond = Expr::new();
    cond.not_exists(PK);
    if engine.put_if(backfill_item(&stored)?, &cond).await? {
        Ok(stored)
    } else {
        Err(StoreError::BackfillAlreadyExists(b.id.clone()))
    }
}

pub async fn get<E: ItemEngine + ?Sized>(engine: &E, id: &str) -> Result<Backfill, StoreError> {
    match engine
        .get_item(key(keys::backfill_pk(id), STATE_SK))
        .await?
    {
        Some(item) => decode_backfill(&item),
        None => Err(StoreError::BackfillNotFound(id.to_string())),
    }
}

/// Stores `b` at version + 1 if the stored version is still `b.version`.
pub async fn put<E: ItemEngine + ?Sized>(
    engine: &E,
    b: &Backfill,
) -> Result<Option<Backfill>, StoreError> {
    let mut next = b.clone();
    next.version = b.version + 1;
    let mut cond = Expr::new();
    cond.eq(VERSION, n(b.version));
    Ok(engine
        .put_if(backfill_item(&next)?, &cond)
        .await?
        .then_some(next))
}

/// Backfills RUNNING or PAUSED, oldest first: the index names them, the table is read.
pub async fn open<E: ItemEngine + ?Sized>(engine: &E) -> Result<Vec<Backfill>, StoreError> {
    let mut cond = Expr::new();
    cond.eq(GSI2PK, s(OPEN_BACKFILLS_PK));
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (items, next) = engine
            .query_page(
                Some(keys::ACTIVE_INDEX),
                &cond,
                500,
                cursor.as_deref(),
                true,
            )
            .await?;
        for entry in &items {
            // The index projects keys only, and lags the table: read the backfill.
            let pk = crate::item::ItemReader::new(entry).s(PK)?;
            let Some(id) = pk.strip_prefix(&keys::backfill_pk("")) else {
                continue;
            };
            let fresh = get(engine, id).await?;
            if fresh.state.is_open() {
                out.push(fresh);
            }
        }
        match next {
            Some(n) => cursor = Some(n),
            None => return Ok(out),
        }
    }
}
