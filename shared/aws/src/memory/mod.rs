//! The ledger in process memory, with DynamoDB's conditional semantics: what `cronledger
//! simulate` runs on by default (the emulator serves one request at a time, so a fleet's day
//! would take hours), held to [`crate::dynamo::DynamoStore`] by one conformance suite that
//! runs every store test against both.
//!
//! Every operation takes the one lock, checks its conditions and applies all its writes
//! before releasing it: a transaction is all-or-nothing and every read is strongly
//! consistent (reads DynamoDB serves eventually consistent may only be fresher here).
//! Consumed capacity is charged by DynamoDB's published rules (see [`capacity`]), so the
//! request meter means the same on both stores.

mod capacity;
mod children;
mod index;
mod items;
mod runs;
mod scale;
mod schedules;

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cronledger_core::{Attempt, Run, RunKey, RunStatus, ScheduleSpec};

use crate::error::StoreError;
use crate::ledger::{
    AuditEntry, ChangeMeta, Created, Fire, FireOutcome, OperatorAction, Page, RecentRuns,
    RunChange, StoredSchedule, StreakChange,
};
use crate::meter::RequestMeter;
use crate::metered::Metered;
use crate::store::{ChildStore, RunStore, ScheduleStore};

pub use capacity::{item_size, stored_bytes, Request, STORAGE_OVERHEAD_BYTES};
pub use index::IndexLag;

/// The ledger's items, typed. Each field is one kind of item of the DynamoDB table; the
/// indexes are answered by scanning or ranging over these maps.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    /// By schedule id.
    pub schedules: BTreeMap<String, StoredSchedule>,
    /// By schedule id, oldest first.
    pub audit: BTreeMap<String, Vec<AuditEntry>>,
    /// By schedule id, then by the run's sort key (`keys::run_sk`), so a schedule's runs
    /// range in the table's order.
    pub runs: BTreeMap<String, BTreeMap<String, StoredRun>>,
    /// The `active` index over `runs`, kept by every run write (see [`index`]).
    pub active: index::ActiveIndex,
    /// The runs' encoded items, for capacity charges (see `runs::RunItems`).
    pub run_items: runs::RunItems,
    /// Items kept as DynamoDB keeps them, for the subjects written over the item engine
    /// (release states, backfills, idempotency claims, the system audit, the kill switch,
    /// alerts and their trackers, the outcome counters).
    pub items: items::ItemTable,
    /// Runs' children, by schedule id and child sort key (see `keys::child_sk`).
    pub children: BTreeMap<children::ChildSlot, cronledger_core::children::Child>,
}

/// A run as stored: the run and the attempts its item records.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredRun {
    pub run: Run,
    pub attempts: Vec<Attempt>,
}

/// The in-memory ledger, each call metered under its operation's name (as
/// [`crate::DynamoLedger`]). Cheap to share behind an `Arc`.
pub type MemoryStore = Metered<InMemoryStore>;

impl MemoryStore {
    /// An empty ledger with the `due` and `active` indexes sharded `shards` ways (as a
    /// DynamoDB ledger built with the same count), charging `meter`.
    pub fn new(shards: u32, meter: RequestMeter) -> MemoryStore {
        Metered::wrap(InMemoryStore::new(shards, meter))
    }

    /// [`MemoryStore::new`] with its `active` index trailing the table by `lag`, as a
    /// DynamoDB global secondary index does.
    pub fn with_index_lag(shards: u32, meter: RequestMeter, lag: IndexLag) -> MemoryStore {
        let store = InMemoryStore::new(shards, meter);
        store.tables().active = index::ActiveIndex::lagging(lag);
        Metered::wrap(store)
    }
}

/// The in-memory ledger's tables and charges, unmetered.
#[derive(Debug)]
pub struct InMemoryStore {
    tables: Mutex<Tables>,
    meter: RequestMeter,
    shards: u32,
}

impl InMemoryStore {
    /// An empty ledger with the `due` and `active` indexes sharded `shards` ways (as a
    /// DynamoDB ledger built with the same count), charging `meter`.
    pub fn new(shards: u32, meter: RequestMeter) -> InMemoryStore {
        InMemoryStore {
            tables: Mutex::new(Tables::default()),
            meter,
            shards: shards.max(1),
        }
    }

    pub fn shards(&self) -> u32 {
        self.shards
    }

    pub fn meter(&self) -> &RequestMeter {
        &self.meter
    }

    /// The one lock every operation holds from its first read to its last write. Still usable
    /// after a panicking holder: every operation checks before it writes, so a panic leaves
    /// no half-applied change. Each acquisition counts as one store operation for the index
    /// lag.
    pub(crate) fn tables(&self) -> MutexGuard<'_, Tables> {
        let mut tables = self.tables.lock().unwrap_or_else(PoisonError::into_inner);
        tables.active.tick();
        tables
    }
}

#[async_trait]
impl ScheduleStore for InMemoryStore {
    async fn create_schedule(
        &self,
        spec: ScheduleSpec,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.create_schedule_impl(spec, meta)
    }

    async fn update_schedule(
        &self,
        spec: ScheduleSpec,
        expected_version: u64,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.update_schedule_impl(spec, expected_version, meta)
    }

    async fn pause_schedule(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.pause_impl(id, expected_version, meta)
    }

    async fn resume_schedule(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.resume_impl(id, expected_version, meta)
    }

    async fn archive_schedule(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.archive_impl(id, expected_version, meta)
    }

    async fn get_schedule(&self, id: &str) -> Result<StoredSchedule, StoreError> {
        self.get_schedule_impl(id)
    }

    async fn list_schedules(
        &self,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError> {
        self.list_schedules_impl(limit, cursor)
    }

    async fn audit_log(&self, id: &str) -> Result<Vec<AuditEntry>, StoreError> {
        self.audit_log_impl(id)
    }

    async fn schedule_spec_at(&self, id: &str, version: u64) -> Result<ScheduleSpec, StoreError> {
        self.schedule_spec_at_impl(id, version)
    }

    async fn record_operator_action(
        &self,
        action: &OperatorAction,
    ) -> Result<AuditEntry, StoreError> {
        self.record_operator_action_impl(action)
    }

    async fn due_schedules(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<StoredSchedule>, StoreError> {
        self.due_schedules_impl(shard, until, limit)
    }

    async fn due_schedules_page(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError> {
        self.due_schedules_page_impl(shard, until, limit, cursor)
    }

    async fn advance_watermark(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        through: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.advance_watermark_impl(id, expected, through)
    }

    async fn set_downstream(&self, id: &str, downstream: &[String]) -> Result<(), StoreError> {
        self.set_downstream_impl(id, downstream)
    }

    async fn count_failure_streak(
        &self,
        id: &str,
        change: StreakChange,
    ) -> Result<u32, StoreError> {
        self.count_failure_streak_impl(id, change)
    }
}

#[async_trait]
impl RunStore for InMemoryStore {
    async fn fire(&self, fire: &Fire) -> Result<FireOutcome, StoreError> {
        self.fire_impl(fire)
    }

    async fn fire_all(&self, fires: &[Fire]) -> Result<Vec<FireOutcome>, StoreError> {
        self.fire_all_impl(fires)
    }

    async fn advance_next_run(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        self.advance_next_run_impl(id, expected, next)
    }

    async fn create_run(&self, run: &Run) -> Result<Created, StoreError> {
        self.create_run_impl(run)
    }

    async fn get_run(&self, key: &RunKey) -> Result<Run, StoreError> {
        self.get_run_impl(key)
    }

    async fn get_run_with_attempts(&self, key: &RunKey) -> Result<(Run, Vec<Attempt>), StoreError> {
        self.get_run_with_attempts_impl(key)
    }

    async fn transition_run(&self, key: &RunKey, change: &RunChange) -> Result<Run, StoreError> {
        self.transition_run_impl(key, change)
    }

    async fn active_runs(
        &self,
        shard: u32,
        status: Option<RunStatus>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError> {
        self.active_runs_impl(shard, status, limit, cursor)
    }

    async fn recent_runs(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<RecentRuns, StoreError> {
        self.recent_runs_impl(schedule_id, limit, at)
    }

    async fn schedule_with_recent_runs(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<(StoredSchedule, RecentRuns), StoreError> {
        self.schedule_with_recent_runs_impl(schedule_id, limit, at)
    }

    async fn running_before(
        &self,
        schedule_id: &str,
        before: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError> {
        self.running_before_impl(schedule_id, before)
    }

    async fn pending_live_runs(
        &self,
        shard: u32,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Run>, StoreError> {
        self.pending_live_runs_impl(shard, from, to, limit)
    }

    async fn run_history(
        &self,
        schedule_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError> {
        self.run_history_impl(schedule_id, limit, cursor)
    }

    async fn runs_between(
        &self,
        schedule_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError> {
        self.runs_between_impl(schedule_id, from, to)
    }
}

#[async_trait]
impl ChildStore for InMemoryStore {
    async fn put_children(
        &self,
        parent: &RunKey,
        children: &[cronledger_core::children::Child],
    ) -> Result<(), StoreError> {
        self.put_children_impl(parent, children)
    }

    async fn get_child(
        &self,
        parent: &RunKey,
        step: u32,
        index: u32,
    ) -> Result<cronledger_core::children::Child, StoreError> {
        self.get_child_impl(parent, step, index)
    }

    async fn children_of(
        &self,
        parent: &RunKey,
        step: u32,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<cronledger_core::children::Child>, StoreError> {
        self.children_of_impl(parent, step, limit, cursor)
    }

    async fn change_child(
        &self,
        parent: &RunKey,
        change: &crate::ledger::ChildChange,
    ) -> Result<cronledger_core::children::Child, StoreError> {
        self.change_child_impl(parent, change)
    }
}

// Alerts and trackers, backfills, the system's items, release states, health: written once
// over the item engine (`items.rs`).
cronledger_ledger::engine_subjects!(InMemoryStore);
