//! Windows of schedules that run `after` others (their "dependents"). The ticker never
//! fires them; a window is recorded once its upstreams' runs for it have ended:
//!
//! - every upstream succeeded: the window's run is created PENDING (trigger DEPENDENCY)
//!   and sent to its lane;
//! - an upstream ended without succeeding: the window is recorded SKIPPED
//!   (UPSTREAM_NOT_SUCCEEDED), so it stays accounted, and its own dependents follow;
//! - an upstream succeeded SUSPECT (unless `accept_suspect`): the window is recorded
//!   MANUAL_REQUIRED (UPSTREAM_SUSPECT) for an operator, and its dependents wait;
//! - an upstream has not ended it yet: nothing.
//!
//! Two deciders share this: the worker, as an upstream's run ends (the dependent starts
//! at once), and the reconciler each pass, for every window the worker did not get to
//! (a crash, a window skipped before it reached a worker, a range record). The create is
//! conditional on the run's key, so every window is recorded once whoever gets there.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chrono::{DateTime, Utc};
use cronledger_aws::{Created, LaneError, LaneQueue, LedgerStore, StoreError};
use cronledger_core::admission::{decide, lane_of, Ask, Candidate, Moment};
use cronledger_core::calendar::CalendarSet;
use cronledger_core::dependency::{due_from, readiness_of, Readiness, UpstreamOutcome};
use cronledger_core::run::Origin;
use cronledger_core::{
    late_start, OverlapPolicy, Reason, Run, RunKey, RunStatus, Schedule, ScheduleSpec, Trigger,
};
use cronledger_ledger::ledger::{ScheduleState, StoredSchedule};

use crate::overlap::active_runs_of;

/// What [`record_window`] did.
#[derive(Debug)]
pub enum Recorded {
    /// An upstream has not ended the window: nothing was written.
    Waiting,
    /// This call created the window's entry: PENDING to send now (`send`), PENDING waiting
    /// (its turn behind a running run, the throttled release of a late window, the resume),
    /// or recorded SKIPPED, COALESCED or MANUAL_REQUIRED by the rule book.
    Created { run: Run, send: bool },
    /// The window was recorded before (by another decider).
    Existing(Run),
}

/// The window at `at` of the dependent `stored` (compiled as `schedule`), recorded as
/// `readiness` says. A window ready to run is the dependent's own run: the rule book
/// (`cronledger_core::admission`) decides it with the dependent's pause, approval, overlap
/// and lanes, and a window created past the dependent's grace (counted from `due`, see
/// [`cronledger_core::dependency::due_from`]) follows its misfire policy and goes to the
/// correction lane's throttled release, never to the live lane.
pub async fn record_window(
    store: &dyn LedgerStore,
    stored: &StoredSchedule,
    schedule: &Schedule,
    at: DateTime<Utc>,
    (readiness, due): (&Readiness, DateTime<Utc>),
    now: DateTime<Utc>,
) -> Result<Recorded, StoreError> {
    let window = (at, Origin::Expected);
    let Some((run, send)) =
        admit_window(store, stored, schedule, window, (readiness, due), now).await?
    else {
        return Ok(Recorded::Waiting);
    };
    Ok(match store.create_run(&run).await? {
        Created::New(run) => {
            if let (Readiness::Skip { upstream, status }, Some(Reason::UpstreamNotSucceeded)) =
                (readiness, run.reason)
            {
                tracing::info!(run = %run.key, %upstream, upstream_status = %status,
                    "window skipped: an upstream did not succeed");
            }
            if let Readiness::Hold { upstream } = readiness {
                tracing::warn!(run = %run.key, %upstream,
                    "window held: an upstream's result is SUSPECT");
            }
            Recorded::Created { run, send }
        }
        Created::Existing(run) => Recorded::Existing(run),
    })
}

/// The entry the dependent `stored` (compiled as `schedule`) gets for its window at `at`
/// under `origin` (the expected occurrence, or a repair's run), shaped as `readiness` and
/// the rule book say, and whether to send it now; `None` while an upstream has not ended
/// the window. Nothing is written: the caller creates it (see [`record_window`]).
pub async fn admit_window(
    store: &dyn LedgerStore,
    stored: &StoredSchedule,
    schedule: &Schedule,
    (at, origin): (DateTime<Utc>, Origin),
    (readiness, due): (&Readiness, DateTime<Utc>),
    now: DateTime<Utc>,
) -> Result<Option<(Run, bool)>, StoreError> {
    let mut run = schedule.pending_run(
        at,
        schedule.window_for(at),
        origin,
        Trigger::Dependency,
        now,
        stored.version,
    );
    let mut send = false;
    // A window on an excluded date is recorded SKIPPED (EXCLUDED) by the rule book, whatever
    // its upstreams did: it was never to run.
    let calendars = if schedule.spec.calendars.is_empty() {
        CalendarSet::default()
    } else {
        store.calendars().await?
    };
    let excluded = schedule.excluded_by(&calendars, at);
    match readiness {
        _ if excluded => {
            decide(&Ask {
                moment: Moment::Create,
                spec: &schedule.spec,
                run: Candidate::of(&run),
                stopped: None,
                others: &[],
                excluded,
                late: None,
                now,
            })
            .shape(&mut run);
        }
        Readiness::Waiting { .. } => return Ok(None),
        Readiness::Ready => {
            let others = if schedule.spec.overlap == OverlapPolicy::Allow {
                Vec::new()
            } else {
                active_runs_of(store, schedule.id()).await?
            };
            // Late by the time since it was due, judged as a live window that late would be.
            let late_by = (now - due).max(chrono::TimeDelta::zero());
            let late = (late_by > schedule.spec.grace.as_delta())
                .then(|| late_start(schedule, at, at + late_by));
            let stopped = if stored.paused_at(at) {
                Some(Reason::Paused)
            } else {
                stored.stopped()
            };
            send = decide(&Ask {
                moment: Moment::Create,
                spec: &schedule.spec,
                run: Candidate::of(&run),
                stopped,
                others: &others,
                excluded,
                late,
                now,
            })
            .shape(&mut run);
        }
        Readiness::Skip { .. } => {
            run.status = RunStatus::Skipped;
            run.reason = Some(Reason::UpstreamNotSucceeded);
        }
        // An upstream succeeded SUSPECT: an operator decides whether its results are good
        // enough to build on (approving sends the window through the rule book then).
        Readiness::Hold { .. } => {
            run.status = RunStatus::ManualRequired;
            run.reason = Some(Reason::UpstreamSuspect);
        }
    }
    Ok(Some((run, send)))
}

/// The dependent `id` of an upstream whose window `at` ended, when that window is one of
/// its own: not archived, still running `after` something, and `at` on its grid. The one
/// walk step the worker's dependents and a cascading backfill share.
pub async fn dependent_at(
    store: &dyn LedgerStore,
    id: &str,
    at: DateTime<Utc>,
) -> Result<Option<(StoredSchedule, Schedule)>, StoreError> {
    let dependent = store.get_schedule(id).await?;
    if dependent.spec.after.is_empty() || dependent.state == ScheduleState::Archived {
        return Ok(None);
    }
    let schedule = dependent.schedule().map_err(StoreError::ScheduleInvalid)?;
    if !schedule.is_occurrence(at) {
        return Ok(None);
    }
    Ok(Some((dependent, schedule)))
}

/// The window at `at` of `spec` as its upstreams' expected runs for it stand (one read
/// each), and when it is due. A window an upstream recorded only inside a range record
/// reads as waiting here; the reconciler reads ranges.
pub async fn readiness_at(
    store: &dyn LedgerStore,
    spec: &ScheduleSpec,
    at: DateTime<Utc>,
) -> Result<(Readiness, DateTime<Utc>), StoreError> {
    readiness_with(store, spec, at, None).await
}

/// [`readiness_at`], with `ended` (a run that just ended, of any origin) standing for its
/// schedule's entry, as the one that decides.
pub async fn readiness_with(
    store: &dyn LedgerStore,
    spec: &ScheduleSpec,
    at: DateTime<Utc>,
    ended: Option<&Run>,
) -> Result<(Readiness, DateTime<Utc>), StoreError> {
    let mut outcomes = BTreeMap::new();
    let mut runs = Vec::new();
    for upstream in &spec.after {
        let run = match ended.filter(|e| e.key.schedule_id == *upstream) {
            Some(ended) => Some(ended.clone()),
            None => upstream_entry(store, upstream, at).await?,
        };
        if let Some(run) = run {
            outcomes.insert(upstream.clone(), UpstreamOutcome::of(&run));
            runs.push(run);
        }
    }
    Ok((
        readiness_of(
            &spec.after,
            spec.accept_partial,
            spec.accept_suspect,
            &outcomes,
        ),
        due_from(at, &runs),
    ))
}

/// The entry that stands for `upstream`'s window at `at`: its expected run, or where that
/// was skipped for its own upstream (UPSTREAM_NOT_SUCCEEDED) and later repaired, the repair's
/// run (one more read, only then); `None` while not recorded.
pub async fn upstream_entry(
    store: &dyn LedgerStore,
    upstream: &str,
    at: DateTime<Utc>,
) -> Result<Option<Run>, StoreError> {
    let run = match store.get_run(&RunKey::expected(upstream, at)).await {
        Ok(run) => run,
        Err(StoreError::RunNotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    if run.status == RunStatus::Skipped && run.reason == Some(Reason::UpstreamNotSucceeded) {
        match store
            .get_run(&crate::repair::repair_key(upstream, at))
            .await
        {
            Ok(repair) => return Ok(Some(repair)),
            Err(StoreError::RunNotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(run))
}

/// Sends a dependent's run the rule book made ready, to its lane (the dependent's own).
pub async fn send_window(
    store: &dyn LedgerStore,
    lanes: &dyn LaneQueue,
    dependent: &StoredSchedule,
    run: &Run,
    now: DateTime<Utc>,
) -> Result<(), DependentError> {
    let lane = lane_of(run.trigger, run.lane, dependent.spec.priority.live_lane());
    crate::runs::claim_and_send::<DependentError>(store, lanes, run, lane, now).await?;
    Ok(())
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
        let Some((dependent, schedule)) = dependent_at(store, &id, at).await? else {
            continue;
        };
        // A window already accounted for (the reconciler's watermark passed it).
        if at <= dependent.reconciled_through {
            continue;
        }
        let (ready, due) = readiness_at(store, &dependent.spec, at).await?;
        if let Recorded::Created { run, send } =
            record_window(store, &dependent, &schedule, at, (&ready, due), now).await?
        {
            if send {
                send_window(store, lanes, &dependent, &run, now).await?;
            } else if run.status.is_terminal() {
                next.extend(dependent.downstream.iter().cloned());
            }
            created.push(run);
        }
    }
    Ok(created)
}
