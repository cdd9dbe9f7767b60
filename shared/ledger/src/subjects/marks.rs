//! The shards' fire marks and catalogs (see [`crate::fire_mark`]), written once over the
//! item engine. Every read here is strongly consistent: a tick sees every schedule change
//! that committed before it, whatever an index would lag.

use chrono::{DateTime, Utc};

use crate::codec::schedule::VERSION;
use crate::engine::{query_all, ItemEngine, Returning, Write};
use crate::error::StoreError;
use crate::expr::{Comparison, Cond};
use crate::fire_mark::{self, FireMark};
use crate::item::n;
use crate::keys::PK;
use crate::ledger::StoredSchedule;

pub async fn read<E: ItemEngine + ?Sized>(engine: &E, shard: u32) -> Result<FireMark, StoreError> {
    let item = engine.get_item(fire_mark::mark_key(shard)).await?;
    fire_mark::decode_mark(shard, item.as_ref())
}

/// Moves the shard's `fired_through` from `from` to `to` if the mark and its catalog are as
/// `read`.
pub async fn move_fired<E: ItemEngine + ?Sized>(
    engine: &E,
    read: &FireMark,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let expr = fire_mark::move_fired(read, from, to);
    engine
        .update_if(fire_mark::mark_key(read.shard), &expr)
        .await
}

/// Moves the shard's `sent_through` from `from` to `to`.
pub async fn move_sent<E: ItemEngine + ?Sized>(
    engine: &E,
    shard: u32,
    from: Option<DateTime<Utc>>,
    to: DateTime<Utc>,
) -> Result<bool, StoreError> {
    engine
        .update_if(fire_mark::mark_key(shard), &fire_mark::move_sent(from, to))
        .await
}

/// The reconciler's fence: the shard's `fired_through` at least `at`. `false` when it was.
pub async fn fence<E: ItemEngine + ?Sized>(
    engine: &E,
    shard: u32,
    at: DateTime<Utc>,
) -> Result<bool, StoreError> {
    engine
        .update_if(fire_mark::mark_key(shard), &fire_mark::fence(at))
        .await
}

/// Every schedule in the shard's catalog, in id order.
pub async fn catalog<E: ItemEngine + ?Sized>(
    engine: &E,
    shard: u32,
) -> Result<Vec<StoredSchedule>, StoreError> {
    query_all(engine, None, &fire_mark::catalog_of(shard))
        .await?
        .iter()
        .map(fire_mark::decode_catalog_entry)
        .collect()
}

/// Schedules listed per page while seeding a catalog.
const SEED_PAGE: u32 = 100;

/// Writes the shard's catalog from its schedules, once: for a table whose schedules were
/// written before catalogs existed (a shard whose mark has never counted a change). A copy
/// never replaces a newer one a concurrent change wrote. Returns the copies written.
pub async fn seed_catalog<E: ItemEngine + ?Sized>(
    engine: &E,
    shard: u32,
) -> Result<u32, StoreError> {
    let mut written = 0;
    let mut cursor: Option<String> = None;
    loop {
        let page = super::schedules::list(engine, SEED_PAGE, cursor.as_deref()).await?;
        for schedule in page
            .items
            .iter()
            .filter(|s| s.shard == shard && s.state != crate::ledger::ScheduleState::Archived)
        {
            let item = fire_mark::encode_catalog_entry(schedule)?;
            let mut newer_or_absent = crate::expr::Expr::new();
            newer_or_absent.any(vec![
                Cond::NotExists(PK.to_string()),
                Cond::Compare(VERSION.to_string(), Comparison::Lt, n(schedule.version)),
            ]);
            if engine.put_if(item, &newer_or_absent).await? {
                written += 1;
            }
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let bump = Write::Update {
        key: fire_mark::mark_key(shard),
        expr: fire_mark::bump_catalog(),
    };
    engine.write(bump, Returning::Nothing, false).await?;
    Ok(written)
}
