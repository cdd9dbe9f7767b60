//! The control plane's items in memory (idempotency claims, backfills, the system audit,
//! the kill switch, release states): the same conditions as `dynamo::ops` and
//! `dynamo::control`, each request charged as the DynamoDB store's. Values are stored as
//! the items' decoders give them back.

use cronledger_core::window::utc_text;

use super::capacity::Request;
use super::InMemoryStore;
use crate::dynamo::ops::{
    backfill_item, claim_item, decode_backfill, decode_claim, decode_kill_switch,
    decode_system_audit, kill_switch_item, system_audit_item,
};
use crate::error::StoreError;
use crate::item::Item;
use crate::keys;
use crate::ops::{Backfill, IdempotencyClaim, KillSwitch, SystemAuditEntry};

/// The DynamoDB store's page size when it lists open backfills.
const OPEN_BACKFILLS_PAGE: usize = 500;

/// The system audit's order: its sort key up to the random tag (which only orders two
/// actions of one instant).
fn system_audit_order(entry: &SystemAuditEntry) -> String {
    format!(
        "{}{}#{}#",
        keys::AUDIT_PREFIX,
        entry.at.format("%Y-%m-%dT%H:%M:%S%.6fZ"),
        entry.action
    )
}

/// Where an open backfill sorts in the `active` index: `{created_at}#{id}`.
fn open_backfill_order(backfill: &Backfill) -> String {
    format!("{}#{}", utc_text(backfill.created_at), backfill.id)
}

impl InMemoryStore {
    /// One conditional PutItem (absent, or expired by `created_at`); when it fails, one
    /// GetItem of the claim there. Expired claims are never deleted here (TTL's deletes are
    /// lazy anyway), so the read always finds it.
    pub(super) fn claim_impl(
        &self,
        claim: &IdempotencyClaim,
    ) -> Result<Option<IdempotencyClaim>, StoreError> {
        let item = claim_item(claim)?;
        let mut tables = self.tables();
        self.charge_call("PutItem");
        let existing = tables.claims.get(&claim.key);
        let stored_item = existing.map(claim_item).transpose()?;
        match existing {
            Some(held) if held.expires_at.timestamp() >= claim.created_at.timestamp() => {
                let held = held.clone();
                self.charge_write("PutItem", stored_item.as_ref(), None, Request::Standard);
                self.charge_call("GetItem");
                let read: Vec<&Item> = stored_item.iter().collect();
                self.charge_read("GetItem", None, &read, true, Request::Standard);
                Ok(Some(held))
            }
            _ => {
                self.charge_write(
                    "PutItem",
                    stored_item.as_ref(),
                    Some(&item),
                    Request::Standard,
                );
                tables
                    .claims
                    .insert(claim.key.clone(), decode_claim(&item)?);
                Ok(None)
            }
        }
    }

    pub(super) fn create_backfill_impl(&self, backfill: &Backfill) -> Result<Backfill, StoreError> {
        let mut stored = backfill.clone();
        stored.version = 1;
        let item = backfill_item(&stored)?;
        let mut tables = self.tables();
        self.charge_call("PutItem");
        if let Some(existing) = tables.backfills.get(&backfill.id) {
            let existing = backfill_item(existing)?;
            self.charge_write("PutItem", Some(&existing), None, Request::Standard);
            return Err(StoreError::BackfillAlreadyExists(backfill.id.clone()));
        }
        self.charge_write("PutItem", None, Some(&item), Request::Standard);
        tables
            .backfills
            .insert(backfill.id.clone(), decode_backfill(&item)?);
        Ok(stored)
    }

    pub(super) fn get_backfill_impl(&self, id: &str) -> Result<Backfill, StoreError> {
        let tables = self.tables();
        self.charge_call("GetItem");
        let found = tables.backfills.get(id).map(backfill_item).transpose()?;
        let read: Vec<&Item> = found.iter().collect();
        self.charge_read("GetItem", None, &read, true, Request::Standard);
        match found {
            Some(item) => decode_backfill(&item),
            None => Err(StoreError::BackfillNotFound(id.to_string())),
        }
    }

    /// One PutItem at version + 1, if the stored version is still `backfill.version`.
    pub(super) fn put_backfill_impl(
        &self,
        backfill: &Backfill,
    ) -> Result<Option<Backfill>, StoreError> {
        let mut next = backfill.clone();
        next.version = backfill.version + 1;
        let item = backfill_item(&next)?;
        let mut tables = self.tables();
        self.charge_call("PutItem");
        let existing = tables.backfills.get(&backfill.id);
        let stored_item = existing.map(backfill_item).transpose()?;
        if existing.map(|b| b.version) != Some(backfill.version) {
            self.charge_write("PutItem", stored_item.as_ref(), None, Request::Standard);
            return Ok(None);
        }
        self.charge_write(
            "PutItem",
            stored_item.as_ref(),
            Some(&item),
            Request::Standard,
        );
        tables
            .backfills
            .insert(backfill.id.clone(), decode_backfill(&item)?);
        Ok(Some(next))
    }

    /// Oldest first, as the `active` index orders them: Query pages of 500 on the index,
    /// each backfill then read again (GetItem), as the DynamoDB store does.
    pub(super) fn open_backfills_impl(&self) -> Result<Vec<Backfill>, StoreError> {
        let tables = self.tables();
        let mut open: Vec<&Backfill> = tables
            .backfills
            .values()
            .filter(|b| b.state.is_open())
            .collect();
        open.sort_by_cached_key(|b| open_backfill_order(b));
        let items = open
            .iter()
            .map(|b| backfill_item(b))
            .collect::<Result<Vec<Item>, _>>()?;
        let mut pages: Vec<&[Item]> = items.chunks(OPEN_BACKFILLS_PAGE).collect();
        if items.len() % OPEN_BACKFILLS_PAGE == 0 {
            pages.push(&[]);
        }
        for page in pages {
            let read: Vec<&Item> = page.iter().collect();
            self.charge_index_query(keys::ACTIVE_INDEX, &read);
            for item in page {
                self.charge_call("GetItem");
                self.charge_read("GetItem", None, &[item], true, Request::Standard);
            }
        }
        items.iter().map(decode_backfill).collect()
    }

    /// One PutItem under a fresh sort key (a random tag keeps two actions of one instant).
    pub(super) fn append_system_audit_impl(
        &self,
        entry: &SystemAuditEntry,
    ) -> Result<(), StoreError> {
        let item = system_audit_item(entry)?;
        let stored = decode_system_audit(&item)?;
        let mut tables = self.tables();
        self.charge_call("PutItem");
        self.charge_write("PutItem", None, Some(&item), Request::Standard);
        let order = system_audit_order(&stored);
        let at = tables
            .system_audit
            .partition_point(|e| system_audit_order(e) <= order);
        tables.system_audit.insert(at, stored);
        Ok(())
    }

    /// Newest first: one descending Query page of at most `limit` (1 to 1,000) entries.
    pub(super) fn system_audit_impl(
        &self,
        limit: u32,
    ) -> Result<Vec<SystemAuditEntry>, StoreError> {
        let limit = limit.clamp(1, super::schedules::QUERY_PAGE_MAX) as usize;
        let tables = self.tables();
        let newest: Vec<SystemAuditEntry> = tables
            .system_audit
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect();
        let items = newest
            .iter()
            .map(system_audit_item)
            .collect::<Result<Vec<Item>, _>>()?;
        self.charge_call("Query");
        let read: Vec<&Item> = items.iter().collect();
        self.charge_read("Query", None, &read, true, Request::Standard);
        Ok(newest)
    }

    pub(super) fn kill_switch_impl(&self) -> Result<Option<KillSwitch>, StoreError> {
        let tables = self.tables();
        self.charge_call("GetItem");
        let item = tables
            .kill_switch
            .as_ref()
            .map(kill_switch_item)
            .transpose()?;
        let read: Vec<&Item> = item.iter().collect();
        self.charge_read("GetItem", None, &read, true, Request::Standard);
        item.as_ref().map(decode_kill_switch).transpose()
    }

    /// One unconditional PutItem: last writer wins.
    pub(super) fn put_kill_switch_impl(&self, state: &KillSwitch) -> Result<(), StoreError> {
        let item = kill_switch_item(state)?;
        let mut tables = self.tables();
        self.charge_call("PutItem");
        let before = tables
            .kill_switch
            .as_ref()
            .map(kill_switch_item)
            .transpose()?;
        self.charge_write("PutItem", before.as_ref(), Some(&item), Request::Standard);
        tables.kill_switch = Some(decode_kill_switch(&item)?);
        Ok(())
    }
}
