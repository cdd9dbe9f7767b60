//! The memory store's item table: items kept as DynamoDB keeps them, for the subjects
//! written once over the port's [`ItemEngine`] (see `crate::subjects`). Each request is
//! charged here, from the items it reads and writes, as DynamoDB charges it.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::capacity::{index_def, Request};
use super::InMemoryStore;
use crate::cursor;
use crate::engine::ItemEngine;
use crate::error::StoreError;
use crate::expr::{eval, Expr};
use crate::item::{Item, ItemReader};
use crate::keys::{PK, SK};

/// Items by (PK, SK).
pub(crate) type ItemTable = BTreeMap<(String, String), Item>;

fn key_of(item: &Item) -> Result<(String, String), StoreError> {
    let r = ItemReader::new(item);
    Ok((
        r.s(crate::keys::PK)?.to_string(),
        r.s(crate::keys::SK)?.to_string(),
    ))
}

#[async_trait]
impl ItemEngine for InMemoryStore {
    async fn get_item(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let at = key_of(&key)?;
        let tables = self.tables();
        self.charge_call("GetItem");
        let found = tables.items.get(&at).cloned();
        let read: Vec<&Item> = found.iter().collect();
        self.charge_read("GetItem", None, &read, true, Request::Standard);
        Ok(found)
    }

    async fn put_if(&self, item: Item, cond: &Expr) -> Result<bool, StoreError> {
        let at = key_of(&item)?;
        let mut tables = self.tables();
        self.charge_call("PutItem");
        let before = tables.items.get(&at);
        if !eval::all_hold(&cond.conditions, before) {
            self.charge_write("PutItem", before, None, Request::Standard);
            return Ok(false);
        }
        self.charge_write("PutItem", before, Some(&item), Request::Standard);
        tables.items.insert(at, item);
        Ok(true)
    }

    async fn query_page(
        &self,
        index: Option<&str>,
        expr: &Expr,
        limit: u32,
        cursor: Option<&str>,
        forward: bool,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        let start = cursor::decode(cursor)?;
        let def = match index {
            Some(name) => Some(index_def(name).ok_or_else(|| {
                StoreError::InvalidRequest(format!("the table has no index `{name}`"))
            })?),
            None => None,
        };
        // The partition and sort attributes the query ranges over, and what a page's last
        // key holds (the table's keys, and the index's).
        let (hash, range) = match def {
            Some(def) => {
                let of = |kind: &str| {
                    def.key_schema
                        .iter()
                        .find(|k| k.key_type == kind)
                        .map(|k| k.attribute_name.as_str())
                };
                (of("HASH").unwrap_or(PK), of("RANGE"))
            }
            None => (PK, Some(SK)),
        };
        let key_attrs: Vec<&str> = [PK, SK, hash].into_iter().chain(range).collect();
        let key_of_item = |item: &Item| -> Item {
            key_attrs
                .iter()
                .filter_map(|a| item.get(*a).map(|v| (a.to_string(), v.clone())))
                .collect()
        };
        let order = |item: &Item| {
            let text = |a: &str| {
                item.get(a)
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .unwrap_or_default()
            };
            (range.map(text).unwrap_or_default(), text(PK), text(SK))
        };
        let tables = self.tables();
        let mut matched: Vec<&Item> = tables
            .items
            .values()
            .filter(|item| item.contains_key(hash) && range.is_none_or(|r| item.contains_key(r)))
            .filter(|item| eval::all_hold(&expr.conditions, Some(item)))
            .collect();
        matched.sort_by_key(|item| order(item));
        if !forward {
            matched.reverse();
        }
        let from = match &start {
            Some(start) => matched
                .iter()
                .position(|item| key_of_item(item) == *start)
                .map_or(0, |at| at + 1),
            None => 0,
        };
        let limit = limit.clamp(1, 1000) as usize;
        let read: Vec<&Item> = matched.into_iter().skip(from).take(limit).collect();
        self.charge_call("Query");
        let index_name = def.map(|d| d.index_name.as_str());
        self.charge_read(
            "Query",
            index_name,
            &read,
            index.is_none(),
            Request::Standard,
        );
        let next = (read.len() == limit)
            .then(|| read.last().map(|item| key_of_item(item)))
            .flatten();
        let kept = read
            .into_iter()
            .filter(|item| eval::kept(&expr.filters, item))
            .cloned()
            .collect();
        Ok((kept, cursor::encode(next.as_ref())))
    }

    async fn update_if(&self, key: Item, expr: &Expr) -> Result<bool, StoreError> {
        let at = key_of(&key)?;
        let mut tables = self.tables();
        self.charge_call("UpdateItem");
        let before = tables.items.get(&at);
        if !eval::all_hold(&expr.conditions, before) {
            self.charge_write("UpdateItem", before, None, Request::Standard);
            return Ok(false);
        }
        let after = eval::apply(&expr.updates, before.unwrap_or(&key))?;
        self.charge_write("UpdateItem", before, Some(&after), Request::Standard);
        tables.items.insert(at, after);
        Ok(true)
    }

    async fn delete_item(&self, key: Item) -> Result<(), StoreError> {
        let at = key_of(&key)?;
        let mut tables = self.tables();
        self.charge_call("DeleteItem");
        match tables.items.remove(&at) {
            Some(before) => self.charge_delete("DeleteItem", &before),
            None => self.charge_write("DeleteItem", None, None, Request::Standard),
        }
        Ok(())
    }

    /// `BatchGetItem`s of up to 100 keys, eventually consistent, as the DynamoDB store
    /// sends them.
    async fn fetch_items(&self, entries: &[Item]) -> Result<Vec<Item>, StoreError> {
        let keys = entries.iter().map(key_of).collect::<Result<Vec<_>, _>>()?;
        let tables = self.tables();
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(crate::dynamo::BATCH_GET_KEYS) {
            let read: Vec<&Item> = chunk.iter().filter_map(|k| tables.items.get(k)).collect();
            self.charge_call("BatchGetItem");
            self.charge_read("BatchGetItem", None, &read, false, Request::Standard);
            found.extend(read.into_iter().cloned());
        }
        Ok(found)
    }
}
