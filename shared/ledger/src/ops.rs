//! The control plane's own items beside the ledger: request idempotency claims
//! (`IDEM#{key}`, expiring by TTL), backfills (`BACKFILL#{id}`: range, limits, cursor, state),
//! and the system audit log (system-wide actions: the kill switch).

use chrono::{DateTime, Utc};
use cronledger_core::RunKey;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::layer::store_trait;

/// Who first used a request's `Idempotency-Key`, and for which run. A second request with the
/// same key finds this and answers with that run instead of creating another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IdempotencyClaim {
    /// The key as scoped by the caller (the api prefixes the schedule id).
    pub key: String,
    /// The run the first request creates.
    pub run: RunKey,
    /// SHA-256 (hex) of the first request's body: the same key with another body is refused.
    /// Claims stored before the hash existed have none and replay whatever the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_hash: Option<String>,
    pub created_at: DateTime<Utc>,
    /// When the claim may be forgotten (the table's TTL attribute).
    pub expires_at: DateTime<Utc>,
}

/// A backfill's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BackfillState {
    Running,
    Paused,
    Cancelled,
    Done,
}

impl BackfillState {
    pub fn as_str(self) -> &'static str {
        match self {
            BackfillState::Running => "RUNNING",
            BackfillState::Paused => "PAUSED",
            BackfillState::Cancelled => "CANCELLED",
            BackfillState::Done => "DONE",
        }
    }

    /// Still has work to release (or may have, once resumed).
    pub fn is_open(self) -> bool {
        matches!(self, BackfillState::Running | BackfillState::Paused)
    }
}

impl std::fmt::Display for BackfillState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a backfill is PAUSED (`None`: an operator's pause, or one awaiting approval).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BackfillPauseReason {
    /// Its measured spend reached its `budget` (a resume needs a note and lifts the cap).
    Budget,
}

/// What a backfill may spend, was estimated to cost, and has cost so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackfillBudget {
    /// Over them at creation it is refused; reaching them pauses it (BUDGET).
    #[serde(
        default,
        skip_serializing_if = "cronledger_core::estimate::Budget::is_empty"
    )]
    pub caps: cronledger_core::estimate::Budget,
    /// What its selected windows were estimated to cost when it was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<cronledger_core::estimate::Estimate>,
    /// What its finished runs cost, measured by the last release pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<cronledger_core::estimate::Spend>,
    /// Why the release paused it (`None` for an operator's pause).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<BackfillPauseReason>,
}

/// Why a backfill waits for an admin's approval before it first runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ApprovalReason {
    /// It would run more windows than the api's approval limit.
    OverLimit,
    /// It runs windows scheduled before the schedule existed.
    BeforeScheduleCreated,
    /// Its schedule has `approval: every_run`: the backfill is approved once, as a whole,
    /// and its windows then run without a hold each.
    EveryRun,
}

impl ApprovalReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalReason::OverLimit => "OVER_LIMIT",
            ApprovalReason::BeforeScheduleCreated => "BEFORE_SCHEDULE_CREATED",
            ApprovalReason::EveryRun => "EVERY_RUN",
        }
    }
}

/// Which windows of the range a backfill runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Reprocess {
    /// Windows with no run that succeeded, is in flight, or awaits approval.
    Missing,
    /// Windows whose runs failed (and none succeeded).
    Failed,
    /// Every window, done or not (a forced re-run of history).
    All,
}

/// How fast a backfill may go.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackfillLimits {
    /// Runs of this backfill in flight at most.
    pub concurrency: u32,
    /// Runs released per pass at most.
    pub batch_size: u32,
    /// Runs released per minute at most, averaged over passes.
    pub rate_per_minute: f64,
}

impl Default for BackfillLimits {
    fn default() -> Self {
        BackfillLimits {
            concurrency: 2,
            batch_size: 7,
            rate_per_minute: 7.0,
        }
    }
}

/// When a running backfill stops releasing on its own (and starts again once clear).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseConditions {
    /// Visible messages in the realtime lane above which it waits.
    #[serde(default)]
    pub realtime_backlog: Option<u64>,
    /// Share of its finished runs that failed above which it waits (once 4 have finished).
    #[serde(default)]
    pub error_rate: Option<f64>,
    /// CloudWatch alarms that hold it while any is in ALARM.
    #[serde(default)]
    pub alarms: Vec<String>,
}

/// One backfill: `PK=BACKFILL#{id}`, `SK=STATE`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Backfill {
    pub id: String,
    pub schedule_id: String,
    /// Occurrences scheduled in `[from, to]`.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub reprocess: Reprocess,
    pub limits: BackfillLimits,
    pub pause_when: PauseConditions,
    pub state: BackfillState,
    /// Why it is held right now by a pause condition (`None` while releasing).
    pub held: Option<String>,
    /// Every occurrence at or before this has been written or passed over.
    pub cursor: Option<DateTime<Utc>>,
    /// Occurrences in the range.
    pub total_windows: u64,
    /// Occurrences the reprocess filter selected when the backfill was created.
    pub planned: u64,
    /// Runs written so far.
    pub written: u64,
    /// Selected windows passed over at release time because they no longer needed it.
    pub passed_over: u64,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    pub note: String,
    pub updated_at: DateTime<Utc>,
    pub last_release_at: Option<DateTime<Utc>>,
    /// The MANUAL_REQUIRED range record whose approval created it, if any.
    pub source_record: Option<RunKey>,
    /// For a backfill the reconciler proposed for a long gap: the `replay_group_id` of the
    /// gap's catch-up entries. Its CATCH_UP runs count as the backfill's own, and the windows
    /// it holds for approval are the ones resuming it releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_group: Option<String>,
    /// Why it was created PAUSED for an admin (empty: it needed no approval).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approval_required: Vec<ApprovalReason>,
    /// The admin who approved it, and when (`None` until then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<DateTime<Utc>>,
    /// Each of its runs, as it ends, re-runs the same window of the schedules that run
    /// after this one (and theirs, down the chain).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cascade: bool,
    /// Its own source of each window's expected `{count, checksum}`, asked after each of its
    /// runs instead of the schedule's `verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<cronledger_core::JobSpec>,
    /// Its budget: caps, the estimate at creation, the measured spend.
    #[serde(flatten)]
    pub budget: BackfillBudget,
    /// Optimistic-concurrency version: 0 before the first write.
    pub version: u64,
}

impl Backfill {
    /// Held for an admin's approval: nothing of it may start, and a plain resume is refused.
    pub fn awaiting_approval(&self) -> bool {
        !self.approval_required.is_empty() && self.approved_at.is_none()
    }
}

/// One system-wide operator action (the kill switch): `PK=SYSTEM`, `SK=AUDIT#...`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SystemAuditEntry {
    pub at: DateTime<Utc>,
    pub actor: String,
    pub action: String,
    pub note: String,
    pub details: serde_json::Value,
}

/// The global kill switch as stored (`PK=SYSTEM`, `SK=KILL_SWITCH`): the one fact every
/// function checks before it fires, plans, releases or starts anything. The API writes it
/// first, then disables what AWS can disable for it (the ticker's and reconciler's
/// schedules, the workers' event source mappings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KillSwitch {
    pub engaged: bool,
    /// When it was last engaged or released.
    pub since: DateTime<Utc>,
    pub actor: String,
    pub note: String,
}

store_trait! {
    /// Backfills: an operator's replay of a range of windows, versioned.
    pub trait BackfillStore {
    /// Stores a new backfill (version 0 -> 1); `BACKFILL_ALREADY_EXISTS` if its id is taken.
    async fn create_backfill(&self, backfill: &Backfill) -> Result<Backfill, StoreError>;

    async fn get_backfill(&self, id: &str) -> Result<Backfill, StoreError>;

    /// Stores `backfill` if the stored version is still `backfill.version`, at version + 1;
    /// `None` when another writer got there first.
    async fn put_backfill(&self, backfill: &Backfill) -> Result<Option<Backfill>, StoreError>;

    /// Backfills RUNNING or PAUSED, oldest first.
    async fn open_backfills(&self) -> Result<Vec<Backfill>, StoreError>;
}
}

store_trait! {
    /// The system's own items: idempotency claims of the API, its audit log, the kill switch.
    pub trait SystemStore {
    /// Stores the claim unless one exists for its key (and has not expired); returns the one
    /// already there, or `None` when this one was stored.
    async fn claim_idempotency(
        &self,
        claim: &IdempotencyClaim,
    ) -> Result<Option<IdempotencyClaim>, StoreError>;

    async fn append_system_audit(&self, entry: &SystemAuditEntry) -> Result<(), StoreError>;

    /// The system audit log, newest first.
    async fn system_audit(&self, limit: u32) -> Result<Vec<SystemAuditEntry>, StoreError>;

    /// The kill switch; `None` when it was never set (released).
    async fn kill_switch(&self) -> Result<Option<KillSwitch>, StoreError>;

    /// Engages or releases the kill switch (last writer wins: it is one operator's lever).
    async fn put_kill_switch(&self, state: &KillSwitch) -> Result<(), StoreError>;
}
}

/// Where the control plane's items live: backfills, replays and the system's own.
pub trait OpsStore: BackfillStore + crate::replays::ReplayStore + SystemStore {}

impl<T: BackfillStore + crate::replays::ReplayStore + SystemStore + ?Sized> OpsStore for T {}
