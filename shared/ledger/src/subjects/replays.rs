//! Replays (see [`crate::replays`]): versioned documents as backfills are
//! ([`super::documents`]); open ones under the `active` index partition `REPLAYS`.

use chrono::{DateTime, Utc};

use super::documents::{self, Document};
use crate::engine::ItemEngine;
use crate::error::StoreError;
use crate::replays::Replay;

impl Document for Replay {
    const TYPE: &'static str = "REPLAY";
    const OPEN_PK: &'static str = "REPLAYS";
    fn pk(id: &str) -> String {
        format!("REPLAY#{id}")
    }
    fn not_found(id: &str) -> StoreError {
        StoreError::ReplayNotFound(id.to_string())
    }
    fn already_exists(id: &str) -> StoreError {
        StoreError::ReplayAlreadyExists(id.to_string())
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
}

/// Stores a new replay at version 1; `REPLAY_ALREADY_EXISTS` if its id is taken.
pub async fn create<E: ItemEngine + ?Sized>(engine: &E, r: &Replay) -> Result<Replay, StoreError> {
    documents::create(engine, r).await
}

pub async fn get<E: ItemEngine + ?Sized>(engine: &E, id: &str) -> Result<Replay, StoreError> {
    documents::get(engine, id).await
}

/// Stores `r` at version + 1 if the stored version is still `r.version`.
pub async fn put<E: ItemEngine + ?Sized>(
    engine: &E,
    r: &Replay,
) -> Result<Option<Replay>, StoreError> {
    documents::put(engine, r).await
}

/// Replays RUNNING or PAUSED, oldest first.
pub async fn open<E: ItemEngine + ?Sized>(engine: &E) -> Result<Vec<Replay>, StoreError> {
    documents::open(engine).await
}
