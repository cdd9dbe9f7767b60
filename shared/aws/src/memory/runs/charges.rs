//! Capacity charges of the in-memory runs' requests, with the items as the DynamoDB store
//! would write and read them (`codec::run::encode` plus the attempt history).

use super::super::capacity::Request;
use super::super::{MemoryStore, StoredRun, Tables};
use super::{stored_run, QUERY_PAGE};
use crate::codec::attempt as attempts;
use crate::codec::run as codec;
use crate::codec::schedule as schedule_codec;
use crate::item::{s, Item};
use crate::ledger::{Fire, StoredSchedule};

impl MemoryStore {
    /// The run's item: `codec::run::encode` and the attempt history on it.
    pub(super) fn run_item(&self, stored: &StoredRun) -> Item {
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

    pub(super) fn charge_run_write(
        &self,
        operation: &'static str,
        before: Option<&StoredRun>,
        after: Option<&StoredRun>,
        request: Request,
    ) {
        let before = before.map(|r| self.run_item(r));
        let after = after.map(|r| self.run_item(r));
        self.charge_write(operation, before.as_ref(), after.as_ref(), request);
    }

    pub(super) fn charge_schedule_write(
        &self,
        before: Option<&StoredSchedule>,
        after: Option<&StoredSchedule>,
        request: Request,
    ) {
        let operation = match request {
            Request::Standard => "UpdateItem",
            Request::Transactional => "TransactWriteItems",
        };
        let before = before.and_then(|s| schedule_codec::encode(s).ok());
        let after = after.and_then(|s| schedule_codec::encode(s).ok());
        self.charge_write(operation, before.as_ref(), after.as_ref(), request);
    }

    pub(super) fn charge_run_reads(
        &self,
        operation: &'static str,
        index: Option<&'static str>,
        runs: &[&StoredRun],
        consistent: bool,
    ) {
        let items: Vec<Item> = runs.iter().map(|r| self.run_item(r)).collect();
        let items: Vec<&Item> = items.iter().collect();
        self.charge_read(operation, index, &items, consistent, Request::Standard);
    }

    /// A query followed page by page to its end: one request per page of up to 1,000
    /// items, and one more after a full last page (it said there might be more).
    pub(super) fn charge_query_pages(
        &self,
        index: Option<&'static str>,
        read: &[&StoredRun],
        consistent: bool,
    ) {
        let mut pages = read.chunks(QUERY_PAGE);
        loop {
            let page = pages.next().unwrap_or_default();
            self.charge_call("Query");
            self.charge_run_reads("Query", index, page, consistent);
            if page.len() < QUERY_PAGE {
                return;
            }
        }
    }

    /// A fire that was refused writes nothing, but both its checked items are charged.
    pub(super) fn charge_refused_fire(&self, tables: &Tables, fire: &Fire) {
        let existing = stored_run(tables, &fire.run.key);
        self.charge_run_write("TransactWriteItems", existing, None, Request::Transactional);
        let schedule = tables.schedules.get(&fire.run.key.schedule_id);
        self.charge_schedule_write(schedule, None, Request::Transactional);
    }
}
