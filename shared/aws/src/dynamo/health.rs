//! The outcome counters on DynamoDB: the write and the item are `codec::health`'s.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use chrono::NaiveDate;

use super::values::item_to_sdk;
use super::{DynamoStore, Expr, Render};
use crate::codec::health as codec;
use crate::error::StoreError;
use crate::health::{DayTally, HealthStore, Outcome};
use crate::item::s;
use crate::keys::{self, PK, SK};

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
        let expr = codec::count(outcome, count, day);
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item_to_sdk(codec::key_of(schedule, day))))
            .set_update_expression(expr.update())
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| crate::error::store_request("UpdateItem", e))?;
        self.meter
            .record_capacity("UpdateItem", out.consumed_capacity());
        Ok(())
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
        self.query_all(None, &cond)
            .await?
            .iter()
            .map(codec::decode)
            .collect()
    }
}
