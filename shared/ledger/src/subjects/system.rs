//! The system's own items (see [`crate::ops`]), written once over the item engine: the
//! API's idempotency claims, the system audit log, the kill switch.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use chrono::{DateTime, Utc};

use crate::engine::ItemEngine;
use crate::error::StoreError;
use crate::expr::{Comparison, Cond, Expr};
use crate::item::{key, n, s, Item, ItemReader, ItemWriter};
use crate::keys::{self, EXPIRES_AT, PK, SK};
use crate::ops::{IdempotencyClaim, KillSwitch, SystemAuditEntry};

const TYPE: &str = "type";
const DOC: &str = "doc";
const IDEM_TYPE: &str = "IDEMPOTENCY";
const SYSTEM_AUDIT_TYPE: &str = "SYSTEM_AUDIT";
const CLAIM_SK: &str = "CLAIM";
const SYSTEM_PK: &str = "SYSTEM";
const KILL_SWITCH_SK: &str = "KILL_SWITCH";
const KILL_SWITCH_TYPE: &str = "KILL_SWITCH";

fn claim_item(claim: &IdempotencyClaim) -> Result<Item, StoreError> {
    Ok(ItemWriter::new()
        .s(PK, keys::idempotency_pk(&claim.key))
        .s(SK, CLAIM_SK)
        .s(TYPE, IDEM_TYPE)
        .s(DOC, to_json(claim)?)
        .n(EXPIRES_AT, claim.expires_at.timestamp())
        .build())
}

fn decode_claim(item: &Item) -> Result<IdempotencyClaim, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, IDEM_TYPE)?;
    r.json(DOC)
}

/// A system audit item, under a fresh random tag (see [`system_audit_sk`]).
fn system_audit_item(e: &SystemAuditEntry) -> Result<Item, StoreError> {
    Ok(ItemWriter::new()
        .s(PK, SYSTEM_PK)
        .s(SK, system_audit_sk(e.at, &e.action))
        .s(TYPE, SYSTEM_AUDIT_TYPE)
        .s(DOC, to_json(e)?)
        .build())
}

fn decode_system_audit(item: &Item) -> Result<SystemAuditEntry, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, SYSTEM_AUDIT_TYPE)?;
    r.json(DOC)
}

fn kill_switch_item(state: &KillSwitch) -> Result<Item, StoreError> {
    Ok(ItemWriter::new()
        .s(PK, SYSTEM_PK)
        .s(SK, KILL_SWITCH_SK)
        .s(TYPE, KILL_SWITCH_TYPE)
        .s(DOC, to_json(state)?)
        .build())
}

fn decode_kill_switch(item: &Item) -> Result<KillSwitch, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, KILL_SWITCH_TYPE)?;
    r.json(DOC)
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::InvalidRequest(e.to_string()))
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

/// The key is free: no item there, or one whose TTL (`expires_at`, epoch seconds) passed
/// before `now` (TTL deletes lazily, up to days late).
pub fn unless_live(now: DateTime<Utc>) -> Expr {
    let mut cond = Expr::new();
    cond.any(vec![
        Cond::NotExists(PK.to_string()),
        Cond::Compare(EXPIRES_AT.to_string(), Comparison::Lt, n(now.timestamp())),
    ]);
    cond
}

/// Stores the claim unless a live one holds its key; answers the one there, or `None`.
pub async fn claim<E: ItemEngine + ?Sized>(
    engine: &E,
    claim: &IdempotencyClaim,
) -> Result<Option<IdempotencyClaim>, StoreError> {
    let pk = keys::idempotency_pk(&claim.key);
    for _ in 0..3 {
        if engine
            .put_if(claim_item(claim)?, &unless_live(claim.created_at))
            .await?
        {
            return Ok(None);
        }
        if let Some(item) = engine.get_item(key(pk.clone(), CLAIM_SK)).await? {
            return decode_claim(&item).map(Some);
        }
        // Expired and deleted between the two calls: try again.
    }
    Err(StoreError::Contention(format!(
        "idempotency key `{}` kept changing",
        claim.key
    )))
}

pub async fn append_audit<E: ItemEngine + ?Sized>(
    engine: &E,
    e: &SystemAuditEntry,
) -> Result<(), StoreError> {
    let item = system_audit_item(e)?;
    let mut cond = Expr::new();
    cond.not_exists(PK);
    if engine.put_if(item, &cond).await? {
        Ok(())
    } else {
        Err(StoreError::InvalidRequest(
            "a system action with the same instant is already recorded".into(),
        ))
    }
}

/// The system audit log, newest first.
pub async fn audit<E: ItemEngine + ?Sized>(
    engine: &E,
    limit: u32,
) -> Result<Vec<SystemAuditEntry>, StoreError> {
    let mut cond = Expr::new();
    cond.eq(PK, s(SYSTEM_PK))
        .begins_with(SK, s(keys::AUDIT_PREFIX));
    let (items, _) = engine.query_page(None, &cond, limit, None, false).await?;
    items.iter().map(decode_system_audit).collect()
}

pub async fn kill_switch<E: ItemEngine + ?Sized>(
    engine: &E,
) -> Result<Option<KillSwitch>, StoreError> {
    let Some(item) = engine
        .get_item(key(SYSTEM_PK.to_string(), KILL_SWITCH_SK))
        .await?
    else {
        return Ok(None);
    };
    decode_kill_switch(&item).map(Some)
}

/// Engages or releases it: last writer wins.
pub async fn put_kill_switch<E: ItemEngine + ?Sized>(
    engine: &E,
    state: &KillSwitch,
) -> Result<(), StoreError> {
    let item = kill_switch_item(state)?;
    engine.put_if(item, &Expr::new()).await?;
    Ok(())
}
