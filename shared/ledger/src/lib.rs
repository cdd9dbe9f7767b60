//! The ledger port: what the app asks of a ledger store, without the AWS SDK. The store
//! traits by subject (the ledger of schedules, runs and children; alerts and their trackers;
//! operations: backfills, idempotency claims, the kill switch; release state; health), their
//! types and keys, and the write rules both stores share (a schedule's changes, a fire's
//! checks). `shared/aws` implements it on DynamoDB and in memory; `shared/core` stays pure
//! below it.

pub mod alerts;
pub mod control;
pub mod error;
pub mod health;
pub mod keys;
pub mod ledger;
pub mod ops;
pub mod schedule_change;

pub use alerts::{AlertStore, Awaiting, HeldWork, Notifier, NotifyError, RecordedAlert};
pub use control::{ReleaseState, ReleaseStateStore};
pub use error::StoreError;
pub use health::{DayTally, HealthStore, Outcome};
pub use ledger::{
    AuditAction, AuditEntry, ChangeMeta, Created, Fire, FireOutcome, LedgerStore, OperatorAction,
    Page, Pause, RecentRuns, RunChange, ScheduleState, StoredSchedule, StreakChange,
};
pub use ops::{
    ApprovalReason, Backfill, BackfillLimits, BackfillState, IdempotencyClaim, KillSwitch,
    OpsStore, PauseConditions, Reprocess, SystemAuditEntry,
};
