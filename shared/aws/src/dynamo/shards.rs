//! The shard count a table is written with, kept on the table (`PK=SYSTEM`, `SK=SHARDS`) so
//! that a deployment cannot shrink it. Growing is safe: every reader covers shards
//! `0..count`, which includes every shard an item was written under before, and items move to
//! their new shard when next written (a schedule at its next fire, a run at its next status
//! change). Shrinking would leave the items of the higher shards unread: refused.

use super::DynamoStore;
use crate::engine::{ItemEngine, Returning, Write};
use crate::error::StoreError;
use crate::expr::{Comparison, Cond, Expr};
use crate::item::{key, n};
use crate::meter::metered;
use crate::schema::Versioned;

const SYSTEM_PK: &str = "SYSTEM";
const SHARDS_SK: &str = "SHARDS";
const COUNT: &str = "shard_count";

impl DynamoStore {
    /// Records this ledger's shard count as the table's (one conditional write, at a
    /// function's cold start), or refuses with `SHARD_COUNT_DECREASED` when the table was
    /// written with more shards.
    pub async fn claim_shard_count(&self) -> Result<(), StoreError> {
        metered("claim_shard_count", async {
            let count = n(self.shards);
            let mut claim = Expr::new();
            claim.set(COUNT, count.clone()).any(vec![
                Cond::NotExists(COUNT.to_string()),
                Cond::Compare(COUNT.to_string(), Comparison::Le, count),
            ]);
            let update = Write::Update {
                key: key(SYSTEM_PK.to_string(), SHARDS_SK),
                expr: claim,
            };
            let claimed = Versioned(self)
                .write(update, Returning::Nothing, false)
                .await?
                .applied();
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
