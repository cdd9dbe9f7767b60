//! The table's global secondary indexes, derived from the items as DynamoDB derives them:
//! every index the bundled table definition declares (`due`, `active`, `catalog`), each
//! item that has the index's keys entered under them with the attributes the index
//! projects. Kept in index order, so a query ranges over one partition instead of scanning.
//!
//! DynamoDB keeps a global secondary index eventually consistent with its table: an entry
//! appears, moves or leaves a little after the write. These can lag the same way
//! ([`IndexLag`]): each change becomes visible after that many more store operations, so a
//! reader that trusts an index read to be current fails here before it fails in AWS.
//! Readers fetch the items entries name (as the DynamoDB store does), so a lagging entry may
//! name an item that moved on or is gone.

use std::collections::{BTreeMap, VecDeque};

use super::capacity::{indexes, projected};
use crate::item::Item;
use crate::keys::{PK, SK};
use crate::table::IndexDef;

/// How far the in-memory indexes trail their table: each entry's change becomes visible to
/// readers this many store operations after its write (0: at once, as the conformance suite
/// runs). A request count, not a duration, so a simulation on a virtual clock lags the same
/// on any machine; readers that poll (the ticker, the reconciler) see every change after a
/// few passes, as they would in AWS within about a second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexLag {
    pub operations: u64,
    /// The one index that lags (by name), or `None`: every index.
    pub index: Option<&'static str>,
}

impl IndexLag {
    /// Every index trailing by `operations`.
    pub const fn all(operations: u64) -> IndexLag {
        IndexLag {
            operations,
            index: None,
        }
    }

    /// Only `index` trailing by `operations`.
    pub const fn only(index: &'static str, operations: u64) -> IndexLag {
        IndexLag {
            operations,
            index: Some(index),
        }
    }

    fn of(&self, index: &str) -> u64 {
        match self.index {
            Some(lagging) if lagging != index => 0,
            _ => self.operations,
        }
    }
}

/// Where an entry sorts: the index's partition and sort key, then the table's keys (the
/// order among equal index keys, which DynamoDB leaves unspecified).
pub(crate) type EntryKey = (String, String, String, String);

/// One index: its definition and its entries, as readers see them.
#[derive(Debug)]
pub(crate) struct Index {
    pub def: &'static IndexDef,
    pub hash: &'static str,
    pub range: Option<&'static str>,
    pub entries: BTreeMap<EntryKey, Item>,
}

fn text(item: &Item, attr: &str) -> String {
    item.get(attr)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

impl Index {
    fn new(def: &'static IndexDef) -> Index {
        let of = |kind: &str| {
            def.key_schema
                .iter()
                .find(|k| k.key_type == kind)
                .map(|k| k.attribute_name.as_str())
        };
        Index {
            def,
            hash: of("HASH").unwrap_or(PK),
            range: of("RANGE"),
            entries: BTreeMap::new(),
        }
    }

    /// `item`'s entry in this index, if it has the index's keys.
    fn entry(&self, item: &Item) -> Option<(EntryKey, Item)> {
        let entry = projected(self.def, item)?;
        Some((self.entry_key(&entry), entry))
    }

    /// Where an entry (or a page's last key) sorts in this index.
    pub fn entry_key(&self, entry: &Item) -> EntryKey {
        (
            text(entry, self.hash),
            self.range.map(|r| text(entry, r)).unwrap_or_default(),
            text(entry, PK),
            text(entry, SK),
        )
    }

    /// The attributes a page's last key holds: the table's keys and the index's.
    pub fn key_attributes(&self) -> Vec<&'static str> {
        [PK, SK, self.hash].into_iter().chain(self.range).collect()
    }
}

/// One change of an index entry, waiting to become visible.
#[derive(Debug)]
struct EntryChange {
    index: usize,
    remove: Option<EntryKey>,
    insert: Option<(EntryKey, Item)>,
}

/// Every index of the table, with the changes not visible yet.
#[derive(Debug)]
pub(crate) struct Indexes {
    indexes: Vec<Index>,
    lag: IndexLag,
    /// Store operations so far.
    operations: u64,
    /// Changes not visible yet, with the operation count at which they become visible.
    pending: VecDeque<(u64, EntryChange)>,
}

impl Indexes {
    pub fn new(lag: IndexLag) -> Indexes {
        Indexes {
            indexes: indexes().iter().map(Index::new).collect(),
            lag,
            operations: 0,
            pending: VecDeque::new(),
        }
    }

    pub fn named(&self, name: &str) -> Option<&Index> {
        self.indexes.iter().find(|i| i.def.index_name == name)
    }

    /// One more store operation: the changes whose lag has passed become visible.
    pub fn tick(&mut self) {
        self.operations += 1;
        while self
            .pending
            .front()
            .is_some_and(|(visible_at, _)| *visible_at <= self.operations)
        {
            if let Some((_, change)) = self.pending.pop_front() {
                self.apply(change);
            }
        }
    }

    /// Moves an item's entries from where `before` put them to where `after` puts them
    /// (either absent: a new item, or a deleted one).
    pub fn item_changed(&mut self, before: Option<&Item>, after: Option<&Item>) {
        for at in 0..self.indexes.len() {
            let index = &self.indexes[at];
            let old = before.and_then(|item| index.entry(item));
            let new = after.and_then(|item| index.entry(item));
            if old == new {
                continue;
            }
            let lag = self.lag.of(&index.def.index_name);
            let change = EntryChange {
                index: at,
                remove: old.map(|(key, _)| key),
                insert: new,
            };
            if lag == 0 {
                self.apply(change);
            } else {
                // Changes of one index become visible in their order: one lag for all.
                self.pending.push_back((self.operations + lag, change));
            }
        }
    }

    fn apply(&mut self, change: EntryChange) {
        let entries = &mut self.indexes[change.index].entries;
        if let Some(key) = change.remove {
            entries.remove(&key);
        }
        if let Some((key, entry)) = change.insert {
            entries.insert(key, entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{s, ItemWriter};
    use crate::keys::{ACTIVE_INDEX, GSI2PK, GSI2SK};

    fn run_item(status_sk: &str) -> Item {
        ItemWriter::new()
            .s(PK, "SCHED#a")
            .s(SK, "RUN#1")
            .s(GSI2PK, "ACTIVE#0")
            .s(GSI2SK, status_sk)
            .build()
    }

    fn visible(indexes: &Indexes) -> Vec<String> {
        let active = indexes.named(ACTIVE_INDEX).expect("the active index");
        active.entries.keys().map(|k| k.1.clone()).collect()
    }

    #[test]
    fn a_lagging_index_shows_each_change_that_many_operations_later() {
        let mut indexes = Indexes::new(IndexLag::all(2));
        let pending = run_item("P#1");
        indexes.item_changed(None, Some(&pending));
        assert!(visible(&indexes).is_empty(), "not yet");
        indexes.tick();
        assert!(visible(&indexes).is_empty(), "one operation later");
        indexes.tick();
        assert_eq!(visible(&indexes), ["P#1"], "two operations later");
        // A move: the old entry stays, and the new one is missing, until the lag passes.
        let running = run_item("R#1");
        indexes.item_changed(Some(&pending), Some(&running));
        indexes.tick();
        assert_eq!(visible(&indexes), ["P#1"]);
        indexes.tick();
        assert_eq!(visible(&indexes), ["R#1"]);
        // Leaving the index (no keys) removes the entry; no lag: at once.
        let mut current = Indexes::new(IndexLag::default());
        current.item_changed(None, Some(&running));
        assert_eq!(visible(&current), ["R#1"]);
        let mut done = running.clone();
        done.remove(GSI2PK);
        current.item_changed(Some(&running), Some(&done));
        assert!(visible(&current).is_empty());
        assert_eq!(done.get(PK), Some(&s("SCHED#a")));
    }
}
