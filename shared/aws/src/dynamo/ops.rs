//! The control plane's items (see [`crate::ops`]): idempotency claims, backfills, system audit.
//!
//! Backfills are stored whole as one JSON document (read and written whole, under a version
//! condition); open ones carry the `active` index keys under a partition of their own
//! (`BACKFILLS`), so the release step lists them without a scan.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cronledger_core::window::utc_text;

use super::{DynamoStore, Expr};
use crate::error::StoreError;
use crate::item::{key, n, s, Item, ItemReader, ItemWriter};
use crate::keys::{self, EXPIRES_AT, GSI2PK, GSI2SK, PK, SK};
use crate::ops::{Backfill, IdempotencyClaim, KillSwitch, SystemAuditEntry};
use crate::ops::{BackfillStore, SystemStore};

const TYPE: &str = "type";
const IDEM_TYPE: &str = "IDEMPOTENCY";
const BACKFILL_TYPE: &str = "BACKFILL";
const SYSTEM_AUDIT_TYPE: &str = "SYSTEM_AUDIT";
const CLAIM_SK: &str = "CLAIM";
const STATE_SK: &str = "STATE";
const DOC: &str = "doc";
const VERSION: &str = "version";
const STATE: &str = "state";
const SCHEDULE_ID: &str = "schedule_id";
/// The `active` index partition of open backfills.
pub(crate) const OPEN_BACKFILLS_PK: &str = "BACKFILLS";
const SYSTEM_PK: &str = "SYSTEM";
const KILL_SWITCH_SK: &str = "KILL_SWITCH";
const KILL_SWITCH_TYPE: &str = "KILL_SWITCH";

pub(crate) fn claim_item(claim: &IdempotencyClaim) -> Result<Item, StoreError> {
    Ok(ItemWriter::new()
        .s(PK, keys::idempotency_pk(&claim.key))
        .s(SK, CLAIM_SK)
        .s(TYPE, IDEM_TYPE)
        .s(DOC, to_json(claim)?)
        .n(EXPIRES_AT, claim.expires_at.timestamp())
        .build())
}

pub(crate) fn backfill_item(b: &Backfill) -> Result<Item, StoreError> {
    let mut w = ItemWriter::new()
        .s(PK, keys::backfill_pk(&b.id))
        .s(SK, STATE_SK)
        .s(TYPE, BACKFILL_TYPE)
        .s(SCHEDULE_ID, &b.schedule_id)
        .s(STATE, b.state.as_str())
        .n(VERSION, b.version)
        .s(DOC, to_json(b)?);
    if b.state.is_open() {
        w = w
            .s(GSI2PK, OPEN_BACKFILLS_PK)
            .s(GSI2SK, format!("{}#{}", utc_text(b.created_at), b.id));
    }
    Ok(w.build())
}

pub(crate) fn decode_backfill(item: &Item) -> Result<Backfill, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, BACKFILL_TYPE)?;
    let mut b: Backfill = r.json(DOC)?;
    // The attribute is the truth the conditions test.
    b.version = r.n(VERSION)?;
    Ok(b)
}

pub(crate) fn decode_claim(item: &Item) -> Result<IdempotencyClaim, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, IDEM_TYPE)?;
    r.json(DOC)
}

/// A system audit item, under a fresh random tag (see [`system_audit_sk`]).
pub(crate) fn system_audit_item(e: &SystemAuditEntry) -> Result<Item, StoreError> {
    Ok(ItemWriter::new()
        .s(PK, SYSTEM_PK)
        .s(SK, system_audit_sk(e.at, &e.action))
        .s(TYPE, SYSTEM_AUDIT_TYPE)
        .s(DOC, to_json(e)?)
        .build())
}

pub(crate) fn decode_system_audit(item: &Item) -> Result<SystemAuditEntry, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, SYSTEM_AUDIT_TYPE)?;
    r.json(DOC)
}

pub(crate) fn kill_switch_item(state: &KillSwitch) -> Result<Item, StoreError> {
    Ok(ItemWriter::new()
        .s(PK, SYSTEM_PK)
        .s(SK, KILL_SWITCH_SK)
        .s(TYPE, KILL_SWITCH_TYPE)
        .s(DOC, to_json(state)?)
        .build())
}

pub(crate) fn decode_kill_switch(item: &Item) -> Result<KillSwitch, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, KILL_SWITCH_TYPE)?;
    r.json(DOC)
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::InvalidRequest(e.to_string()))
}

impl DynamoStore {
    async fn claim_impl(
        &self,
        claim: &IdempotencyClaim,
    ) -> Result<Option<IdempotencyClaim>, StoreError> {
        let pk = keys::idempotency_pk(&claim.key);
        for _ in 0..3 {
            if self
                .put_unless_live(claim_item(claim)?, claim.created_at)
                .await?
            {
                return Ok(None);
            }
            if let Some(item) = self.get_item(key(pk.clone(), CLAIM_SK)).await? {
                return decode_claim(&item).map(Some);
            }
            // Expired and deleted between the two calls: try again.
        }
        Err(StoreError::Contention(format!(
            "idempotency key `{}` kept changing",
            claim.key
        )))
    }

    async fn create_backfill_impl(&self, b: &Backfill) -> Result<Backfill, StoreError> {
        let mut stored = b.clone();
        stored.version = 1;
        let mut cond = Expr::new();
        cond.not_exists(PK);
        if self.put_if(backfill_item(&stored)?, &cond).await? {
            Ok(stored)
        } else {
            Err(StoreError::BackfillAlreadyExists(b.id.clone()))
        }
    }

    async fn get_backfill_impl(&self, id: &str) -> Result<Backfill, StoreError> {
        match self.get_item(key(keys::backfill_pk(id), STATE_SK)).await? {
            Some(item) => decode_backfill(&item),
            None => Err(StoreError::BackfillNotFound(id.to_string())),
        }
    }

    async fn put_backfill_impl(&self, b: &Backfill) -> Result<Option<Backfill>, StoreError> {
        let mut next = b.clone();
        next.version = b.version + 1;
        let mut cond = Expr::new();
        cond.eq(VERSION, n(b.version));
        Ok(self
            .put_if(backfill_item(&next)?, &cond)
            .await?
            .then_some(next))
    }

    async fn open_backfills_impl(&self) -> Result<Vec<Backfill>, StoreError> {
        let mut cond = Expr::new();
        cond.eq(GSI2PK, s(OPEN_BACKFILLS_PK));
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let (items, next) = self
                .query_page(
                    Some(keys::ACTIVE_INDEX),
                    &cond,
                    500,
                    cursor.as_deref(),
                    true,
                )
                .await?;
            for entry in &items {
                // The index projects keys only, and lags the table: read the backfill.
                let pk = crate::item::ItemReader::new(entry).s(PK)?;
                let Some(id) = pk.strip_prefix(&keys::backfill_pk("")) else {
                    continue;
                };
                let fresh = self.get_backfill_impl(id).await?;
                if fresh.state.is_open() {
                    out.push(fresh);
                }
            }
            match next {
                Some(n) => cursor = Some(n),
                None => return Ok(out),
            }
        }
    }

    async fn append_system_audit_impl(&self, e: &SystemAuditEntry) -> Result<(), StoreError> {
        let item = system_audit_item(e)?;
        let mut cond = Expr::new();
        cond.not_exists(PK);
        if self.put_if(item, &cond).await? {
            Ok(())
        } else {
            Err(StoreError::InvalidRequest(
                "a system action with the same instant is already recorded".into(),
            ))
        }
    }

    async fn system_audit_impl(&self, limit: u32) -> Result<Vec<SystemAuditEntry>, StoreError> {
        let mut cond = Expr::new();
        cond.eq(PK, s(SYSTEM_PK))
            .begins_with(SK, s(keys::AUDIT_PREFIX));
        let (items, _) = self.query_page(None, &cond, limit, None, false).await?;
        items.iter().map(decode_system_audit).collect()
    }
}

impl DynamoStore {
    async fn kill_switch_impl(&self) -> Result<Option<KillSwitch>, StoreError> {
        let Some(item) = self
            .get_item(key(SYSTEM_PK.to_string(), KILL_SWITCH_SK))
            .await?
        else {
            return Ok(None);
        };
        decode_kill_switch(&item).map(Some)
    }

    async fn put_kill_switch_impl(&self, state: &KillSwitch) -> Result<(), StoreError> {
        let item = kill_switch_item(state)?;
        self.put_conditional(item, None, None, None).await?;
        Ok(())
    }
}

/// Time first (newest-first listing), then the action and a random tag so two actions at
/// one instant both stay.
fn system_audit_sk(at: DateTime<Utc>, action: &str) -> String {
    let tag = RandomState::new().hash_one((action, at.timestamp_micros())) & 0xffff_ffff;
    format!(
        "{}{}#{action}#{tag:08x}",
        keys::AUDIT_PREFIX,
        at.format("%Y-%m-%dT%H:%M:%S%.6fZ")
    )
}

#[async_trait]
impl BackfillStore for DynamoStore {
    async fn create_backfill(&self, backfill: &Backfill) -> Result<Backfill, StoreError> {
        self.create_backfill_impl(backfill).await
    }

    async fn get_backfill(&self, id: &str) -> Result<Backfill, StoreError> {
        self.get_backfill_impl(id).await
    }

    async fn put_backfill(&self, backfill: &Backfill) -> Result<Option<Backfill>, StoreError> {
        self.put_backfill_impl(backfill).await
    }

    async fn open_backfills(&self) -> Result<Vec<Backfill>, StoreError> {
        self.open_backfills_impl().await
    }
}

#[async_trait]
impl SystemStore for DynamoStore {
    async fn claim_idempotency(
        &self,
        claim: &IdempotencyClaim,
    ) -> Result<Option<IdempotencyClaim>, StoreError> {
        self.claim_impl(claim).await
    }

    async fn append_system_audit(&self, entry: &SystemAuditEntry) -> Result<(), StoreError> {
        self.append_system_audit_impl(entry).await
    }

    async fn system_audit(&self, limit: u32) -> Result<Vec<SystemAuditEntry>, StoreError> {
        self.system_audit_impl(limit).await
    }

    async fn kill_switch(&self) -> Result<Option<KillSwitch>, StoreError> {
        self.kill_switch_impl().await
    }

    async fn put_kill_switch(&self, state: &KillSwitch) -> Result<(), StoreError> {
        self.put_kill_switch_impl(state).await
    }
}
