//! Windows of schedules that run `after` others (their "dependents"). The ticker never
//! fires them; a window is recorded once its upstreams' runs for it have ended:
//!
//! - every upstream succeeded: the window's run is created PENDING (trigger DEPENDENCY)
//!   and sent to its lane;
//! - an upstream ended without succeeding: the window is recorded SKIPPED
//!   (UPSTREAM_NOT_SUCCEEDED), so it stays accounted, and its own dependents follow;
//! - an upstream has not ended it yet: nothing.
//!
//! Two deciders share this: the worker, as an upstream's run ends (the dependent starts
//! at once), and the reconciler each pass, for every window the worker did not get to
//! (a crash, a window skipped before it reached a worker, a range record). The create is
//! conditional on the run's key, so every window is recorded once whoever gets there.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chrono::{DateTime, Utc};
use cronledger_aws::ledger::ScheduleState;
use cronledger_aws::{Created, LaneError, LaneQueue, LedgerStore, StoreError};
use cronledger_core::dependency::{readiness, Readiness};
use cronledger_core::run::Origin;
use cronledger_core::{Lane, Reason, Run, RunKey, RunStatus, Schedule, ScheduleSpec, Trigger};

/// What [`record_window`] did.
#[derive(Debug)]
pub enum Recorded {
    /// An upstream has not ended the window: nothing was written.
    Waiting,
    /// This call created the window's entry (PENDING to send, or SKIPPED).
    Created(Run),
    /// The window was recorded before (by another decider).
    Existing(Run),
}

/// The window at `at` of `schedule` (version `version`), recorded as `readiness` says.
pub async fn record_window(
    store: &dyn LedgerStore,
    schedule: &Schedule,
    version: u64,
    at: DateTime<Utc>,
    readiness: &Readiness,
    now: DateTime<Utc>,
) -> Result<Recorded, StoreError> {
    let mut run = schedule.pending_run(
        at,
        schedule.window_for(at),
        Origin::Expected,
        Trigger::Dependency,
        now,
        version,
    );
    match readiness {
        Readiness::Waiting { .. } => return Ok(Recorded::Waiting),
        Readiness::Ready => {}
        Readiness::Skip { .. } => {
            run.status = RunStatus::Skipped;
            run.reason = Some(Reason::UpstreamNotSucceeded);
        }
    }
    Ok(match store.create_run(&run).await? {
        Created::New(run) => {
            if let Readiness::Skip { upstream, status } = readiness {
                tracing::info!(run = %run.key, %upstream, upstream_status = %status,
                    "window skipped: an upstream did not succeed");
            }
            Recorded::Created(run)
        }
        Created::Existing(run) => Recorded::Existing(run),
    })
}

/// The window at `at` of `spec` as its upstreams' expected runs for it stand (one read
/// each). A window an upstream recorded only inside a range record reads as waiting here;
/// the reconciler reads ranges.
pub async fn readiness_at(
    store: &dyn LedgerStore,
    spec: &ScheduleSpec,
    at: DateTime<Utc>,
) -> Result<Readiness, StoreError> {
    let mut outcomes = BTreeMap::new();
    for upstream in &spec.after {
        match store.get_run(&RunKey::expected(upstream.clone(), at)).await {
            Ok(run) => {
                outcomes.insert(upstream.clone(), run.status);
            }
            Err(StoreError::RunNotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(readiness(&spec.after, spec.accept_partial, &outcomes))
}

/// Why a dependent's window could not be decided or sent (the reconciler tries again).
#[derive(Debug, thiserror::Error)]
pub enum DependentError {
    #[error(transparent)]
    Store(#[from] StoreError),

    #[error(transparent)]
    Lane(#[from] LaneError),
}

/// Most dependents one run's end decides, its dependents' dependents included; the rest
/// are the reconciler's.
pub const MAX_CASCADE: usize = 32;

/// As `ended` (an upstream's expected run) ends: decides the same window of each of its
/// schedule's dependents (`downstream`), sends the runs that became ready, and follows the
/// windows recorded SKIPPED to their own dependents. Answers the entries it created.
pub async fn after_upstream_end(
    store: &dyn LedgerStore,
    lanes: &dyn LaneQueue,
    downstream: &[String],
    ended: &Run,
    now: DateTime<Utc>,
) -> Result<Vec<Run>, DependentError> {
    let mut created = Vec::new();
    if downstream.is_empty() || ended.key.origin != Origin::Expected || !ended.status.is_terminal()
    {
        return Ok(created);
    }
    let at = ended.key.scheduled_for;
    let mut next: VecDeque<String> = downstream.iter().cloned().collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    while let Some(id) = next.pop_front() {
        if seen.len() >= MAX_CASCADE {
            break;
        }
        if !seen.insert(id.clone()) {
            continue;
        }
        let dependent = store.get_schedule(&id).await?;
        // Archived, no longer dependent (a stale list), or a window already accounted.
        if dependent.spec.after.is_empty()
            || dependent.state == ScheduleState::Archived
            || at <= dependent.reconciled_through
        {
            continue;
        }
        let schedule =
            Schedule::new(dependent.spec.clone()).map_err(StoreError::ScheduleInvalid)?;
        if !schedule.timing().is_occurrence(at) {
            continue;
        }
        let ready = readiness_at(store, &dependent.spec, at).await?;
        if let Recorded::Created(run) =
            record_window(store, &schedule, dependent.version, at, &ready, now).await?
        {
            if run.status == RunStatus::Pending {
                let lane = run.lane.unwrap_or(Lane::Normal);
                crate::runs::claim_and_send::<DependentError>(store, lanes, &run, lane, now)
                    .await?;
            } else {
                next.extend(dependent.downstream.iter().cloned());
            }
            created.push(run);
        }
    }
    Ok(created)
}
