//! The two stores a release's items are loaded into as they were written (past the store,
//! as a restore or the previous release would leave them): DynamoDB Local's table, and the
//! memory store's item table.

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use cronledger_aws::dynamo::values::{item_from_sdk, item_to_sdk};
use cronledger_aws::engine::{ItemEngine, Returning, Write};
use cronledger_aws::expr::Expr;
use cronledger_aws::item::{key, Item};
use cronledger_aws::{
    AlertStore, HealthStore, LedgerStore, MemoryStore, OpsStore, ReleaseStateStore, RequestMeter,
};
use cronledger_tests::TestLedger;

/// Every store trait the release's items are read through.
pub trait AllStores: LedgerStore + OpsStore + AlertStore + HealthStore + ReleaseStateStore {}
impl<T: LedgerStore + OpsStore + AlertStore + HealthStore + ReleaseStateStore + ?Sized> AllStores
    for T
{
}

pub enum Backend {
    Dynamo(TestLedger),
    Memory(Arc<MemoryStore>),
}

impl Backend {
    pub async fn both() -> [Backend; 2] {
        [
            Backend::Dynamo(TestLedger::new().await),
            Backend::Memory(Arc::new(MemoryStore::new(
                cronledger_tests::SHARDS,
                RequestMeter::new(),
            ))),
        ]
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Dynamo(_) => "dynamodb",
            Backend::Memory(_) => "memory",
        }
    }

    pub fn store(&self) -> Arc<dyn AllStores> {
        match self {
            Backend::Dynamo(ledger) => Arc::new(ledger.ledger.clone()),
            Backend::Memory(memory) => memory.clone(),
        }
    }

    pub fn ledger(&self) -> Arc<dyn LedgerStore> {
        match self {
            Backend::Dynamo(ledger) => Arc::new(ledger.ledger.clone()),
            Backend::Memory(memory) => memory.clone(),
        }
    }

    pub fn control(&self) -> Arc<dyn ReleaseStateStore> {
        match self {
            Backend::Dynamo(ledger) => Arc::new(ledger.ledger.clone()),
            Backend::Memory(memory) => memory.clone(),
        }
    }

    /// Writes `item` exactly as it is.
    pub async fn put_raw(&self, item: Item) {
        match self {
            Backend::Dynamo(ledger) => {
                ledger
                    .clients
                    .dynamodb
                    .put_item()
                    .table_name(&ledger.table)
                    .set_item(Some(item_to_sdk(item)))
                    .send()
                    .await
                    .expect("raw put");
            }
            Backend::Memory(memory) => {
                let put = Write::Put {
                    item,
                    cond: Expr::new(),
                };
                memory
                    .store()
                    .write(put, Returning::Nothing, false)
                    .await
                    .expect("raw put");
            }
        }
    }

    pub async fn put_all(&self, items: impl IntoIterator<Item = Item>) {
        for item in items {
            self.put_raw(item).await;
        }
    }

    /// The item at (`pk`, `sk`) exactly as it is.
    pub async fn get_raw(&self, pk: &str, sk: &str) -> Option<Item> {
        match self {
            Backend::Dynamo(ledger) => ledger
                .clients
                .dynamodb
                .get_item()
                .table_name(&ledger.table)
                .key("PK", AttributeValue::S(pk.into()))
                .key("SK", AttributeValue::S(sk.into()))
                .consistent_read(true)
                .send()
                .await
                .expect("raw get")
                .item
                .map(|item| item_from_sdk(&item)),
            Backend::Memory(memory) => memory
                .store()
                .get_item(key(pk.into(), sk))
                .await
                .expect("raw get"),
        }
    }
}
