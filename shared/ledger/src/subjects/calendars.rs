//! Calendars (see [`crate::calendars`]), written once over the item engine. Each is one
//! item in the `CALENDARS` partition holding its whole document, so one Query reads them
//! all.

use std::collections::BTreeMap;

use cronledger_core::calendar::CalendarSet;

use crate::calendars::StoredCalendar;
use crate::engine::{query_all, ItemEngine};
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{s, Item, ItemReader};
use crate::keys::{PK, SK};

const TYPE: &str = "type";
const DOC: &str = "doc";
const VERSION: &str = "version";
const CALENDAR_TYPE: &str = "CALENDAR";
/// The partition every calendar lives in.
pub const CALENDARS_PK: &str = "CALENDARS";
const CALENDAR_PREFIX: &str = "CALENDAR#";

fn decode_calendar(item: &Item) -> Result<StoredCalendar, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, CALENDAR_TYPE)?;
    let mut calendar: StoredCalendar = r.json(DOC)?;
    // The attribute is the truth the conditions test.
    calendar.version = r.n(VERSION)?;
    Ok(calendar)
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
