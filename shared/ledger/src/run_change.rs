//! One status change of a run, typed: what the caller read (status, lease epoch) and a
//! [`Transition`] that carries what its kind needs and nothing else. A start cannot lack its
//! lease, only a retry can re-pin a schedule version, only an end carries a result, and the
//! write rules (`crate::run_plan`) read each field from the one place it can be.

use chrono::{DateTime, Utc};
use cronledger_core::children::ChildCounts;
use cronledger_core::run::{transition, RunResult};
use cronledger_core::steps::StepCheckpoint;
use cronledger_core::{Lane, Reason, RunEvent, RunStatus};

use crate::error::StoreError;

/// A new owner of a run and how long it may hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrant {
    pub owner: String,
    pub until: DateTime<Utc>,
}

impl LeaseGrant {
    pub fn new(owner: impl Into<String>, until: DateTime<Utc>) -> LeaseGrant {
        LeaseGrant {
            owner: owner.into(),
            until,
        }
    }
}

/// The events that open a new attempt under a new lease epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// A worker took the run.
    Start,
    /// A worker took over a RUNNING run whose lease had expired.
    Reclaim,
    /// A worker took the next step of a run handed over between steps.
    StartStep,
}

impl Opening {
    pub fn event(self) -> RunEvent {
        match self {
            Opening::Start => RunEvent::Start,
            Opening::Reclaim => RunEvent::Reclaim,
            Opening::StartStep => RunEvent::StartStep,
        }
    }
}

/// The events that end an attempt with the job's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Succeed,
    SucceedPartially,
    FailRetryable,
    Fail,
}

impl Ending {
    pub fn event(self) -> RunEvent {
        match self {
            Ending::Succeed => RunEvent::Succeed,
            Ending::SucceedPartially => RunEvent::SucceedPartially,
            Ending::FailRetryable => RunEvent::FailRetryable,
            Ending::Fail => RunEvent::Fail,
        }
    }

    pub fn of(event: RunEvent) -> Option<Ending> {
        Some(match event {
            RunEvent::Succeed => Ending::Succeed,
            RunEvent::SucceedPartially => Ending::SucceedPartially,
            RunEvent::FailRetryable => Ending::FailRetryable,
            RunEvent::Fail => Ending::Fail,
            _ => return None,
        })
    }
}

/// What a change does to a run, each kind with what it needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// ENQUEUE: sent to its lane (`job_id`: the send's identity) or claimed for a send on
    /// `lane`; `lane_was`, when given, must be the stored lane (another writer may have
    /// moved the run first).
    Enqueue {
        lane: Option<Lane>,
        lane_was: Option<Lane>,
        job_id: Option<String>,
        reason: Option<Reason>,
    },
    /// START, RECLAIM, START_STEP: a new attempt under a new lease epoch, with a `steps`
    /// job's checkpoints as it opens them.
    Open {
        event: Opening,
        lease: LeaseGrant,
        steps: Option<Vec<StepCheckpoint>>,
    },
    /// HEARTBEAT: the lease held on (by its worker, or claimed by the reconciler).
    Heartbeat { lease: LeaseGrant },
    /// ADVANCE_STEP: a step succeeded and handed over to the next step's message.
    HandOver {
        lease: LeaseGrant,
        steps: Vec<StepCheckpoint>,
    },
    /// AWAIT_CHILDREN: the attempt answered children; the run waits for them (their
    /// counters set when the generator answered them).
    AwaitChildren {
        lease: LeaseGrant,
        children: Option<ChildCounts>,
    },
    /// SUCCEED, SUCCEED_PARTIALLY, FAIL_RETRYABLE, FAIL: the attempt's end and its result.
    End {
        event: Ending,
        reason: Option<Reason>,
        result: RunResult,
        steps: Option<Vec<StepCheckpoint>>,
    },
    /// HOLD_FOR_APPROVAL: waits for an operator, with a guard's dry-run result when that
    /// is why.
    Hold {
        reason: Reason,
        result: Option<RunResult>,
    },
    /// COALESCE: the window whose run stands for this one.
    Coalesce {
        reason: Option<Reason>,
        into: Option<DateTime<Utc>>,
    },
    /// The reconciler's plan of a parked late run (PLAN_CATCH_UP on `lane`, or a hold, a
    /// skip, a coalesce): made a catch-up run of `replay_group`, once (the write fails
    /// unless the stored trigger is still SCHEDULED, so two reconcilers cannot both plan it).
    Plan {
        event: RunEvent,
        reason: Option<Reason>,
        replay_group: Option<String>,
        lane: Option<Lane>,
        coalesced_into: Option<DateTime<Utc>>,
    },
    /// APPROVE: the run goes to the manual lane in the same write (that is how the rule
    /// book knows it was approved, whoever starts it next).
    Approve { reason: Option<Reason> },
    /// RETRY: an operator's retry, re-pinned to `schedule_version` (its next attempts
    /// execute that version's job) or, without one, kept on the version it was created
    /// under. `cascade`, when given, is the run's `cascade` from now on: whether its success
    /// re-opens its dependents' windows skipped for it (`None` keeps the stored one).
    Retry {
        reason: Option<Reason>,
        schedule_version: Option<u64>,
        cascade: Option<bool>,
    },
    /// Any other decision (SKIP, CANCEL, REJECT, STALL, RETRY_AFTER_STALL, WAIT_RESUME,
    /// WAIT_BEHIND, AWAIT_PLAN, a hold or a failure without a result) with its reason.
    Decide {
        event: RunEvent,
        reason: Option<Reason>,
    },
}

impl Transition {
    pub fn event(&self) -> RunEvent {
        match self {
            Transition::Enqueue { .. } => RunEvent::Enqueue,
            Transition::Open { event, .. } => event.event(),
            Transition::Heartbeat { .. } => RunEvent::Heartbeat,
            Transition::HandOver { .. } => RunEvent::AdvanceStep,
            Transition::AwaitChildren { .. } => RunEvent::AwaitChildren,
            Transition::End { event, .. } => event.event(),
            Transition::Hold { .. } => RunEvent::HoldForApproval,
            Transition::Coalesce { .. } => RunEvent::Coalesce,
            Transition::Plan { event, .. } | Transition::Decide { event, .. } => *event,
            Transition::Approve { .. } => RunEvent::Approve,
            Transition::Retry { .. } => RunEvent::Retry,
        }
    }

    /// The reason the change leaves on the run (`None` clears it).
    pub fn reason(&self) -> Option<Reason> {
        match self {
            Transition::Enqueue { reason, .. }
            | Transition::End { reason, .. }
            | Transition::Coalesce { reason, .. }
            | Transition::Plan { reason, .. }
            | Transition::Approve { reason }
            | Transition::Retry { reason, .. }
            | Transition::Decide { reason, .. } => *reason,
            Transition::Hold { reason, .. } => Some(*reason),
            Transition::Open { .. }
            | Transition::Heartbeat { .. }
            | Transition::HandOver { .. }
            | Transition::AwaitChildren { .. } => None,
        }
    }

    pub fn lease(&self) -> Option<&LeaseGrant> {
        match self {
            Transition::Open { lease, .. }
            | Transition::Heartbeat { lease }
            | Transition::HandOver { lease, .. }
            | Transition::AwaitChildren { lease, .. } => Some(lease),
            _ => None,
        }
    }

    pub fn result(&self) -> Option<&RunResult> {
        match self {
            Transition::End { result, .. } => Some(result),
            Transition::Hold { result, .. } => result.as_ref(),
            _ => None,
        }
    }

    /// A `steps` job's checkpoints as the change leaves them; `None` keeps the stored ones.
    pub fn steps(&self) -> Option<&[StepCheckpoint]> {
        match self {
            Transition::Open { steps, .. } | Transition::End { steps, .. } => steps.as_deref(),
            Transition::HandOver { steps, .. } => Some(steps),
            _ => None,
        }
    }

    /// The children counters the change sets; `None` keeps them (a child's end moves them
    /// through [`ChildStore::change_child`](crate::store::ChildStore::change_child)).
    pub fn children(&self) -> Option<&ChildCounts> {
        match self {
            Transition::AwaitChildren { children, .. } => children.as_ref(),
            _ => None,
        }
    }

    /// The lane the change puts the run on.
    pub fn lane(&self) -> Option<Lane> {
        match self {
            Transition::Enqueue { lane, .. } | Transition::Plan { lane, .. } => *lane,
            Transition::Approve { .. } => Some(Lane::Manual),
            _ => None,
        }
    }

    /// The lane the caller read, which the stored one must be.
    pub fn lane_was(&self) -> Option<Lane> {
        match self {
            Transition::Enqueue { lane_was, .. } => *lane_was,
            _ => None,
        }
    }

    pub fn job_id(&self) -> Option<&str> {
        match self {
            Transition::Enqueue { job_id, .. } => job_id.as_deref(),
            _ => None,
        }
    }

    /// COALESCE: the window whose run stands for this one.
    pub fn coalesced_into(&self) -> Option<DateTime<Utc>> {
        match self {
            Transition::Coalesce { into, .. } => *into,
            Transition::Plan { coalesced_into, .. } => *coalesced_into,
            _ => None,
        }
    }

    /// The replay group a planned run joins as a catch-up run.
    pub fn catch_up(&self) -> Option<&str> {
        match self {
            Transition::Plan { replay_group, .. } => replay_group.as_deref(),
            _ => None,
        }
    }

    pub fn schedule_version(&self) -> Option<u64> {
        match self {
            Transition::Retry {
                schedule_version, ..
            } => *schedule_version,
            _ => None,
        }
    }

    /// The run's `cascade` as a retry sets it; `None` keeps the stored one.
    pub fn cascade(&self) -> Option<bool> {
        match self {
            Transition::Retry { cascade, .. } => *cascade,
            _ => None,
        }
    }

    /// Whether this change opens a new lease epoch.
    pub fn opens_epoch(&self) -> bool {
        matches!(self, Transition::Open { .. })
    }
}

/// One status change of a run, conditioned on what the caller believes it is.
#[derive(Debug, Clone, PartialEq)]
pub struct RunChange {
    /// The status the caller read; the write fails if it is not the stored one.
    pub from: RunStatus,
    /// The lease epoch the caller holds; the write fails if it is not the stored one.
    pub epoch: u64,
    pub at: DateTime<Utc>,
    pub transition: Transition,
}

impl RunChange {
    pub fn new(from: RunStatus, epoch: u64, at: DateTime<Utc>, transition: Transition) -> Self {
        RunChange {
            from,
            epoch,
            at,
            transition,
        }
    }

    /// ENQUEUE with nothing more: the run marked sent.
    pub fn enqueue(from: RunStatus, epoch: u64, at: DateTime<Utc>) -> RunChange {
        let sent = Transition::Enqueue {
            lane: None,
            lane_was: None,
            job_id: None,
            reason: None,
        };
        RunChange::new(from, epoch, at, sent)
    }

    /// A new attempt (`event`) under `owner`'s lease until `until`.
    pub fn open(
        event: Opening,
        from: RunStatus,
        epoch: u64,
        at: DateTime<Utc>,
        owner: impl Into<String>,
        until: DateTime<Utc>,
    ) -> RunChange {
        let lease = LeaseGrant::new(owner, until);
        let opening = Transition::Open {
            event,
            lease,
            steps: None,
        };
        RunChange::new(from, epoch, at, opening)
    }

    /// HEARTBEAT of a RUNNING run: `owner`'s lease extended to `until`.
    pub fn heartbeat(
        epoch: u64,
        at: DateTime<Utc>,
        owner: impl Into<String>,
        until: DateTime<Utc>,
    ) -> RunChange {
        let lease = LeaseGrant::new(owner, until);
        RunChange::new(
            RunStatus::Running,
            epoch,
            at,
            Transition::Heartbeat { lease },
        )
    }

    /// The end of a RUNNING run's attempt (`event`) with `result`.
    pub fn end(event: Ending, epoch: u64, at: DateTime<Utc>, result: RunResult) -> RunChange {
        let end = Transition::End {
            event,
            reason: None,
            result,
            steps: None,
        };
        RunChange::new(RunStatus::Running, epoch, at, end)
    }

    /// A decision with its reason (see [`Transition::Decide`]).
    pub fn decide(
        event: RunEvent,
        from: RunStatus,
        epoch: u64,
        at: DateTime<Utc>,
        reason: Option<Reason>,
    ) -> RunChange {
        RunChange::new(from, epoch, at, Transition::Decide { event, reason })
    }

    pub fn event(&self) -> RunEvent {
        self.transition.event()
    }

    pub fn opens_epoch(&self) -> bool {
        self.transition.opens_epoch()
    }

    /// The status the change leads to, or why no store may apply it (refused before any
    /// request): an event the table does not allow from the status read, or a decision
    /// naming an event that must carry more (a start's lease, an end's result, ...).
    pub fn target(&self) -> Result<RunStatus, StoreError> {
        let event = self.event();
        if let Transition::Decide { .. } | Transition::Plan { .. } = &self.transition {
            if !decidable(event) {
                return Err(StoreError::InvalidRequest(format!(
                    "{event} carries more than a reason: use its own transition"
                )));
            }
        }
        Ok(transition(self.from, event)?)
    }
}

/// Events a bare decision (a reason, nothing else) may apply.
fn decidable(event: RunEvent) -> bool {
    use RunEvent as E;
    matches!(
        event,
        E::Skip
            | E::Cancel
            | E::Reject
            | E::Stall
            | E::RetryAfterStall
            | E::WaitResume
            | E::WaitBehind
            | E::AwaitPlan
            | E::PlanCatchUp
            | E::HoldForApproval
            | E::Coalesce
            | E::Fail
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        "2026-03-01T00:00:00Z".parse().expect("an instant")
    }

    #[test]
    fn a_decision_cannot_stand_in_for_a_transition_that_carries_more() {
        for event in [
            RunEvent::Start,
            RunEvent::Heartbeat,
            RunEvent::Retry,
            RunEvent::Enqueue,
        ] {
            let change = RunChange::decide(event, RunStatus::Pending, 0, at(), None);
            assert!(
                matches!(change.target(), Err(StoreError::InvalidRequest(_))),
                "{event}"
            );
        }
        let skip = RunChange::decide(RunEvent::Skip, RunStatus::Pending, 0, at(), None);
        assert_eq!(skip.target().ok(), Some(RunStatus::Skipped));
    }

    #[test]
    fn each_field_comes_from_the_one_kind_that_carries_it() {
        let lease = LeaseGrant::new("w", at());
        let open = Transition::Open {
            event: Opening::Start,
            lease: lease.clone(),
            steps: None,
        };
        assert_eq!(open.lease(), Some(&lease));
        assert!(open.opens_epoch());
        assert_eq!(open.event(), RunEvent::Start);
        let retry = Transition::Retry {
            reason: None,
            schedule_version: Some(3),
            cascade: Some(false),
        };
        assert_eq!(retry.cascade(), Some(false));
        assert_eq!(retry.schedule_version(), Some(3));
        assert!(retry.lease().is_none());
        assert_eq!(
            Transition::Approve { reason: None }.lane(),
            Some(Lane::Manual)
        );
    }
}
