//! Calendars as stored: named lists of excluded local dates that schedules name in their
//! `calendars`. Every calendar lives in one partition (`PK=CALENDARS`,
//! `SK=CALENDAR#{name}`), so the paths that create runs read them all with one Query. Each
//! change is versioned (optimistic lock) and audited in its own transaction, under the
//! calendar's own partition (`PK=CALENDAR#{name}`, `SK=AUDIT#{version}`), which outlives a
//! delete: a calendar created again under a deleted one's name continues its versions.
//!
//! An edit changes the future only: runs already recorded keep what they were, and the
//! paths that create runs read the calendars as they are when they plan a window.

use chrono::{DateTime, Utc};
use cronledger_core::calendar::{CalendarSet, CalendarSpec};
use cronledger_core::named_enum;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::layer::store_trait;
use crate::ledger::ChangeMeta;

/// A calendar as stored: its spec, its version (the optimistic lock) and its last change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCalendar {
    pub name: String,
    pub spec: CalendarSpec,
    /// 1 for the first version; never reused, not even after a delete.
    pub version: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub updated_by: String,
}

named_enum!(
    /// What a calendar's audit entry records.
    CalendarAction {
        Create => "CREATE",
        Update => "UPDATE",
        Delete => "DELETE",
    }
);

/// One audited change of a calendar: the spec before and after (`None` before a create and
/// after a delete), who, why, when, and the version it produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalendarAuditEntry {
    pub name: String,
    pub version: u64,
    pub action: CalendarAction,
    pub actor: String,
    pub note: String,
    pub at: DateTime<Utc>,
    pub before: Option<CalendarSpec>,
    pub after: Option<CalendarSpec>,
}

store_trait! {
    /// Calendars: the named exclusions schedules refer to, versioned and audited.
    pub trait CalendarStore {
    /// Every stored calendar, by name (one strongly consistent Query of one partition).
    async fn calendars(&self) -> Result<CalendarSet, StoreError>;

    /// Every stored calendar with its version, by name (the same one Query).
    async fn list_calendars(&self) -> Result<Vec<StoredCalendar>, StoreError>;

    /// `CALENDAR_NOT_FOUND` when there is none by that name.
    async fn get_calendar(&self, name: &str) -> Result<StoredCalendar, StoreError>;

    /// Creates the calendar (`expected_version` `None`: `CALENDAR_ALREADY_EXISTS` when the
    /// name is taken) or replaces it if the stored version is `expected_version` (else
    /// `CALENDAR_VERSION_CONFLICT`; `CALENDAR_NOT_FOUND` when there is none), audited in the
    /// same transaction.
    async fn put_calendar(
        &self,
        name: &str,
        spec: CalendarSpec,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredCalendar, StoreError>;

    /// Deletes the calendar (at `expected_version` when given), audited in the same
    /// transaction; `CALENDAR_IN_USE` while a schedule that is not archived names it.
    /// Answers the delete's audit entry.
    async fn delete_calendar(
        &self,
        name: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<CalendarAuditEntry, StoreError>;

    /// The calendar's audit log, oldest first (it outlives a delete; empty for a name that
    /// never had a calendar).
    async fn calendar_audit(&self, name: &str) -> Result<Vec<CalendarAuditEntry>, StoreError>;
}
}

/// The calendar a put stores: version 1 past `last_version` for a create (the audit's last
/// version, so a name used before continues its versions), the next version of `current`
/// for a replace.
pub fn put(
    name: &str,
    spec: CalendarSpec,
    current: Option<&StoredCalendar>,
    last_version: u64,
    meta: &ChangeMeta,
) -> StoredCalendar {
    StoredCalendar {
        name: name.to_string(),
        spec,
        version: current.map_or(last_version, |c| c.version) + 1,
        created_at: current.map_or(meta.at, |c| c.created_at),
        updated_at: meta.at,
        updated_by: meta.actor.clone(),
    }
}

/// Whether a put or delete may apply to what is stored: a create only where there is none,
/// a change only at the version the caller expects (none given, for a delete: whatever is
/// current).
pub fn check_put(
    name: &str,
    current: Option<&StoredCalendar>,
    expected_version: Option<u64>,
) -> Result<(), StoreError> {
    match (current, expected_version) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(StoreError::CalendarNotFound(name.to_string())),
        (Some(c), None) => Err(StoreError::CalendarAlreadyExists {
            name: name.to_string(),
            version: c.version,
        }),
        (Some(c), Some(expected)) => check_version(c, expected),
    }
}

pub fn check_version(current: &StoredCalendar, expected: u64) -> Result<(), StoreError> {
    if current.version == expected {
        Ok(())
    } else {
        Err(StoreError::CalendarVersionConflict {
            name: current.name.clone(),
            expected,
            actual: current.version,
        })
    }
}

/// The audit entry of a put: a create or an update.
pub fn put_entry(
    before: Option<&StoredCalendar>,
    after: &StoredCalendar,
    meta: &ChangeMeta,
) -> CalendarAuditEntry {
    CalendarAuditEntry {
        name: after.name.clone(),
        version: after.version,
        action: if before.is_some() {
            CalendarAction::Update
        } else {
            CalendarAction::Create
        },
        actor: meta.actor.clone(),
        note: meta.reason.clone(),
        at: meta.at,
        before: before.map(|b| b.spec.clone()),
        after: Some(after.spec.clone()),
    }
}

/// The audit entry of a delete, at the version after the deleted one.
pub fn delete_entry(current: &StoredCalendar, meta: &ChangeMeta) -> CalendarAuditEntry {
    CalendarAuditEntry {
        name: current.name.clone(),
        version: current.version + 1,
        action: CalendarAction::Delete,
        actor: meta.actor.clone(),
        note: meta.reason.clone(),
        at: meta.at,
        before: Some(current.spec.clone()),
        after: None,
    }
}
