//! Schedules, written once over the item engine: audited, optimistic-locked changes, the
//! audit log and operators' actions, the catalog, the ticker's `due` index and the marks the
//! reconciler and the worker move.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use chrono::{DateTime, Utc};
use cronledger_core::ScheduleSpec;

use crate::codec::schedule as codec;
use crate::engine::{query_all, ItemEngine, Returning, Write, Written};
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{key, n, s, time, Item};
use crate::keys::{self, GSI1PK, GSI1SK, GSI3PK, PK, SK};
use crate::ledger::{
    AuditAction, AuditEntry, ChangeMeta, OperatorAction, Page, StoredSchedule, StreakChange,
};
use crate::schedule_change as change;
use crate::{fire_mark, fire_plan, schedule_marks};

/// Tries of a read-modify-write whose condition failed because a concurrent writer changed
/// a field the caller did not ask about (the ticker moved `next_run_at`).
const CHANGE_TRIES: u32 = 5;

pub(crate) fn schedule_key(id: &str) -> Item {
    key(keys::schedule_pk(id), keys::SCHEDULE_SK)
}

fn absent() -> Expr {
    let mut absent = Expr::new();
    absent.not_exists(PK);
    absent
}

pub async fn create<E: ItemEngine + ?Sized>(
    engine: &E,
    spec: ScheduleSpec,
    meta: ChangeMeta,
) -> Result<StoredSchedule, StoreError> {
    let schedule = change::created(spec, &meta, engine.shards())?;
    let mut writes = vec![
        Write::Put {
            item: codec::encode(&schedule)?,
            cond: absent(),
        },
        audit_put(AuditAction::Create, None, &schedule, &meta)?,
    ];
    writes.extend(catalog_writes(None, &schedule)?);
    if engine.transact(writes).await? {
        Ok(schedule)
    } else {
        Err(StoreError::ScheduleAlreadyExists(schedule.id().to_string()))
    }
}

pub async fn update<E: ItemEngine + ?Sized>(
    engine: &E,
    spec: ScheduleSpec,
    expected_version: u64,
    meta: ChangeMeta,
) -> Result<StoredSchedule, StoreError> {
    let id = spec.id.clone();
    let apply = |current: &StoredSchedule| change::updated(current, &spec, &meta);
    change_with(
        engine,
        &id,
        Some(expected_version),
        &meta,
        AuditAction::Update,
        apply,
    )
    .await
}

pub async fn pause<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
    expected_version: Option<u64>,
    meta: ChangeMeta,
) -> Result<StoredSchedule, StoreError> {
    let apply = |current: &StoredSchedule| change::paused(current, &meta);
    change_with(
        engine,
        id,
        expected_version,
        &meta,
        AuditAction::Pause,
        apply,
    )
    .await
}

pub async fn resume<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
    expected_version: Option<u64>,
    meta: ChangeMeta,
) -> Result<StoredSchedule, StoreError> {
    let apply = |current: &StoredSchedule| change::resumed(current, &meta);
    change_with(
        engine,
        id,
        expected_version,
        &meta,
        AuditAction::Resume,
        apply,
    )
    .await
}

pub async fn archive<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
    expected_version: Option<u64>,
    meta: ChangeMeta,
) -> Result<StoredSchedule, StoreError> {
    let action = AuditAction::Archive;
    change_with(
        engine,
        id,
        expected_version,
        &meta,
        action,
        change::archived,
    )
    .await
}

/// Read, apply, write back at version + 1 with its audit entry, in one transaction.
///
/// The write is conditioned on the version read and on the fields the ticker and the
/// reconciler move (`next_run_at`, `reconciled_through`), so it can replace the whole item
/// without undoing their work. When only those moved, the change is re-applied to the fresh
/// item; when the version moved, it is a `SCHEDULE_VERSION_CONFLICT`.
async fn change_with<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
    expected_version: Option<u64>,
    meta: &ChangeMeta,
    action: AuditAction,
    apply: impl Fn(&StoredSchedule) -> Result<StoredSchedule, StoreError>,
) -> Result<StoredSchedule, StoreError> {
    for _ in 0..CHANGE_TRIES {
        let current = get(engine, id).await?;
        change::check_changeable(&current, expected_version)?;
        let mut next = apply(&current)?;
        next.version = current.version + 1;
        next.updated_at = meta.at;

        let mut unchanged = Expr::new();
        unchanged
            .eq(codec::VERSION, n(current.version))
            .eq_or_absent(codec::NEXT_RUN_AT, current.next_run_at.map(time))
            .eq(codec::RECONCILED_THROUGH, time(current.reconciled_through));
        let mut writes = vec![
            Write::Put {
                item: codec::encode(&next)?,
                cond: unchanged,
            },
            audit_put(action, Some(&current), &next, meta)?,
        ];
        writes.extend(catalog_writes(Some(&current), &next)?);
        if engine.transact(writes).await? {
            return Ok(next);
        }
        // Someone wrote in between: read again and decide which case it is.
    }
    Err(StoreError::Contention(format!(
        "schedule `{id}` kept changing under the edit"
    )))
}

/// A change's writes to the shards' catalogs (see [`crate::fire_mark`]), in its transaction:
/// the schedule's copy replaced (removed once archived, moved when its shard changed) and
/// each catalog it touched at a new version, so every ticker reads it again.
fn catalog_writes(
    before: Option<&StoredSchedule>,
    after: &StoredSchedule,
) -> Result<Vec<Write>, StoreError> {
    let mut writes = Vec::new();
    let archived = after.state == crate::ledger::ScheduleState::Archived;
    if archived {
        writes.push(Write::Delete {
            key: fire_mark::catalog_entry_key(after.shard, after.id()),
            cond: Expr::new(),
        });
    } else {
        writes.push(Write::Put {
            item: fire_mark::encode_catalog_entry(after)?,
            cond: Expr::new(),
        });
    }
    writes.push(Write::Update {
        key: fire_mark::mark_key(after.shard),
        expr: fire_mark::bump_catalog(),
    });
    if let Some(before) = before.filter(|b| b.shard != after.shard) {
        writes.push(Write::Delete {
            key: fire_mark::catalog_entry_key(before.shard, before.id()),
            cond: Expr::new(),
        });
        writes.push(Write::Update {
            key: fire_mark::mark_key(before.shard),
            expr: fire_mark::bump_catalog(),
        });
    }
    Ok(writes)
}

/// The change's audit entry: one per version, ever (a second writer at the same version
/// fails here too).
fn audit_put(
    action: AuditAction,
    before: Option<&StoredSchedule>,
    after: &StoredSchedule,
    meta: &ChangeMeta,
) -> Result<Write, StoreError> {
    let entry = change::change_entry(action, before, after, meta);
    Ok(Write::Put {
        item: codec::encode_audit(&entry, keys::audit_sk(entry.version))?,
        cond: absent(),
    })
}

pub async fn get<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
) -> Result<StoredSchedule, StoreError> {
    match engine.get_item(schedule_key(id)).await? {
        Some(item) => codec::decode(&item),
        None => Err(StoreError::ScheduleNotFound(id.to_string())),
    }
}

pub async fn list<E: ItemEngine + ?Sized>(
    engine: &E,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<StoredSchedule>, StoreError> {
    let mut cond = Expr::new();
    cond.eq(GSI3PK, s(keys::CATALOG_PK));
    let (entries, next) = engine
        .query_page(Some(keys::CATALOG_INDEX), &cond, limit, cursor, true)
        .await?;
    let items = engine.fetch_items(&entries).await?;
    Ok(Page {
        items: items.iter().map(codec::decode).collect::<Result<_, _>>()?,
        next,
    })
}

pub async fn audit_log<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
) -> Result<Vec<AuditEntry>, StoreError> {
    let mut cond = Expr::new();
    cond.eq(PK, s(keys::schedule_pk(id)))
        .begins_with(SK, s(keys::AUDIT_PREFIX));
    query_all(engine, None, &cond)
        .await?
        .iter()
        .map(codec::decode_audit)
        .collect()
}

/// One GetItem on `AUDIT#{version}`: every change writes that entry, with the spec it
/// produced, in the change's own transaction, so a version the schedule ever had is
/// readable there for as long as the schedule exists.
pub async fn spec_at<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
    version: u64,
) -> Result<ScheduleSpec, StoreError> {
    match engine
        .get_item(key(keys::schedule_pk(id), keys::audit_sk(version)))
        .await?
    {
        Some(item) => codec::decode_audit_spec(&item),
        None => Err(StoreError::VersionNotFound {
            id: id.to_string(),
            version,
        }),
    }
}

/// Reads the current version (so the entry sorts after that version's change), then puts
/// the entry. An action changes no version, so it never races a schedule edit's
/// transaction; one that lands during an edit sorts under the version it read.
pub async fn record_operator_action<E: ItemEngine + ?Sized>(
    engine: &E,
    action: &OperatorAction,
) -> Result<AuditEntry, StoreError> {
    let version = get(engine, &action.schedule_id).await?.version;
    let entry = change::operator_entry(action, version);
    let tag = RandomState::new().hash_one((&action.actor, action.at.timestamp_micros()));
    let sk = keys::operator_audit_sk(
        version,
        action.at,
        action.action.as_str(),
        (tag & 0xffff_ffff) as u32,
    );
    if engine
        .put_if(codec::encode_audit(&entry, sk)?, &absent())
        .await?
    {
        Ok(entry)
    } else {
        Err(StoreError::InvalidRequest(
            "an operator action with the same instant and tag is already recorded".into(),
        ))
    }
}

fn due_by(shard: u32, until: DateTime<Utc>) -> Expr {
    let mut cond = Expr::new();
    cond.eq(GSI1PK, s(keys::due_pk(shard)))
        .lt(GSI1SK, s(keys::due_sk_bound(until)));
    cond
}

pub async fn due<E: ItemEngine + ?Sized>(
    engine: &E,
    shard: u32,
    until: DateTime<Utc>,
    limit: u32,
) -> Result<Vec<StoredSchedule>, StoreError> {
    let cond = due_by(shard, until);
    // A query page holds at most 1,000 items (or 1 MB): follow the pages, or every schedule
    // past the first page of a shard would miss its window.
    let mut items = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let want = limit.saturating_sub(items.len() as u32);
        if want == 0 {
            break;
        }
        let (mut page, cursor) = engine
            .query_page(Some(keys::DUE_INDEX), &cond, want, next.as_deref(), true)
            .await?;
        items.append(&mut page);
        match cursor {
            Some(c) => next = Some(c),
            None => break,
        }
    }
    fetch_due(engine, &items, until).await
}

pub async fn due_page<E: ItemEngine + ?Sized>(
    engine: &E,
    shard: u32,
    until: DateTime<Utc>,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<StoredSchedule>, StoreError> {
    let cond = due_by(shard, until);
    let (entries, next) = engine
        .query_page(Some(keys::DUE_INDEX), &cond, limit, cursor, true)
        .await?;
    Ok(Page {
        items: fetch_due(engine, &entries, until).await?,
        next,
    })
}

/// The schedules behind `due` entries that are still due by `until` (the index lags the
/// table: another ticker may have fired one meanwhile).
async fn fetch_due<E: ItemEngine + ?Sized>(
    engine: &E,
    entries: &[Item],
    until: DateTime<Utc>,
) -> Result<Vec<StoredSchedule>, StoreError> {
    let bound = keys::due_sk_bound(until);
    let mut due = Vec::with_capacity(entries.len());
    for item in engine.fetch_items(entries).await? {
        let stored = codec::decode(&item)?;
        if codec::due_keys(&stored).is_some_and(|(_, sk)| sk < bound) {
            due.push(stored);
        }
    }
    Ok(due)
}

pub async fn advance_next_run<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
    expected: DateTime<Utc>,
    next: Option<DateTime<Utc>>,
) -> Result<bool, StoreError> {
    let expr = fire_plan::advance(id, expected, next, engine.shards());
    engine.update_if(schedule_key(id), &expr).await
}

pub async fn advance_watermark<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
    expected: DateTime<Utc>,
    through: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let expr = schedule_marks::watermark(id, expected, through)?;
    engine.update_if(schedule_key(id), &expr).await
}

pub async fn set_downstream<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
    downstream: &[String],
) -> Result<(), StoreError> {
    let expr = schedule_marks::downstream(downstream)?;
    if engine.update_if(schedule_key(id), &expr).await? {
        Ok(())
    } else {
        Err(StoreError::ScheduleNotFound(id.to_string()))
    }
}

/// Failed: one more, answering the new value. Succeeded: `SET failure_streak = 0` only when
/// the caller's copy of the schedule showed a streak (the worker passes what it read), so a
/// healthy run writes nothing; here it is written unconditionally and answers 0.
pub async fn count_failure_streak<E: ItemEngine + ?Sized>(
    engine: &E,
    id: &str,
    change: StreakChange,
) -> Result<u32, StoreError> {
    let update = Write::Update {
        key: schedule_key(id),
        expr: schedule_marks::failure_streak(change),
    };
    match engine.write(update, Returning::UpdatedNew, false).await? {
        Written::Applied(new) => Ok(new
            .as_ref()
            .and_then(|new| new.get(codec::FAILURE_STREAK))
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)),
        Written::Refused(_) => Err(StoreError::ScheduleNotFound(id.to_string())),
    }
}
