//! The ledger's store traits, by subject: schedules (their changes, audit and the reconciler's
//! marks), runs (the ticker's fires, transitions, listings) and children. [`LedgerStore`] is
//! all three and the calendars (`crate::calendars`), which every store implements (see
//! `crate::layer` for wrappers).

use chrono::{DateTime, Utc};
use cronledger_core::children::Child;
use cronledger_core::{Attempt, Run, RunKey, RunStatus, ScheduleSpec};

use crate::calendars::CalendarStore;
use crate::error::StoreError;
use crate::fire_mark::FireMark;
use crate::layer::store_trait;
use crate::ledger::{
    AuditEntry, ChangeMeta, ChildChange, Created, Fire, FireOutcome, OperatorAction, Page,
    RecentRuns, RunChange, StoredSchedule, StreakChange,
};

store_trait! {
    /// Schedules: their changes (versioned and audited), reads, and the marks the ticker and
    /// the reconciler keep on them.
    pub trait ScheduleStore {
    /// Stores a validated spec at version 1, audited in the same transaction.
    async fn create_schedule(
        &self,
        spec: ScheduleSpec,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError>;

    /// Replaces the spec if the stored version is `expected_version` (else
    /// `SCHEDULE_VERSION_CONFLICT`), audited in the same transaction.
    async fn update_schedule(
        &self,
        spec: ScheduleSpec,
        expected_version: u64,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError>;

    async fn pause_schedule(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError>;

    async fn resume_schedule(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError>;

    /// Retires a schedule: no delete, its runs stay readable, it leaves the `due` index.
    async fn archive_schedule(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError>;

    async fn get_schedule(&self, id: &str) -> Result<StoredSchedule, StoreError>;

    async fn list_schedules(
        &self,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError>;

    /// The audit log of a schedule, oldest first: its changes and operators' actions.
    async fn audit_log(&self, id: &str) -> Result<Vec<AuditEntry>, StoreError>;

    /// The spec in force at `version`, from that version's audit entry (one read): what a
    /// run created under `version` executes. Versions never change once written.
    /// `SCHEDULE_VERSION_NOT_FOUND` when the schedule never had that version.
    async fn schedule_spec_at(&self, id: &str, version: u64) -> Result<ScheduleSpec, StoreError>;

    /// Records an operator's action in the schedule's audit log, right after the entry of
    /// the version current now (the schedule itself is not changed).
    async fn record_operator_action(
        &self,
        action: &OperatorAction,
    ) -> Result<AuditEntry, StoreError>;

    /// Schedules of a shard whose `next_run_at` is at or before `until`.
    async fn due_schedules(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<StoredSchedule>, StoreError>;

    /// One page of a shard's schedules whose `next_run_at` is at or before `until`, in
    /// `next_run_at` order, and a cursor for the next page: the ticker follows the pages
    /// until none is left, so no due schedule waits behind a fixed read limit.
    async fn due_schedules_page(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError>;

    /// The shard's fire mark, read strongly consistent (empty before its first tick and
    /// change; see [`crate::fire_mark`]).
    async fn fire_mark(&self, shard: u32) -> Result<FireMark, StoreError>;

    /// Moves the shard's `fired_through` from `from` (the tick's range start) to `to` if the
    /// mark and its catalog version are as `read`. `false` when another ticker, the
    /// reconciler's fence or a schedule change moved it.
    async fn move_fired_mark(
        &self,
        read: &FireMark,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Moves the shard's `sent_through` from `from` to `to`, if it is still `from`.
    async fn move_sent_mark(
        &self,
        shard: u32,
        from: Option<DateTime<Utc>>,
        to: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Moves the shard's `fired_through` to `at` if it is before it (the reconciler's fence).
    async fn fence_fire_mark(&self, shard: u32, at: DateTime<Utc>) -> Result<bool, StoreError>;

    /// The shard's catalog: a copy of each of its schedules, read strongly consistent.
    async fn shard_catalog(&self, shard: u32) -> Result<Vec<StoredSchedule>, StoreError>;

    /// Writes the shard's catalog from its schedules (a table older than catalogs) and moves
    /// its version. Returns the copies written.
    async fn seed_catalog(&self, shard: u32) -> Result<u32, StoreError>;

    /// Deletes a run a tick wrote if it is still as written (its status, never leased, at
    /// its version): the tick learned its schedule changed under it. `false` when it moved on.
    async fn take_back_run(&self, run: &Run) -> Result<bool, StoreError>;

    /// Moves the reconciler's watermark forward, if unchanged.
    async fn advance_watermark(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        through: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Replaces the schedule's `downstream` list (one UpdateItem, no version condition: it
    /// is derived from other schedules' specs, not part of this one's rule).
    async fn set_downstream(&self, id: &str, downstream: &[String]) -> Result<(), StoreError>;

    /// Moves the schedule's failure streak with a run's end (one UpdateItem, no version
    /// condition: it is not part of the rule) and answers the streak after it. A success
    /// only writes when the streak was not 0, so a healthy schedule's runs pay nothing.
    async fn count_failure_streak(&self, id: &str, change: StreakChange)
        -> Result<u32, StoreError>;
}
}

store_trait! {
    /// Runs: the ticker's fires, creation, guarded transitions and the listings.
    pub trait RunStore {
    /// The ticker's write: the run (if absent), then the advanced `next_run_at` (if
    /// unchanged and the schedule still at the run's version). Two plain conditional writes,
    /// run first; a run whose schedule was edited, paused or archived between them is taken
    /// back, so the outcome is as one transaction's (see `crate::subjects::fire`).
    async fn fire(&self, fire: &Fire) -> Result<FireOutcome, StoreError>;

    /// Several fires, each for a different schedule (at most [`MAX_FIRES_PER_TRANSACTION`](crate::ledger::MAX_FIRES_PER_TRANSACTION)),
    /// each with its own outcome, in the fires' order.
    async fn fire_all(&self, fires: &[Fire]) -> Result<Vec<FireOutcome>, StoreError>;

    /// Moves `next_run_at` on alone (when the run already existed), if unchanged.
    async fn advance_next_run(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError>;

    /// Puts the run unless one exists for its key; returns whichever is stored.
    async fn create_run(&self, run: &Run) -> Result<Created, StoreError>;

    async fn get_run(&self, key: &RunKey) -> Result<Run, StoreError>;

    /// The run and its attempts (the most recent ones; see `codec::attempt`), oldest first,
    /// in one read. The opening and ending transitions record them; nobody else writes them.
    async fn get_run_with_attempts(&self, key: &RunKey) -> Result<(Run, Vec<Attempt>), StoreError>;

    /// Applies one event, conditioned on the current status and lease epoch.
    async fn transition_run(&self, key: &RunKey, change: &RunChange) -> Result<Run, StoreError>;

    /// Non-terminal runs of a shard, optionally of one status, oldest window first.
    async fn active_runs(
        &self,
        shard: u32,
        status: Option<RunStatus>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError>;

    /// Of a schedule's newest `limit` runs, the ones still in flight and, with `at`, the
    /// ones scheduled in `at`'s second, newest first: what the overlap, ALREADY_DONE and
    /// QUEUE_NEW checks need. The store reads the whole page and sends only those.
    async fn recent_runs(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<RecentRuns, StoreError>;

    /// The schedule with [`RunStore::recent_runs`] in one read (the schedule's item sorts
    /// after its runs). `ScheduleNotFound` when the schedule has no item.
    async fn schedule_with_recent_runs(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<(StoredSchedule, RecentRuns), StoreError>;

    /// A schedule's RUNNING runs scheduled before `before`, from the active index (eventually
    /// consistent): what a newest-runs page that stopped at `before` cannot see.
    async fn running_before(
        &self,
        schedule_id: &str,
        before: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError>;

    /// A shard's live runs (SCHEDULED or MANUAL) still PENDING with their window in
    /// `[from, to]`, oldest first, at most `limit` read from the `active` index: where the
    /// ticker looks for dispatches lost between a run's write and its send.
    async fn pending_live_runs(
        &self,
        shard: u32,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Run>, StoreError>;

    /// A schedule's runs, newest first.
    async fn run_history(
        &self,
        schedule_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError>;

    /// Every run (expected and operator's) scheduled in `[from, to]`, oldest first.
    async fn runs_between(
        &self,
        schedule_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError>;
}
}

store_trait! {
    /// Children: the items a `children` step fans out to, counted on their parent run.
    pub trait ChildStore {
    /// Stores each child of `parent` that is not stored yet (a generator run again after a
    /// lost attempt answers the same children, and the ones kept are not reset).
    async fn put_children(&self, parent: &RunKey, children: &[Child]) -> Result<(), StoreError>;

    async fn get_child(&self, parent: &RunKey, step: u32, index: u32) -> Result<Child, StoreError>;

    /// One page of the children one step of `parent` answered, by index.
    async fn children_of(
        &self,
        parent: &RunKey,
        step: u32,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Child>, StoreError>;

    /// Changes one child, conditioned on the status and epoch read (`CHILD_CONFLICT`
    /// otherwise). A change that ends the child, or reopens a failed one, moves the parent's
    /// counter in the same transaction, conditioned on the parent being RUNNING: each
    /// child's end is counted exactly once.
    async fn change_child(
        &self,
        parent: &RunKey,
        change: &ChildChange,
    ) -> Result<Child, StoreError>;
}
}

/// The ledger of schedules, runs and children: what the Lambda functions ask of a store.
pub trait LedgerStore: ScheduleStore + RunStore + ChildStore + CalendarStore {}

impl<T: ScheduleStore + RunStore + ChildStore + CalendarStore + ?Sized> LedgerStore for T {}
