//! A running backfill's budget: what its finished runs cost (measured from their durations
//! and attempts, at the prices its estimate used), and the pause when that reaches a cap.
//! `max_target_calls` also bounds what a pass releases (the calls made, and one a run for the
//! runs in flight, count against it); retries can still pass it by their extra attempts.
//! `max_cost_usd` is judged on finished runs, so the runs in flight when it is reached (at
//! most `concurrency`) still end and may pass it by their cost.

use chrono::{DateTime, Utc};
use cronledger_aws::{Backfill, BackfillState};
use cronledger_core::alerts::{self, About, Alert};
use cronledger_core::estimate::{BudgetCap, Spend};
use cronledger_core::{Run, RunStatus, ScheduleSpec};
use cronledger_ledger::ops::BackfillPauseReason;

use super::{in_group, is_own, Counts};
use crate::cost;

/// What the backfill's executed runs cost.
pub(super) fn measure(spec: &ScheduleSpec, runs: &[Run], b: &Backfill) -> Spend {
    let executed: Vec<&Run> = runs
        .iter()
        .filter(|r| is_own(r, &b.id) || in_group(r, b))
        .filter(|r| {
            matches!(
                r.status,
                RunStatus::Success | RunStatus::PartialSuccess | RunStatus::Failed
            )
        })
        .collect();
    cost::estimate::spent(spec, &executed)
}

/// Runs the target-call cap still allows to be released, after the calls `spent` made and
/// one a run (a step each) for the runs in flight (`None`: no such cap).
pub(super) fn runs_left(
    b: &Backfill,
    spec: &ScheduleSpec,
    spent: &Spend,
    counts: &Counts,
) -> Option<u64> {
    let cap = b.budget.caps.max_target_calls?;
    let per_run = cost::estimate::job_cost(spec, &[]).calls_per_run.max(1);
    let left = cap.saturating_sub(spent.target_calls) / per_run;
    Some(left.saturating_sub(counts.in_flight()))
}

/// The caps `spent` has reached.
pub(super) fn reached(b: &Backfill, spent: &Spend) -> Vec<BudgetCap> {
    b.budget.caps.reached_by(spent.cost_usd, spent.target_calls)
}

/// Pauses `b` for its budget; what `held` and the alert say.
pub(super) fn pause(b: &mut Backfill, spent: &Spend, reached: &[BudgetCap]) -> String {
    let caps = &b.budget.caps;
    let said: Vec<String> = reached
        .iter()
        .map(|cap| match cap {
            BudgetCap::MaxCostUsd => format!(
                "spent ${:.4} of max_cost_usd ${:.4}",
                spent.cost_usd,
                caps.max_cost_usd.unwrap_or_default()
            ),
            BudgetCap::MaxTargetCalls => format!(
                "made {} of max_target_calls {}",
                spent.target_calls,
                caps.max_target_calls.unwrap_or_default()
            ),
        })
        .collect();
    let cause = format!("BUDGET: {}", said.join(", "));
    b.state = BackfillState::Paused;
    b.held = Some(cause.clone());
    b.budget.pause_reason = Some(BackfillPauseReason::Budget);
    cause
}

/// BACKFILL_PAUSED for the backfill's budget, to its schedule's subscribers.
pub(super) fn alert(spec: &ScheduleSpec, b: &Backfill, cause: &str, now: DateTime<Utc>) -> Alert {
    alerts::backfill_paused(&About::of(spec), &format!("backfill {}", b.id), cause, now)
}
