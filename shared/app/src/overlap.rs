//! The overlap reads: which of a schedule's runs are still in flight or waiting, whatever
//! created them (the rule book, `cronledger_core::admission`, weighs them). The ticker asks
//! when it writes a window that is already due, a dependent's window when it is created, the
//! worker again when a run starts (things moved since), and the release when a run ends.

use cronledger_aws::{LedgerStore, StoreError};
use cronledger_core::overlap::ActiveRun;
use cronledger_core::{Run, RunStatus};
use cronledger_ledger::ledger::RecentRuns;

/// The schedule's runs still in flight or waiting, of any trigger: overlap is mutual
/// exclusion, so a running catch-up, backfill or dependent run holds the schedule's turn too.
pub async fn active_runs_of(
    store: &dyn LedgerStore,
    schedule_id: &str,
) -> Result<Vec<ActiveRun>, StoreError> {
    let recent = store.recent_runs(schedule_id, RECENT_RUNS, None).await?;
    active_before(store, schedule_id, &recent).await
}

/// The runs in flight among `recent`, and, when that page stopped short of the
/// schedule's first run and shows none running, the runs still RUNNING before it: a job
/// that outlives more windows than the page holds (each recorded SKIPPED behind it) would
/// otherwise drop out of sight and the next window would start beside it. Those come from
/// the active index, eventually consistent, which is enough for runs older than the page.
/// Runs waiting (not running) before the page are not looked for: under QUEUE_NEW the runs
/// queued behind them fill the page, so the page is never without an active run then.
pub async fn active_before(
    store: &dyn LedgerStore,
    schedule_id: &str,
    recent: &RecentRuns,
) -> Result<Vec<ActiveRun>, StoreError> {
    let mut active = active_among(&recent.runs);
    let running_seen = active.iter().any(|r| r.status == RunStatus::Running);
    let before = match recent.oldest_read {
        Some(before) if !recent.complete && !running_seen => before,
        _ => return Ok(active),
    };
    for run in store.running_before(schedule_id, before).await? {
        if !active.iter().any(|a| a.key == run.key) {
            active.push(ActiveRun::of(&run));
        }
    }
    Ok(active)
}

/// How many of a schedule's newest runs the overlap checks read.
pub const RECENT_RUNS: u32 = 25;

/// The runs still in flight or waiting among `recent` (see [`active_runs_of`]).
pub fn active_among<'a>(recent: impl IntoIterator<Item = &'a Run>) -> Vec<ActiveRun> {
    recent
        .into_iter()
        .filter(|r| ActiveRun::counts(r))
        .map(ActiveRun::of)
        .collect()
}
