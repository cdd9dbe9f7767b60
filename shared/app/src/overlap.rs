//! The overlap reads: which of a schedule's live runs are still in flight. The ticker asks
//! when it writes a window that is already due, the worker again when a run starts (things
//! moved since), and the worker's QUEUE_NEW release when a run ends.

use cronledger_aws::ledger::RecentRuns;
use cronledger_aws::{LedgerStore, StoreError};
use cronledger_core::overlap::ActiveRun;
use cronledger_core::{Reason, Run, RunStatus, Trigger};

/// The schedule's live runs (SCHEDULED or MANUAL) still in flight: the runs the overlap
/// policy is about. Catch-up and backfill runs are paced by their own release budgets and
/// never make live work skip or wait (invariant 7).
pub async fn active_runs_of(
    store: &dyn LedgerStore,
    schedule_id: &str,
) -> Result<Vec<ActiveRun>, StoreError> {
    let recent = store.recent_runs(schedule_id, RECENT_RUNS, None).await?;
    live_active_before(store, schedule_id, &recent).await
}

/// The live runs in flight among `recent`, and, when that page stopped short of the
/// schedule's first run and shows none running, the live runs still RUNNING before it: a job
/// that outlives more windows than the page holds (each recorded SKIPPED behind it) would
/// otherwise drop out of sight and the next window would start beside it. Those come from
/// the active index, eventually consistent, which is enough for runs older than the page.
/// Runs waiting (not running) before the page are not looked for: under QUEUE_NEW the runs
/// queued behind them fill the page, so the page is never without an active run then.
pub async fn live_active_before(
    store: &dyn LedgerStore,
    schedule_id: &str,
    recent: &RecentRuns,
) -> Result<Vec<ActiveRun>, StoreError> {
    let mut active = live_active(&recent.runs);
    let running_seen = active.iter().any(|r| r.status == RunStatus::Running);
    let before = match recent.oldest_read {
        Some(before) if !recent.complete && !running_seen => before,
        _ => return Ok(active),
    };
    for run in store.running_before(schedule_id, before).await? {
        if is_live(run.trigger) && !active.iter().any(|a| a.key == run.key) {
            active.push(ActiveRun {
                key: run.key,
                status: run.status,
            });
        }
    }
    Ok(active)
}

/// How many of a schedule's newest runs the overlap checks read.
pub const RECENT_RUNS: u32 = 25;

/// The live runs still in flight among `recent` (see [`active_runs_of`]). A late run
/// parked for the reconciler's plan of its gap (LATE_AWAITING_PLAN) is catch-up work in
/// waiting, not live work: it holds nothing back.
pub fn live_active(recent: &[Run]) -> Vec<ActiveRun> {
    recent
        .iter()
        .filter(|r| {
            r.status.is_active() && is_live(r.trigger) && r.reason != Some(Reason::LateAwaitingPlan)
        })
        .map(|r| ActiveRun {
            key: r.key.clone(),
            status: r.status,
        })
        .collect()
}

/// Live work: what the overlap policy governs.
pub fn is_live(trigger: Trigger) -> bool {
    matches!(trigger, Trigger::Scheduled | Trigger::Manual)
}
