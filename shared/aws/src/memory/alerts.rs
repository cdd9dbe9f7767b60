//! Recorded alerts in memory: the same conditions as `dynamo::alerts`, each request charged
//! as the DynamoDB store's, with the items `codec::alert` writes.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cronledger_core::alerts::Alert;

use super::capacity::Request;
use super::InMemoryStore;
use crate::alerts::RecordedAlert;
use crate::codec::alert as codec;
use crate::dynamo::alerts::OUTBOX_PAGE_MAX;
use crate::error::StoreError;
use crate::item::Item;
use crate::keys;

/// The alert items: by schedule, then by sort key (`ALERT#{key}`), and the outbox (the
/// `active` index's `ALERTS#OUTBOX` partition) by its sort key.
#[derive(Debug, Default)]
pub(crate) struct AlertTables {
    by_schedule: BTreeMap<String, BTreeMap<String, RecordedAlert>>,
    /// Outbox sort key -> (schedule, sort key) of the unpublished record.
    outbox: BTreeMap<String, (String, String)>,
}

fn outbox_sk(recorded: &RecordedAlert) -> String {
    let alert = &recorded.alert;
    keys::alert_outbox_sk(recorded.recorded_at, &alert.schedule, &alert.key())
}

impl AlertTables {
    fn get(&self, schedule: &str, sk: &str) -> Option<&RecordedAlert> {
        self.by_schedule.get(schedule)?.get(sk)
    }

    /// Stores `recorded` in place of whatever had its key, keeping the outbox in step.
    fn put(&mut self, recorded: RecordedAlert) {
        let schedule = recorded.alert.schedule.clone();
        let sk = keys::alert_sk(&recorded.alert.key());
        if let Some(old) = self.get(&schedule, &sk) {
            let old_entry = outbox_sk(old);
            self.outbox.remove(&old_entry);
        }
        if recorded.published_at.is_none() {
            self.outbox
                .insert(outbox_sk(&recorded), (schedule.clone(), sk.clone()));
        }
        self.by_schedule
            .entry(schedule)
            .or_default()
            .insert(sk, recorded);
    }
}

impl InMemoryStore {
    /// One PutItem that takes the key when it is free or its record expired before `at`.
    pub(super) fn record_alert_impl(
        &self,
        alert: &Alert,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let recorded = RecordedAlert::unpublished(alert, at);
        let item = codec::encode(&recorded)?;
        let mut tables = self.tables();
        self.charge_call("PutItem");
        let held = tables
            .alerts
            .get(&alert.schedule, &keys::alert_sk(&alert.key()));
        let before = held.map(codec::encode).transpose()?;
        if held.is_some_and(|held| codec::expires_at(held.recorded_at) >= at.timestamp()) {
            self.charge_write("PutItem", before.as_ref(), None, Request::Standard);
            return Ok(false);
        }
        self.charge_write("PutItem", before.as_ref(), Some(&item), Request::Standard);
        tables.alerts.put(codec::decode(&item)?);
        Ok(true)
    }

    /// One UpdateItem: `published_at` set once, the outbox entry removed; nothing written
    /// when there is no record (its condition fails).
    pub(super) fn alert_published_impl(
        &self,
        alert: &Alert,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tables = self.tables();
        self.charge_call("UpdateItem");
        let sk = keys::alert_sk(&alert.key());
        let Some(held) = tables.alerts.get(&alert.schedule, &sk) else {
            self.charge_write("UpdateItem", None, None, Request::Standard);
            return Ok(());
        };
        let mut published = held.clone();
        published.published_at.get_or_insert(at);
        let (before, after) = (codec::encode(held)?, codec::encode(&published)?);
        self.charge_write("UpdateItem", Some(&before), Some(&after), Request::Standard);
        tables.alerts.put(codec::decode(&after)?);
        Ok(())
    }

    /// One Query page of the outbox (keys only, eventually consistent), then its records
    /// read in BatchGetItem requests of 100, as the DynamoDB store does.
    pub(super) fn unpublished_alerts_impl(
        &self,
        limit: u32,
    ) -> Result<Vec<RecordedAlert>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let tables = self.tables();
        let page = usize::try_from(limit.min(OUTBOX_PAGE_MAX)).unwrap_or(usize::MAX);
        let waiting: Vec<&RecordedAlert> = tables
            .alerts
            .outbox
            .values()
            .take(page)
            .filter_map(|(schedule, sk)| tables.alerts.get(schedule, sk))
            .collect();
        let items = waiting
            .iter()
            .map(|recorded| codec::encode(recorded))
            .collect::<Result<Vec<Item>, _>>()?;
        let read: Vec<&Item> = items.iter().collect();
        self.charge_index_fetch(keys::ACTIVE_INDEX, &read);
        Ok(waiting.into_iter().cloned().collect())
    }

    /// The schedule's whole alert partition (Query pages of 1,000), newest first.
    pub(super) fn alerts_of_impl(
        &self,
        schedule: &str,
        limit: u32,
    ) -> Result<Vec<RecordedAlert>, StoreError> {
        let tables = self.tables();
        let held: Vec<RecordedAlert> = tables
            .alerts
            .by_schedule
            .get(schedule)
            .map(|by_key| by_key.values().cloned().collect())
            .unwrap_or_default();
        let items = held
            .iter()
            .map(codec::encode)
            .collect::<Result<Vec<Item>, _>>()?;
        self.charge_query_all(&items);
        Ok(codec::newest_first(held, limit))
    }
}
