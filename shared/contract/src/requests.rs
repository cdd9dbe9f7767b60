//! Request bodies. Each refuses fields it does not know (400/422 naming the field), so a
//! typo in a client is an error, not a silently ignored setting.

use chrono::{DateTime, Utc};
use cronledger_ledger::ops::{PauseConditions, Reprocess};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest note kept; longer ones are cut.
pub const NOTE_MAX_CHARS: usize = 1000;

/// `{"note": "why"}`: the audit reason of a lever.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Note {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1000))]
    pub note: Option<String>,
}

impl Note {
    pub fn new(note: impl Into<String>) -> Note {
        Note {
            note: Some(note.into()),
        }
    }

    /// The note trimmed and cut to [`NOTE_MAX_CHARS`], or `default` when there is none.
    pub fn text(&self, default: &str) -> String {
        self.note
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .unwrap_or(default)
            .chars()
            .take(NOTE_MAX_CHARS)
            .collect()
    }
}

/// Whether an operator's run reuses its window's existing run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Answer with the window's existing run when there is one (ALREADY_DONE applies).
    #[default]
    Reuse,
    /// Always a new run, forced past ALREADY_DONE.
    New,
}

/// Run now (trigger MANUAL).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunNowRequest {
    #[serde(default)]
    pub mode: Mode,
    /// The occurrence whose window to run (default: the latest at or before now); it must be
    /// a fire time of the schedule (else 422 SCHEDULED_FOR_NOT_AN_OCCURRENCE), so the run's
    /// window and idempotency key are the occurrence's own.
    // Written even when null: an `Idempotency-Key`'s body hash is of this serialization.
    #[serde(default)]
    pub scheduled_for: Option<DateTime<Utc>>,
    #[serde(default)]
    pub note: Option<String>,
}

/// A one-off MANUAL run at a future instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunAtRequest {
    pub at: DateTime<Utc>,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_for: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Which job a retried run executes from now on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Definition {
    /// The job of the version the run was created under (or last re-pinned to).
    #[default]
    Original,
    /// The schedule's current job: the run is re-pinned to the current version.
    Current,
}

/// Retry a FAILED (or STALLED) run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default)]
    pub definition: Definition,
    /// When the retried run of an expected window ends SUCCESS, each dependent window that
    /// was SKIPPED (UPSTREAM_NOT_SUCCEEDED) for it is re-opened, down the chain (default
    /// `true`); `false` leaves them skipped.
    #[serde(default = "cascades")]
    pub cascade: bool,
}

fn cascades() -> bool {
    true
}

impl Default for RetryRequest {
    fn default() -> Self {
        RetryRequest {
            note: None,
            definition: Definition::default(),
            cascade: cascades(),
        }
    }
}

/// A backfill over `[from, to]` (or, with `dry_run`, its plan).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Default `missing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reprocess: Option<Reprocess>,
    /// Runs in flight at most (1-100, default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub concurrency: Option<u32>,
    /// Runs released a pass at most (1-500, default 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 500))]
    pub batch_size: Option<u32>,
    /// Runs released a minute at most (above 0, default 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_minute: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_when: Option<PauseConditions>,
    #[serde(default)]
    pub dry_run: bool,
    /// As each of the backfill's runs ends, re-run the same window of the schedules that run
    /// after this one (and theirs), under the same backfill.
    #[serde(default)]
    pub cascade: bool,
    /// The backfill's own source of each window's expected `{count, checksum}` (an http,
    /// lambda or noop target, as a schedule's `verify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Value>,
    /// USD its runs may cost (at the cost model's prices): an estimate over it is refused
    /// (422 BACKFILL_OVER_BUDGET); a measured spend reaching it pauses the backfill (BUDGET).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Calls to the target its runs may make: over it refused, reaching it paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_target_calls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Stop (`engaged: true`) or restart all automatic firing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillSwitchRequest {
    pub engaged: bool,
    /// Why (required, not blank).
    pub note: String,
}

/// The next fire times of a schedule document (nothing saved).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    /// A schedule document, as in a manifest.
    #[schemars(schema_with = "crate::schemas::schedule_document_ref")]
    pub schedule: Value,
    /// How many (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// After this instant (default now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<DateTime<Utc>>,
}

/// An audit of `[from, to)` now (`POST /v1/audit/runs`, and the auditor function's on-demand
/// event): every schedule's, or one's. Its findings are published as the daily pass's are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditRunRequest {
    /// RFC3339; windows scheduled at or after it.
    pub from: DateTime<Utc>,
    /// RFC3339, not after now; windows scheduled before it.
    pub to: DateTime<Utc>,
    /// One schedule's id (default: every schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}
