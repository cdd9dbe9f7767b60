//! The store conformance suite: every store test written once and run against both
//! ledgers, the DynamoDB one on the emulator (a fresh table per test) and the in-memory one
//! `simulate` runs on, so the two cannot drift apart. Each test is generated twice, as
//! `<module>::dynamodb::<name>` and `<module>::memory::<name>`.
//!
//! Tests that read or write DynamoDB items directly (`malformed_items.rs`) are about the
//! table's encoding, which the memory store does not have, and stay outside this suite.

mod alerts;
mod attempts;
mod audit;
mod awaiting;
mod calendars;
mod capacity;
mod children;
mod fire_marks;
mod health;
mod ops;
mod pinned_version;
mod races;
mod run_lease;
mod runs;
mod schedules;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cronledger_aws::{
    AlertStore, ChangeMeta, HealthStore, LedgerStore, MemoryStore, OpsStore, ReleaseStateStore,
    RequestMeter,
};
use cronledger_tests::{TestLedger, SHARDS};

/// Which ledger a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    DynamoDb,
    Memory,
}

/// One test's stores (the same ledger behind each trait) and the meter they charge.
pub struct Env {
    pub backend: Backend,
    pub ledger: Arc<dyn LedgerStore>,
    pub ops: Arc<dyn OpsStore>,
    pub control: Arc<dyn ReleaseStateStore>,
    pub alerts: Arc<dyn AlertStore>,
    pub health: Arc<dyn HealthStore>,
    pub meter: RequestMeter,
    /// The DynamoDB test table, deleted when the test ends.
    _table: Option<TestLedger>,
}

impl Env {
    pub async fn new(backend: Backend) -> Env {
        match backend {
            Backend::DynamoDb => {
                let table = TestLedger::new().await;
                let store = Arc::new(table.ledger.clone());
                Env {
                    backend,
                    ledger: store.clone(),
                    ops: store.clone(),
                    control: store.clone(),
                    alerts: store.clone(),
                    health: store,
                    meter: table.clients.meter.clone(),
                    _table: Some(table),
                }
            }
            Backend::Memory => {
                let meter = RequestMeter::new();
                let store = Arc::new(MemoryStore::new(SHARDS, meter.clone()));
                Env {
                    backend,
                    ledger: store.clone(),
                    ops: store.clone(),
                    control: store.clone(),
                    alerts: store.clone(),
                    health: store,
                    meter,
                    _table: None,
                }
            }
        }
    }
}

pub fn meta(actor: &str, at: DateTime<Utc>) -> ChangeMeta {
    ChangeMeta {
        actor: actor.into(),
        reason: format!("{actor} did it"),
        at,
        details: None,
    }
}

/// Defines each test once (`async fn name(env: Env) { ... }`) and generates it for both
/// backends, in `dynamodb` and `memory` submodules of the module that calls it.
#[macro_export]
macro_rules! conformance {
    ($( $(#[doc = $doc:literal])* async fn $name:ident($env:ident: Env) $body:block )*) => {
        $(
            $(#[doc = $doc])*
            pub(crate) async fn $name($env: $crate::Env) $body
        )*

        pub mod dynamodb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name($crate::Env::new($crate::Backend::DynamoDb).await).await
                }
            )*
        }

        pub mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name($crate::Env::new($crate::Backend::Memory).await).await
                }
            )*
        }
    };
}

/// The schedule ids of `id`'s shard due by `until`.
pub async fn due_ids(env: &Env, id: &str, until: DateTime<Utc>) -> Vec<String> {
    env.ledger
        .due_schedules(cronledger_aws::keys::shard_of(id, SHARDS), until, 100)
        .await
        .expect("due")
        .into_iter()
        .map(|s| s.spec.id)
        .collect()
}
