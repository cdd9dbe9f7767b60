//! What each schedule change does to a stored schedule, apart from how a store writes it:
//! both stores (DynamoDB and memory) apply these same rules, so they cannot drift.

use chrono::{DateTime, Utc};
use cronledger_core::{Schedule, ScheduleSpec};

use crate::error::StoreError;
use crate::keys;
use crate::ledger::{
    AuditAction, AuditEntry, ChangeMeta, OperatorAction, PastTiming, Pause, ScheduleState,
    StoredSchedule, PAUSE_HISTORY,
};

fn compiled(spec: &ScheduleSpec) -> Result<Schedule, StoreError> {
    Schedule::new(spec.clone()).map_err(StoreError::ScheduleInvalid)
}

/// The fire time (`next_run_at`) of the first occurrence strictly after `at` under `spec`.
/// None for a schedule that runs `after` upstreams: the ticker never fires it (its windows
/// are created when the upstreams' end), so it stays out of the `due` index.
pub fn next_after(
    spec: &ScheduleSpec,
    at: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    let compiled = compiled(spec)?;
    Ok(fired_by_ticker(spec)
        .then(|| compiled.next_fire_after(at))
        .flatten())
}

fn fired_by_ticker(spec: &ScheduleSpec) -> bool {
    spec.after.is_empty()
}

/// A new schedule at version 1.
pub fn created(
    spec: ScheduleSpec,
    meta: &ChangeMeta,
    shards: u32,
) -> Result<StoredSchedule, StoreError> {
    Ok(StoredSchedule {
        next_run_at: next_after(&spec, meta.at)?,
        shard: keys::shard_of(&spec.id, shards),
        spec,
        version: 1,
        state: ScheduleState::Active,
        // Windows before the schedule existed were never expected.
        reconciled_through: meta.at,
        pauses: Vec::new(),
        past_timings: Vec::new(),
        created_at: meta.at,
        updated_at: meta.at,
        failure_streak: 0,
        downstream: Vec::new(),
    })
}

/// `current` with `spec` in force (version and `updated_at` are the caller's).
pub fn updated(
    current: &StoredSchedule,
    spec: &ScheduleSpec,
    meta: &ChangeMeta,
) -> Result<StoredSchedule, StoreError> {
    let timing_changed = spec.cron != current.spec.cron || spec.timezone != current.spec.timezone;
    let next_run_at = compiled(spec)?
        .next_fire_after_edit(&compiled(&current.spec)?, current.next_run_at, meta.at)
        .filter(|_| fired_by_ticker(spec));
    // The old expression still judges its windows up to now (see `PastTiming`); entries the
    // watermark has passed are done.
    let mut past_timings: Vec<PastTiming> = current.past_timings_ahead().cloned().collect();
    if timing_changed && meta.at > current.reconciled_through {
        past_timings.push(PastTiming {
            cron: current.spec.cron.clone(),
            timezone: current.spec.timezone.name().to_string(),
            until: meta.at,
        });
    }
    Ok(StoredSchedule {
        spec: spec.clone(),
        next_run_at,
        past_timings,
        ..current.clone()
    })
}

pub fn paused(current: &StoredSchedule, meta: &ChangeMeta) -> Result<StoredSchedule, StoreError> {
    if current.state != ScheduleState::Active {
        return Err(StoreError::InvalidRequest(format!(
            "schedule `{}` is {}, only an ACTIVE schedule can be paused",
            current.id(),
            current.state
        )));
    }
    let mut pauses = current.pauses.clone();
    pauses.push(Pause {
        from: meta.at,
        until: None,
        actor: meta.actor.clone(),
        note: meta.reason.clone(),
    });
    let keep_from = pauses.len().saturating_sub(PAUSE_HISTORY);
    Ok(StoredSchedule {
        state: ScheduleState::Paused,
        pauses: pauses.split_off(keep_from),
        ..current.clone()
    })
}

pub fn resumed(current: &StoredSchedule, meta: &ChangeMeta) -> Result<StoredSchedule, StoreError> {
    if current.state != ScheduleState::Paused {
        return Err(StoreError::InvalidRequest(format!(
            "schedule `{}` is {}, only a PAUSED schedule can be resumed",
            current.id(),
            current.state
        )));
    }
    let mut pauses = current.pauses.clone();
    if let Some(open) = pauses.iter_mut().rev().find(|p| p.until.is_none()) {
        open.until = Some(meta.at);
    }
    Ok(StoredSchedule {
        state: ScheduleState::Active,
        pauses,
        // Windows during the pause are the reconciler's (PAUSED skips).
        next_run_at: next_after(&current.spec, meta.at)?,
        // An operator resumed it: failures count again from here (a schedule that paused
        // itself on failure pauses again only after as many new ones).
        failure_streak: 0,
        downstream: Vec::new(),
        ..current.clone()
    })
}

pub fn archived(current: &StoredSchedule) -> Result<StoredSchedule, StoreError> {
    Ok(StoredSchedule {
        state: ScheduleState::Archived,
        ..current.clone()
    })
}

/// Whether a change may apply to `current`: the version the caller expects (none: whatever
/// is current) and not archived.
pub fn check_changeable(
    current: &StoredSchedule,
    expected_version: Option<u64>,
) -> Result<(), StoreError> {
    let expected = expected_version.unwrap_or(current.version);
    if current.version != expected {
        return Err(StoreError::VersionConflict {
            id: current.id().to_string(),
            expected,
            actual: current.version,
        });
    }
    if current.state == ScheduleState::Archived {
        return Err(StoreError::ScheduleArchived(current.id().to_string()));
    }
    Ok(())
}

/// The audit entry a change writes beside the schedule at its new version.
pub fn change_entry(
    action: AuditAction,
    before: Option<&StoredSchedule>,
    after: &StoredSchedule,
    meta: &ChangeMeta,
) -> AuditEntry {
    AuditEntry {
        schedule_id: after.id().to_string(),
        version: after.version,
        action,
        actor: meta.actor.clone(),
        reason: meta.reason.clone(),
        at: meta.at,
        before: before.map(audit_view),
        after: audit_view(after),
        details: meta.details.clone(),
    }
}

/// The audit entry of an operator's action, under the version current when it was taken.
pub fn operator_entry(action: &OperatorAction, version: u64) -> AuditEntry {
    AuditEntry {
        schedule_id: action.schedule_id.clone(),
        version,
        action: action.action,
        actor: action.actor.clone(),
        reason: action.reason.clone(),
        at: action.at,
        before: None,
        after: serde_json::Value::Null,
        details: Some(action.details.clone()),
    }
}

/// The document an audit entry records as "before" and "after".
pub fn audit_view(schedule: &StoredSchedule) -> serde_json::Value {
    serde_json::json!({
        "spec": schedule.spec,
        "version": schedule.version,
        "state": schedule.state.as_str(),
        "pauses": schedule.pauses,
    })
}
