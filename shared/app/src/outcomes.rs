//! What follows a run's terminal transition, whoever wrote it: the ticker (a window
//! recorded SKIPPED at its fire), the worker (an attempt's end, a run it skipped or gave
//! up), the reconciler (missed and dependent windows, approvals that timed out) and the
//! api (an operator's cancel or reject). Each of them calls [`ended`] with the run as
//! written, so a schedule's health counts every window once, however it ended. A held
//! window folded into a backfill (COALESCED by an approval) is not counted: the
//! backfill's run for the window counts it when it ends.

use chrono::{DateTime, Utc};
use cronledger_aws::{HealthStore, Outcome};
use cronledger_core::{Run, Span};
use cronledger_ledger::health::outcome_of;

/// Counts `run` (just written terminal by the caller's conditional write, so once) on its
/// schedule's day counters: a range record counts each window it stands for. `slo`: the
/// schedule's `slo.within`, which decides whether a success was fresh. A failure to count
/// is logged: health is a view, never a reason to undo what was recorded.
pub async fn ended(
    health: Option<&dyn HealthStore>,
    run: &Run,
    slo: Option<Span>,
    now: DateTime<Utc>,
) {
    let Some(health) = health else {
        return;
    };
    let ended_at = run.completed_at.unwrap_or(now);
    let Some(outcome) = outcome_of(run.status, run.key.scheduled_for, ended_at, slo) else {
        return;
    };
    // A range record (SKIPPED or COALESCED) stands for `count` windows; a run for one.
    let windows = match outcome {
        Outcome::Skipped => u64::from(run.count.max(1)),
        _ => 1,
    };
    let day = run.key.scheduled_for.date_naive();
    if let Err(e) = health
        .count_outcome(&run.key.schedule_id, day, outcome, windows)
        .await
    {
        tracing::warn!(run = %run.key, error = %e, "could not count the run's end for its schedule's health");
    }
}
