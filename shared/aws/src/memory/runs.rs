//! Runs in memory, and the ticker's reads and writes: the same conditional transitions,
//! fires and index reads as `dynamo::runs` and `dynamo::schedules`.

use chrono::{DateTime, Utc};
use cronledger_core::{Attempt, Run, RunKey, RunStatus};

use super::MemoryStore;
use crate::error::StoreError;
use crate::ledger::{Created, Fire, FireOutcome, Page, RecentRuns, RunChange, StoredSchedule};

impl MemoryStore {
    pub(super) fn due_schedules_impl(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<StoredSchedule>, StoreError> {
        let _ = (shard, until, limit);
        todo!("memory store: due_schedules")
    }

    pub(super) fn fire_impl(&self, fire: &Fire) -> Result<FireOutcome, StoreError> {
        let _ = fire;
        todo!("memory store: fire")
    }

    pub(super) fn fire_all_impl(&self, fires: &[Fire]) -> Result<bool, StoreError> {
        let _ = fires;
        todo!("memory store: fire_all")
    }

    pub(super) fn advance_next_run_impl(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        let _ = (id, expected, next);
        todo!("memory store: advance_next_run")
    }

    pub(super) fn create_run_impl(&self, run: &Run) -> Result<Created, StoreError> {
        let _ = run;
        todo!("memory store: create_run")
    }

    pub(super) fn get_run_impl(&self, key: &RunKey) -> Result<Run, StoreError> {
        let _ = key;
        todo!("memory store: get_run")
    }

    pub(super) fn get_run_with_attempts_impl(
        &self,
        key: &RunKey,
    ) -> Result<(Run, Vec<Attempt>), StoreError> {
        let _ = key;
        todo!("memory store: get_run_with_attempts")
    }

    pub(super) fn transition_run_impl(
        &self,
        key: &RunKey,
        change: &RunChange,
    ) -> Result<Run, StoreError> {
        let _ = (key, change);
        todo!("memory store: transition_run")
    }

    pub(super) fn active_runs_impl(
        &self,
        shard: u32,
        status: Option<RunStatus>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError> {
        let _ = (shard, status, limit, cursor);
        todo!("memory store: active_runs")
    }

    pub(super) fn recent_runs_impl(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<RecentRuns, StoreError> {
        let _ = (schedule_id, limit, at);
        todo!("memory store: recent_runs")
    }

    pub(super) fn schedule_with_recent_runs_impl(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<(StoredSchedule, RecentRuns), StoreError> {
        let _ = (schedule_id, limit, at);
        todo!("memory store: schedule_with_recent_runs")
    }

    pub(super) fn running_before_impl(
        &self,
        schedule_id: &str,
        before: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError> {
        let _ = (schedule_id, before);
        todo!("memory store: running_before")
    }

    pub(super) fn pending_live_runs_impl(
        &self,
        shard: u32,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Run>, StoreError> {
        let _ = (shard, from, to, limit);
        todo!("memory store: pending_live_runs")
    }

    pub(super) fn run_history_impl(
        &self,
        schedule_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError> {
        let _ = (schedule_id, limit, cursor);
        todo!("memory store: run_history")
    }

    pub(super) fn runs_between_impl(
        &self,
        schedule_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError> {
        let _ = (schedule_id, from, to);
        todo!("memory store: runs_between")
    }
}
