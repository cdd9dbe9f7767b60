//! The ticker's per-shard state: a fire mark and a catalog of the shard's schedules, both in
//! the shard's own partition (`SHARD#{n}`), so a tick reads them strongly consistent from
//! the table and depends on no index.
//!
//! - **The fire mark** (`SHARD#{n}` / `FIRE`): `fired_through`, every window whose fire time
//!   is at or before it has been fired by a ticker (or left to the reconciler, past its
//!   grace); `sent_through`, the runs fired up to it were sent (it trails only while a tick
//!   sends, or after a ticker died sending); `catalog_version`, moved by every schedule change
//!   in the shard, in the change's own transaction.
//! - **The catalog** (`SHARD#{n}` / `SCHEDULE#{id}`): a copy of each schedule's definition
//!   (spec, version, state, pauses, the instant it fires from), written in the same
//!   transaction as the schedule's change. The marks the reconciler and the worker move on
//!   the schedule item (watermark, failure streak, downstream) are not copied: the ticker
//!   does not read them.
//!
//! A tick moves `fired_through` only if it and `catalog_version` are where the tick read
//! them: a lagging or racing ticker, or a change to the catalog under the tick, makes the move
//! fail, and the tick reads again (see the ticker's module).

use chrono::{DateTime, Utc};

use crate::codec::schedule as schedule_codec;
use crate::error::StoreError;
use crate::expr::{Comparison, Cond, Expr};
use crate::item::{key, n, s, time, Item, ItemReader, ItemWriter};
use crate::keys::{self, GSI1PK, GSI1SK, GSI3PK, GSI3SK, PK, SK};
use crate::ledger::StoredSchedule;

pub const TYPE: &str = "type";
pub const FIRE_MARK_TYPE: &str = "FIRE_MARK";
pub const FIRED_THROUGH: &str = "fired_through";
pub const SENT_THROUGH: &str = "sent_through";
pub const CATALOG_VERSION: &str = "catalog_version";

/// A shard's fire mark as read (all empty before the shard's first tick and change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FireMark {
    pub shard: u32,
    /// Windows fired (or left to the reconciler) through this fire time.
    pub fired_through: Option<DateTime<Utc>>,
    /// Runs sent through this fire time.
    pub sent_through: Option<DateTime<Utc>>,
    /// Moved by every change to the shard's catalog.
    pub catalog_version: u64,
}

impl FireMark {
    /// Where the runs that may not have been sent begin: `sent_through`, or (never set)
    /// `fired_through`.
    pub fn unsent_after(&self) -> Option<DateTime<Utc>> {
        self.sent_through.or(self.fired_through)
    }
}

pub fn mark_key(shard: u32) -> Item {
    key(keys::shard_pk(shard), keys::FIRE_MARK_SK)
}

pub fn catalog_entry_key(shard: u32, id: &str) -> Item {
    key(keys::shard_pk(shard), keys::catalog_entry_sk(id))
}

pub fn decode_mark(shard: u32, item: Option<&Item>) -> Result<FireMark, StoreError> {
    let Some(item) = item else {
        return Ok(FireMark {
            shard,
            ..FireMark::default()
        });
    };
    let r = ItemReader::new(item);
    r.expect_type(TYPE, FIRE_MARK_TYPE)?;
    Ok(FireMark {
        shard,
        fired_through: r.opt_time(FIRED_THROUGH)?,
        sent_through: r.opt_time(SENT_THROUGH)?,
        catalog_version: r.opt_n(CATALOG_VERSION)?.unwrap_or(0),
    })
}

/// Moves `fired_through` from `from` to `to` (and, on a shard's first move, starts
/// `sent_through` at `from`: nothing before it was fired), only if the mark and the catalog
/// are as `read`.
pub fn move_fired(read: &FireMark, from: DateTime<Utc>, to: DateTime<Utc>) -> Expr {
    let mut expr = Expr::new();
    expr.set(TYPE, s(FIRE_MARK_TYPE))
        .set(FIRED_THROUGH, time(to))
        .eq_or_absent(FIRED_THROUGH, read.fired_through.map(time))
        .eq_or_absent(
            CATALOG_VERSION,
            (read.catalog_version > 0).then(|| n(read.catalog_version)),
        );
    if read.sent_through.is_none() {
        expr.set(SENT_THROUGH, time(read.fired_through.unwrap_or(from)));
    }
    expr
}

/// Moves `sent_through` from `from` to `to`: the runs fired up to `to` were sent.
pub fn move_sent(from: Option<DateTime<Utc>>, to: DateTime<Utc>) -> Expr {
    let mut expr = Expr::new();
    expr.set(SENT_THROUGH, time(to))
        .eq_or_absent(SENT_THROUGH, from.map(time))
        .exists(FIRED_THROUGH);
    expr
}

/// The reconciler's fence: `fired_through` at least `at`, so no ticker that read the mark
/// before fires a window at or before it (its move fails and it reads again).
pub fn fence(at: DateTime<Utc>) -> Expr {
    let mut expr = Expr::new();
    expr.set(TYPE, s(FIRE_MARK_TYPE))
        .set(FIRED_THROUGH, time(at))
        .any(vec![
            Cond::NotExists(FIRED_THROUGH.to_string()),
            Cond::Compare(FIRED_THROUGH.to_string(), Comparison::Lt, time(at)),
        ]);
    expr
}

/// A change to the shard's catalog: its version moves (part of the change's transaction).
pub fn bump_catalog() -> Expr {
    let mut expr = Expr::new();
    expr.set(TYPE, s(FIRE_MARK_TYPE))
        .increment(CATALOG_VERSION, 1);
    expr
}

/// The catalog copy of `schedule`: its item, in its shard's partition, out of every index.
pub fn encode_catalog_entry(schedule: &StoredSchedule) -> Result<Item, StoreError> {
    let mut item = schedule_codec::encode(schedule)?;
    for index_key in [GSI1PK, GSI1SK, GSI3PK, GSI3SK] {
        item.remove(index_key);
    }
    let entry_key = catalog_entry_key(schedule.shard, schedule.id());
    item.extend(entry_key);
    Ok(ItemWriter(item)
        .s(TYPE, schedule_codec::CATALOG_ENTRY_TYPE)
        .build())
}

pub fn decode_catalog_entry(item: &Item) -> Result<StoredSchedule, StoreError> {
    schedule_codec::decode_as(item, schedule_codec::CATALOG_ENTRY_TYPE)
}

/// The key condition of a shard's catalog entries.
pub fn catalog_of(shard: u32) -> Expr {
    let mut cond = Expr::new();
    cond.eq(PK, s(keys::shard_pk(shard)))
        .begins_with(SK, s(keys::CATALOG_ENTRY_PREFIX));
    cond
}
