//! The control plane's items in memory (idempotency claims, backfills, the system audit,
//! the kill switch, release states): the same conditions as `dynamo::ops` and
//! `dynamo::control`.

use cronledger_core::Lane;

use super::MemoryStore;
use crate::control::ReleaseState;
use crate::error::StoreError;
use crate::ops::{Backfill, IdempotencyClaim, KillSwitch, SystemAuditEntry};

impl MemoryStore {
    pub(super) fn claim_impl(
        &self,
        claim: &IdempotencyClaim,
    ) -> Result<Option<IdempotencyClaim>, StoreError> {
        let _ = claim;
        todo!("memory store: claim_idempotency")
    }

    pub(super) fn create_backfill_impl(&self, backfill: &Backfill) -> Result<Backfill, StoreError> {
        let _ = backfill;
        todo!("memory store: create_backfill")
    }

    pub(super) fn get_backfill_impl(&self, id: &str) -> Result<Backfill, StoreError> {
        let _ = id;
        todo!("memory store: get_backfill")
    }

    pub(super) fn put_backfill_impl(
        &self,
        backfill: &Backfill,
    ) -> Result<Option<Backfill>, StoreError> {
        let _ = backfill;
        todo!("memory store: put_backfill")
    }

    pub(super) fn open_backfills_impl(&self) -> Result<Vec<Backfill>, StoreError> {
        todo!("memory store: open_backfills")
    }

    pub(super) fn append_system_audit_impl(
        &self,
        entry: &SystemAuditEntry,
    ) -> Result<(), StoreError> {
        let _ = entry;
        todo!("memory store: append_system_audit")
    }

    pub(super) fn system_audit_impl(
        &self,
        limit: u32,
    ) -> Result<Vec<SystemAuditEntry>, StoreError> {
        let _ = limit;
        todo!("memory store: system_audit")
    }

    pub(super) fn kill_switch_impl(&self) -> Result<Option<KillSwitch>, StoreError> {
        todo!("memory store: kill_switch")
    }

    pub(super) fn put_kill_switch_impl(&self, state: &KillSwitch) -> Result<(), StoreError> {
        let _ = state;
        todo!("memory store: put_kill_switch")
    }

    pub(super) fn release_state_impl(
        &self,
        lane: Lane,
    ) -> Result<Option<ReleaseState>, StoreError> {
        let _ = lane;
        todo!("memory store: release_state")
    }

    pub(super) fn put_release_state_impl(&self, state: &ReleaseState) -> Result<bool, StoreError> {
        let _ = state;
        todo!("memory store: put_release_state")
    }
}
