//! Runs (ledger entries), their statuses and the closed transition table.

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::error::Code;
use crate::named_enum;
use crate::policy::Lane;
use crate::window::{utc_text, IdempotencyKey, Window};

named_enum!(
    RunStatus {
        Pending => "PENDING",
        Queued => "QUEUED",
        Running => "RUNNING",
        RetryPending => "RETRY_PENDING",
        Success => "SUCCESS",
        PartialSuccess => "PARTIAL_SUCCESS",
        Failed => "FAILED",
        Stalled => "STALLED",
        Skipped => "SKIPPED",
        Coalesced => "COALESCED",
        ManualRequired => "MANUAL_REQUIRED",
        Cancelled => "CANCELLED",
    }
);

named_enum!(
    /// Who asked for the run.
    Trigger {
        Scheduled => "SCHEDULED",
        CatchUp => "CATCH_UP",
        Manual => "MANUAL",
        Backfill => "BACKFILL",
        /// Every upstream's run for the window succeeded (`after`).
        Dependency => "DEPENDENCY",
    }
);

named_enum!(
    /// Why a run is in the status it is in, when the status alone does not say.
    Reason {
        /// The window passed while nothing ran, and the policy skips missed windows.
        Missed => "MISSED",
        /// An earlier run of the schedule was still active (SKIP_NEW).
        Overlap => "OVERLAP",
        /// Found too late to start within the grace period.
        GraceExpired => "GRACE_EXPIRED",
        Paused => "PAUSED",
        Disabled => "DISABLED",
        /// The window's local date is excluded by the schedule's calendars or its own
        /// `exclude` list.
        Excluded => "EXCLUDED",
        /// The schedule was archived before the run could start.
        Archived => "ARCHIVED",
        /// The window's idempotency key already succeeded.
        AlreadyDone => "ALREADY_DONE",
        /// Folded into another run of the same catch-up (RUN_ONCE).
        Coalesced => "COALESCED",
        /// The schedule's misfire policy is MANUAL.
        PolicyManual => "POLICY_MANUAL",
        /// More windows than `max_auto_catch_up` allows to start on their own.
        CapExceeded => "CAP_EXCEEDED",
        /// A side-effecting job past the immediate tier.
        SideEffects => "SIDE_EFFECTS",
        /// The gap is longer than the backfill tier.
        GapTooLong => "GAP_TOO_LONG",
        /// A stalled run of a job not declared idempotent (entries written before
        /// WORKER_LOST and MAX_RUNTIME_EXCEEDED said which).
        StalledNotIdempotent => "STALLED_NOT_IDEMPOTENT",
        /// The worker running the attempt vanished (its lease ran out without an outcome:
        /// a crash, a lost completion write): for a job not declared idempotent nobody knows
        /// whether it acted, so an operator decides.
        WorkerLost => "WORKER_LOST",
        /// Waiting for the active run to end (QUEUE_NEW).
        QueuedBehind => "QUEUED_BEHIND",
        /// A live run reached a worker past its grace behind a backlog (CATCH_UP_ALL, past
        /// the immediate tier): it waits for the reconciler to plan it with the rest of its
        /// gap (the tier, the cap, the catch-up lanes), as if it had never been fired.
        LateAwaitingPlan => "LATE_AWAITING_PLAN",
        /// Heartbeat stopped or max_runtime passed.
        HeartbeatLost => "HEARTBEAT_LOST",
        MaxRuntimeExceeded => "MAX_RUNTIME_EXCEEDED",
        RetriesExhausted => "RETRIES_EXHAUSTED",
        PermanentError => "PERMANENT_ERROR",
        Rejected => "REJECTED",
        CancelledByOperator => "CANCELLED_BY_OPERATOR",
        /// The schedule's `approval: every_run`: each window waits for an operator.
        ApprovalRequired => "APPROVAL_REQUIRED",
        /// Nobody approved the window within the schedule's `approval_timeout`.
        ApprovalTimeout => "APPROVAL_TIMEOUT",
        /// The guarded job's dry run reported more items than `guard.max_affected`.
        AffectedOverLimit => "AFFECTED_OVER_LIMIT",
        /// An upstream's run for the window ended without succeeding (`after`).
        UpstreamNotSucceeded => "UPSTREAM_NOT_SUCCEEDED",
        /// An upstream's run for the window succeeded but is SUSPECT (its `count` outside
        /// its `expect` band) and the dependent does not `accept_suspect`: an operator decides.
        UpstreamSuspect => "UPSTREAM_SUSPECT",
    }
);

impl RunStatus {
    /// No automatic event moves a run out of these. FAILED alone can be reopened, and only
    /// by an operator's retry.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Success
                | RunStatus::PartialSuccess
                | RunStatus::Failed
                | RunStatus::Skipped
                | RunStatus::Coalesced
                | RunStatus::Cancelled
        )
    }

    /// Nothing at all moves a run out of these.
    pub fn is_absorbing(self) -> bool {
        self.is_terminal() && self != RunStatus::Failed
    }

    /// In flight or waiting for the machine: the reconciler's stuck-run scan looks at these.
    /// STALLED is included so that a crash between marking and resolving it is found again.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            RunStatus::Pending
                | RunStatus::Queued
                | RunStatus::Running
                | RunStatus::RetryPending
                | RunStatus::Stalled
        )
    }

    /// Counts as the window having been done (ALREADY_DONE for later triggers).
    pub fn is_success(self) -> bool {
        matches!(self, RunStatus::Success | RunStatus::PartialSuccess)
    }
}

named_enum!(
    /// Everything that can happen to a run.
    RunEvent {
        /// Sent to its lane (again, with the same message identity, if the first send was lost).
        Enqueue => "ENQUEUE",
        /// A worker took it: new attempt, new lease epoch.
        Start => "START",
        /// A worker took over a RUNNING run whose lease had expired.
        Reclaim => "RECLAIM",
        Heartbeat => "HEARTBEAT",
        Succeed => "SUCCEED",
        SucceedPartially => "SUCCEED_PARTIALLY",
        /// The attempt failed in a way worth retrying; the message comes back after a backoff.
        FailRetryable => "FAIL_RETRYABLE",
        /// Failed for good: a permanent error, or the last attempt.
        Fail => "FAIL",
        /// The reconciler found the lease or runtime expired.
        Stall => "STALL",
        /// A stalled run of an idempotent job goes back for a new attempt.
        RetryAfterStall => "RETRY_AFTER_STALL",
        HoldForApproval => "HOLD_FOR_APPROVAL",
        /// A run of a paused schedule that the throttled catch-up or backfill release sent
        /// before the pause: it waits PENDING (reason PAUSED) to be released again after the
        /// resume, instead of being dropped.
        WaitResume => "WAIT_RESUME",
        /// QUEUE_NEW: an earlier run is still active; wait PENDING (reason QUEUED_BEHIND) for
        /// the finishing run to release this one, instead of holding a message in the lane.
        WaitBehind => "WAIT_BEHIND",
        /// A late live run waits PENDING (reason LATE_AWAITING_PLAN) for the reconciler to
        /// plan it with its gap, instead of running in the live lane on its own.
        AwaitPlan => "AWAIT_PLAN",
        /// The reconciler made a waiting late run a catch-up run of its gap (trigger
        /// CATCH_UP, a replay group, a catch-up lane): it waits for the throttled release.
        PlanCatchUp => "PLAN_CATCH_UP",
        Skip => "SKIP",
        Coalesce => "COALESCE",
        /// Operator events.
        Approve => "APPROVE",
        Reject => "REJECT",
        Cancel => "CANCEL",
        Retry => "RETRY",
        /// A step of a `steps` job succeeded and handed over to the next step's message: the
        /// attempt ends, the run stays RUNNING (see [`crate::steps`]).
        AdvanceStep => "ADVANCE_STEP",
        /// A worker took the next step of a run handed over between steps: new attempt, new
        /// lease epoch, still RUNNING.
        StartStep => "START_STEP",
        /// The job (or step) answered children: its attempt ends, and the run stays RUNNING
        /// until every child has ended (see [`crate::children`]).
        AwaitChildren => "AWAIT_CHILDREN",
    }
);

impl RunEvent {
    pub fn is_operator(self) -> bool {
        matches!(
            self,
            RunEvent::Approve | RunEvent::Reject | RunEvent::Cancel | RunEvent::Retry
        )
    }
}

/// A transition the table does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("RUN_INVALID_TRANSITION: {event} is not allowed from {from}")]
pub struct TransitionError {
    pub from: RunStatus,
    pub event: RunEvent,
}

impl TransitionError {
    pub fn code(&self) -> Code {
        Code::RunInvalidTransition
    }
}

/// The closed transition table. Anything not listed is an error.
pub fn transition(from: RunStatus, event: RunEvent) -> Result<RunStatus, TransitionError> {
    use RunEvent as E;
    use RunStatus as S;
    let to = match (from, event) {
        (S::Pending, E::Enqueue) => S::Queued,
        (S::Pending | S::Queued | S::RetryPending, E::Start) => S::Running,
        (S::Queued, E::Enqueue) => S::Queued,
        (S::RetryPending, E::Enqueue) => S::RetryPending,
        // A retry that must not run (its schedule paused, or its window overtaken) ends too.
        (S::Pending | S::Queued | S::RetryPending, E::Skip) => S::Skipped,
        (S::Pending | S::Queued | S::ManualRequired, E::Coalesce) => S::Coalesced,
        // From RUNNING: a guarded job's dry run found more than `max_affected`.
        (S::Pending | S::Queued | S::Stalled | S::Running, E::HoldForApproval) => S::ManualRequired,
        // A window that waited for approval (`approval: every_run`) past its timeout.
        (S::ManualRequired, E::Skip) => S::Skipped,
        (S::Pending | S::Queued, E::WaitBehind | E::AwaitPlan) => S::Pending,
        // A retry under QUEUE_NEW waits behind a running window like any queued run.
        (S::RetryPending, E::WaitBehind) => S::Pending,
        (S::Pending | S::Queued | S::RetryPending, E::WaitResume) => S::Pending,
        (S::Pending, E::PlanCatchUp) => S::Pending,

        (
            S::Running,
            E::Reclaim | E::Heartbeat | E::AdvanceStep | E::StartStep | E::AwaitChildren,
        ) => S::Running,
        // A run between two steps whose schedule stopped: it waits for the resume.
        (S::Running, E::WaitResume) => S::Pending,
        (S::Running, E::Succeed) => S::Success,
        (S::Running, E::SucceedPartially) => S::PartialSuccess,
        (S::Running, E::FailRetryable) => S::RetryPending,
        (S::Running | S::RetryPending, E::Fail) => S::Failed,
        (S::Running, E::Stall) => S::Stalled,
        (S::Stalled, E::RetryAfterStall) => S::RetryPending,

        (S::ManualRequired, E::Approve) => S::Pending,
        (S::ManualRequired, E::Reject) => S::Cancelled,
        (S::Pending | S::Queued | S::RetryPending | S::ManualRequired | S::Stalled, E::Cancel) => {
            S::Cancelled
        }
        (S::Failed | S::Stalled, E::Retry) => S::Pending,
        _ => return Err(TransitionError { from, event }),
    };
    Ok(to)
}

/// The statuses a run may be created in. QUEUED: the ticker writes a run it is about to
/// send QUEUED, so its send needs no second write (a lost send is found by the shard's
/// `sent_through`, see the ticker).
pub fn is_initial(status: RunStatus) -> bool {
    matches!(
        status,
        RunStatus::Pending
            | RunStatus::Queued
            | RunStatus::Skipped
            | RunStatus::Coalesced
            | RunStatus::ManualRequired
    )
}

/// Who holds a run, until when, under which epoch. Every write by a worker is conditioned on
/// the epoch it was given, so a worker whose lease was taken over cannot write (invariant 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Lease {
    pub owner: String,
    pub until: DateTime<Utc>,
    pub epoch: u64,
}

/// What a job reported about its work.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What the schedule's `verify` source expected for the window (see
    /// [`crate::ScheduleSpec::verify`]), recorded beside what the job reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_checksum: Option<String>,
    /// SUSPECT: the run succeeded but its `count` is outside the schedule's `expect` band
    /// (see [`crate::quality`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<crate::quality::Quality>,
    /// Why it is SUSPECT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality_reason: Option<crate::quality::QualityReason>,
}

/// What distinguishes an operator's run from the expected occurrence at the same instant.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(tag = "kind", content = "id", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Origin {
    /// The expected occurrence itself (ticker or reconciler).
    Expected,
    Manual(String),
    Backfill(String),
}

/// Identity of a run: `(schedule_id, scheduled_for)` for an expected occurrence, plus the
/// request or backfill id for an operator's run.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct RunKey {
    pub schedule_id: String,
    pub scheduled_for: DateTime<Utc>,
    pub origin: Origin,
}

impl RunKey {
    pub fn expected(schedule_id: impl Into<String>, scheduled_for: DateTime<Utc>) -> RunKey {
        RunKey {
            schedule_id: schedule_id.into(),
            scheduled_for,
            origin: Origin::Expected,
        }
    }

    /// The sort-key suffix: `RUN#{scheduled_for}` or `RUN#{scheduled_for}#MANUAL#{id}`.
    pub fn sort_key(&self) -> String {
        let at = utc_text(self.scheduled_for);
        match &self.origin {
            Origin::Expected => format!("RUN#{at}"),
            Origin::Manual(id) => format!("RUN#{at}#MANUAL#{id}"),
            Origin::Backfill(id) => format!("RUN#{at}#BACKFILL#{id}"),
        }
    }
}

impl std::fmt::Display for RunKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.schedule_id, self.sort_key())
    }
}

/// One ledger entry: an expected occurrence, a range of them, or an operator's request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Run {
    pub key: RunKey,
    pub trigger: Trigger,
    pub status: RunStatus,
    pub reason: Option<Reason>,
    pub window: Window,
    pub business_date: NaiveDate,
    pub idempotency_key: IdempotencyKey,
    pub replay_group_id: Option<String>,
    /// For a range record: the last window it covers, and how many.
    pub range_end: Option<DateTime<Utc>>,
    pub count: u32,
    /// For COALESCED: the run that does its work.
    pub coalesced_into: Option<DateTime<Utc>>,
    pub lane: Option<Lane>,
    pub attempts: u32,
    pub lease: Option<Lease>,
    /// Bumped by every start or reclaim; 0 before the first.
    pub lease_epoch: u64,
    pub created_at: DateTime<Utc>,
    /// When the entry last changed (any transition): how long a parked run has waited.
    pub updated_at: DateTime<Utc>,
    pub queued_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    pub schedule_version: u64,
    pub cron: String,
    pub timezone: String,
    pub job_id: Option<String>,
    pub result: Option<RunResult>,
    /// An operator forced this run (`mode=new`): it executes even when its window's
    /// idempotency key already succeeded (no ALREADY_DONE skip).
    #[serde(default)]
    pub forced: bool,
    /// How long the ledger keeps the run once it ends, fixed at creation (the schedule's
    /// `retention`; longer for range records): see [`crate::retention`].
    #[serde(default = "default_retention")]
    pub retention: crate::span::Span,
    /// A cascading backfill's run: as it ends, the same window of each schedule that runs
    /// after it is re-run under the same backfill (see the app's `cascade`). Any other run
    /// (an operator's retry sets it, and a repair run carries it): as it ends SUCCESS, each
    /// dependent window skipped for its window (UPSTREAM_NOT_SUCCEEDED) is re-opened (see
    /// the app's `repair`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cascade: bool,
    /// A backfill's own `verify` source, for its runs: asked instead of the schedule's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<crate::spec::JobSpec>,
    /// A `steps` job's checkpoints, one per step (empty for a one-call job).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<crate::steps::StepCheckpoint>,
    /// The children this run's job (or step) answered, as counted so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<crate::children::ChildCounts>,
}

fn default_retention() -> crate::span::Span {
    crate::retention::DEFAULT_RETENTION
}

/// The stable ledger format (DESIGN "Manifest and ledger formats").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LedgerEntry {
    pub schedule: String,
    pub scheduled_for: String,
    pub trigger: Trigger,
    pub status: RunStatus,
    pub reason: Option<Reason>,
    pub attempts: u32,
    pub window_start: String,
    pub window_end: String,
    pub idempotency_key: String,
    pub replay_group_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_end: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coalesced_into: Option<String>,
}

impl Run {
    pub fn ledger_entry(&self) -> LedgerEntry {
        LedgerEntry {
            schedule: self.key.schedule_id.clone(),
            scheduled_for: utc_text(self.key.scheduled_for),
            trigger: self.trigger,
            status: self.status,
            reason: self.reason,
            attempts: self.attempts,
            window_start: utc_text(self.window.start),
            window_end: utc_text(self.window.end),
            idempotency_key: self.idempotency_key.to_string(),
            replay_group_id: self.replay_group_id.clone(),
            range_end: self.range_end.map(utc_text),
            count: self.range_end.map(|_| self.count),
            coalesced_into: self.coalesced_into.map(utc_text),
        }
    }

    /// Applies an event to the status, or says why it cannot.
    pub fn apply(&mut self, event: RunEvent) -> Result<RunStatus, TransitionError> {
        self.status = transition(self.status, event)?;
        Ok(self.status)
    }
}
