//! The shard count a table is written with, kept on the table (`PK=SYSTEM`, `SK=SHARDS`) so
//! that a deployment cannot shrink it. Growing is safe: every reader covers shards
//! `0..count`, which includes every shard an item was written under before, and items move to
//! their new shard when next written (a schedule at its next fire, a run at its next status
//! change). Shrinking would leave the items of the higher shards unread: refused.

use super::values::{item_to_sdk, to_sdk};
use crate::meter::metered;
use aws_sdk_dynamodb::types::ReturnConsumedCapacity;

use super::{unless_condition_failed, DynamoStore};
use crate::error::StoreError;
use crate::item::{key, n};

const SYSTEM_PK: &str = "SYSTEM";
const SHARDS_SK: &str = "SHARDS";
const COUNT: &str = "shard_count";

impl DynamoStore {
    /// Records this ledger's shard count as the table's (one conditional write, at a
    /// function's cold start), or refuses with `SHARD_COUNT_DECREASED` when the table was
    /// written with more shards.
    pub async fn claim_shard_count(&self) -> Result<(), StoreError> {
        metered("claim_shard_count", async {
            let sent = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(item_to_sdk(key(SYSTEM_PK.to_string(), SHARDS_SK))))
                .update_expression("SET #count = :count")
                .condition_expression("attribute_not_exists(#count) OR #count <= :count")
                .expression_attribute_names("#count", COUNT)
                .expression_attribute_values(":count", to_sdk(n(self.shards)))
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            let claimed = match sent {
                Ok(out) => {
                    self.meter
                        .record_capacity("UpdateItem", out.consumed_capacity());
                    true
                }
                Err(err) => unless_condition_failed("UpdateItem", err)?,
            };
            if claimed {
                return Ok(());
            }
            let stored = self
                .get_item(key(SYSTEM_PK.to_string(), SHARDS_SK))
                .await?
                .and_then(|item| crate::item::ItemReader::new(&item).n::<u32>(COUNT).ok())
                .unwrap_or(self.shards);
            Err(StoreError::ShardCountDecreased {
                stored,
                configured: self.shards,
            })
        })
        .await
    }
}
