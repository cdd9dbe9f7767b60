//! Replays: an operator's retry of every run matching a filter (schedule or owner, statuses,
//! a range of windows), released in the reconciler's pass at the backfill throttle. A replay
//! is its own item (`PK=REPLAY#{id}`, `SK=STATE`) beside the backfills rather than a kind
//! of backfill: a backfill walks one schedule's occurrences and writes new runs, a replay
//! reopens existing runs of any number of schedules, so it keeps the list of runs it
//! matched (at most [`REPLAY_MAX_RUNS`], which keeps the item far below DynamoDB's 400 KB)
//! and a cursor into it.

use chrono::{DateTime, Utc};
use cronledger_core::{RunKey, RunStatus};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::layer::store_trait;
use crate::ops::{BackfillLimits, BackfillState};

/// Most runs one replay may hold: a larger filter is refused (`REPLAY_TOO_LARGE`).
pub const REPLAY_MAX_RUNS: usize = 1000;

/// Why a replay waits for an admin's approval before it retries anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReplayApprovalReason {
    /// It retries runs of a schedule with `side_effects: true`.
    SideEffects,
    /// It retries runs of a schedule with `approval: every_run`: approved once, as a whole.
    EveryRun,
}

/// Which runs a replay matched: runs of `schedule` (or of every schedule `owner` owns)
/// scheduled in `[from, to)` whose status is one of `statuses`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayFilter {
    pub schedule: Option<String>,
    pub owner: Option<String>,
    pub statuses: Vec<RunStatus>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub include_non_idempotent: bool,
}

/// One matched run, as it was when the replay matched it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayEntry {
    pub key: RunKey,
    pub status: RunStatus,
    /// Its schedule has `idempotent: true`.
    pub idempotent: bool,
    /// Its schedule has `side_effects: true`.
    pub side_effects: bool,
}

/// How the replay's retried runs ended, as its passes saw them.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ReplayTally {
    pub succeeded: u64,
    pub failed: u64,
    /// Ended otherwise (cancelled, skipped, held for an operator).
    pub other: u64,
    /// Matched runs passed over at release: they no longer had a status of the filter
    /// (retried or cancelled by someone else meanwhile).
    pub passed_over: u64,
}

/// One replay: `PK=REPLAY#{id}`, `SK=STATE`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Replay {
    pub id: String,
    pub filter: ReplayFilter,
    /// The runs it retries, oldest window first.
    pub runs: Vec<ReplayEntry>,
    /// Matched runs of non-idempotent schedules left out (`include_non_idempotent: false`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub non_idempotent: Vec<ReplayEntry>,
    /// Runs before this index have been retried or passed over.
    pub cursor: u64,
    /// Retried runs not yet seen ended: the pass re-reads these (at most `concurrency`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<RunKey>,
    pub tally: ReplayTally,
    /// The backfill throttle it is released at.
    pub limits: BackfillLimits,
    /// RUNNING, PAUSED (only while held for approval), CANCELLED or DONE.
    pub state: BackfillState,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approval_required: Vec<ReplayApprovalReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<DateTime<Utc>>,
    /// A retried run that ends SUCCESS re-opens the dependent windows skipped for it.
    pub cascade: bool,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    pub note: String,
    pub updated_at: DateTime<Utc>,
    pub last_release_at: Option<DateTime<Utc>>,
    /// Optimistic-concurrency version: 0 before the first write.
    pub version: u64,
}

impl Replay {
    /// Held for an admin's approval: nothing of it may start.
    pub fn awaiting_approval(&self) -> bool {
        !self.approval_required.is_empty() && self.approved_at.is_none()
    }

    /// Matched runs not yet retried nor passed over.
    pub fn unreleased(&self) -> &[ReplayEntry] {
        let at = (self.cursor as usize).min(self.runs.len());
        &self.runs[at..]
    }
}

store_trait! {
    /// Replays: an operator's retry of the runs a filter matched, versioned.
    pub trait ReplayStore {
    /// Stores a new replay (version 0 -> 1); `REPLAY_ALREADY_EXISTS` if its id is taken.
    async fn create_replay(&self, replay: &Replay) -> Result<Replay, StoreError>;

    async fn get_replay(&self, id: &str) -> Result<Replay, StoreError>;

    /// Stores `replay` if the stored version is still `replay.version`, at version + 1;
    /// `None` when another writer got there first.
    async fn put_replay(&self, replay: &Replay) -> Result<Option<Replay>, StoreError>;

    /// Replays RUNNING or PAUSED, oldest first.
    async fn open_replays(&self) -> Result<Vec<Replay>, StoreError>;
}
}
