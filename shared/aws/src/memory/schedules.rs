//! Schedules and their audit log in memory: the same versioned, conditional writes as
//! `dynamo::schedules`.

use chrono::{DateTime, Utc};
use cronledger_core::ScheduleSpec;

use super::MemoryStore;
use crate::error::StoreError;
use crate::ledger::{AuditEntry, ChangeMeta, OperatorAction, Page, StoredSchedule};

impl MemoryStore {
    pub(super) fn create_schedule_impl(
        &self,
        spec: ScheduleSpec,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        let _ = (spec, meta);
        todo!("memory store: create_schedule")
    }

    pub(super) fn update_schedule_impl(
        &self,
        spec: ScheduleSpec,
        expected_version: u64,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        let _ = (spec, expected_version, meta);
        todo!("memory store: update_schedule")
    }

    pub(super) fn pause_impl(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        let _ = (id, expected_version, meta);
        todo!("memory store: pause_schedule")
    }

    pub(super) fn resume_impl(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        let _ = (id, expected_version, meta);
        todo!("memory store: resume_schedule")
    }

    pub(super) fn archive_impl(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        let _ = (id, expected_version, meta);
        todo!("memory store: archive_schedule")
    }

    pub(super) fn get_schedule_impl(&self, id: &str) -> Result<StoredSchedule, StoreError> {
        let _ = id;
        todo!("memory store: get_schedule")
    }

    pub(super) fn list_schedules_impl(
        &self,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError> {
        let _ = (limit, cursor);
        todo!("memory store: list_schedules")
    }

    pub(super) fn audit_log_impl(&self, id: &str) -> Result<Vec<AuditEntry>, StoreError> {
        let _ = id;
        todo!("memory store: audit_log")
    }

    pub(super) fn schedule_spec_at_impl(
        &self,
        id: &str,
        version: u64,
    ) -> Result<ScheduleSpec, StoreError> {
        let _ = (id, version);
        todo!("memory store: schedule_spec_at")
    }

    pub(super) fn record_operator_action_impl(
        &self,
        action: &OperatorAction,
    ) -> Result<AuditEntry, StoreError> {
        let _ = action;
        todo!("memory store: record_operator_action")
    }

    pub(super) fn advance_watermark_impl(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        through: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let _ = (id, expected, through);
        todo!("memory store: advance_watermark")
    }
}
