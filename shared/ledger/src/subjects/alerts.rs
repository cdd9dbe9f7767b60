//! Recorded alerts and the trackers of held work (see [`crate::alerts`],
//! [`crate::codec::alert`] and [`crate::codec::awaiting`]), written once over the item
//! engine. An alert is one item in its schedule's partition, recorded by a put that only
//! takes a free (or expired) key, and listed in the `active` index's `ALERTS#OUTBOX`
//! partition until published; a tracker likewise, listed by its next reminder.

use chrono::{DateTime, Utc};
use cronledger_core::alerts::Alert;

use crate::alerts::{Awaiting, RecordedAlert};
use crate::codec::alert as codec;
use crate::codec::awaiting as awaiting_codec;
use crate::engine::{query_all, ItemEngine};
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{s, time};
use crate::keys::{self, GSI2PK, GSI2SK, PK, SK};
use crate::subjects::system::unless_live;

/// Most outbox entries one `unpublished_alerts` reads (DynamoDB's Query limit).
pub const OUTBOX_PAGE_MAX: u32 = 1000;

/// Most trackers one `awaiting_due` reads (DynamoDB's Query limit).
pub const AWAITING_PAGE_MAX: u32 = 1000;

pub async fn record<E: ItemEngine + ?Sized>(
    engine: &E,
    alert: &Alert,
    at: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let recorded = RecordedAlert::unpublished(alert, at);
    engine
        .put_if(codec::encode(&recorded)?, &unless_live(at))
        .await
}

/// Sets `published_at` once and takes the outbox entry away. A record that is gone (never
/// made, or expired and deleted) is left gone: the condition keeps the update from
/// creating a bare item.
pub async fn published<E: ItemEngine + ?Sized>(
    engine: &E,
    alert: &Alert,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut expr = Expr::new();
    expr.set_if_absent(codec::PUBLISHED_AT, time(at))
        .remove(GSI2PK)
        .remove(GSI2SK)
        .exists(PK);
    engine.update_if(codec::alert_key(alert), &expr).await?;
    Ok(())
}

/// One page of the outbox, oldest first; the index projects keys only, so the records are
/// then read (eventually consistent, as fresh as the index) and those published or gone
/// meanwhile are left out.
pub async fn unpublished<E: ItemEngine + ?Sized>(
    engine: &E,
    limit: u32,
) -> Result<Vec<RecordedAlert>, StoreError> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut cond = Expr::new();
    cond.eq(GSI2PK, s(keys::ALERTS_OUTBOX_PK));
    let (entries, _) = engine
        .query_page(
            Some(keys::ACTIVE_INDEX),
            &cond,
            limit.min(OUTBOX_PAGE_MAX),
            None,
            true,
        )
        .await?;
    let items = engine.fetch_items(&entries).await?;
    let mut waiting = Vec::with_capacity(items.len());
    for item in &items {
        let recorded = codec::decode(item)?;
        if recorded.published_at.is_none() {
            waiting.push(recorded);
        }
    }
    Ok(waiting)
}

/// Every alert of the schedule (a schedule has few: one per condition, kept 30 days), then
/// newest first.
pub async fn of_schedule<E: ItemEngine + ?Sized>(
    engine: &E,
    schedule: &str,
    limit: u32,
) -> Result<Vec<RecordedAlert>, StoreError> {
    let mut cond = Expr::new();
    cond.eq(PK, s(keys::schedule_pk(schedule)))
        .begins_with(SK, s(keys::ALERT_PREFIX));
    let items = query_all(engine, None, &cond).await?;
    let alerts = items
        .iter()
        .map(codec::decode)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(codec::newest_first(alerts, limit))
}

pub async fn track<E: ItemEngine + ?Sized>(
    engine: &E,
    awaiting: &Awaiting,
    at: DateTime<Utc>,
) -> Result<bool, StoreError> {
    engine
        .put_if(awaiting_codec::encode(awaiting)?, &unless_live(at))
        .await
}

/// One index page of the due trackers, then their items (keys-only index).
pub async fn due<E: ItemEngine + ?Sized>(
    engine: &E,
    now: DateTime<Utc>,
    limit: u32,
) -> Result<Vec<Awaiting>, StoreError> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut cond = Expr::new();
    cond.eq(GSI2PK, s(keys::ALERTS_AWAITING_PK))
        .lt(GSI2SK, s(keys::due_sk_bound(now)));
    let (entries, _) = engine
        .query_page(
            Some(keys::ACTIVE_INDEX),
            &cond,
            limit.min(AWAITING_PAGE_MAX),
            None,
            true,
        )
        .await?;
    let items = engine.fetch_items(&entries).await?;
    let mut due = items
        .iter()
        .map(awaiting_codec::decode)
        .collect::<Result<Vec<_>, _>>()?;
    // The items are as fresh as the table: one moved on meanwhile is not due.
    due.retain(|a| a.remind_at <= now);
    due.sort_by_key(awaiting_codec::index_sk);
    Ok(due)
}

/// The next reminder: the item put again with its new time, only while it is there (a
/// racing pass that dropped it wins). No next one: the item goes.
pub async fn remind<E: ItemEngine + ?Sized>(
    engine: &E,
    awaiting: &Awaiting,
    next: Option<DateTime<Utc>>,
) -> Result<(), StoreError> {
    let Some(next) = next else {
        let key = awaiting_codec::awaiting_key(&awaiting.schedule, &awaiting.group);
        return engine.delete_item(key).await;
    };
    let moved = Awaiting {
        remind_at: next,
        ..awaiting.clone()
    };
    let mut there = Expr::new();
    there.exists(PK);
    engine
        .put_if(awaiting_codec::encode(&moved)?, &there)
        .await
        .map(|_| ())
}
