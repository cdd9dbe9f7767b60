//! The ledger port: what the app asks of a ledger store, without the AWS SDK. The store
//! traits by subject (the ledger of schedules, runs and children; alerts and their trackers;
//! operations: backfills, idempotency claims, the kill switch; release state; health), their
//! types and keys, and the write rules both stores share (a schedule's changes, a fire's
//! checks). `shared/aws` implements it on DynamoDB and in memory; `shared/core` stays pure
//! below it.

pub mod alerts;
pub mod calendars;
pub mod child_plan;
pub mod codec;
pub mod control;
pub mod cursor;
pub mod engine;
pub mod error;
pub mod expr;
pub mod fire_mark;
pub mod fire_plan;
pub mod health;
pub mod item;
pub mod keys;
pub mod layer;
pub mod ledger;
pub mod ops;
pub mod replays;
pub mod run_change;
pub mod run_plan;
pub mod schedule_change;
pub mod schedule_marks;
pub mod schema;
pub mod store;
pub mod subjects;

pub use alerts::{AlertStore, Awaiting, HeldWork, Notifier, NotifyError, RecordedAlert};
pub use calendars::{CalendarAction, CalendarAuditEntry, CalendarStore, StoredCalendar};
pub use control::{ReleaseState, ReleaseStateStore};
pub use error::StoreError;
pub use health::{DayTally, HealthStore, Outcome};
pub use layer::Layer;
pub use ledger::{
    AuditAction, AuditEntry, ChangeMeta, Created, Fire, FireOutcome, OperatorAction, Page, Pause,
    RecentRuns, RunChange, ScheduleState, StoredSchedule, StreakChange,
};
pub use ops::{
    ApprovalReason, Backfill, BackfillLimits, BackfillState, IdempotencyClaim, KillSwitch,
    OpsStore, PauseConditions, Reprocess, SystemAuditEntry,
};
pub use ops::{BackfillStore, SystemStore};
pub use replays::{
    Replay, ReplayApprovalReason, ReplayEntry, ReplayFilter, ReplayStore, ReplayTally,
    REPLAY_MAX_RUNS,
};
pub use store::{ChildStore, LedgerStore, RunStore, ScheduleStore};

/// The store traits, for `use cronledger_ledger::prelude::*`: a method of any of them
/// can be called on a `dyn LedgerStore` or `dyn OpsStore`.
pub mod prelude {
    pub use crate::alerts::AlertStore as _;
    pub use crate::calendars::CalendarStore as _;
    pub use crate::control::ReleaseStateStore as _;
    pub use crate::health::HealthStore as _;
    pub use crate::ops::{BackfillStore as _, SystemStore as _};
    pub use crate::replays::ReplayStore as _;
    pub use crate::store::{ChildStore as _, RunStore as _, ScheduleStore as _};
}
