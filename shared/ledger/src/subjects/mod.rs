//! Every store subject written once over an [`ItemEngine`](crate::engine::ItemEngine):
//! both stores implement every store trait through [`engine_subjects!`](crate::engine_subjects),
//! so their requests, conditions and items are the same by construction. A store is its
//! engine: the DynamoDB store sends the requests, the memory store answers them on its item
//! table.

pub mod alerts;
pub mod backfills;
pub mod calendars;
pub mod children;
pub mod documents;
pub mod fire;
pub mod health;
pub mod marks;
pub mod release;
pub mod replays;
pub mod runs;
pub mod schedules;
pub mod system;

/// One store trait implemented by forwarding each method to a subject's function, which
/// takes the engine first: `fn method(&self, arg: Type, ...) -> Answer = subject::function;`.
#[doc(hidden)]
#[macro_export]
macro_rules! __forward_to_subjects {
    ($store:ty, $trait:ident {
        $( fn $method:ident(&self $(, $arg:ident : $ty:ty)* ) -> $answer:ty = $subject:path; )*
    }) => {
        #[async_trait]
        impl $trait for $store {
            $(
                async fn $method(&self $(, $arg: $ty)*) -> Result<$answer, StoreError> {
                    // Every item written stamped with the schema version, every read checked.
                    $subject(&$crate::schema::Versioned(self) $(, $arg)*).await
                }
            )*
        }
    };
}

/// Implements every store trait for `$store`, an [`ItemEngine`](crate::engine::ItemEngine),
/// from the subjects: one set of forwarding for both stores.
#[macro_export]
macro_rules! engine_subjects {
    ($store:ty) => {
        const _: () = {
            use $crate::subjects::__private::*;

            $crate::__forward_to_subjects!($store, ScheduleStore {
                fn create_schedule(&self, spec: ScheduleSpec, meta: ChangeMeta) -> StoredSchedule = schedules::create;
                fn update_schedule(&self, spec: ScheduleSpec, expected_version: u64, meta: ChangeMeta) -> StoredSchedule = schedules::update;
                fn pause_schedule(&self, id: &str, expected_version: Option<u64>, meta: ChangeMeta) -> StoredSchedule = schedules::pause;
                fn resume_schedule(&self, id: &str, expected_version: Option<u64>, meta: ChangeMeta) -> StoredSchedule = schedules::resume;
                fn archive_schedule(&self, id: &str, expected_version: Option<u64>, meta: ChangeMeta) -> StoredSchedule = schedules::archive;
                fn get_schedule(&self, id: &str) -> StoredSchedule = schedules::get;
                fn list_schedules(&self, limit: u32, cursor: Option<&str>) -> Page<StoredSchedule> = schedules::list;
                fn audit_log(&self, id: &str) -> Vec<AuditEntry> = schedules::audit_log;
                fn schedule_spec_at(&self, id: &str, version: u64) -> ScheduleSpec = schedules::spec_at;
                fn record_operator_action(&self, action: &OperatorAction) -> AuditEntry = schedules::record_operator_action;
                fn due_schedules(&self, shard: u32, until: Time, limit: u32) -> Vec<StoredSchedule> = schedules::due;
                fn due_schedules_page(&self, shard: u32, until: Time, limit: u32, cursor: Option<&str>) -> Page<StoredSchedule> = schedules::due_page;
                fn fire_mark(&self, shard: u32) -> FireMark = marks::read;
                fn move_fired_mark(&self, read: &FireMark, from: Time, to: Time) -> bool = marks::move_fired;
                fn move_sent_mark(&self, shard: u32, from: Option<Time>, to: Time) -> bool = marks::move_sent;
                fn fence_fire_mark(&self, shard: u32, at: Time) -> bool = marks::fence;
                fn shard_catalog(&self, shard: u32) -> Vec<StoredSchedule> = marks::catalog;
                fn seed_catalog(&self, shard: u32) -> u32 = marks::seed_catalog;
                fn take_back_run(&self, run: &Run) -> bool = fire::take_back_run;
                fn advance_watermark(&self, id: &str, expected: Time, through: Time) -> bool = schedules::advance_watermark;
                fn set_downstream(&self, id: &str, downstream: &[String]) -> () = schedules::set_downstream;
                fn count_failure_streak(&self, id: &str, change: StreakChange) -> u32 = schedules::count_failure_streak;
            });

            $crate::__forward_to_subjects!($store, RunStore {
                fn fire(&self, fire: &Fire) -> FireOutcome = fire::fire;
                fn fire_all(&self, fires: &[Fire]) -> Vec<FireOutcome> = fire::fire_all;
                fn advance_next_run(&self, id: &str, expected: Time, next: Option<Time>) -> bool = schedules::advance_next_run;
                fn create_run(&self, run: &Run) -> Created = runs::create;
                fn get_run(&self, key: &RunKey) -> Run = runs::get;
                fn get_run_with_attempts(&self, key: &RunKey) -> (Run, Vec<Attempt>) = runs::get_with_attempts;
                fn transition_run(&self, key: &RunKey, change: &RunChange) -> Run = runs::transition;
                fn active_runs(&self, shard: u32, status: Option<RunStatus>, limit: u32, cursor: Option<&str>) -> Page<Run> = runs::active;
                fn recent_runs(&self, schedule_id: &str, limit: u32, at: Option<Time>) -> RecentRuns = runs::recent;
                fn schedule_with_recent_runs(&self, schedule_id: &str, limit: u32, at: Option<Time>) -> (StoredSchedule, RecentRuns) = runs::schedule_with_recent;
                fn running_before(&self, schedule_id: &str, before: Time) -> Vec<Run> = runs::running_before;
                fn pending_live_runs(&self, shard: u32, from: Time, to: Time, limit: u32) -> Vec<Run> = runs::pending_live;
                fn run_history(&self, schedule_id: &str, limit: u32, cursor: Option<&str>) -> Page<Run> = runs::history;
                fn runs_between(&self, schedule_id: &str, from: Time, to: Time) -> Vec<Run> = runs::between;
            });

            $crate::__forward_to_subjects!($store, ChildStore {
                fn put_children(&self, parent: &RunKey, children: &[Child]) -> () = children::put;
                fn get_child(&self, parent: &RunKey, step: u32, index: u32) -> Child = children::get;
                fn children_of(&self, parent: &RunKey, step: u32, limit: u32, cursor: Option<&str>) -> Page<Child> = children::of_step;
                fn change_child(&self, parent: &RunKey, change: &ChildChange) -> Child = children::change;
            });

            $crate::__forward_to_subjects!($store, AlertStore {
                fn record_alert(&self, alert: &Alert, at: Time) -> bool = alerts::record;
                fn alert_published(&self, alert: &Alert, at: Time) -> () = alerts::published;
                fn unpublished_alerts(&self, limit: u32) -> Vec<RecordedAlert> = alerts::unpublished;
                fn alerts_of(&self, schedule: &str, limit: u32) -> Vec<RecordedAlert> = alerts::of_schedule;
                fn track_awaiting(&self, awaiting: &Awaiting, at: Time) -> bool = alerts::track;
                fn awaiting_due(&self, now: Time, limit: u32) -> Vec<Awaiting> = alerts::due;
                fn remind_awaiting(&self, awaiting: &Awaiting, next: Option<Time>) -> () = alerts::remind;
            });

            $crate::__forward_to_subjects!($store, BackfillStore {
                fn create_backfill(&self, backfill: &Backfill) -> Backfill = backfills::create;
                fn get_backfill(&self, id: &str) -> Backfill = backfills::get;
                fn put_backfill(&self, backfill: &Backfill) -> Option<Backfill> = backfills::put;
                fn open_backfills(&self) -> Vec<Backfill> = backfills::open;
            });

            $crate::__forward_to_subjects!($store, ReplayStore {
                fn create_replay(&self, replay: &Replay) -> Replay = replays::create;
                fn get_replay(&self, id: &str) -> Replay = replays::get;
                fn put_replay(&self, replay: &Replay) -> Option<Replay> = replays::put;
                fn open_replays(&self) -> Vec<Replay> = replays::open;
            });

            $crate::__forward_to_subjects!($store, SystemStore {
                fn claim_idempotency(&self, claim: &IdempotencyClaim) -> Option<IdempotencyClaim> = system::claim;
                fn append_system_audit(&self, entry: &SystemAuditEntry) -> () = system::append_audit;
                fn system_audit(&self, limit: u32) -> Vec<SystemAuditEntry> = system::audit;
                fn kill_switch(&self) -> Option<KillSwitch> = system::kill_switch;
                fn put_kill_switch(&self, state: &KillSwitch) -> () = system::put_kill_switch;
            });

            $crate::__forward_to_subjects!($store, CalendarStore {
                fn calendars(&self) -> CalendarSet = calendars::set;
                fn list_calendars(&self) -> Vec<StoredCalendar> = calendars::all;
                fn get_calendar(&self, name: &str) -> StoredCalendar = calendars::get;
                fn put_calendar(&self, name: &str, spec: CalendarSpec, expected_version: Option<u64>, meta: ChangeMeta) -> StoredCalendar = calendars::put;
                fn delete_calendar(&self, name: &str, expected_version: Option<u64>, meta: ChangeMeta) -> CalendarAuditEntry = calendars::delete;
                fn calendar_audit(&self, name: &str) -> Vec<CalendarAuditEntry> = calendars::audit;
            });

            $crate::__forward_to_subjects!($store, ReleaseStateStore {
                fn release_state(&self, lane: Lane) -> Option<ReleaseState> = release::get;
                fn put_release_state(&self, state: &ReleaseState) -> bool = release::put;
            });

            $crate::__forward_to_subjects!($store, HealthStore {
                fn count_outcome(&self, schedule: &str, day: NaiveDate, outcome: Outcome, count: u64) -> () = health::count;
                fn outcome_days(&self, schedule: &str, from: NaiveDate, through: NaiveDate) -> Vec<DayTally> = health::days;
            });
        };
    };
}

/// What [`engine_subjects!`] names in the crates that expand it.
#[doc(hidden)]
pub mod __private {
    pub use crate::alerts::{AlertStore, Awaiting, RecordedAlert};
    pub use crate::calendars::{CalendarAuditEntry, CalendarStore, StoredCalendar};
    pub use crate::control::{ReleaseState, ReleaseStateStore};
    pub use crate::error::StoreError;
    pub use crate::fire_mark::FireMark;
    pub use crate::health::{DayTally, HealthStore, Outcome};
    pub use crate::ledger::{
        AuditEntry, ChangeMeta, ChildChange, Created, Fire, FireOutcome, OperatorAction, Page,
        RecentRuns, RunChange, StoredSchedule, StreakChange,
    };
    pub use crate::ops::{
        Backfill, BackfillStore, IdempotencyClaim, KillSwitch, SystemAuditEntry, SystemStore,
    };
    pub use crate::replays::{Replay, ReplayStore};
    pub use crate::store::{ChildStore, RunStore, ScheduleStore};
    pub use crate::subjects::{
        alerts, backfills, calendars, children, fire, health, marks, release, replays, runs,
        schedules, system,
    };
    pub use async_trait::async_trait;
    pub use chrono::NaiveDate;
    pub use cronledger_core::alerts::Alert;
    pub use cronledger_core::calendar::{CalendarSet, CalendarSpec};
    pub use cronledger_core::children::Child;
    pub use cronledger_core::{Attempt, Lane, Run, RunKey, RunStatus, ScheduleSpec};

    /// An instant, as every store trait takes it.
    pub type Time = chrono::DateTime<chrono::Utc>;
}
