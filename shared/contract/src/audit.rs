//! The completeness audit (`GET /v1/audit/completeness`, `cronledger audit`, the auditor's
//! daily pass, `simulate`'s `audit`): every expected window of every schedule in a range,
//! checked against the ledger by something that did not write it.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The audit of `[from, to)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletenessReport {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub schedules: Vec<ScheduleAudit>,
    /// The fleet's windows accounted for exactly once over its expected windows (1 when
    /// nothing was expected).
    pub completeness: f64,
    /// `missing` lists were cut at this many windows per schedule (the counts are whole);
    /// the next page starts after the last listed window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// One schedule's windows in the range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleAudit {
    pub schedule: String,
    /// Windows the schedule's versions, bounds, calendars and pauses say it had.
    pub expected: u64,
    /// Of those, windows with a ledger entry (ran, failed, skipped with a reason,
    /// coalesced, waiting or held).
    pub accounted: u64,
    /// Expected windows with no entry, oldest first (listed up to the page size).
    pub missing: Vec<DateTime<Utc>>,
    /// How many windows are missing (the list may be cut).
    pub missing_count: u64,
    /// Windows with more than one run, or more than one execution of a job not declared
    /// idempotent.
    pub duplicates: Vec<DuplicateWindow>,
    /// Entries the schedule could not have made: not a window of the version they name,
    /// or of no version at all.
    pub unexplained: Vec<UnexplainedEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DuplicateWindow {
    pub scheduled_for: DateTime<Utc>,
    /// Runs of the window that executed (an attempt started).
    pub runs: u32,
    /// Attempts started over those runs.
    pub executions: u32,
    /// RUNS (more than one run executed), EXECUTIONS (a job not declared idempotent
    /// started again after an attempt that may have acted) or ENTRIES (more than one automatic
    /// entry stands for the window).
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnexplainedEntry {
    pub scheduled_for: DateTime<Utc>,
    pub trigger: String,
    pub status: String,
    pub schedule_version: u64,
    /// NOT_A_WINDOW_OF_ITS_VERSION or UNKNOWN_VERSION.
    pub why: String,
}
