//! Replays as the api takes and shows them: the request (a filter of runs to retry), a dry
//! run's plan and a replay's progress.

use chrono::{DateTime, Utc};
use cronledger_core::estimate::{Budget, BudgetCap, Estimate};
use cronledger_core::run::RunStatus;
use cronledger_ledger::ops::{BackfillLimits, BackfillState};
use cronledger_ledger::replays::ReplayApprovalReason;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Retry every run matching a filter: runs of `schedule` (or of every schedule `owner`
/// owns) scheduled in `[from, to)` whose status is one of `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Statuses to retry: FAILED and STALLED (the statuses a retry reopens).
    pub status: Vec<RunStatus>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Answer the plan and its estimate; nothing is written.
    #[serde(default)]
    pub dry_run: bool,
    /// Retry runs of schedules with `idempotent: false` too (they are listed either way).
    #[serde(default)]
    pub include_non_idempotent: bool,
    /// USD the retries may cost at most (estimated): over it the replay is refused
    /// (REPLAY_OVER_BUDGET).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// A retried run that ends SUCCESS re-opens the dependent windows skipped for it
    /// (default `true`).
    #[serde(default = "cascades")]
    pub cascade: bool,
}

fn cascades() -> bool {
    true
}

/// One run a replay matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRun {
    pub schedule: String,
    /// The run's id in `/v1/schedules/{id}/runs/{run}`.
    pub run: String,
    pub scheduled_for: DateTime<Utc>,
    /// Its status when matched.
    pub status: RunStatus,
    pub idempotent: bool,
    pub side_effects: bool,
}

/// A dry run: the runs a replay would retry, the non-idempotent ones it leaves out, whether
/// it would wait for approval, and what it would cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayPlan {
    /// Always `true`.
    pub dry_run: bool,
    pub schedule: Option<String>,
    pub owner: Option<String>,
    pub status: Vec<RunStatus>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// The runs it would retry.
    pub size: u64,
    pub runs: Vec<ReplayRun>,
    /// Matched runs of non-idempotent schedules: retried only with
    /// `include_non_idempotent: true` (then they are in `runs` too).
    pub non_idempotent: Vec<ReplayRun>,
    pub approval_required: bool,
    pub approval_reasons: Vec<ReplayApprovalReason>,
    /// The backfill throttle the retries are released at.
    pub limits: BackfillLimits,
    pub cascade: bool,
    pub estimate: Estimate,
    pub budget: Budget,
    /// The caps the estimate goes over: the replay itself would be refused
    /// (REPLAY_OVER_BUDGET). Empty: within budget.
    pub over_budget: Vec<BudgetCap>,
}

/// A replay's progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayView {
    pub id: String,
    /// RUNNING, PAUSED (held for approval), CANCELLED or DONE.
    pub state: BackfillState,
    /// Why it is held (APPROVAL_REQUIRED and the reasons); `null` while releasing.
    pub held: Option<String>,
    pub approval_required: bool,
    pub approval_reasons: Vec<ReplayApprovalReason>,
    pub approved_by: Option<String>,
    pub approved_at: Option<DateTime<Utc>>,
    pub schedule: Option<String>,
    pub owner: Option<String>,
    pub status: Vec<RunStatus>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub include_non_idempotent: bool,
    pub cascade: bool,
    pub limits: BackfillLimits,
    /// Runs it retries.
    pub total: u64,
    /// Runs retried so far.
    pub released: u64,
    /// Retried and not ended yet.
    pub in_flight: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// Passed over (no longer in a status of the filter when their turn came) or ended
    /// otherwise (cancelled, skipped, held).
    pub skipped: u64,
    /// Not retried yet.
    pub remaining: u64,
    /// Runs retried a minute since it was created.
    pub rate_per_minute: f64,
    pub eta: Option<DateTime<Utc>>,
    pub runs: Vec<ReplayRun>,
    pub non_idempotent: Vec<ReplayRun>,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    pub note: String,
    pub version: u64,
}
