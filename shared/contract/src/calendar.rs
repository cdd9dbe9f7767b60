//! Calendars as the api shows them (`/v1/calendars`): one calendar, the list, a delete's
//! answer and a calendar's audit log. A calendar is written as its document,
//! `{exclude: [DATE | "DATE..DATE"]}` ([`CalendarSpec`]).

use chrono::{DateTime, Utc};
use cronledger_core::calendar::{CalendarSpec, DateSel};
use cronledger_ledger::calendars::{CalendarAction, CalendarAuditEntry, StoredCalendar};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Page;

/// One stored calendar (`ETag` = its version).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarView {
    pub name: String,
    pub version: u64,
    /// The local dates (in each schedule's own zone) schedules naming it do not run.
    pub exclude: Vec<DateSel>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Who made the current version.
    pub updated_by: String,
}

impl From<&StoredCalendar> for CalendarView {
    fn from(c: &StoredCalendar) -> CalendarView {
        CalendarView {
            name: c.name.clone(),
            version: c.version,
            exclude: c.spec.exclude.clone(),
            created_at: c.created_at,
            updated_at: c.updated_at,
            updated_by: c.updated_by.clone(),
        }
    }
}

impl CalendarView {
    /// The calendar's document, as a manifest and a put write it.
    pub fn spec(&self) -> CalendarSpec {
        CalendarSpec {
            exclude: self.exclude.clone(),
        }
    }
}

/// Every calendar, by name (one page: `next` is always `null`).
pub type CalendarList = Page<CalendarView>;

/// A calendar deleted: the version its delete recorded in its audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarDeleted {
    pub name: String,
    pub version: u64,
}

/// A calendar's audit log, oldest first (kept after a delete).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarAuditLog {
    pub calendar: String,
    pub entries: Vec<CalendarAuditEntryView>,
}

/// One change of a calendar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarAuditEntryView {
    /// The version the change produced (a delete's is the one after the deleted version).
    pub version: u64,
    pub action: CalendarAction,
    pub actor: String,
    /// The note given with it (`Cronledger-Note`).
    pub note: String,
    pub at: DateTime<Utc>,
    /// The calendar before; `null` for a create.
    pub before: Option<CalendarSpec>,
    /// The calendar after; `null` for a delete.
    pub after: Option<CalendarSpec>,
}

impl From<&CalendarAuditEntry> for CalendarAuditEntryView {
    fn from(e: &CalendarAuditEntry) -> CalendarAuditEntryView {
        CalendarAuditEntryView {
            version: e.version,
            action: e.action,
            actor: e.actor.clone(),
            note: e.note.clone(),
            at: e.at,
            before: e.before.clone(),
            after: e.after.clone(),
        }
    }
}
