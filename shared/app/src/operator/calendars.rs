//! Calendars: list, read, put (create, or replace under the version it is based on) and
//! delete (refused while a schedule that is not archived names it), each change audited
//! under the caller with its note. An edit changes the future only: the paths that create
//! runs read the calendars when they plan a window, and a run already recorded keeps what
//! it was.

use cronledger_contract::{
    CalendarAuditEntryView, CalendarAuditLog, CalendarDeleted, CalendarList, CalendarView,
};
use cronledger_core::calendar::{read_calendar, unknown_calendars, CalendarSpec};
use cronledger_core::{Issue, ScheduleSpec};
use cronledger_ledger::StoreError;
use serde_json::Value;

use super::Operator;
use crate::api::{Actor, ApiError, ApiResult};

/// A calendar put: its document, and the version it replaces (`None`: a create).
#[derive(Debug, Clone)]
pub struct CalendarChange {
    /// `{exclude: [DATE | "DATE..DATE"]}`.
    pub document: Value,
    /// The version the change is based on (the api's `If-Match`); `None` creates it.
    pub version: Option<u64>,
    /// Why (the audit note).
    pub note: String,
}

/// What a put did.
#[derive(Debug, Clone)]
pub struct CalendarPut {
    pub calendar: CalendarView,
    /// A new calendar (no version was given), not a replacement.
    pub created: bool,
}

/// The calendar document as the body gives it, with the core's codes; fields are named as
/// in the body (`exclude`).
fn read_document(name: &str, document: &Value) -> ApiResult<CalendarSpec> {
    read_calendar(name, document, "").map_err(|issues| {
        let issues: Vec<Issue> = issues
            .into_iter()
            .map(|mut issue| {
                issue.field = issue.field.trim_start_matches('.').to_string();
                issue
            })
            .collect();
        ApiError::issues(&issues)
    })
}

impl Operator {
    /// Every calendar, by name.
    pub async fn calendars(&self) -> ApiResult<CalendarList> {
        let stored = self.deps().store.list_calendars().await?;
        Ok(CalendarList {
            items: stored.iter().map(CalendarView::from).collect(),
            next: None,
        })
    }

    pub async fn calendar(&self, name: &str) -> ApiResult<CalendarView> {
        let stored = self.deps().store.get_calendar(name).await?;
        Ok(CalendarView::from(&stored))
    }

    /// Creates a calendar (no version given) or replaces it under the version the change
    /// is based on, audited.
    pub async fn put_calendar(
        &self,
        actor: &Actor,
        name: &str,
        change: CalendarChange,
    ) -> ApiResult<CalendarPut> {
        let spec = read_document(name, &change.document)?;
        let meta = self.api.meta(actor, change.note);
        let stored = self
            .deps()
            .store
            .put_calendar(name, spec, change.version, meta)
            .await?;
        Ok(CalendarPut {
            calendar: CalendarView::from(&stored),
            created: change.version.is_none(),
        })
    }

    /// Deletes a calendar (at `version` when given), audited; refused with CALENDAR_IN_USE
    /// while a schedule that is not archived names it.
    pub async fn delete_calendar(
        &self,
        actor: &Actor,
        name: &str,
        version: Option<u64>,
        note: String,
    ) -> ApiResult<CalendarDeleted> {
        let meta = self.api.meta(actor, note);
        let entry = self
            .deps()
            .store
            .delete_calendar(name, version, meta)
            .await?;
        Ok(CalendarDeleted {
            name: entry.name,
            version: entry.version,
        })
    }

    /// A calendar's audit log, oldest first; kept after a delete (a name that never had a
    /// calendar is CALENDAR_NOT_FOUND).
    pub async fn calendar_audit(&self, name: &str) -> ApiResult<CalendarAuditLog> {
        let entries = self.deps().store.calendar_audit(name).await?;
        if entries.is_empty() {
            return Err(StoreError::CalendarNotFound(name.to_string()).into());
        }
        Ok(CalendarAuditLog {
            calendar: name.to_string(),
            entries: entries.iter().map(CalendarAuditEntryView::from).collect(),
        })
    }
}

impl Operator {
    /// Refuses (422 CALENDAR_UNKNOWN, naming `calendars[i]`) a schedule that names a
    /// calendar not stored: one read of every calendar, only when it names any.
    pub(super) async fn check_calendars(&self, spec: &ScheduleSpec) -> ApiResult<()> {
        if spec.calendars.is_empty() {
            return Ok(());
        }
        let stored = self.deps().store.calendars().await?;
        let issues = unknown_calendars(&spec.calendars, &|name| stored.contains(name), "");
        if issues.is_empty() {
            Ok(())
        } else {
            let placed: Vec<Issue> = issues
                .into_iter()
                .map(|issue| issue.in_schedule(Some(&spec.id), None))
                .collect();
            Err(ApiError::issues(&placed))
        }
    }
}
