//! The memory store's item table: items kept as DynamoDB keeps them, for the subjects
//! written once over the port's [`ItemEngine`] (see `crate::subjects`). Each request is
//! charged here, from the items it reads and writes, as DynamoDB charges it.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::capacity::Request;
use super::InMemoryStore;
use crate::engine::ItemEngine;
use crate::error::StoreError;
use crate::expr::{eval, Expr};
use crate::item::{Item, ItemReader};

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
}
