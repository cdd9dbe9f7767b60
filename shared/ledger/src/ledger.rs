//! The ledger as the functions see it: a small trait over schedules and runs, and the types
//! its operations take and return. `cronledger_aws::DynamoLedger` is the DynamoDB version.

use chrono::{DateTime, Utc};
use cronledger_core::children::{Child, ChildStatus};
use cronledger_core::run::is_initial;
use cronledger_core::{Reason, Run, ScheduleSpec};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
pub use crate::run_change::{Ending, LeaseGrant, Opening, RunChange, Transition};
use cronledger_core::named_enum;

named_enum!(
    /// Operational state of a schedule, apart from its spec's `enabled`.
    ScheduleState {
        Active => "ACTIVE",
        /// Stopped by an operator with a note; windows while paused are PAUSED skips.
        Paused => "PAUSED",
        /// Retired: never fires again, never changes again, its runs stay readable.
        Archived => "ARCHIVED",
        /// Shown, never stored: an active schedule with no window left (past its `end_at`,
        /// or its `max_runs` windows all created). It stays, with its ledger, editable (a
        /// later `end_at` brings it back).
        Ended => "ENDED",
    }
);

/// One pause, kept on the schedule so the reconciler can tell PAUSED windows from missed ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pause {
    pub from: DateTime<Utc>,
    /// `None` while still paused.
    pub until: Option<DateTime<Utc>>,
    pub actor: String,
    pub note: String,
}

/// How many pauses a schedule remembers (older ones are beyond any catch-up horizon).
pub const PAUSE_HISTORY: usize = 20;

/// Fires per [`RunStore::fire_all`](crate::store::RunStore::fire_all): the ticker's batch of fires written side by side
/// (two writes each) and sent 10 to a request.
pub const MAX_FIRES_PER_TRANSACTION: usize = 50;

/// An expression (cron and timezone) the schedule had until an edit, kept until the
/// reconciler's watermark passes `until`: the windows before the edit are judged by the
/// expression in force then, not by the new one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PastTiming {
    pub cron: String,
    pub timezone: String,
    /// The edit's instant: this expression's windows end here.
    pub until: DateTime<Utc>,
}

/// A schedule as stored: its spec plus the state the scheduler keeps about it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSchedule {
    pub spec: ScheduleSpec,
    pub version: u64,
    pub state: ScheduleState,
    pub shard: u32,
    /// The next occurrence the ticker will fire; `None` when it never fires again.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The reconciler's watermark: every window up to here is accounted for.
    pub reconciled_through: DateTime<Utc>,
    pub pauses: Vec<Pause>,
    /// Expressions replaced by edits the reconciler has not reconciled past yet, oldest first.
    pub past_timings: Vec<PastTiming>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Runs ended FAILED in a row since the last success (see [`ScheduleStore::count_failure_streak`](crate::store::ScheduleStore::count_failure_streak)).
    pub failure_streak: u32,
    /// The schedules that run `after` this one, sorted: who a run's end may start. Kept by
    /// the reconciler from the specs (see [`ScheduleStore::set_downstream`](crate::store::ScheduleStore::set_downstream)), so it can lag an
    /// edit by a pass; the specs' `after` is the truth.
    pub downstream: Vec<String>,
}

/// How a run's end moves its schedule's failure streak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreakChange {
    /// One more failure in a row.
    Failed,
    /// A success ends the streak.
    Succeeded,
}

impl StoredSchedule {
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// The replaced expressions that still judge windows: their edit is past the watermark.
    pub fn past_timings_ahead(&self) -> impl Iterator<Item = &PastTiming> {
        self.past_timings
            .iter()
            .filter(|p| p.until > self.reconciled_through)
    }

    /// The next fire time after `now`, what people are shown: `next_run_at` is the first fire
    /// time of the current definition, and no fire moves it (see [`crate::fire_mark`]).
    pub fn next_fire_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let first = self.next_run_at?;
        if first > now {
            return Some(first);
        }
        let schedule = self.schedule().ok()?;
        schedule
            .next_fire_after(schedule.occurrence_at(now))
            .map(|next| next.max(first))
    }

    /// The schedule ready to evaluate, its `max_runs` counted from its creation when it has
    /// no `start_at`.
    pub fn schedule(&self) -> Result<cronledger_core::Schedule, cronledger_core::Issue> {
        Ok(cronledger_core::Schedule::new(self.spec.clone())?.anchored(self.created_at))
    }

    /// Whether the ticker fires it (active, enabled, with a first fire time).
    pub fn fires(&self) -> bool {
        self.state == ScheduleState::Active && self.spec.enabled && self.next_run_at.is_some()
    }

    /// Why none of the schedule's runs may start now, whatever already fired them: paused,
    /// archived, or disabled in its spec. `None` while it runs normally.
    pub fn stopped(&self) -> Option<Reason> {
        match self.state {
            ScheduleState::Archived => Some(Reason::Archived),
            ScheduleState::Paused => Some(Reason::Paused),
            ScheduleState::Active | ScheduleState::Ended if !self.spec.enabled => {
                Some(Reason::Disabled)
            }
            ScheduleState::Active | ScheduleState::Ended => None,
        }
    }

    /// Whether the schedule was paused at `t` (for PAUSED skips).
    pub fn paused_at(&self, t: DateTime<Utc>) -> bool {
        self.pauses
            .iter()
            .any(|p| p.from <= t && p.until.is_none_or(|until| t < until))
    }
}

/// Who changes a schedule, why, and when: what the audit entry records besides the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeMeta {
    pub actor: String,
    pub reason: String,
    pub at: DateTime<Utc>,
    /// What else the change's audit entry records (an update's assessed risk).
    pub details: Option<serde_json::Value>,
}

named_enum!(
    AuditAction {
        Create => "CREATE",
        Update => "UPDATE",
        Pause => "PAUSE",
        Resume => "RESUME",
        Archive => "ARCHIVE",
        // Operators' actions on the schedule's runs and backfills: they change no version.
        RunNow => "RUN_NOW",
        RunAt => "RUN_AT",
        RunRetry => "RUN_RETRY",
        RunApprove => "RUN_APPROVE",
        RunReject => "RUN_REJECT",
        RunCancel => "RUN_CANCEL",
        // The scheduler re-opened a dependent's window when an operator's retry repaired its
        // upstream (the entry names the upstream run).
        RunRepair => "RUN_REPAIR",
        BackfillCreate => "BACKFILL_CREATE",
        BackfillPause => "BACKFILL_PAUSE",
        BackfillResume => "BACKFILL_RESUME",
        BackfillCancel => "BACKFILL_CANCEL",
        BackfillApprove => "BACKFILL_APPROVE",
    }
);

/// One audited change (the schedule before and after, as JSON documents), or one
/// operator's action on its runs or backfills (`details` says on what; `after` is null).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub schedule_id: String,
    /// The version the change produced; for an operator's action, the version it was
    /// taken under.
    pub version: u64,
    pub action: AuditAction,
    pub actor: String,
    pub reason: String,
    pub at: DateTime<Utc>,
    pub before: Option<serde_json::Value>,
    pub after: serde_json::Value,
    pub details: Option<serde_json::Value>,
}

/// An operator's action to record in a schedule's audit log: what, on which run or
/// backfill (`details`), by whom and why.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorAction {
    pub schedule_id: String,
    pub action: AuditAction,
    pub actor: String,
    /// The operator's note.
    pub reason: String,
    pub at: DateTime<Utc>,
    pub details: serde_json::Value,
}

/// Result of a create-if-absent: ours, or the one that was there first.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    New(Run),
    Existing(Run),
}

impl Created {
    pub fn is_new(&self) -> bool {
        matches!(self, Created::New(_))
    }

    pub fn run(&self) -> &Run {
        match self {
            Created::New(run) | Created::Existing(run) => run,
        }
    }
}

/// One change of a child, conditioned on what the caller read.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildChange {
    pub step: u32,
    pub index: u32,
    pub from: ChildStatus,
    pub epoch: u64,
    pub to: ChildStatus,
    pub at: DateTime<Utc>,
    /// A start: the next epoch and attempt, leased until then.
    pub start_until: Option<DateTime<Utc>>,
    pub count: Option<u64>,
    pub checksum: Option<String>,
    pub error_code: Option<String>,
}

impl ChildChange {
    /// `child` (as read) moving to `to`, conditioned on its status and epoch.
    pub fn new(child: &Child, to: ChildStatus, at: DateTime<Utc>) -> ChildChange {
        ChildChange {
            step: child.step,
            index: child.index,
            from: child.status,
            epoch: child.lease_epoch,
            to,
            at,
            start_until: None,
            count: None,
            checksum: None,
            error_code: None,
        }
    }

    /// How the change moves its parent's counters: `(succeeded, failed, count)` added.
    pub fn counter_delta(&self) -> Option<(i64, i64, u64)> {
        match (self.from, self.to) {
            (from, ChildStatus::Success) if !from.is_terminal() => {
                Some((1, 0, self.count.unwrap_or(0)))
            }
            (from, ChildStatus::Failed) if !from.is_terminal() => Some((0, 1, 0)),
            (ChildStatus::Failed, ChildStatus::Pending) => Some((0, -1, 0)),
            _ => None,
        }
    }
}

/// Refuses a run no writer may create: only the statuses a run begins in are stored new.
pub fn check_new_run(run: &Run) -> Result<(), StoreError> {
    if is_initial(run.status) {
        Ok(())
    } else {
        Err(StoreError::InvalidRequest(format!(
            "a run cannot be created {}",
            run.status
        )))
    }
}

/// Refuses a batch of fires over [`MAX_FIRES_PER_TRANSACTION`] (both stores).
pub fn check_fire_batch(fires: &[Fire]) -> Result<(), StoreError> {
    if fires.len() > MAX_FIRES_PER_TRANSACTION {
        return Err(StoreError::InvalidRequest(format!(
            "{} fires at once; at most {MAX_FIRES_PER_TRANSACTION}",
            fires.len()
        )));
    }
    Ok(())
}

/// After a fire's run was written and its schedule did not move: whether the schedule is
/// still the one the run was planned under (same version, ACTIVE), so another writer moved
/// it and the run stands, or an edit, pause or archive got in between and the run is to be
/// taken back. `current` is the schedule as read then.
pub fn fire_still_planned(
    current: Result<StoredSchedule, StoreError>,
    fire: &Fire,
) -> Result<bool, StoreError> {
    match current {
        Ok(current) => {
            Ok(current.version == fire.run.schedule_version
                && current.state == ScheduleState::Active)
        }
        Err(StoreError::ScheduleNotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// What the ticker asks for one due schedule: record the run, move the schedule on.
#[derive(Debug, Clone, PartialEq)]
pub struct Fire {
    pub run: Run,
    /// The `next_run_at` the ticker read; the write fails if another ticker moved it.
    pub expected_next_run_at: DateTime<Utc>,
    pub next_run_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FireOutcome {
    /// The run was created; the schedule advanced with it, or another writer (a ticker, the
    /// reconciler) had moved it already.
    Created,
    /// Nothing was written. `existing` is the run already recorded for the window (a
    /// reconciler or another ticker got there first); `schedule_moved` means the schedule's
    /// `next_run_at` was no longer the expected one (or it stopped firing).
    Lost {
        existing: Option<Box<Run>>,
        schedule_moved: bool,
    },
}

/// One page of a listing; `next` is an opaque cursor for the following page.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// What [`RunStore::recent_runs`](crate::store::RunStore::recent_runs) found, and how far back it looked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecentRuns {
    pub runs: Vec<Run>,
    /// The read reached the schedule's oldest run.
    pub complete: bool,
    /// The window of the oldest run the read looked at (when not `complete`).
    pub oldest_read: Option<DateTime<Utc>>,
}
