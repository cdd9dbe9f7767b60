//! Schedules as the api shows them: one schedule, its preview, a proposed change's risk and
//! its audit log.

use chrono::{DateTime, Utc};
use cronledger_core::health::Health;
use cronledger_core::risk::RiskReport;
use cronledger_core::timing::DstNote;
use cronledger_core::ScheduleSpec;
use cronledger_ledger::ledger::{AuditAction, Pause, ScheduleState};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::Page;

/// One stored schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleView {
    pub id: String,
    pub version: u64,
    pub state: ScheduleState,
    /// The timing in words, with its zone; `null` for an expression that no longer parses
    /// (stored before a rule tightened).
    pub describe: Option<String>,
    /// The spec as stored (an http url's credentials, stored before they were refused, are
    /// redacted).
    pub spec: ScheduleSpec,
    /// The earliest window not yet started (a run written ahead of its fire time and still
    /// waiting counts); `null` when it never fires again.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The last instant a window may fall on (`end_at`, or the last of `max_runs` windows);
    /// absent when unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<DateTime<Utc>>,
    /// Every window up to here is accounted for in the ledger.
    pub reconciled_through: DateTime<Utc>,
    /// The schedules that run after this one, as the reconciler last kept them.
    pub downstream: Vec<String>,
    pub pauses: Vec<Pause>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The schedule's health; `null` where the api keeps no counters; absent with
    /// `?health=false` and in answers to changes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub health: Option<Option<Health>>,
}

/// A field that is there, possibly `null` (`Some(None)`), apart from one left out (`None`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

pub type SchedulePage = Page<ScheduleView>;

/// The next fire times of a schedule, with DST notes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Preview {
    pub schedule: String,
    pub cron: String,
    pub timezone: String,
    pub describe: String,
    pub after: DateTime<Utc>,
    /// The schedule's `jitter` offset: each occurrence fires this much later.
    pub jitter_offset_seconds: i64,
    pub fire_times: Vec<PreviewTime>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewTime {
    /// The occurrence (its window and key are this instant's).
    pub at: DateTime<Utc>,
    /// The occurrence in the schedule's zone, `YYYY-MM-DD HH:MM:SS ZONE`.
    pub local: String,
    pub dst: Option<DstNote>,
    /// `dst` in words.
    pub dst_note: Option<String>,
    /// When the ticker fires it (`at` plus the jitter offset).
    pub fire_at: DateTime<Utc>,
    /// Its local date is excluded (the schedule's `exclude` or a calendar it names): the
    /// window is recorded SKIPPED (EXCLUDED) and does not run.
    #[serde(default)]
    pub excluded: bool,
}

/// A proposed spec's risk against the stored one (nothing saved).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeDiff {
    pub schedule: String,
    /// The stored version the report compares with.
    pub version: u64,
    pub report: RiskReport,
}

/// One page of a schedule's audit log, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditLog {
    pub schedule: String,
    pub entries: Vec<AuditEntryView>,
    /// Entries over every page.
    pub total: u64,
    pub next: Option<String>,
}

/// A versioned change of a schedule, or an operator's action on its runs and backfills.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditEntryView {
    /// The version the change produced; for an operator's action, the version it was taken
    /// under.
    pub version: u64,
    pub action: AuditAction,
    pub actor: String,
    /// The note given with it.
    pub reason: String,
    pub at: DateTime<Utc>,
    /// The spec before (a change), redacted; `null` for a create or an operator's action.
    pub before: Option<Value>,
    pub after: Value,
    /// What an operator's action was on (`run`, `backfill`, ...) and its particulars.
    pub details: Option<Value>,
}
