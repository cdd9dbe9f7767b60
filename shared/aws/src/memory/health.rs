//! The outcome counters in memory: the same items and requests as `dynamo::health`, each
//! charged as the DynamoDB store's (one UpdateItem an add, one Query a range). Expired days
//! are never deleted here (TTL's deletes are lazy anyway); a range read does not reach them.

use async_trait::async_trait;
use chrono::NaiveDate;

use super::capacity::Request;
use super::InMemoryStore;
use crate::dynamo::health::{add_outcome, health_item};
use crate::error::StoreError;
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
        {
            let mut tables = self.tables();
            let days = tables.health.entry(schedule.to_string()).or_default();
            let before = days.get(&day).map(|t| health_item(schedule, day, t));
            let tally = days.entry(day).or_insert_with(|| DayTally {
                day: Some(day),
                ..DayTally::default()
            });
            add_outcome(tally, outcome, count);
            let after = health_item(schedule, day, tally);
            self.charge_call("UpdateItem");
            self.charge_write(
                "UpdateItem",
                before.as_ref(),
                Some(&after),
                Request::Standard,
            );
            Ok(())
        }
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
        {
            let tables = self.tables();
            let found: Vec<DayTally> = tables
                .health
                .get(schedule)
                .into_iter()
                .flat_map(|days| days.range(from..=through).map(|(_, t)| *t))
                .collect();
            let items: Vec<Item> = found
                .iter()
                .filter_map(|t| t.day.map(|day| health_item(schedule, day, t)))
                .collect();
            self.charge_call("Query");
            let read: Vec<&Item> = items.iter().collect();
            self.charge_read("Query", None, &read, true, Request::Standard);
            Ok(found)
        }
    }
}
