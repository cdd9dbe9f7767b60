//! The outcome counters on the memory store's item table: `subjects::health` over the store's requests.

use async_trait::async_trait;
use chrono::NaiveDate;

use super::InMemoryStore;
use crate::error::StoreError;
use crate::health::{DayTally, HealthStore, Outcome};
use crate::subjects::health;

#[async_trait]
impl HealthStore for InMemoryStore {
    async fn count_outcome(
        &self,
        schedule: &str,
        day: NaiveDate,
        outcome: Outcome,
        count: u64,
    ) -> Result<(), StoreError> {
        health::count(self, schedule, day, outcome, count).await
    }

    async fn outcome_days(
        &self,
        schedule: &str,
        from: NaiveDate,
        through: NaiveDate,
    ) -> Result<Vec<DayTally>, StoreError> {
        health::days(self, schedule, from, through).await
    }
}
