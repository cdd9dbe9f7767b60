//! The outcome counters (see [`crate::health`]): one item a schedule and UTC day,
//! `SCHED#{id}` / `HEALTH#{yyyy-mm-dd}`, numbers added with `ADD` (so concurrent workers
//! never lose a count) and a TTL `TALLY_DAYS` after the day.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use chrono::{Days, NaiveDate};

use super::values::item_to_sdk;
use super::{DynamoStore, Expr, Render};
use crate::error::StoreError;
use crate::health::{DayTally, HealthStore, Outcome, TALLY_DAYS};
use crate::item::{key, n, s, Item, ItemReader, ItemWriter};
use crate::keys::{self, EXPIRES_AT, PK, SK};

const TYPE: &str = "type";
const HEALTH_TYPE: &str = "HEALTH";
const SUCCEEDED: &str = "succeeded";
const FAILED: &str = "failed";
const SKIPPED: &str = "skipped";
const FRESH: &str = "fresh";

/// The counters one window with `outcome` adds to.
pub(crate) fn counters_of(outcome: Outcome) -> &'static [&'static str] {
    match outcome {
        Outcome::Succeeded { fresh: true } => &[SUCCEEDED, FRESH],
        Outcome::Succeeded { fresh: false } => &[SUCCEEDED],
        Outcome::Failed => &[FAILED],
        Outcome::Skipped => &[SKIPPED],
    }
}

/// Adds `count` windows with `outcome` to `tally`, as the UpdateItem adds them to the item.
pub(crate) fn add_outcome(tally: &mut DayTally, outcome: Outcome, count: u64) {
    for counter in counters_of(outcome) {
        let field = match *counter {
            SUCCEEDED => &mut tally.succeeded,
            FAILED => &mut tally.failed,
            SKIPPED => &mut tally.skipped,
            _ => &mut tally.fresh,
        };
        *field = field.saturating_add(count);
    }
}

/// Epoch seconds of the midnight `TALLY_DAYS` after `day`: when the item may go.
pub(crate) fn expires_at(day: NaiveDate) -> i64 {
    day.checked_add_days(Days::new(TALLY_DAYS.unsigned_abs()))
        .unwrap_or(day)
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc().timestamp())
        .unwrap_or_default()
}

/// The item of `schedule`'s counters `tally` (for the memory store's charges: DynamoDB's
/// item is built by the UpdateItem and lacks the counters never added to).
pub(crate) fn health_item(schedule: &str, day: NaiveDate, tally: &DayTally) -> Item {
    ItemWriter::new()
        .s(PK, keys::schedule_pk(schedule))
        .s(SK, keys::health_sk(day))
        .s(TYPE, HEALTH_TYPE)
        .n(SUCCEEDED, tally.succeeded)
        .n(FAILED, tally.failed)
        .n(SKIPPED, tally.skipped)
        .n(FRESH, tally.fresh)
        .n(EXPIRES_AT, expires_at(day))
        .build()
}

pub(crate) fn decode_health(item: &Item) -> Result<DayTally, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, HEALTH_TYPE)?;
    let day = r
        .sk()
        .strip_prefix(keys::HEALTH_PREFIX)
        .and_then(|d| d.parse::<NaiveDate>().ok())
        .ok_or_else(|| r.malformed(SK, "not HEALTH#{yyyy-mm-dd}"))?;
    let counter = |name: &str| r.opt_n::<u64>(name).map(Option::unwrap_or_default);
    Ok(DayTally {
        day: Some(day),
        succeeded: counter(SUCCEEDED)?,
        failed: counter(FAILED)?,
        skipped: counter(SKIPPED)?,
        fresh: counter(FRESH)?,
    })
}

#[async_trait]
impl HealthStore for DynamoStore {
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
        let mut expr = Expr::new();
        for counter in counters_of(outcome) {
            expr.increment(counter, count);
        }
        expr.set_if_absent(TYPE, s(HEALTH_TYPE))
            .set_if_absent(EXPIRES_AT, n(expires_at(day)));
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item_to_sdk(key(
                keys::schedule_pk(schedule),
                keys::health_sk(day),
            ))))
            .set_update_expression(expr.update())
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        {
            let out = update
                .send()
                .await
                .map_err(|e| crate::error::store_request("UpdateItem", e))?;
            self.meter
                .record_capacity("UpdateItem", out.consumed_capacity());
            Ok(())
        }
    }

    async fn outcome_days(
        &self,
        schedule: &str,
        from: NaiveDate,
        through: NaiveDate,
    ) -> Result<Vec<DayTally>, StoreError> {
        if from > through {
            return Ok(Vec::new());
        }
        let mut cond = Expr::new();
        cond.eq(PK, s(keys::schedule_pk(schedule))).between(
            SK,
            s(keys::health_sk(from)),
            s(keys::health_sk(through)),
        );
        {
            self.query_all(None, &cond)
                .await?
                .iter()
                .map(decode_health)
                .collect()
        }
    }
}
