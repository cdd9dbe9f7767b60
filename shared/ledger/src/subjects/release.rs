//! The release state of each lane (see [`crate::control`]): one item a lane, replaced
//! whole under a version condition.

use cronledger_core::Lane;

use crate::control::ReleaseState;
use crate::engine::ItemEngine;
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{key, n, Item, ItemReader, ItemWriter};
use crate::keys::{PK, SK};

const TYPE: &str = "type";
const RELEASE_TYPE: &str = "RELEASE_STATE";
const STATE_SK: &str = "STATE";
const LANE: &str = "lane";
const PAUSED: &str = "paused";
const CAUSE: &str = "cause";
const SINCE: &str = "since";
const LAST_RELEASE_AT: &str = "last_release_at";
const DLQ_DEPTH: &str = "dlq_depth";
const VERSION: &str = "version";

pub fn release_pk(lane: Lane) -> String {
    format!("RELEASE#{lane}")
}

/// The item `put_release_state` writes for `state`: at the next version.
fn release_state_item(state: &ReleaseState) -> Item {
    ItemWriter::new()
        .s(PK, release_pk(state.lane))
        .s(SK, STATE_SK)
        .s(TYPE, RELEASE_TYPE)
        .s(LANE, state.lane.as_str())
        .bool(PAUSED, state.paused)
        .opt_s(CAUSE, state.cause.clone())
        .time(SINCE, state.since)
        .opt_time(LAST_RELEASE_AT, state.last_release_at)
        .opt_n(DLQ_DEPTH, state.dlq_depth)
        .n(VERSION, state.version + 1)
        .build()
}

fn decode_release_state(item: &Item) -> Result<ReleaseState, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, RELEASE_TYPE)?;
    Ok(ReleaseState {
        lane: r.parsed(LANE)?,
        paused: r.bool(PAUSED)?,
        cause: r.opt_s(CAUSE)?.map(str::to_string),
        since: r.time(SINCE)?,
        last_release_at: r.opt_time(LAST_RELEASE_AT)?,
        dlq_depth: r.opt_n(DLQ_DEPTH)?,
        version: r.n(VERSION)?,
    })
}

/// The lane's release state; `None` while it was never written.
pub async fn get<E: ItemEngine + ?Sized>(
    engine: &E,
    lane: Lane,
) -> Result<Option<ReleaseState>, StoreError> {
    match engine.get_item(key(release_pk(lane), STATE_SK)).await? {
        Some(item) => decode_release_state(&item).map(Some),
        None => Ok(None),
    }
}

/// Stores `state` at its version + 1 if the stored one is still `state.version` (absent for
/// version 0): `false` when another writer got there first.
pub async fn put<E: ItemEngine + ?Sized>(
    engine: &E,
    state: &ReleaseState,
) -> Result<bool, StoreError> {
    let mut cond = Expr::new();
    if state.version == 0 {
        cond.not_exists(PK);
    } else {
        cond.eq(VERSION, n(state.version));
    }
    engine.put_if(release_state_item(state), &cond).await
}
