//! Capacity charges of the in-memory runs' requests, with the items as the DynamoDB store
//! would write and read them (`codec::run::encode` plus the attempt history).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use cronledger_core::RunKey;

use super::super::capacity::Request;
use super::super::{InMemoryStore, StoredRun};
use super::QUERY_PAGE;
use crate::codec::attempt as attempts;
use crate::codec::run as codec;
use crate::item::{s, Item};

/// The encoded items of the runs written or read lately, each the item of the run as stored
/// now (every run write replaces its entry). A schedule's newest runs are read on every
/// admission and settle, so most charges find their item here instead of encoding it again.
/// Bounded: past [`RunItems::CAPACITY`] entries it starts over.
#[derive(Debug, Default)]
pub(crate) struct RunItems {
    items: RefCell<HashMap<RunKey, Arc<Item>>>,
}

impl RunItems {
    const CAPACITY: usize = 50_000;

    fn get(&self, key: &RunKey) -> Option<Arc<Item>> {
        self.items.borrow().get(key).cloned()
    }

    /// Drops a deleted run's item.
    pub(crate) fn forget(&self, key: &RunKey) {
        self.items.borrow_mut().remove(key);
    }

    fn put(&self, key: &RunKey, item: Item) -> Arc<Item> {
        let item = Arc::new(item);
        let mut items = self.items.borrow_mut();
        if items.len() >= Self::CAPACITY {
            items.clear();
        }
        items.insert(key.clone(), item.clone());
        item
    }
}

impl InMemoryStore {
    /// The run's item as stored now: from the cache, or encoded (and kept).
    pub(crate) fn stored_item(&self, items: &RunItems, stored: &StoredRun) -> Arc<Item> {
        match items.get(&stored.run.key) {
            Some(item) => item,
            None => items.put(&stored.run.key, self.run_item(stored)),
        }
    }

    /// The item of a run just written, kept for the next charge.
    pub(super) fn written_item(&self, items: &RunItems, stored: &StoredRun) -> Arc<Item> {
        items.put(&stored.run.key, self.run_item(stored))
    }

    /// The run's item: `codec::run::encode` and the attempt history on it.
    fn run_item(&self, stored: &StoredRun) -> Item {
        let mut item = codec::encode(&stored.run, self.shards);
        for attempt in &stored.attempts {
            let number = attempt.number;
            let start = attempt
                .start
                .as_ref()
                .and_then(|a| attempts::to_json(a).ok());
            let end = attempt.end.as_ref().and_then(|a| attempts::to_json(a).ok());
            if let Some(start) = start {
                item.insert(attempts::start_attribute(number), s(start));
            }
            if let Some(end) = end {
                item.insert(attempts::end_attribute(number), s(end));
            }
        }
        item
    }

    /// Charges a run's write: `before` as stored before it, `written` (the stored run after
    /// a write that applied; `None` when its condition failed).
    pub(crate) fn charge_run_write(
        &self,
        items: &RunItems,
        operation: &'static str,
        before: Option<Arc<Item>>,
        written: Option<&StoredRun>,
        request: Request,
    ) {
        let after = written.map(|stored| self.written_item(items, stored));
        self.charge_write(operation, before.as_deref(), after.as_deref(), request);
    }

    pub(super) fn charge_run_reads(
        &self,
        cache: &RunItems,
        operation: &'static str,
        index: Option<&'static str>,
        runs: &[&StoredRun],
        consistent: bool,
    ) {
        let items: Vec<Arc<Item>> = runs
            .iter()
            .map(|stored| self.stored_item(cache, stored))
            .collect();
        let items: Vec<&Item> = items.iter().map(Arc::as_ref).collect();
        self.charge_read(operation, index, &items, consistent, Request::Standard);
    }

    /// One Query request that read `read`: strongly consistent on the table, eventually
    /// on an index (the only way DynamoDB serves them), as the DynamoDB store asks.
    pub(super) fn charge_query_page(
        &self,
        items: &RunItems,
        index: Option<&'static str>,
        read: &[&StoredRun],
    ) {
        self.charge_call("Query");
        self.charge_run_reads(items, "Query", index, read, index.is_none());
    }

    /// A query followed page by page to its end: one request per page of up to 1,000
    /// items, and one more after a full last page (it said there might be more).
    pub(super) fn charge_query_pages(
        &self,
        items: &RunItems,
        index: Option<&'static str>,
        read: &[&StoredRun],
    ) {
        let mut pages = read.chunks(QUERY_PAGE);
        loop {
            let page = pages.next().unwrap_or_default();
            self.charge_query_page(items, index, page);
            if page.len() < QUERY_PAGE {
                return;
            }
        }
    }
}
