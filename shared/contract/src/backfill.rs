//! Backfills as the api shows them: progress, the open list, a dry run's plan and a
//! verification of a range against the ledger.

use chrono::{DateTime, Utc};
use cronledger_core::run::{RunKey, RunStatus, Trigger};
use cronledger_ledger::ops::{
    ApprovalReason, BackfillLimits, BackfillPauseReason, BackfillState, PauseConditions, Reprocess,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Page;

/// What a backfill, a catch-up proposal or a plan would cost before it runs (and a running
/// backfill's measured spend); see `cronledger_core::estimate`.
pub use cronledger_core::estimate::{Budget, BudgetCap, Estimate, Spend};

/// A backfill's progress: counts, rate and ETA.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillView {
    pub id: String,
    pub schedule: String,
    pub state: BackfillState,
    /// Why it is held right now (a pause condition, or APPROVAL_REQUIRED and the reasons);
    /// `null` while releasing.
    pub held: Option<String>,
    /// Waiting for an admin's approval before anything of it starts.
    pub approval_required: bool,
    pub approval_reasons: Vec<ApprovalReason>,
    pub approved_by: Option<String>,
    pub approved_at: Option<DateTime<Utc>>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub reprocess: Reprocess,
    pub limits: BackfillLimits,
    pub pause_when: PauseConditions,
    /// Every window at or before this has been written or passed over.
    pub cursor: Option<DateTime<Utc>>,
    /// Occurrences in the range.
    pub total_windows: u64,
    /// Windows the reprocess filter selected.
    pub total: u64,
    /// Runs written so far.
    pub written: u64,
    pub queued: u64,
    pub running: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub skipped: u64,
    pub awaiting_approval: u64,
    pub remaining: u64,
    /// Windows finished a minute since it was created.
    pub rate_per_minute: f64,
    pub eta: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    pub note: String,
    /// The MANUAL_REQUIRED range record whose approval created it.
    pub source_record: Option<RunKey>,
    /// A backfill the reconciler proposed for a long gap: the gap's replay group.
    pub replay_group: Option<String>,
    /// Its caps (`max_cost_usd`, `max_target_calls`); empty: none.
    #[serde(default)]
    pub budget: Budget,
    /// What its selected windows were estimated to cost when it was created.
    #[serde(default)]
    pub estimate: Option<Estimate>,
    /// What its finished runs cost, as the last release pass measured them.
    #[serde(default)]
    pub spent: Option<Spend>,
    /// Why the release paused it: BUDGET when its spend reached a cap (`null` otherwise).
    #[serde(default)]
    pub pause_reason: Option<BackfillPauseReason>,
    pub version: u64,
}

/// One open backfill in the list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillSummary {
    pub id: String,
    pub schedule: String,
    pub state: BackfillState,
    pub held: Option<String>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub total: u64,
    pub written: u64,
    pub created_by: String,
}

pub type BackfillList = Page<BackfillSummary>;

/// A dry run: what a backfill would cover, and whether it would wait for approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillPlan {
    /// Always `true`.
    pub dry_run: bool,
    pub schedule: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub reprocess: Reprocess,
    pub limits: BackfillLimits,
    /// Occurrences in the range.
    pub total_windows: u64,
    /// Windows the reprocess filter selects.
    pub size: u64,
    pub approval_required: bool,
    pub approval_reasons: Vec<ApprovalReason>,
    /// Over this many windows a side-effecting schedule's backfill waits for an admin.
    pub approval_over: u64,
    /// The first 1,000 selected windows.
    pub windows: Vec<DateTime<Utc>>,
    /// What the selected windows would cost and when they would be done.
    pub estimate: Estimate,
    /// The caps asked for.
    #[serde(default)]
    pub budget: Budget,
    /// The caps the estimate goes over: the backfill itself would be refused
    /// (BACKFILL_OVER_BUDGET). Empty: within budget.
    #[serde(default)]
    pub over_budget: Vec<BudgetCap>,
}

/// Expected windows against the ledger: every count, and one page of the problem windows
/// and of the reported ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verification {
    pub backfill: String,
    pub schedule: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub expected_windows: u64,
    pub succeeded: u64,
    pub missing: u64,
    pub failed: u64,
    pub not_run: u64,
    pub in_flight: u64,
    /// Succeeded, with a count or checksum the `verify` source did not expect.
    pub mismatched: u64,
    /// Succeeded, and the `verify` source did not answer.
    pub unverified: u64,
    /// Every expected window succeeded (and matched its source).
    pub complete: bool,
    /// The reported counts summed over every window.
    pub reported_count_total: u64,
    pub problems: Vec<Problem>,
    pub reported: Vec<Reported>,
    pub problems_total: u64,
    pub reported_total: u64,
    /// Either list has more than this page.
    pub truncated: bool,
    pub next_cursor: Option<String>,
}

/// A window that is not accounted for as succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    pub scheduled_for: DateTime<Utc>,
    /// MISSING, FAILED, NOT_RUN, IN_FLIGHT, MISMATCH or UNVERIFIED.
    pub problem: String,
    pub statuses: Vec<RunStatus>,
    /// MISMATCH: what the source expected (`{count, checksum}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Value>,
    /// MISMATCH: what the job reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported: Option<Value>,
}

/// A succeeded window with what its job reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reported {
    pub scheduled_for: DateTime<Utc>,
    pub status: RunStatus,
    pub trigger: Trigger,
    pub count: Option<u64>,
    pub checksum: Option<String>,
}
