//! Admission: whether a delivery starts an attempt, and if not, how its run ends or waits.
//! The worker reads what the rule book needs (the schedule's other runs, a late run's
//! neighbours) and asks it (`cronledger_core::admission`): stops, approval, lateness and
//! overlap are decided there, for every kind of run. What is the worker's own: a delivery
//! that finds its run taken, finished or between steps, a lost attempt, and ALREADY_DONE.

use chrono::{DateTime, Utc};
use cronledger_aws::StoreError;
use cronledger_core::admission::{
    decide, needs_approval, Admission as RuleBook, Ask, Candidate, Moment,
};
use cronledger_core::{
    late_start, planned_with_its_gap, Lane, OverlapPolicy, Reason, Run, RunKey, RunStatus,
    Schedule, Trigger,
};
use cronledger_ledger::ledger::Opening;
use cronledger_ledger::ledger::StoredSchedule;

use cronledger_core::steps::handed_over;

use super::children::waits_for_children;
use super::read::Sighting;
use super::Worker;
use crate::overlap::{active_before, active_runs_of};

/// What a worker decided about a delivery before running anything.
pub(super) enum Admission {
    /// Acknowledge without running: duplicate, finished, or owned by someone else.
    Ack(&'static str),
    /// Another run of the schedule holds its turn (SKIP_NEW or QUEUE_NEW): park the run
    /// PENDING (QUEUED_BEHIND) and let the finishing run release it, rather than bounce the
    /// message until SQS dead-letters it.
    WaitBehind,
    /// A late CATCH_UP_ALL run past the immediate tier, inside a backlog: park it PENDING
    /// (LATE_AWAITING_PLAN) for the reconciler to plan with the rest of its gap (cap,
    /// catch-up lanes, pacing, approvals, backfill proposal).
    AwaitPlan,
    /// A run of a paused or disabled schedule that a throttled release (catch-up, backfill)
    /// sent before the stop: park it PENDING with the stop's reason, for the release to send
    /// again after the resume. Waiting, not dropped.
    WaitResume(Reason),
    /// The attempt under way lost its worker (lease expired, no outcome) and the job is not
    /// declared idempotent: nobody knows whether it acted, so the attempt is STALLED and the
    /// run held for an operator (MANUAL_REQUIRED) with this reason. Never run again on its own.
    OutcomeUnknown(Reason),
    /// End the run without executing it.
    Skip(Reason),
    /// End a run that already failed an attempt as FAILED with this reason, without
    /// another attempt.
    GiveUp(Reason),
    /// Hold the run for an operator's approval (MANUAL_REQUIRED) without executing it.
    Hold(Reason),
    /// Fold the run into a later window's (COALESCED), without executing it; and move that
    /// window's run, when it is waiting late in the same backlog, to the correction lane.
    Coalesce {
        into: DateTime<Utc>,
        promote: Option<Box<Run>>,
    },
    Start(Opening),
}

impl Worker {
    /// Decides whether a delivery starts an attempt.
    pub(super) async fn admit(
        &self,
        seen: &Sighting,
        stored: &StoredSchedule,
        schedule: &Schedule,
        lane: Lane,
        now: DateTime<Utc>,
    ) -> Result<Admission, StoreError> {
        let run = &seen.run;
        let lease_live = run.lease.as_ref().is_some_and(|l| l.until > now);
        let stopped = stored.stopped();
        let event = match run.status {
            RunStatus::Pending | RunStatus::Queued | RunStatus::RetryPending => Opening::Start,
            // Between two steps: the next step's message (or a copy) takes the run on.
            RunStatus::Running if handed_over(&run.steps) => match stopped {
                Some(Reason::Archived) => return Ok(Admission::GiveUp(Reason::Archived)),
                Some(reason) => return Ok(Admission::WaitResume(reason)),
                None => return Ok(Admission::Start(Opening::StartStep)),
            },
            // Its job answered children: they run from their own messages.
            RunStatus::Running if waits_for_children(run) => {
                return Ok(Admission::Ack("waiting for its children"))
            }
            RunStatus::Running if lease_live => {
                return Ok(Admission::Ack("running under a live lease"))
            }
            // The worker vanished mid-attempt (a crash, a lost completion write): for a job
            // not declared idempotent a second execution is never automatic.
            RunStatus::Running if !schedule.spec.idempotent => {
                return Ok(Admission::OutcomeUnknown(Reason::WorkerLost))
            }
            // A reclaim is a retry, and a stopped schedule's runs are not retried: the
            // reconciler stalls the attempt and its retry meets the stop.
            RunStatus::Running if stopped.is_some() => {
                return Ok(Admission::Ack("lost attempt of a stopped schedule"))
            }
            RunStatus::Running => Opening::Reclaim,
            _ => return Ok(Admission::Ack("not runnable")),
        };
        if run.trigger == Trigger::CatchUp
            && run.status == RunStatus::Pending
            && matches!(lane, Lane::Realtime | Lane::Normal)
        {
            // A live run the reconciler planned into a catch-up lane, met by a stray copy of
            // its live message: the throttled release sends it, not this lane.
            return Ok(Admission::Ack("a catch-up run waiting for its release"));
        }
        let candidate = Candidate::of(run);
        let mut late = None;
        if stopped.is_none() && judged_on_lateness(run, lane) {
            let at = run.key.scheduled_for;
            if !needs_approval(&schedule.spec, &candidate)
                && planned_with_its_gap(schedule, at, now)
                && self.in_backlog(schedule, run).await?
            {
                return Ok(Admission::AwaitPlan);
            }
            late = Some(late_start(schedule, at, now));
        }
        // The ticker (or the path that created the run) asked the rule book too; ask again,
        // things moved since.
        let others = if schedule.spec.overlap == OverlapPolicy::Allow || candidate.resuming {
            Vec::new()
        } else {
            match &seen.recent {
                Some(recent) => active_before(self.store.as_ref(), schedule.id(), recent).await?,
                None => active_runs_of(self.store.as_ref(), schedule.id()).await?,
            }
        };
        let decision = decide(&Ask {
            moment: Moment::Start,
            spec: &schedule.spec,
            run: candidate,
            stopped,
            others: &others,
            excluded: false,
            late,
            now,
        });
        Ok(match decision {
            RuleBook::Go { .. } | RuleBook::Release { .. } => Admission::Start(event),
            RuleBook::Hold { reason } => Admission::Hold(reason),
            RuleBook::Skip { reason } => Admission::Skip(reason),
            RuleBook::Wait {
                reason: Reason::QueuedBehind,
            } => Admission::WaitBehind,
            RuleBook::Wait { reason } => Admission::WaitResume(reason),
            RuleBook::Coalesce { into } => {
                let promote = self.waiting_in_backlog(schedule, into).await?;
                Admission::Coalesce { into, promote }
            }
        })
    }

    /// The run of `into` (the latest window past its grace that a late run folds into under
    /// RUN_ONCE) when it is still waiting for its first start in a live lane: the lane is
    /// backed up (a worker outage, a backlog), so that run would arrive late too and fold
    /// into the next, and in a lasting backlog nothing would ever run. Moving it to the
    /// correction lane (its own queue and workers) makes the window that the coalesced runs
    /// point to run now, once. `None` when that window will run anyway: it has no run yet
    /// (the reconciler fires it as its gap's latest), or its run started, was moved already,
    /// waits behind an earlier one by policy (QUEUE_NEW) or is a catch-up run.
    pub(super) async fn waiting_in_backlog(
        &self,
        schedule: &Schedule,
        into: DateTime<Utc>,
    ) -> Result<Option<Box<Run>>, StoreError> {
        let latest = self.waiting_run_at(schedule, into).await?;
        Ok(latest
            .filter(|r| r.lane != Some(Lane::Correction))
            .map(Box::new))
    }

    /// The live run of `schedule`'s window at `at`, when it still waits for its first start
    /// (see [`waiting_first_start`]).
    pub(super) async fn waiting_run_at(
        &self,
        schedule: &Schedule,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        match self
            .store
            .get_run(&RunKey::expected(schedule.id(), at))
            .await
        {
            Ok(run) if waiting_first_start(&run) => Ok(Some(run)),
            Ok(_) | Err(StoreError::RunNotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether a late run is part of a backlog: the run of the window before or after it is
    /// a live run waiting for its first start too (or parked already). A lone late run (fired
    /// just before a scheduler outage, its neighbours missing) opens a gap the reconciler
    /// plans from the missing windows; it is judged alone, as the oldest window of that gap.
    pub(super) async fn in_backlog(
        &self,
        schedule: &Schedule,
        run: &Run,
    ) -> Result<bool, StoreError> {
        let at = run.key.scheduled_for;
        for neighbour in [schedule.prev_before(at), schedule.next_after(at)]
            .into_iter()
            .flatten()
        {
            if self.waiting_run_at(schedule, neighbour).await?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// A live run still waiting for its first start in a lane (or parked for a plan), not by
/// policy behind an earlier one, not an operator's.
pub(super) fn waiting_first_start(run: &Run) -> bool {
    run.trigger == Trigger::Scheduled
        && run.attempts == 0
        && matches!(run.status, RunStatus::Pending | RunStatus::Queued)
        && run.reason != Some(Reason::QueuedBehind)
        && run.lane != Some(Lane::Manual)
}

/// Whether a start is held to the schedule's grace period (see [`late_start`]): the first
/// attempt of a live run the ticker fired. Not catch-up or operators' runs (already decided by
/// the planner or a person), not retries, not a run approved onto the manual lane, and not a
/// QUEUE_NEW run that waited behind an earlier one (it waited by policy).
pub(super) fn judged_on_lateness(run: &Run, lane: Lane) -> bool {
    waiting_first_start(run) && lane != Lane::Manual
}

/// ALREADY_DONE when another run of the same window (an operator's, say) already succeeded
/// with the same idempotency key.
pub(super) fn already_done(seen: &Sighting) -> Option<Reason> {
    let run = &seen.run;
    if run.forced {
        // An operator forced this run (`mode=new`): it runs whatever already succeeded.
        return None;
    }
    seen.same_instant
        .iter()
        .any(|r| {
            r.key != run.key && r.idempotency_key == run.idempotency_key && r.status.is_success()
        })
        .then_some(Reason::AlreadyDone)
}
