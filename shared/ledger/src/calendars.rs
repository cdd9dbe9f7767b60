//! Calendars as stored: named lists of excluded local dates that schedules name in their
//! `calendars`. Every calendar lives in one partition (`PK=CALENDARS`,
//! `SK=CALENDAR#{name}`), so the paths that create runs read them all with one Query.

use chrono::{DateTime, Utc};
use cronledger_core::calendar::{CalendarSet, CalendarSpec};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::layer::store_trait;

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

store_trait! {
    /// Calendars: the named exclusions schedules refer to.
    pub trait CalendarStore {
    /// Every stored calendar, by name (one strongly consistent Query of one partition).
    async fn calendars(&self) -> Result<CalendarSet, StoreError>;
}
}
