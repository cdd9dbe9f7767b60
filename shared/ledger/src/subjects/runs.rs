//! Runs, written once over the item engine: conditional creation, guarded transitions and
//! the listings (a schedule's partition, the `active` index).

use chrono::{DateTime, Utc};
use cronledger_core::{Attempt, Run, RunKey, RunStatus, Trigger};

use crate::codec::attempt as attempts;
use crate::codec::run as codec;
use crate::codec::schedule as schedule_codec;
use crate::engine::{query_all, ItemEngine, QueryPage, Returning, Write, Written};
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{key, s, Item};
use crate::keys::{self, GSI2PK, GSI2SK, PK, SK};
use crate::ledger::{check_new_run, Created, Page, RecentRuns, RunChange, StoredSchedule};
use crate::{fire_plan, run_plan};

pub(crate) fn run_item_key(run_key: &RunKey) -> Item {
    key(
        keys::schedule_pk(&run_key.schedule_id),
        keys::run_sk(run_key),
    )
}

pub async fn create<E: ItemEngine + ?Sized>(engine: &E, run: &Run) -> Result<Created, StoreError> {
    check_new_run(run)?;
    let put = Write::Put {
        item: codec::encode(run, engine.shards()),
        cond: fire_plan::create(),
    };
    // The existing item comes back with the failure: found costs one request too.
    match engine.write(put, Returning::Nothing, true).await? {
        Written::Applied(_) => Ok(Created::New(run.clone())),
        Written::Refused(Some(item)) => Ok(Created::Existing(codec::decode(&item)?)),
        // Emulators without ALL_OLD on a failed condition: one more read.
        Written::Refused(None) => Ok(Created::Existing(get(engine, &run.key).await?)),
    }
}

pub async fn get<E: ItemEngine + ?Sized>(engine: &E, run_key: &RunKey) -> Result<Run, StoreError> {
    match engine.get_item(run_item_key(run_key)).await? {
        Some(item) => codec::decode(&item),
        None => Err(StoreError::RunNotFound(run_key.to_string())),
    }
}

/// The run and its attempt history, from the one item.
pub async fn get_with_attempts<E: ItemEngine + ?Sized>(
    engine: &E,
    run_key: &RunKey,
) -> Result<(Run, Vec<Attempt>), StoreError> {
    match engine.get_item(run_item_key(run_key)).await? {
        Some(item) => Ok((codec::decode(&item)?, attempts::decode(&item)?)),
        None => Err(StoreError::RunNotFound(run_key.to_string())),
    }
}

pub async fn transition<E: ItemEngine + ?Sized>(
    engine: &E,
    run_key: &RunKey,
    change: &RunChange,
) -> Result<Run, StoreError> {
    // Refused before any request.
    let to = change.target()?;
    let update = Write::Update {
        key: run_item_key(run_key),
        expr: run_plan::transition(run_key, change, to, engine.shards())?,
    };
    let stored = match engine.write(update, Returning::AllNew, true).await? {
        Written::Applied(Some(item)) => return codec::decode(&item),
        Written::Applied(None) => return get(engine, run_key).await,
        Written::Refused(Some(item)) => Some(codec::decode(&item)?),
        // No item comes back when there is none: one more read tells a missing run from a
        // conflict.
        Written::Refused(None) => match get(engine, run_key).await {
            Ok(run) => Some(run),
            Err(StoreError::RunNotFound(_)) => None,
            Err(e) => return Err(e),
        },
    };
    Err(run_plan::refusal(run_key, change, stored))
}

pub async fn active<E: ItemEngine + ?Sized>(
    engine: &E,
    shard: u32,
    status: Option<RunStatus>,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<Run>, StoreError> {
    let mut cond = Expr::new();
    cond.eq(GSI2PK, s(keys::active_pk(shard)));
    let (entries, next) = engine
        .query_page(Some(keys::ACTIVE_INDEX), &cond, limit, cursor, true)
        .await?;
    let mut items = fetch_active(engine, &entries).await?;
    // The entries say nothing about status: the page keeps the wanted one.
    items.retain(|r| status.is_none_or(|wanted| r.status == wanted));
    Ok(Page { items, next })
}

pub async fn history<E: ItemEngine + ?Sized>(
    engine: &E,
    schedule_id: &str,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<Run>, StoreError> {
    let mut cond = Expr::new();
    cond.eq(PK, s(keys::schedule_pk(schedule_id)))
        .begins_with(SK, s(keys::RUN_PREFIX));
    let (items, next) = engine.query_page(None, &cond, limit, cursor, false).await?;
    Ok(Page {
        items: decode_all(&items)?,
        next,
    })
}

pub async fn recent<E: ItemEngine + ?Sized>(
    engine: &E,
    schedule_id: &str,
    limit: u32,
    at: Option<DateTime<Utc>>,
) -> Result<RecentRuns, StoreError> {
    let mut expr = Expr::new();
    expr.eq(PK, s(keys::schedule_pk(schedule_id)))
        .begins_with(SK, s(keys::RUN_PREFIX));
    recent_runs_filter(&mut expr, at);
    let out = engine.query(None, &expr, limit, None, false).await?;
    recent_runs_of(&out, &out.items)
}

/// The schedule's item and its newest runs in one descending query: the schedule's sort
/// key follows every run's, so it comes first and the page follows it.
pub async fn schedule_with_recent<E: ItemEngine + ?Sized>(
    engine: &E,
    schedule_id: &str,
    limit: u32,
    at: Option<DateTime<Utc>>,
) -> Result<(StoredSchedule, RecentRuns), StoreError> {
    let mut expr = Expr::new();
    expr.eq(PK, s(keys::schedule_pk(schedule_id))).between(
        SK,
        s(keys::RUN_PREFIX),
        s(keys::SCHEDULE_SK),
    );
    recent_runs_filter(&mut expr, at);
    expr.or_one_of(schedule_codec::TYPE, [s(schedule_codec::SCHEDULE_TYPE)]);
    let out = engine
        .query(None, &expr, limit.saturating_add(1), None, false)
        .await?;
    let items = &out.items;
    let is_schedule = |item: &Item| {
        item.get(SK)
            .and_then(|sk| sk.as_s().ok())
            .map(String::as_str)
            == Some(keys::SCHEDULE_SK)
    };
    let stored = match items.first().filter(|item| is_schedule(item)) {
        Some(item) => schedule_codec::decode(item)?,
        None => return Err(StoreError::ScheduleNotFound(schedule_id.to_string())),
    };
    Ok((stored, recent_runs_of(&out, &items[1..])?))
}

pub async fn pending_live<E: ItemEngine + ?Sized>(
    engine: &E,
    shard: u32,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: u32,
) -> Result<Vec<Run>, StoreError> {
    // One page of the shard's entries with windows in range (text order is time order),
    // PENDING live triggers only: catch-up runs wait there for their release.
    let low = keys::index_time(from);
    let high = format!("{}$", keys::index_time(to));
    let mut expr = Expr::new();
    expr.eq(GSI2PK, s(keys::active_pk(shard)))
        .between(GSI2SK, s(low), s(high));
    let (entries, _) = engine
        .query_page(Some(keys::ACTIVE_INDEX), &expr, limit, None, true)
        .await?;
    Ok(fetch_active(engine, &entries)
        .await?
        .into_iter()
        .filter(|r| matches!(r.trigger, Trigger::Scheduled | Trigger::Manual))
        .filter(|r| r.status == RunStatus::Pending)
        .filter(|r| from <= r.key.scheduled_for && r.key.scheduled_for <= to)
        .collect())
}

pub async fn running_before<E: ItemEngine + ?Sized>(
    engine: &E,
    schedule_id: &str,
    before: DateTime<Utc>,
) -> Result<Vec<Run>, StoreError> {
    // The shard's live entries through `before`'s second (text order is time order), kept
    // to this schedule's, RUNNING, and windows before `before`: few in a healthy system,
    // however long the schedule's history (the fleet's live runs are mostly ahead of it).
    let shard = keys::shard_of(schedule_id, engine.shards());
    let high = format!("{}$", keys::index_time(before));
    let mut expr = Expr::new();
    expr.eq(GSI2PK, s(keys::active_pk(shard)))
        .le(GSI2SK, s(high));
    // The entry's sort key names the schedule: only its entries are fetched.
    let ours = format!("#{schedule_id}#{}", keys::RUN_PREFIX);
    let entries: Vec<Item> = query_all(engine, Some(keys::ACTIVE_INDEX), &expr)
        .await?
        .into_iter()
        .filter(|e| {
            e.get(GSI2SK)
                .and_then(|v| v.as_s().ok())
                .is_some_and(|sk| sk.contains(&ours))
        })
        .collect();
    Ok(fetch_active(engine, &entries)
        .await?
        .into_iter()
        .filter(|r| r.key.schedule_id == schedule_id && r.status == RunStatus::Running)
        .filter(|r| r.key.scheduled_for < before)
        .collect())
}

pub async fn between<E: ItemEngine + ?Sized>(
    engine: &E,
    schedule_id: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<Run>, StoreError> {
    // Bounds on whole seconds without the `Z`, so every text form of an instant in range
    // (fractions, operator suffixes) sorts inside; exact bounds are applied after.
    let low = format!("{}{}", keys::RUN_PREFIX, keys::whole_second(from));
    let high = format!("{}{}~", keys::RUN_PREFIX, keys::whole_second(to));
    let mut cond = Expr::new();
    cond.eq(PK, s(keys::schedule_pk(schedule_id)))
        .between(SK, s(low), s(high));
    let runs = decode_all(&query_all(engine, None, &cond).await?)?;
    Ok(runs
        .into_iter()
        .filter(|r| from <= r.key.scheduled_for && r.key.scheduled_for <= to)
        .collect())
}

/// The runs behind `active` entries that are still active (the index lags the table).
async fn fetch_active<E: ItemEngine + ?Sized>(
    engine: &E,
    entries: &[Item],
) -> Result<Vec<Run>, StoreError> {
    Ok(decode_all(&engine.fetch_items(entries).await?)?
        .into_iter()
        .filter(|r| r.status.is_active())
        .collect())
}

fn decode_all(items: &[Item]) -> Result<Vec<Run>, StoreError> {
    items.iter().map(codec::decode).collect()
}

/// Keeps the runs the newest-runs checks use: those in flight and, with `at`, those in
/// `at`'s second.
fn recent_runs_filter(expr: &mut Expr, at: Option<DateTime<Utc>>) {
    let active = RunStatus::ALL.iter().filter(|status| status.is_active());
    expr.or_one_of(codec::STATUS, active.map(|status| s(status.as_str())));
    if let Some(at) = at {
        expr.or_begins_with(codec::SCHEDULED_FOR, s(keys::whole_second(at)));
    }
}

/// The page `runs` came from, with how far back its read looked.
fn recent_runs_of(out: &QueryPage, runs: &[Item]) -> Result<RecentRuns, StoreError> {
    // Where the read stopped: the sort key of the last run it looked at, filtered or not.
    let stopped_at = out
        .last_key
        .as_ref()
        .and_then(|k| k.get(SK))
        .and_then(|sk| sk.as_s().ok());
    Ok(RecentRuns {
        runs: decode_all(runs)?,
        complete: out.last_key.is_none(),
        oldest_read: stopped_at.and_then(|sk| keys::run_sk_instant(sk)),
    })
}
