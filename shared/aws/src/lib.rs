//! cronledger's AWS adapters: the ledger on one DynamoDB table, the lanes on SQS, alerts on
//! SNS, and request accounting. Clients come from the standard AWS environment, so
//! `AWS_ENDPOINT_URL` (or the per-service `AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL_SQS`
//! / `AWS_ENDPOINT_URL_SNS`) points them at an emulator.

pub mod config;
pub mod dynamo;
pub mod error;
pub mod lanes;
pub mod memory;
pub mod meter;
pub mod metered;
pub mod notify;
pub mod recorder;
pub mod table;

// The port this crate implements, under the paths its users and its own modules name.
pub use cronledger_ledger::{
    alerts, calendars, child_plan, codec, control, cursor, engine, expr, fire_mark, fire_plan,
    health, item, keys, layer, ledger, ops, prelude, replays, run_plan, schedule_change,
    schedule_marks, schema, store, subjects,
};

pub use alerts::{AlertStore, Awaiting, HeldWork, Notifier, NotifyError, RecordedAlert};
pub use calendars::{CalendarAction, CalendarAuditEntry, CalendarStore, StoredCalendar};
pub use config::{AwsClients, AwsSettings};
pub use control::{ReleaseState, ReleaseStateStore};
pub use dynamo::DynamoLedger;
pub use error::{LaneError, StoreError};
pub use health::{DayTally, HealthStore, Outcome};
pub use lanes::{LaneMessage, LaneQueue, QueueDepth, SqsLanes};
pub use ledger::{
    AuditAction, AuditEntry, ChangeMeta, Created, Fire, FireOutcome, OperatorAction, Page, Pause,
    RecentRuns, RunChange, ScheduleState, StoredSchedule, StreakChange,
};
pub use memory::{IndexLag, MemoryStore};
pub use meter::{metered, CapacityTarget, MeterSnapshot, RequestMeter, Units, Usage};
pub use metered::Metered;
pub use notify::{notifier_from_env, MemoryNotifier, SnsNotifier};
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
pub use table::TableDefinition;
