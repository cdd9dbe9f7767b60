//! The ledger in process memory: an item table that answers the item engine's requests with
//! DynamoDB's rules (`items.rs`), its global secondary indexes derived from the table
//! definition (`index.rs`), each request charged by DynamoDB's published rules (`capacity`).
//! What `cronledger simulate` runs on by default (the emulator serves one request at a time, so
//! a fleet's day would take hours). Every store operation is written once over the engine
//! (`cronledger_ledger::subjects`), so this store and [`crate::dynamo::DynamoStore`] send the
//! same requests; the conformance suite and the differential test hold their answers equal.
//!
//! Every request takes the one lock, checks its conditions and applies all its writes before
//! releasing it: a transaction is all-or-nothing, and a table read is strongly consistent.
//! Index reads are as fresh as the index: current, or trailing by an [`IndexLag`] as
//! DynamoDB's global secondary indexes trail their table.

mod capacity;
mod index;
mod items;

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::meter::RequestMeter;
use crate::metered::Metered;

pub use capacity::{item_size, stored_bytes, Request, STORAGE_OVERHEAD_BYTES};
pub use index::IndexLag;

/// The ledger's items, as DynamoDB keeps them, and the indexes derived from them.
#[derive(Debug)]
pub(crate) struct Tables {
    pub items: items::ItemTable,
    pub indexes: index::Indexes,
}

/// The in-memory ledger, each call metered under its operation's name (as
/// [`crate::DynamoLedger`]). Cheap to share behind an `Arc`.
pub type MemoryStore = Metered<InMemoryStore>;

impl MemoryStore {
    /// An empty ledger with the `due` and `active` indexes sharded `shards` ways (as a
    /// DynamoDB ledger built with the same count), charging `meter`.
    pub fn new(shards: u32, meter: RequestMeter) -> MemoryStore {
        Metered::wrap(InMemoryStore::new(shards, meter))
    }

    /// [`MemoryStore::new`] with its `active` index trailing the table by `lag`, as a
    /// DynamoDB global secondary index does.
    pub fn with_index_lag(shards: u32, meter: RequestMeter, lag: IndexLag) -> MemoryStore {
        Metered::wrap(InMemoryStore::with_index_lag(shards, meter, lag))
    }
}

/// The in-memory ledger's tables and charges, unmetered.
#[derive(Debug)]
pub struct InMemoryStore {
    tables: Mutex<Tables>,
    meter: RequestMeter,
    shards: u32,
}

impl InMemoryStore {
    /// An empty ledger with the `due` and `active` indexes sharded `shards` ways (as a
    /// DynamoDB ledger built with the same count), charging `meter`.
    pub fn new(shards: u32, meter: RequestMeter) -> InMemoryStore {
        InMemoryStore::with_index_lag(shards, meter, IndexLag::default())
    }

    /// [`InMemoryStore::new`] with its indexes trailing the table by `lag`.
    pub fn with_index_lag(shards: u32, meter: RequestMeter, lag: IndexLag) -> InMemoryStore {
        InMemoryStore {
            tables: Mutex::new(Tables {
                items: items::ItemTable::new(),
                indexes: index::Indexes::new(lag),
            }),
            meter,
            shards: shards.max(1),
        }
    }

    pub fn shards(&self) -> u32 {
        self.shards
    }

    pub fn meter(&self) -> &RequestMeter {
        &self.meter
    }

    /// The one lock every operation holds from its first read to its last write. Still usable
    /// after a panicking holder: every operation checks before it writes, so a panic leaves
    /// no half-applied change. Each acquisition counts as one store operation for the index
    /// lag.
    pub(crate) fn tables(&self) -> MutexGuard<'_, Tables> {
        let mut tables = self.tables.lock().unwrap_or_else(PoisonError::into_inner);
        tables.indexes.tick();
        tables
    }
}

// Every store trait, from the subjects written once over the item engine (`items.rs`).
cronledger_ledger::engine_subjects!(InMemoryStore);
