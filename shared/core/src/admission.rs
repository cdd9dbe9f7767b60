//! The rule book: one decision, asked by every path that creates or starts a run.
//!
//! Whether a run is created to run, held for approval, skipped, left waiting, or sent to a
//! lane is answered here and nowhere else (DESIGN invariant 18). The paths that create a run
//! (the ticker's fire, the reconciler's plan of missed windows, a dependent's window, an
//! operator's manual run) ask at [`Moment::Create`]; the worker asks at [`Moment::Start`] for
//! every delivery (first starts, automatic and operator retries, re-sends, reclaims, step
//! hand-overs), so a lever that a creating path got wrong is still held before anything runs.
//!
//! The rules, in the order they apply:
//! 0. **Excluded** (at creation): a window on a date the schedule's calendars or its own
//!    `exclude` list leave out is recorded SKIPPED (EXCLUDED), whoever creates it; only an
//!    operator's own run is exempt (it is a request, not a window of the grid). A calendar
//!    edit changes the future only: a run already created is not judged again.
//! 1. **Stopped** (paused, disabled, archived): a run that would start now does not. Live and
//!    operators' runs end SKIPPED with the stop's reason; runs a throttled release sent
//!    (catch-up, backfill, a late dependent's window) wait PENDING for the resume.
//! 2. **`approval: every_run`**: a run nobody approved is held MANUAL_REQUIRED
//!    (APPROVAL_REQUIRED), whoever created it. Approved means: an operator's manual run
//!    (its own approval), a backfill's run (the backfill is approved as a whole), or a run an
//!    operator approved (it went to the manual lane).
//! 3. **Lateness**: a live window judged past its grace follows the schedule's misfire
//!    policy ([`crate::late_start`], passed in: it needs the gap's neighbours); a dependent's
//!    window created past its grace goes to the correction lane for the throttled release,
//!    never to the live lane.
//! 4. **Overlap is mutual exclusion** under SKIP_NEW and QUEUE_NEW: at most one run of the
//!    schedule executes at a time, whatever created it. A live window that meets a running
//!    run is SKIPPED (OVERLAP) under SKIP_NEW and waits under QUEUE_NEW; every other run
//!    (catch-up, backfill, a late dependent's window, a retry, a manual run) waits for it
//!    (PENDING, QUEUED_BEHIND) and is released in window order when it ends.
//! 5. Otherwise it starts (or, at creation, goes to its lane: [`lane_for`]).

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::overlap::ActiveRun;
use crate::planner::LateStart;
use crate::policy::{Lane, OverlapPolicy};
use crate::run::{Reason, Run, RunKey, RunStatus, Trigger};
use crate::spec::{Approval, ScheduleSpec};

/// When the rule book is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Moment {
    /// A path is about to write the run.
    Create,
    /// A worker took the run's message and is about to open an attempt.
    Start,
}

/// What the rule book needs to know about the run it is asked about.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub key: &'a RunKey,
    pub trigger: Trigger,
    pub status: RunStatus,
    pub reason: Option<Reason>,
    pub lane: Option<Lane>,
    /// The run is going on, not starting anew: a reclaim of a lost attempt, the next step of
    /// a steps run, or a steps run resumed part-way. It already holds the schedule's turn.
    pub resuming: bool,
}

impl<'a> Candidate<'a> {
    /// The run as it is stored (or about to be). A RUNNING run, or a steps run with a step
    /// already tried, is going on ([`Candidate::resuming`]).
    pub fn of(run: &'a Run) -> Candidate<'a> {
        Candidate {
            key: &run.key,
            trigger: run.trigger,
            status: run.status,
            reason: run.reason,
            lane: run.lane,
            resuming: run.status == RunStatus::Running || run.steps.iter().any(|c| c.attempts > 0),
        }
    }

    /// Whether somebody approved this run: an operator's manual run is its own approval, a
    /// backfill is approved as a whole (before any of its runs is released), and a run an
    /// operator approved goes to the manual lane.
    pub fn approved(&self) -> bool {
        matches!(self.trigger, Trigger::Manual | Trigger::Backfill)
            || self.lane == Some(Lane::Manual)
    }

    /// Whether this run is the schedule's live window on its own clock: a SCHEDULED run, or
    /// a dependent's window created in time and sent to its live lane. Everything else
    /// (catch-up, backfill, manual, a late dependent's window, a retry) is extra work that
    /// waits its turn.
    pub fn is_live_window(&self) -> bool {
        let first_try = matches!(self.status, RunStatus::Pending | RunStatus::Queued);
        match self.trigger {
            Trigger::Scheduled => first_try,
            Trigger::Dependency => first_try && !self.lane.is_some_and(is_catch_up_lane),
            Trigger::CatchUp | Trigger::Manual | Trigger::Backfill => false,
        }
    }

    /// Sent by a throttled release (catch-up, backfill, a late dependent's window): when its
    /// schedule stops it waits for the resume instead of ending.
    pub fn released(&self) -> bool {
        match self.trigger {
            Trigger::CatchUp | Trigger::Backfill => true,
            Trigger::Dependency => self.lane.is_some_and(is_catch_up_lane),
            Trigger::Scheduled | Trigger::Manual => false,
        }
    }
}

/// The correction and backfill lanes: throttled, below live work.
pub fn is_catch_up_lane(lane: Lane) -> bool {
    matches!(lane, Lane::Correction | Lane::Backfill)
}

/// Everything the decision takes: no clock, no store.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub moment: Moment,
    pub spec: &'a ScheduleSpec,
    pub run: Candidate<'a>,
    /// The schedule's stop, if it is paused (PAUSED), disabled (DISABLED) or archived
    /// (ARCHIVED).
    pub stopped: Option<Reason>,
    /// The schedule's other runs still in flight or waiting (any trigger).
    pub others: &'a [ActiveRun],
    /// The window's local date is excluded by the schedule's calendars or `exclude` list
    /// ([`crate::Schedule::excluded`]).
    pub excluded: bool,
    /// The misfire policy's word on a start past the grace period, when the path judges
    /// lateness (a live window's first start; a dependent's window at creation).
    pub late: Option<LateStart>,
    pub now: DateTime<Utc>,
}

/// The answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "admission", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Admission {
    /// Start it (at [`Moment::Create`]: create it PENDING and send it to `lane` now).
    Go { lane: Lane },
    /// Create it PENDING on `lane` for the throttled release (correction or backfill).
    Release { lane: Lane },
    /// Record it MANUAL_REQUIRED: an operator decides.
    Hold { reason: Reason },
    /// Record it SKIPPED.
    Skip { reason: Reason },
    /// Record it COALESCED into the window at `into` (RUN_ONCE, late).
    Coalesce { into: DateTime<Utc> },
    /// Leave it PENDING with this reason: QUEUED_BEHIND (released when the running run
    /// ends) or the stop's reason (released after the resume).
    Wait { reason: Reason },
}

impl Admission {
    /// Shapes a run about to be created by this answer (status, reason, lane) and says
    /// whether it is sent to its lane now.
    pub fn shape(self, run: &mut Run) -> bool {
        let (status, reason) = match self {
            Admission::Go { lane } | Admission::Release { lane } => {
                run.lane = Some(lane);
                (RunStatus::Pending, None)
            }
            Admission::Hold { reason } => (RunStatus::ManualRequired, Some(reason)),
            Admission::Skip { reason } => (RunStatus::Skipped, Some(reason)),
            Admission::Coalesce { into } => {
                run.coalesced_into = Some(into);
                (RunStatus::Coalesced, Some(Reason::Coalesced))
            }
            Admission::Wait { reason } => (RunStatus::Pending, Some(reason)),
        };
        run.status = status;
        run.reason = reason;
        matches!(self, Admission::Go { .. })
    }
}

/// The one decision (see the module note for the rules and their order).
pub fn decide(ask: &Ask<'_>) -> Admission {
    let run = &ask.run;
    let spec = ask.spec;
    if ask.excluded && ask.moment == Moment::Create && run.trigger != Trigger::Manual {
        return Admission::Skip {
            reason: Reason::Excluded,
        };
    }
    if let Some(stop) = ask.stopped {
        return if run.released() && stop != Reason::Archived {
            Admission::Wait { reason: stop }
        } else {
            Admission::Skip { reason: stop }
        };
    }
    if needs_approval(spec, run) {
        return Admission::Hold {
            reason: Reason::ApprovalRequired,
        };
    }
    let mut lane = lane_for(spec, run);
    match ask.late {
        None | Some(LateStart::Run) => {}
        Some(LateStart::Skip { reason }) => return Admission::Skip { reason },
        Some(LateStart::Hold { reason }) => return Admission::Hold { reason },
        Some(LateStart::Coalesce { into }) => return Admission::Coalesce { into },
    }
    // A dependent's window created past its own grace (the caller judged it late, see
    // `dependency::due_from`) is catch-up work: the correction lane, under the throttled
    // release, never the live lane.
    let late_dependent =
        ask.moment == Moment::Create && run.trigger == Trigger::Dependency && ask.late.is_some();
    if late_dependent {
        lane = Lane::Correction;
    }
    if let Some(wait) = overlap(ask, late_dependent) {
        return wait;
    }
    if late_dependent {
        Admission::Release { lane }
    } else {
        Admission::Go { lane }
    }
}

/// Rule 2: `approval: every_run` holds every run nobody approved.
pub fn needs_approval(spec: &ScheduleSpec, run: &Candidate<'_>) -> bool {
    every_run_approval(spec) && !run.approved() && !run.resuming
}

/// Whether every run of the schedule waits for an operator (`approval: every_run`): the
/// planner holds every catch-up window of such a schedule by this rule.
pub fn every_run_approval(spec: &ScheduleSpec) -> bool {
    spec.approval == Approval::EveryRun
}

/// Rule 4: SKIPPED or waiting when another run of the schedule holds its turn.
fn overlap(ask: &Ask<'_>, late_dependent: bool) -> Option<Admission> {
    let run = &ask.run;
    let policy = ask.spec.overlap;
    if policy == OverlapPolicy::Allow || run.resuming {
        return None;
    }
    // At creation only a window already due can meet anything: a window inside the
    // lookahead is judged again when it starts, when the earlier run may be done.
    if ask.moment == Moment::Create && run.key.scheduled_for > ask.now {
        return None;
    }
    let others = || ask.others.iter().filter(|o| o.key != *run.key);
    let running = others().any(|o| o.status == RunStatus::Running);
    // Runs of earlier windows waiting for their turn go first (window order).
    let earlier_waiting = others().any(|o| o.key < *run.key && waits_its_turn(o, policy));
    let live = run.is_live_window() && !late_dependent;
    let queued_behind = Admission::Wait {
        reason: Reason::QueuedBehind,
    };
    match policy {
        OverlapPolicy::SkipNew if live && (running || earlier_waiting) => Some(Admission::Skip {
            reason: Reason::Overlap,
        }),
        _ if running || (earlier_waiting && (live || policy == OverlapPolicy::QueueNew)) => {
            Some(queued_behind)
        }
        _ => None,
    }
}

/// An earlier run that a later one must let go first: one parked for its turn
/// (QUEUED_BEHIND), and under QUEUE_NEW (strict window order) any live run still active,
/// waiting, backing off before a retry or stalled. Catch-up work waiting for its throttled
/// release never holds a live window back (invariant 7).
fn waits_its_turn(other: &ActiveRun, policy: OverlapPolicy) -> bool {
    if other.status == RunStatus::Pending && other.reason == Some(Reason::QueuedBehind) {
        return true;
    }
    policy == OverlapPolicy::QueueNew && other.live && other.status.is_active()
}

/// The one rule for a run's lane: an operator's manual run goes to the manual lane, a
/// backfill's to the backfill lane, catch-up never to a live lane, and everything else to
/// the lane it was given or its priority's live lane.
pub fn lane_for(spec: &ScheduleSpec, run: &Candidate<'_>) -> Lane {
    lane_of(run.trigger, run.lane, spec.priority.live_lane())
}

/// [`lane_for`] without a spec at hand: `live` is the schedule's live lane.
pub fn lane_of(trigger: Trigger, lane: Option<Lane>, live: Lane) -> Lane {
    match (trigger, lane) {
        (_, Some(Lane::Manual)) => Lane::Manual,
        (Trigger::Manual, _) => Lane::Manual,
        (Trigger::Backfill, _) => Lane::Backfill,
        (Trigger::CatchUp, Some(Lane::Realtime | Lane::Normal) | None) => Lane::Correction,
        (_, Some(lane)) => lane,
        (_, None) => live,
    }
}

#[cfg(test)]
mod tests;
