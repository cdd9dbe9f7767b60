//! Reminder trackers in memory: the same conditions as `dynamo::awaiting`, each request
//! charged as the DynamoDB store's, with the items `codec::awaiting` writes.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::capacity::Request;
use super::InMemoryStore;
use crate::alerts::Awaiting;
use crate::codec::awaiting as codec;
use crate::error::StoreError;
use crate::item::Item;
use crate::keys;

/// Most trackers one `awaiting_due` reads, as the DynamoDB store's Query page.
const AWAITING_PAGE_MAX: usize = 1000;

/// The trackers by (schedule, group); the index entry is derived from each.
#[derive(Debug, Default)]
pub(crate) struct AwaitingTable {
    by_group: BTreeMap<(String, String), Awaiting>,
}

fn slot(awaiting: &Awaiting) -> (String, String) {
    (awaiting.schedule.clone(), awaiting.group.clone())
}

impl InMemoryStore {
    /// One PutItem that takes the (schedule, group) when free or its tracker expired.
    pub(super) fn track_awaiting_impl(
        &self,
        awaiting: &Awaiting,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let item = codec::encode(awaiting)?;
        let mut tables = self.tables();
        self.charge_call("PutItem");
        let held = tables.awaiting.by_group.get(&slot(awaiting));
        let before = held.map(codec::encode).transpose()?;
        if held.is_some_and(|held| codec::expires_at(held.since) >= at.timestamp()) {
            self.charge_write("PutItem", before.as_ref(), None, Request::Standard);
            return Ok(false);
        }
        self.charge_write("PutItem", before.as_ref(), Some(&item), Request::Standard);
        tables
            .awaiting
            .by_group
            .insert(slot(awaiting), codec::decode(&item)?);
        Ok(true)
    }

    /// One Query page of the index (keys only), then the items in BatchGetItem requests.
    pub(super) fn awaiting_due_impl(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Awaiting>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let tables = self.tables();
        let bound = keys::due_sk_bound(now);
        let mut entries: Vec<(String, &Awaiting)> = tables
            .awaiting
            .by_group
            .values()
            .map(|a| (codec::index_sk(a), a))
            .filter(|(sk, _)| *sk < bound)
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let page = usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .min(AWAITING_PAGE_MAX);
        entries.truncate(page);
        let items = entries
            .iter()
            .map(|(_, a)| codec::encode(a))
            .collect::<Result<Vec<Item>, _>>()?;
        let read: Vec<&Item> = items.iter().collect();
        self.charge_index_fetch(keys::ACTIVE_INDEX, &read);
        Ok(entries
            .into_iter()
            .map(|(_, a)| a.clone())
            .filter(|a| a.remind_at <= now)
            .collect())
    }

    /// A conditional PutItem moving the reminder (nothing when the tracker is gone), or a
    /// DeleteItem.
    pub(super) fn remind_awaiting_impl(
        &self,
        awaiting: &Awaiting,
        next: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        let mut tables = self.tables();
        let held = tables.awaiting.by_group.get(&slot(awaiting));
        let before = held.map(codec::encode).transpose()?;
        match next {
            None => {
                self.charge_call("DeleteItem");
                match &before {
                    Some(before) => self.charge_delete("DeleteItem", before),
                    None => self.charge_write("DeleteItem", None, None, Request::Standard),
                }
                tables.awaiting.by_group.remove(&slot(awaiting));
            }
            Some(next) => {
                self.charge_call("PutItem");
                let Some(held) = held else {
                    self.charge_write("PutItem", None, None, Request::Standard);
                    return Ok(());
                };
                let moved = Awaiting {
                    remind_at: next,
                    ..held.clone()
                };
                let item = codec::encode(&moved)?;
                self.charge_write("PutItem", before.as_ref(), Some(&item), Request::Standard);
                tables
                    .awaiting
                    .by_group
                    .insert(slot(&moved), codec::decode(&item)?);
            }
        }
        Ok(())
    }
}
