//! Backfills (see [`crate::ops`]): versioned documents ([`super::documents`]); open ones
//! under the `active` index partition `BACKFILLS`, so the release step lists them without a
//! scan.

use chrono::{DateTime, Utc};

use super::documents::{self, Document};
use crate::engine::ItemEngine;
use crate::error::StoreError;
use crate::item::ItemWriter;
use crate::keys;
use crate::ops::Backfill;

/// The `active` index partition of open backfills.
pub const OPEN_BACKFILLS_PK: &str = "BACKFILLS";

impl Document for Backfill {
    const TYPE: &'static str = "BACKFILL";
    const OPEN_PK: &'static str = OPEN_BACKFILLS_PK;
    fn pk(id: &str) -> String {
        keys::backfill_pk(id)
    }
    fn not_found(id: &str) -> StoreError {
        StoreError::BackfillNotFound(id.to_string())
    }
    fn already_exists(id: &str) -> StoreError {
        StoreError::BackfillAlreadyExists(id.to_string())
    }
    fn id(&self) -> &str {
        &self.id
    }
    fn version(&self) -> u64 {
        self.version
    }
    fn set_version(&mut self, version: u64) {
        self.version = version;
    }
    fn state(&self) -> &'static str {
        self.state.as_str()
    }
    fn is_open(&self) -> bool {
        self.state.is_open()
    }
    fn created_at(&self) -> DateTime<Utc> {
        self.created_at
    }
    fn attributes(&self, w: ItemWriter) -> ItemWriter {
        w.s("schedule_id", &self.schedule_id)
    }
}

/// Stores a new backfill at version 1; `BACKFILL_ALREADY_EXISTS` if its id is taken.
pub async fn create<E: ItemEngine + ?Sized>(
    engine: &E,
    b: &Backfill,
) -> Result<Backfill, StoreError> {
    documents::create(engine, b).await
}

pub async fn get<E: ItemEngine + ?Sized>(engine: &E, id: &str) -> Result<Backfill, StoreError> {
    documents::get(engine, id).await
}

/// Stores `b` at version + 1 if the stored version is still `b.version`.
pub async fn put<E: ItemEngine + ?Sized>(
    engine: &E,
    b: &Backfill,
) -> Result<Option<Backfill>, StoreError> {
    documents::put(engine, b).await
}

/// Backfills RUNNING or PAUSED, oldest first.
pub async fn open<E: ItemEngine + ?Sized>(engine: &E) -> Result<Vec<Backfill>, StoreError> {
    documents::open(engine).await
}
