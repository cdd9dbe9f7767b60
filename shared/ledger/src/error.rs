//! The ledger's typed errors, each with a stable code (part of the API and log contract:
//! add codes, never rename them).

use std::error::Error as StdError;

use cronledger_core::run::TransitionError;
use cronledger_core::{Issue, RunStatus};

/// Everything a ledger operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("SCHEDULE_NOT_FOUND: schedule `{0}` does not exist")]
    ScheduleNotFound(String),

    #[error("SCHEDULE_ALREADY_EXISTS: schedule `{0}` already exists")]
    ScheduleAlreadyExists(String),

    /// The caller's expected version is not the stored one (someone else changed it first).
    #[error("SCHEDULE_VERSION_CONFLICT: schedule `{id}` is at version {actual}, the change expected {expected}")]
    VersionConflict {
        id: String,
        expected: u64,
        actual: u64,
    },

    /// The schedule never had this version (no audit entry records it).
    #[error("SCHEDULE_VERSION_NOT_FOUND: schedule `{id}` has no version {version}")]
    VersionNotFound { id: String, version: u64 },

    #[error("SCHEDULE_ARCHIVED: schedule `{0}` is archived and cannot change")]
    ScheduleArchived(String),

    /// The spec does not compile (validation should have caught it).
    #[error("SCHEDULE_INVALID: {0}")]
    ScheduleInvalid(Issue),

    #[error("RUN_NOT_FOUND: run `{0}` does not exist")]
    RunNotFound(String),

    #[error("CHILD_NOT_FOUND: child `{0}` does not exist")]
    ChildNotFound(String),

    /// A child's write found another status or epoch than the writer read: another
    /// delivery took or ended it first.
    #[error("CHILD_CONFLICT: child `{0}` changed under the writer")]
    ChildConflict(String),

    /// A worker's write carried a lease epoch that is no longer the run's (invariant 4).
    #[error(
        "RUN_LEASE_LOST: run `{key}` is at lease epoch {actual}, the writer holds epoch {expected}"
    )]
    LeaseLost {
        key: String,
        expected: u64,
        actual: u64,
    },

    #[error("RUN_STATUS_CONFLICT: run `{key}` is {actual}, the change expected {expected}")]
    StatusConflict {
        key: String,
        expected: RunStatus,
        actual: RunStatus,
    },

    #[error(transparent)]
    InvalidTransition(#[from] TransitionError),

    /// The deployment's shard count is below one the table was written with: the items of
    /// the higher shards would never be read again (schedules never fire). Raise it back.
    #[error("SHARD_COUNT_DECREASED: the table was written with {stored} shards, this deployment has {configured}; shards can be added, never removed")]
    ShardCountDecreased { stored: u32, configured: u32 },

    /// A request that could never succeed, refused before any I/O.
    #[error("STORE_INVALID_REQUEST: {0}")]
    InvalidRequest(String),

    /// An item in the table is not shaped as this code writes it.
    #[error("STORE_MALFORMED_ITEM: item PK={pk} SK={sk}: attribute `{attribute}` {problem}")]
    Malformed {
        pk: String,
        sk: String,
        attribute: String,
        problem: String,
    },

    /// An item written by a later release, in a schema this code cannot read: refused and
    /// left as it is, never read with defaults (see `crate::schema`).
    #[error("ITEM_SCHEMA_UNSUPPORTED: item PK={pk} SK={sk} has schema version {version}; this release reads versions up to {current}")]
    SchemaUnsupported {
        pk: String,
        sk: String,
        version: u64,
        current: u64,
    },

    #[error("BACKFILL_NOT_FOUND: backfill `{0}` does not exist")]
    BackfillNotFound(String),

    #[error("BACKFILL_ALREADY_EXISTS: backfill `{0}` already exists")]
    BackfillAlreadyExists(String),

    #[error("REPLAY_NOT_FOUND: replay `{0}` does not exist")]
    ReplayNotFound(String),

    #[error("REPLAY_ALREADY_EXISTS: replay `{0}` already exists")]
    ReplayAlreadyExists(String),

    #[error("CALENDAR_NOT_FOUND: calendar `{0}` does not exist")]
    CalendarNotFound(String),

    /// A create found the name taken, at `version`.
    #[error("CALENDAR_ALREADY_EXISTS: calendar `{name}` already exists (version {version}); replace it under that version")]
    CalendarAlreadyExists { name: String, version: u64 },

    /// The caller's expected version is not the stored one (someone else changed it first).
    #[error("CALENDAR_VERSION_CONFLICT: calendar `{name}` is at version {actual}, the change expected {expected}")]
    CalendarVersionConflict {
        name: String,
        expected: u64,
        actual: u64,
    },

    /// A delete refused while schedules that are not archived name the calendar.
    #[error("CALENDAR_IN_USE: calendar `{name}` is named by {}", schedules.join(", "))]
    CalendarInUse {
        name: String,
        schedules: Vec<String>,
    },

    #[error("STORE_BAD_CURSOR: the pagination cursor is not one this store issued")]
    BadCursor,

    /// Transactions kept colliding with concurrent ones after our retries.
    #[error("STORE_CONTENTION: {0}")]
    Contention(String),

    #[error("STORE_TABLE_DEFINITION: {0}")]
    TableDefinition(String),

    /// The AWS call failed after the SDK's retries.
    #[error("STORE_REQUEST_FAILED: {operation}: {message}")]
    Request {
        operation: &'static str,
        message: String,
    },
}

impl StoreError {
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::ScheduleNotFound(_) => "SCHEDULE_NOT_FOUND",
            StoreError::ScheduleAlreadyExists(_) => "SCHEDULE_ALREADY_EXISTS",
            StoreError::VersionConflict { .. } => "SCHEDULE_VERSION_CONFLICT",
            StoreError::VersionNotFound { .. } => "SCHEDULE_VERSION_NOT_FOUND",
            StoreError::ScheduleArchived(_) => "SCHEDULE_ARCHIVED",
            StoreError::ScheduleInvalid(_) => "SCHEDULE_INVALID",
            StoreError::RunNotFound(_) => "RUN_NOT_FOUND",
            StoreError::ChildNotFound(_) => "CHILD_NOT_FOUND",
            StoreError::ChildConflict(_) => "CHILD_CONFLICT",
            StoreError::LeaseLost { .. } => "RUN_LEASE_LOST",
            StoreError::StatusConflict { .. } => "RUN_STATUS_CONFLICT",
            StoreError::InvalidTransition(e) => e.code().as_str(),
            StoreError::ShardCountDecreased { .. } => "SHARD_COUNT_DECREASED",
            StoreError::InvalidRequest(_) => "STORE_INVALID_REQUEST",
            StoreError::Malformed { .. } => "STORE_MALFORMED_ITEM",
            StoreError::SchemaUnsupported { .. } => "ITEM_SCHEMA_UNSUPPORTED",
            StoreError::BackfillNotFound(_) => "BACKFILL_NOT_FOUND",
            StoreError::BackfillAlreadyExists(_) => "BACKFILL_ALREADY_EXISTS",
            StoreError::ReplayNotFound(_) => "REPLAY_NOT_FOUND",
            StoreError::ReplayAlreadyExists(_) => "REPLAY_ALREADY_EXISTS",
            StoreError::CalendarNotFound(_) => "CALENDAR_NOT_FOUND",
            StoreError::CalendarAlreadyExists { .. } => "CALENDAR_ALREADY_EXISTS",
            StoreError::CalendarVersionConflict { .. } => "CALENDAR_VERSION_CONFLICT",
            StoreError::CalendarInUse { .. } => "CALENDAR_IN_USE",
            StoreError::BadCursor => "STORE_BAD_CURSOR",
            StoreError::Contention(_) => "STORE_CONTENTION",
            StoreError::TableDefinition(_) => "STORE_TABLE_DEFINITION",
            StoreError::Request { .. } => "STORE_REQUEST_FAILED",
        }
    }

    /// A request the store's backend refused or could not make, with the error's whole
    /// chain of causes (an adapter may format it its own way: see `Request`).
    pub fn request(operation: &'static str, err: impl StdError + 'static) -> StoreError {
        let mut message = err.to_string();
        let mut source = err.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        StoreError::Request { operation, message }
    }
}
