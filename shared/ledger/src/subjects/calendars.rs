//! Calendars (see [`crate::calendars`]), written once over the item engine. Each is one
//! item in the `CALENDARS` partition holding its whole document, so one Query reads them
//! all; its audit entries live under its own partition (`CALENDAR#{name}`), one per
//! version, written in the change's transaction.

use std::collections::BTreeMap;

use cronledger_core::calendar::{CalendarSet, CalendarSpec};

use crate::calendars::{self as rules, CalendarAuditEntry, StoredCalendar};
use crate::engine::{query_all, ItemEngine, Write};
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{key, n, s, Item, ItemReader, ItemWriter};
use crate::keys::{self, PK, SK};
use crate::ledger::{ChangeMeta, ScheduleState};

const TYPE: &str = "type";
const DOC: &str = "doc";
const VERSION: &str = "version";
const CALENDAR_TYPE: &str = "CALENDAR";
const CALENDAR_AUDIT_TYPE: &str = "CALENDAR_AUDIT";
/// The partition every calendar lives in.
pub const CALENDARS_PK: &str = "CALENDARS";
const CALENDAR_PREFIX: &str = "CALENDAR#";
/// Tries of a create whose name was taken and freed again meanwhile.
const PUT_TRIES: u32 = 3;
/// Schedules read per page by the in-use check.
const IN_USE_PAGE: u32 = 200;

fn calendar_key(name: &str) -> Item {
    key(CALENDARS_PK.to_string(), format!("{CALENDAR_PREFIX}{name}"))
}

/// The partition of a calendar's audit log.
fn audit_pk(name: &str) -> String {
    format!("{CALENDAR_PREFIX}{name}")
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::InvalidRequest(e.to_string()))
}

fn encode_calendar(c: &StoredCalendar) -> Result<Item, StoreError> {
    Ok(ItemWriter::new()
        .s(PK, CALENDARS_PK)
        .s(SK, format!("{CALENDAR_PREFIX}{}", c.name))
        .s(TYPE, CALENDAR_TYPE)
        .n(VERSION, c.version)
        .s(DOC, to_json(c)?)
        .build())
}

fn decode_calendar(item: &Item) -> Result<StoredCalendar, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, CALENDAR_TYPE)?;
    let mut calendar: StoredCalendar = r.json(DOC)?;
    // The attribute is the truth the conditions test.
    calendar.version = r.n(VERSION)?;
    Ok(calendar)
}

fn encode_audit(e: &CalendarAuditEntry) -> Result<Item, StoreError> {
    Ok(ItemWriter::new()
        .s(PK, audit_pk(&e.name))
        .s(SK, keys::audit_sk(e.version))
        .s(TYPE, CALENDAR_AUDIT_TYPE)
        .n(VERSION, e.version)
        .s(DOC, to_json(e)?)
        .build())
}

fn decode_audit(item: &Item) -> Result<CalendarAuditEntry, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, CALENDAR_AUDIT_TYPE)?;
    r.json(DOC)
}

fn absent() -> Expr {
    let mut cond = Expr::new();
    cond.not_exists(PK);
    cond
}

fn at_version(version: u64) -> Expr {
    let mut cond = Expr::new();
    cond.eq(VERSION, n(version));
    cond
}

/// The audit entry's write: one per version, ever (a second writer at the same version
/// fails here too).
fn audit_put(entry: &CalendarAuditEntry) -> Result<Write, StoreError> {
    Ok(Write::Put {
        item: encode_audit(entry)?,
        cond: absent(),
    })
}

fn audit_query(name: &str) -> Expr {
    let mut cond = Expr::new();
    cond.eq(PK, s(audit_pk(name)))
        .begins_with(SK, s(keys::AUDIT_PREFIX));
    cond
}

/// Every stored calendar: one Query of the `CALENDARS` partition (followed page by page).
pub async fn all<E: ItemEngine + ?Sized>(engine: &E) -> Result<Vec<StoredCalendar>, StoreError> {
    let mut cond = Expr::new();
    cond.eq(PK, s(CALENDARS_PK))
        .begins_with(SK, s(CALENDAR_PREFIX));
    let items = query_all(engine, None, &cond).await?;
    items.iter().map(decode_calendar).collect()
}

/// The calendars in force, by name.
pub async fn set<E: ItemEngine + ?Sized>(engine: &E) -> Result<CalendarSet, StoreError> {
    let by_name: BTreeMap<_, _> = all(engine)
        .await?
        .into_iter()
        .map(|c| (c.name, c.spec))
        .collect();
    Ok(CalendarSet(by_name))
}

async fn read<E: ItemEngine + ?Sized>(
    engine: &E,
    name: &str,
) -> Result<Option<StoredCalendar>, StoreError> {
    engine
        .get_item(calendar_key(name))
        .await?
        .as_ref()
        .map(decode_calendar)
        .transpose()
}

pub async fn get<E: ItemEngine + ?Sized>(
    engine: &E,
    name: &str,
) -> Result<StoredCalendar, StoreError> {
    read(engine, name)
        .await?
        .ok_or_else(|| StoreError::CalendarNotFound(name.to_string()))
}

/// The last version the name's audit log records (0: never used): one Query, newest first.
async fn last_version<E: ItemEngine + ?Sized>(engine: &E, name: &str) -> Result<u64, StoreError> {
    let page = engine
        .query(None, &audit_query(name), 1, None, false)
        .await?;
    page.items
        .first()
        .map(|item| ItemReader::new(item).n(VERSION))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// Creates or replaces the calendar with its audit entry, in one transaction conditioned on
/// what was read (absent, or at the version read).
pub async fn put<E: ItemEngine + ?Sized>(
    engine: &E,
    name: &str,
    spec: CalendarSpec,
    expected_version: Option<u64>,
    meta: ChangeMeta,
) -> Result<StoredCalendar, StoreError> {
    for _ in 0..PUT_TRIES {
        let current = read(engine, name).await?;
        rules::check_put(name, current.as_ref(), expected_version)?;
        let last = match &current {
            Some(_) => 0,
            None => last_version(engine, name).await?,
        };
        let next = rules::put(name, spec.clone(), current.as_ref(), last, &meta);
        let cond = match &current {
            Some(c) => at_version(c.version),
            None => absent(),
        };
        let entry = rules::put_entry(current.as_ref(), &next, &meta);
        let writes = vec![
            Write::Put {
                item: encode_calendar(&next)?,
                cond,
            },
            audit_put(&entry)?,
        ];
        if engine.transact(writes).await? {
            return Ok(next);
        }
        // Someone wrote in between: read again; the checks above say which case it is.
    }
    Err(StoreError::Contention(format!(
        "calendar `{name}` kept changing under the change"
    )))
}

/// The schedules, not archived, that name `name` in their `calendars`, sorted.
pub async fn users<E: ItemEngine + ?Sized>(
    engine: &E,
    name: &str,
) -> Result<Vec<String>, StoreError> {
    let mut users = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = super::schedules::list(engine, IN_USE_PAGE, cursor.as_deref()).await?;
        users.extend(
            page.items
                .into_iter()
                .filter(|s| s.state != ScheduleState::Archived)
                .filter(|s| s.spec.calendars.iter().any(|c| c == name))
                .map(|s| s.spec.id),
        );
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    users.sort();
    Ok(users)
}

/// Deletes the calendar unless a schedule that is not archived names it, with its audit
/// entry, in one transaction conditioned on the version read. (The schedules are read from
/// the catalog index, which may lag a schedule created a moment ago.)
pub async fn delete<E: ItemEngine + ?Sized>(
    engine: &E,
    name: &str,
    expected_version: Option<u64>,
    meta: ChangeMeta,
) -> Result<CalendarAuditEntry, StoreError> {
    let current = get(engine, name).await?;
    rules::check_version(&current, expected_version.unwrap_or(current.version))?;
    let users = users(engine, name).await?;
    if !users.is_empty() {
        return Err(StoreError::CalendarInUse {
            name: name.to_string(),
            schedules: users,
        });
    }
    let entry = rules::delete_entry(&current, &meta);
    let writes = vec![
        Write::Delete {
            key: calendar_key(name),
            cond: at_version(current.version),
        },
        audit_put(&entry)?,
    ];
    if engine.transact(writes).await? {
        return Ok(entry);
    }
    // It changed or went since the read.
    match read(engine, name).await? {
        Some(now) => Err(StoreError::CalendarVersionConflict {
            name: name.to_string(),
            expected: current.version,
            actual: now.version,
        }),
        None => Err(StoreError::CalendarNotFound(name.to_string())),
    }
}

/// The calendar's audit log, oldest first.
pub async fn audit<E: ItemEngine + ?Sized>(
    engine: &E,
    name: &str,
) -> Result<Vec<CalendarAuditEntry>, StoreError> {
    query_all(engine, None, &audit_query(name))
        .await?
        .iter()
        .map(decode_audit)
        .collect()
}
