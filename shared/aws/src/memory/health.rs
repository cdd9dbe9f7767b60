//! The outcome counters in memory: DynamoDB's items, written by the same UpdateItem
//! (`codec::health::count`) and charged as the DynamoDB store's (one UpdateItem an add, one
//! Query a range). Expired days are never deleted here (TTL's deletes are lazy anyway); a
//! range read does not reach them.

use async_trait::async_trait;
use chrono::NaiveDate;

use super::capacity::Request;
use super::InMemoryStore;
use crate::codec::health as codec;
use crate::error::StoreError;
use crate::expr::eval;
use crate::health::{DayTally, HealthStore, Outcome};
use crate::item::Item;

#[async_trait]
impl HealthStore for InMemoryStore {
    async fn count_outcome(
        &self,
        schedule: &str,
        day: NaiveDate,
        outcome: Outcome,
        count: u64,
    ) -> Result<(), StoreError> {
        if count == 0 {
            return Ok(());
        }
        let plan = codec::count(outcome, count, day);
        let mut tables = self.tables();
        self.charge_call("UpdateItem");
        let days = tables.health.entry(schedule.to_string()).or_default();
        let before = days.get(&day);
        let start = before
            .cloned()
            .unwrap_or_else(|| codec::key_of(schedule, day));
        let after = eval::apply(&plan.updates, &start)?;
        self.charge_write("UpdateItem", before, Some(&after), Request::Standard);
        days.insert(day, after);
        Ok(())
    }

    /// Oldest first: one Query (the range's at most `TALLY_DAYS` items fit a page).
    async fn outcome_days(
        &self,
        schedule: &str,
        from: NaiveDate,
        through: NaiveDate,
    ) -> Result<Vec<DayTally>, StoreError> {
        if from > through {
            return Ok(Vec::new());
        }
        let tables = self.tables();
        let read: Vec<&Item> = tables
            .health
            .get(schedule)
            .into_iter()
            .flat_map(|days| days.range(from..=through).map(|(_, item)| item))
            .collect();
        self.charge_call("Query");
        self.charge_read("Query", None, &read, true, Request::Standard);
        read.into_iter().map(codec::decode).collect()
    }
}
