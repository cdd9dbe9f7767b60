//! The release-state items on DynamoDB: `subjects::release` over the store's requests.

use async_trait::async_trait;
use cronledger_core::Lane;

use super::DynamoStore;
use crate::control::{ReleaseState, ReleaseStateStore};
use crate::error::StoreError;
use crate::subjects::release;

#[async_trait]
impl ReleaseStateStore for DynamoStore {
    async fn release_state(&self, lane: Lane) -> Result<Option<ReleaseState>, StoreError> {
        release::get(self, lane).await
    }

    async fn put_release_state(&self, state: &ReleaseState) -> Result<bool, StoreError> {
        release::put(self, state).await
    }
}
