//! Control-plane documents (backfills, replays), written once over the item engine: each is
//! stored whole as one JSON document (`PK={prefix}{id}`, `SK=STATE`), read and written whole
//! under a version condition; open ones carry the `active` index keys under a partition of
//! their kind, so the release step lists them without a scan.

use chrono::{DateTime, Utc};
use cronledger_core::window::utc_text;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::engine::ItemEngine;
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{key, n, s, Item, ItemReader, ItemWriter};
use crate::keys::{self, GSI2PK, GSI2SK, PK, SK};

const TYPE: &str = "type";
const STATE_SK: &str = "STATE";
const DOC: &str = "doc";
const VERSION: &str = "version";
const STATE: &str = "state";

/// A kind of versioned control-plane document.
pub trait Document: Serialize + DeserializeOwned + Clone + Send + Sync {
    /// The item's `type` attribute.
    const TYPE: &'static str;
    /// The `active` index partition of the open ones.
    const OPEN_PK: &'static str;
    fn pk(id: &str) -> String;
    fn not_found(id: &str) -> StoreError;
    fn already_exists(id: &str) -> StoreError;
    fn id(&self) -> &str;
    fn version(&self) -> u64;
    fn set_version(&mut self, version: u64);
    fn state(&self) -> &'static str;
    fn is_open(&self) -> bool;
    fn created_at(&self) -> DateTime<Utc>;
    /// Attributes of its own beside the document (none by default).
    fn attributes(&self, w: ItemWriter) -> ItemWriter {
        w
    }
}

fn item<D: Document>(d: &D) -> Result<Item, StoreError> {
    let doc = serde_json::to_string(d).map_err(|e| StoreError::InvalidRequest(e.to_string()))?;
    let mut w = ItemWriter::new()
        .s(PK, D::pk(d.id()))
        .s(SK, STATE_SK)
        .s(TYPE, D::TYPE);
    w = d
        .attributes(w)
        .s(STATE, d.state())
        .n(VERSION, d.version())
        .s(DOC, doc);
    if d.is_open() {
        w = w
            .s(GSI2PK, D::OPEN_PK)
            .s(GSI2SK, format!("{}#{}", utc_text(d.created_at()), d.id()));
    }
    Ok(w.build())
}

fn decode<D: Document>(item: &Item) -> Result<D, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, D::TYPE)?;
    let mut d: D = r.json(DOC)?;
    // The attribute is the truth the conditions test.
    d.set_version(r.n(VERSION)?);
    Ok(d)
}

/// Stores a new document at version 1; its kind's "already exists" if its id is taken.
pub async fn create<E: ItemEngine + ?Sized, D: Document>(
    engine: &E,
    d: &D,
) -> Result<D, StoreError> {
    let mut stored = d.clone();
    stored.set_version(1);
    let mut cond = Expr::new();
    cond.not_exists(PK);
    if engine.put_if(item(&stored)?, &cond).await? {
        Ok(stored)
    } else {
        Err(D::already_exists(d.id()))
    }
}

pub async fn get<E: ItemEngine + ?Sized, D: Document>(
    engine: &E,
    id: &str,
) -> Result<D, StoreError> {
    match engine.get_item(key(D::pk(id), STATE_SK)).await? {
        Some(item) => decode(&item),
        None => Err(D::not_found(id)),
    }
}

/// Stores `d` at version + 1 if the stored version is still `d.version()`.
pub async fn put<E: ItemEngine + ?Sized, D: Document>(
    engine: &E,
    d: &D,
) -> Result<Option<D>, StoreError> {
    let mut next = d.clone();
    next.set_version(d.version() + 1);
    let mut cond = Expr::new();
    cond.eq(VERSION, n(d.version()));
    Ok(engine.put_if(item(&next)?, &cond).await?.then_some(next))
}

/// The open documents of a kind, oldest first: the index names them, the table is read.
pub async fn open<E: ItemEngine + ?Sized, D: Document>(engine: &E) -> Result<Vec<D>, StoreError> {
    let mut cond = Expr::new();
    cond.eq(GSI2PK, s(D::OPEN_PK));
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
            // The index projects keys only, and lags the table: read the document.
            let pk = ItemReader::new(entry).s(PK)?;
            let Some(id) = pk.strip_prefix(&D::pk("")) else {
                continue;
            };
            let fresh: D = get(engine, id).await?;
            if fresh.is_open() {
                out.push(fresh);
            }
        }
        match next {
            Some(n) => cursor = Some(n),
            None => return Ok(out),
        }
    }
}
