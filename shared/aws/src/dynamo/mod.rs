//! The ledger on one DynamoDB table: the port's item engine (`engine.rs`) sends each
//! request the subjects make; every store trait comes from the subjects, written once for
//! both stores.

mod engine;
mod expr;
mod fetch;
mod shards;
pub mod values;

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

use aws_sdk_dynamodb::Client;

use crate::config::AwsClients;
use crate::meter::RequestMeter;
use crate::metered::Metered;

pub use expr::{Expr, Rendered};
pub(crate) use fetch::BATCH_GET_KEYS;

/// The ledger on DynamoDB, each call metered under its operation's name.
pub type DynamoLedger = Metered<DynamoStore>;

impl DynamoLedger {
    pub fn new(clients: &AwsClients, table: impl Into<String>, shards: u32) -> DynamoLedger {
        Metered::wrap(DynamoStore::new(clients, table, shards))
    }
}

/// Where the ledger lives and how it is sharded.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    meter: RequestMeter,
    table: String,
    shards: u32,
}

impl DynamoStore {
    pub fn new(clients: &AwsClients, table: impl Into<String>, shards: u32) -> DynamoStore {
        DynamoStore {
            client: clients.dynamodb.clone(),
            meter: clients.meter.clone(),
            table: table.into(),
            shards: shards.max(1),
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn shards(&self) -> u32 {
        self.shards
    }

    pub fn client(&self) -> &Client {
        &self.client
    }
}

/// Exponential backoff with full jitter, from std's per-instance random hash keys.
fn jitter(attempt: u32) -> Duration {
    let cap_ms = 10u64 << attempt.min(6);
    Duration::from_millis(RandomState::new().hash_one(attempt) % (cap_ms + 1))
}

// Every store trait, from the subjects written once over the item engine.
cronledger_ledger::engine_subjects!(DynamoStore);
