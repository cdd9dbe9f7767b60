//! How schedules, runs and audit entries look in answers, and run ids in paths.

use chrono::{DateTime, Utc};
use cronledger_core::health::Health;
use cronledger_core::http_target::redact_spec_json;
use cronledger_core::run::Origin;
use cronledger_core::window::utc_text;
use cronledger_core::{Attempt, Run, RunKey, ScheduleSpec, Timing};
use cronledger_ledger::ledger::{AuditEntry, StoredSchedule};
use serde_json::{json, Value};

use super::error::ApiError;
use super::ids::{shown, valid_origin_id};

/// Longest RFC3339 instant a run id starts with (nanoseconds and an offset included).
const RFC3339_MAX: usize = 40;

pub fn schedule(s: &StoredSchedule) -> Value {
    // A url stored with credentials (before they were refused) is not shown with them.
    let spec = ScheduleSpec {
        job: s.spec.job.redacted(),
        ..s.spec.clone()
    };
    // In words for people ("at 02:00 (Asia/Seoul)"); null for an expression that no longer
    // parses (stored before a rule tightened).
    let describe = Timing::parse(&s.spec.cron, s.spec.timezone)
        .ok()
        .map(|t| t.describe());
    json!({
        "id": s.id(),
        "version": s.version,
        "state": s.state.as_str(),
        "describe": describe,
        "spec": spec,
        "next_run_at": s.next_run_at.map(utc_text),
        "reconciled_through": utc_text(s.reconciled_through),
        // The schedules that run after this one (its own upstreams are the spec's `after`),
        // as the reconciler last kept them.
        "downstream": s.downstream,
        "pauses": s.pauses,
        "created_at": utc_text(s.created_at),
        "updated_at": utc_text(s.updated_at),
    })
}

/// A schedule with its health (`null` when there is none to read).
pub fn schedule_with_health(s: &StoredSchedule, health: Option<&Health>) -> Value {
    let mut v = schedule(s);
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "health".into(),
            serde_json::to_value(health).unwrap_or(Value::Null),
        );
    }
    v
}

pub fn audit(e: &AuditEntry) -> Value {
    let (mut before, mut after) = (e.before.clone(), e.after.clone());
    before.iter_mut().for_each(redact_spec_json);
    redact_spec_json(&mut after);
    json!({
        "version": e.version,
        "action": e.action.as_str(),
        "actor": e.actor,
        "reason": e.reason,
        "at": utc_text(e.at),
        "before": before,
        "after": after,
        "details": e.details,
    })
}

/// A run's id in paths: its scheduled instant, plus `~M~{request}` or `~B~{backfill}` for
/// an operator's run.
pub fn run_id(key: &RunKey) -> String {
    let at = utc_text(key.scheduled_for);
    match &key.origin {
        Origin::Expected => at,
        Origin::Manual(id) => format!("{at}~M~{id}"),
        Origin::Backfill(id) => format!("{at}~B~{id}"),
    }
}

pub fn parse_run_id(schedule_id: &str, text: &str) -> Result<RunKey, ApiError> {
    let bad = || {
        ApiError::not_found(
            "RUN_NOT_FOUND",
            format!(
                "`{}` is not a run id (an RFC3339 instant, optionally ~M~ or ~B~ and an id)",
                shown(text)
            ),
        )
    };
    let (at, origin) = match text.split_once('~') {
        None => (text, Origin::Expected),
        Some((at, rest)) => match rest.split_once('~') {
            Some(("M", id)) if valid_origin_id(id) => (at, Origin::Manual(id.to_string())),
            Some(("B", id)) if valid_origin_id(id) => (at, Origin::Backfill(id.to_string())),
            _ => return Err(bad()),
        },
    };
    if at.len() > RFC3339_MAX {
        return Err(bad());
    }
    let scheduled_for = DateTime::parse_from_rfc3339(at)
        .map_err(|_| bad())?
        .with_timezone(&Utc);
    Ok(RunKey {
        schedule_id: schedule_id.to_string(),
        scheduled_for,
        origin,
    })
}

pub fn run(r: &Run) -> Value {
    let mut v = serde_json::to_value(r.ledger_entry()).unwrap_or_else(|_| json!({}));
    if let Some(obj) = v.as_object_mut() {
        let t = |x: Option<DateTime<Utc>>| x.map(utc_text);
        obj.insert("run_id".into(), json!(run_id(&r.key)));
        obj.insert(
            "origin".into(),
            serde_json::to_value(&r.key.origin).unwrap_or(Value::Null),
        );
        obj.insert("business_date".into(), json!(r.business_date.to_string()));
        obj.insert("lane".into(), json!(r.lane.map(|l| l.as_str())));
        obj.insert("forced".into(), json!(r.forced));
        obj.insert("schedule_version".into(), json!(r.schedule_version));
        obj.insert("cron".into(), json!(r.cron));
        obj.insert("timezone".into(), json!(r.timezone));
        obj.insert("job_id".into(), json!(r.job_id));
        obj.insert("result".into(), json!(r.result));
        obj.insert("created_at".into(), json!(utc_text(r.created_at)));
        obj.insert("updated_at".into(), json!(utc_text(r.updated_at)));
        obj.insert("queued_at".into(), json!(t(r.queued_at)));
        obj.insert("started_at".into(), json!(t(r.started_at)));
        obj.insert("completed_at".into(), json!(t(r.completed_at)));
        obj.insert("last_heartbeat_at".into(), json!(t(r.last_heartbeat_at)));
        if !r.steps.is_empty() {
            // A steps job's checkpoints: {name, status, attempts, started_at, ended_at,
            // output, error_code} per step, in order.
            obj.insert("steps".into(), json!(r.steps));
        }
        if let Some(c) = &r.children {
            obj.insert(
                "children".into(),
                json!({"total": c.total, "succeeded": c.succeeded, "failed": c.failed,
                       "running": c.running()}),
            );
        }
    }
    v
}

/// A run with its attempts. `attempt_history` lists the attempts the run item records (the
/// most recent ones, oldest first; `attempts_unlisted` counts older ones beyond that bound or
/// from before attempts were kept); `attempt_detail.current` is the latest attempt as the
/// run itself describes it (lease, heartbeat).
pub fn run_with_attempts(r: &Run, attempts: &[Attempt]) -> Value {
    let mut v = run(r);
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "attempt_detail".into(),
            json!({
                "count": r.attempts,
                "current": (r.attempts > 0).then(|| json!({
                    "number": r.attempts,
                    "lease_epoch": r.lease_epoch,
                    "lease_owner": r.lease.as_ref().map(|l| l.owner.clone()),
                    "lease_until": r.lease.as_ref().map(|l| utc_text(l.until)),
                    "started_at": r.started_at.map(utc_text),
                    "last_heartbeat_at": r.last_heartbeat_at.map(utc_text),
                    "completed_at": r.completed_at.map(utc_text),
                    "status": r.status,
                    "result": r.result,
                })),
            }),
        );
        obj.insert(
            "attempt_history".into(),
            attempts.iter().map(attempt).collect(),
        );
        obj.insert(
            "attempts_unlisted".into(),
            json!(u64::from(r.attempts).saturating_sub(attempts.len() as u64)),
        );
    }
    v
}

/// One attempt: number (= its lease epoch), worker, start, end, duration, outcome, the
/// status it left the run in, and the error it reported.
pub fn attempt(a: &Attempt) -> Value {
    let start = a.start.as_ref();
    let end = a.end.as_ref();
    json!({
        "number": a.number,
        "lease_epoch": a.number,
        "worker": start.map(|s| s.worker.clone()),
        "started_at": start.map(|s| utc_text(s.started_at)),
        "finished_at": end.map(|e| utc_text(e.finished_at)),
        "duration_ms": a.duration_ms(),
        "outcome": end.map(|e| e.outcome),
        "status": end.map(|e| e.status),
        "reason": end.and_then(|e| e.reason),
        "error": end
            .filter(|e| e.error_code.is_some() || e.message.is_some())
            .map(|e| json!({"code": e.error_code, "message": e.message})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_round_trip() {
        let at: DateTime<Utc> = "2026-03-01T02:00:00Z".parse().unwrap();
        for origin in [
            Origin::Expected,
            Origin::Manual("r1".into()),
            Origin::Backfill("b1".into()),
        ] {
            let key = RunKey {
                schedule_id: "s".into(),
                scheduled_for: at,
                origin,
            };
            assert_eq!(parse_run_id("s", &run_id(&key)).unwrap(), key);
        }
        assert!(parse_run_id("s", "yesterday").is_err());
        assert!(parse_run_id("s", "2026-03-01T02:00:00Z~X~1").is_err());
        assert!(parse_run_id("s", "2026-03-01T02:00:00Z~M~").is_err());
    }
}
