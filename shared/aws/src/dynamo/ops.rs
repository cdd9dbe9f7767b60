//! The control plane's items on DynamoDB: `subjects::backfills` and `subjects::system` over
//! the store's requests.

use async_trait::async_trait;

use super::DynamoStore;
use crate::error::StoreError;
use crate::ops::{Backfill, IdempotencyClaim, KillSwitch, SystemAuditEntry};
use crate::ops::{BackfillStore, SystemStore};
use crate::subjects::{backfills, system};

#[async_trait]
impl BackfillStore for DynamoStore {
    async fn create_backfill(&self, backfill: &Backfill) -> Result<Backfill, StoreError> {
        backfills::create(self, backfill).await
    }

    async fn get_backfill(&self, id: &str) -> Result<Backfill, StoreError> {
        backfills::get(self, id).await
    }

    async fn put_backfill(&self, backfill: &Backfill) -> Result<Option<Backfill>, StoreError> {
        backfills::put(self, backfill).await
    }

    async fn open_backfills(&self) -> Result<Vec<Backfill>, StoreError> {
        backfills::open(self).await
    }
}

#[async_trait]
impl SystemStore for DynamoStore {
    async fn claim_idempotency(
        &self,
        claim: &IdempotencyClaim,
    ) -> Result<Option<IdempotencyClaim>, StoreError> {
        system::claim(self, claim).await
    }

    async fn append_system_audit(&self, entry: &SystemAuditEntry) -> Result<(), StoreError> {
        system::append_audit(self, entry).await
    }

    async fn system_audit(&self, limit: u32) -> Result<Vec<SystemAuditEntry>, StoreError> {
        system::audit(self, limit).await
    }

    async fn kill_switch(&self) -> Result<Option<KillSwitch>, StoreError> {
        system::kill_switch(self).await
    }

    async fn put_kill_switch(&self, state: &KillSwitch) -> Result<(), StoreError> {
        system::put_kill_switch(self, state).await
    }
}
