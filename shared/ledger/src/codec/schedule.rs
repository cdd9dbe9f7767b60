//! Schedule items (`SCHED#{id}` / `SCHEDULE`, after every run key) and their audit entries (`AUDIT#{version}`).
//!
//! The spec is one JSON document (it is the rule, read and written whole); the state the
//! scheduler conditions on (`version`, `state`, `next_run_at`, `reconciled_through`) has
//! attributes of its own.

use crate::error::StoreError;
use crate::item::{Item, ItemReader, ItemWriter};
use crate::keys::{self, GSI1PK, GSI1SK, GSI3PK, GSI3SK, PK, SK};
use crate::ledger::{AuditEntry, ScheduleState, StoredSchedule};

pub const TYPE: &str = "type";
pub const SCHEDULE_TYPE: &str = "SCHEDULE";
pub const AUDIT_TYPE: &str = "AUDIT";
/// A schedule's copy in its shard's catalog (see [`crate::fire_mark`]).
pub const CATALOG_ENTRY_TYPE: &str = "CATALOG_ENTRY";

pub const ID: &str = "id";
pub const SPEC: &str = "spec";
pub const VERSION: &str = "version";
pub const STATE: &str = "state";
pub const SHARD: &str = "shard";
pub const NEXT_RUN_AT: &str = "next_run_at";
pub const RECONCILED_THROUGH: &str = "reconciled_through";
pub const PAUSES: &str = "pauses";
pub const PAST_TIMINGS: &str = "past_timings";
pub const CREATED_AT: &str = "created_at";
pub const UPDATED_AT: &str = "updated_at";
pub const FAILURE_STREAK: &str = "failure_streak";
pub const DOWNSTREAM: &str = "downstream";

pub const ACTION: &str = "action";
pub const ACTOR: &str = "actor";
pub const REASON: &str = "reason";
pub const AT: &str = "at";
pub const BEFORE: &str = "before";
pub const AFTER: &str = "after";
pub const DETAILS: &str = "details";

pub fn encode(schedule: &StoredSchedule) -> Result<Item, StoreError> {
    let id = schedule.id();
    let mut w = ItemWriter::new()
        .s(PK, keys::schedule_pk(id))
        .s(SK, keys::SCHEDULE_SK)
        .s(TYPE, SCHEDULE_TYPE)
        .s(ID, id)
        .s(SPEC, to_json(&schedule.spec)?)
        .n(VERSION, schedule.version)
        .s(STATE, schedule.state.as_str())
        .n(SHARD, schedule.shard)
        .opt_time(NEXT_RUN_AT, schedule.next_run_at)
        .time(RECONCILED_THROUGH, schedule.reconciled_through)
        .s(PAUSES, to_json(&schedule.pauses)?)
        .opt_s(
            PAST_TIMINGS,
            (!schedule.past_timings.is_empty())
                .then(|| to_json(&schedule.past_timings))
                .transpose()?,
        )
        .time(CREATED_AT, schedule.created_at)
        .time(UPDATED_AT, schedule.updated_at)
        .opt_n(
            FAILURE_STREAK,
            (schedule.failure_streak > 0).then_some(schedule.failure_streak),
        )
        .opt_s(
            DOWNSTREAM,
            (!schedule.downstream.is_empty())
                .then(|| to_json(&schedule.downstream))
                .transpose()?,
        )
        .s(GSI3PK, keys::CATALOG_PK)
        .s(GSI3SK, id);
    if let Some((pk, sk)) = due_keys(schedule) {
        w = w.s(GSI1PK, pk).s(GSI1SK, sk);
    }
    Ok(w.build())
}

/// The sparse `due` index keys: present only while the schedule fires.
pub fn due_keys(schedule: &StoredSchedule) -> Option<(String, String)> {
    let next = schedule.next_run_at.filter(|_| schedule.fires())?;
    Some((
        keys::due_pk(schedule.shard),
        keys::due_sk(next, schedule.id()),
    ))
}

pub fn decode(item: &Item) -> Result<StoredSchedule, StoreError> {
    decode_as(item, SCHEDULE_TYPE)
}

/// A schedule item, or its catalog copy (`type` says which).
pub fn decode_as(item: &Item, item_type: &str) -> Result<StoredSchedule, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, item_type)?;
    let spec = r.json(SPEC)?;
    decode_with_spec(item, spec)
}

fn decode_with_spec(
    item: &Item,
    spec: cronledger_core::ScheduleSpec,
) -> Result<StoredSchedule, StoreError> {
    let r = ItemReader::new(item);
    if spec.id != r.s(ID)? {
        return Err(r.malformed(SPEC, format!("names schedule `{}`", spec.id)));
    }
    Ok(StoredSchedule {
        spec,
        version: r.n(VERSION)?,
        state: r.parsed::<ScheduleState>(STATE)?,
        shard: r.n(SHARD)?,
        next_run_at: r.opt_time(NEXT_RUN_AT)?,
        reconciled_through: r.time(RECONCILED_THROUGH)?,
        pauses: r.json(PAUSES)?,
        past_timings: match r.opt_s(PAST_TIMINGS)? {
            Some(_) => r.json(PAST_TIMINGS)?,
            None => Vec::new(),
        },
        created_at: r.time(CREATED_AT)?,
        updated_at: r.time(UPDATED_AT)?,
        failure_streak: r.opt_n(FAILURE_STREAK)?.unwrap_or(0),
        downstream: match r.opt_s(DOWNSTREAM)? {
            Some(_) => r.json(DOWNSTREAM)?,
            None => Vec::new(),
        },
    })
}

/// An audit item under `sk` (`keys::audit_sk` for a change, `keys::operator_audit_sk` for
/// an operator's action).
pub fn encode_audit(entry: &AuditEntry, sk: String) -> Result<Item, StoreError> {
    Ok(ItemWriter::new()
        .s(PK, keys::schedule_pk(&entry.schedule_id))
        .s(SK, sk)
        .s(TYPE, AUDIT_TYPE)
        .s(ID, &entry.schedule_id)
        .n(VERSION, entry.version)
        .s(ACTION, entry.action.as_str())
        .s(ACTOR, &entry.actor)
        .s(REASON, &entry.reason)
        .time(AT, entry.at)
        .opt_s(BEFORE, entry.before.as_ref().map(to_json).transpose()?)
        .s(AFTER, to_json(&entry.after)?)
        .opt_s(DETAILS, entry.details.as_ref().map(to_json).transpose()?)
        .build())
}

pub fn decode_audit(item: &Item) -> Result<AuditEntry, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, AUDIT_TYPE)?;
    Ok(AuditEntry {
        schedule_id: r.s(ID)?.to_string(),
        version: r.n(VERSION)?,
        action: r.parsed(ACTION)?,
        actor: r.s(ACTOR)?.to_string(),
        reason: r.s(REASON)?.to_string(),
        at: r.time(AT)?,
        before: r.opt_s(BEFORE)?.map(|_| r.json(BEFORE)).transpose()?,
        after: r.json(AFTER)?,
        details: r.opt_s(DETAILS)?.map(|_| r.json(DETAILS)).transpose()?,
    })
}

/// The spec a version's change entry records (`after.spec`): the rule in force from that
/// version on. An operator's action records no spec and is refused here.
pub fn decode_audit_spec(item: &Item) -> Result<cronledger_core::ScheduleSpec, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, AUDIT_TYPE)?;
    let mut after: serde_json::Value = r.json(AFTER)?;
    let spec = after
        .get_mut("spec")
        .map(serde_json::Value::take)
        .ok_or_else(|| r.malformed(AFTER, "records no spec"))?;
    let spec: cronledger_core::ScheduleSpec = serde_json::from_value(spec)
        .map_err(|e| r.malformed(AFTER, format!("holds a spec that does not read: {e}")))?;
    if spec.id != r.s(ID)? {
        return Err(r.malformed(AFTER, format!("names schedule `{}`", spec.id)));
    }
    Ok(spec)
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    // Serializing our own types cannot fail in practice; keep it typed anyway.
    serde_json::to_string(value).map_err(|e| StoreError::InvalidRequest(e.to_string()))
}
