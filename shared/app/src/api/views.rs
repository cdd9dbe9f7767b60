//! How schedules, runs and audit entries look in answers, and run ids in paths.

use chrono::{DateTime, Utc};
use cronledger_contract::{
    AttemptDetail, AttemptError, AttemptView, AuditEntryView, ChildrenView, CurrentAttempt,
    RunView, ScheduleView,
};
use cronledger_core::health::Health;
use cronledger_core::http_target::redact_spec_json;
use cronledger_core::run::Origin;
use cronledger_core::window::utc_text;
use cronledger_core::{Attempt, Run, RunKey, ScheduleSpec, Timing};
use cronledger_ledger::ledger::{AuditEntry, StoredSchedule};

use super::error::ApiError;
use super::ids::{shown, valid_origin_id};

/// Longest RFC3339 instant a run id starts with (nanoseconds and an offset included).
const RFC3339_MAX: usize = 40;

pub fn schedule(s: &StoredSchedule) -> ScheduleView {
    // A url stored with credentials (before they were refused) is not shown with them.
    let spec = ScheduleSpec {
        job: s.spec.job.redacted(),
        ..s.spec.clone()
    };
    // In words for people ("at 02:00 (Asia/Seoul)"); null for an expression that no longer
    // parses (stored before a rule tightened).
    let describe = Timing::parse(&s.spec.cron, s.spec.timezone)
        .ok()
        .map(|t| t.with_dst(s.spec.dst).describe());
    ScheduleView {
        id: s.id().to_string(),
        version: s.version,
        state: s.state,
        describe,
        spec,
        next_run_at: s.next_run_at,
        ends_at: s.schedule().ok().and_then(|compiled| compiled.ends_at()),
        reconciled_through: s.reconciled_through,
        // The schedules that run after this one (its own upstreams are the spec's `after`),
        // as the reconciler last kept them.
        downstream: s.downstream.clone(),
        pauses: s.pauses.clone(),
        created_at: s.created_at,
        updated_at: s.updated_at,
        health: None,
    }
}

/// A schedule with its health (`null` when there is none to read).
pub fn schedule_with_health(s: &StoredSchedule, health: Option<&Health>) -> ScheduleView {
    ScheduleView {
        health: Some(health.cloned()),
        ..schedule(s)
    }
}

pub fn audit(e: &AuditEntry) -> AuditEntryView {
    let (mut before, mut after) = (e.before.clone(), e.after.clone());
    before.iter_mut().for_each(redact_spec_json);
    redact_spec_json(&mut after);
    AuditEntryView {
        version: e.version,
        action: e.action,
        actor: e.actor.clone(),
        reason: e.reason.clone(),
        at: e.at,
        before,
        after,
        details: e.details.clone(),
    }
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

pub fn run(r: &Run) -> RunView {
    RunView {
        schedule: r.key.schedule_id.clone(),
        scheduled_for: r.key.scheduled_for,
        trigger: r.trigger,
        status: r.status,
        reason: r.reason,
        attempts: r.attempts,
        window_start: r.window.start,
        window_end: r.window.end,
        idempotency_key: r.idempotency_key.to_string(),
        replay_group_id: r.replay_group_id.clone(),
        range_end: r.range_end,
        count: r.range_end.map(|_| r.count),
        coalesced_into: r.coalesced_into,
        run_id: run_id(&r.key),
        origin: r.key.origin.clone(),
        business_date: r.business_date,
        lane: r.lane,
        forced: r.forced,
        schedule_version: r.schedule_version,
        cron: r.cron.clone(),
        timezone: r.timezone.clone(),
        job_id: r.job_id.clone(),
        result: r.result.clone(),
        quality: r.result.as_ref().and_then(|res| res.quality),
        quality_reason: r.result.as_ref().and_then(|res| res.quality_reason),
        created_at: r.created_at,
        updated_at: r.updated_at,
        queued_at: r.queued_at,
        started_at: r.started_at,
        completed_at: r.completed_at,
        last_heartbeat_at: r.last_heartbeat_at,
        // A steps job's checkpoints, in order.
        steps: r.steps.clone(),
        children: r.children.as_ref().map(|c| ChildrenView {
            total: c.total,
            succeeded: c.succeeded,
            failed: c.failed,
            running: c.running(),
        }),
        attempt_detail: None,
        attempt_history: None,
        attempts_unlisted: None,
        upstream: None,
        downstream: None,
    }
}

/// A run with its attempts. `attempt_history` lists the attempts the run item records (the
/// most recent ones, oldest first; `attempts_unlisted` counts older ones beyond that bound or
/// from before attempts were kept); `attempt_detail.current` is the latest attempt as the
/// run itself describes it (lease, heartbeat).
pub fn run_with_attempts(r: &Run, attempts: &[Attempt]) -> RunView {
    let current = (r.attempts > 0).then(|| CurrentAttempt {
        number: r.attempts,
        lease_epoch: r.lease_epoch,
        lease_owner: r.lease.as_ref().map(|l| l.owner.clone()),
        lease_until: r.lease.as_ref().map(|l| l.until),
        started_at: r.started_at,
        last_heartbeat_at: r.last_heartbeat_at,
        completed_at: r.completed_at,
        status: r.status,
        result: r.result.clone(),
    });
    RunView {
        attempt_detail: Some(AttemptDetail {
            count: r.attempts,
            current,
        }),
        attempt_history: Some(attempts.iter().map(attempt).collect()),
        attempts_unlisted: Some(u64::from(r.attempts).saturating_sub(attempts.len() as u64)),
        ..run(r)
    }
}

/// One attempt: number (= its lease epoch), worker, start, end, duration, outcome, the
/// status it left the run in, and the error it reported.
pub fn attempt(a: &Attempt) -> AttemptView {
    let start = a.start.as_ref();
    let end = a.end.as_ref();
    AttemptView {
        number: a.number,
        lease_epoch: a.number,
        worker: start.map(|s| s.worker.clone()),
        started_at: start.map(|s| s.started_at),
        finished_at: end.map(|e| e.finished_at),
        duration_ms: a.duration_ms(),
        outcome: end.map(|e| e.outcome),
        status: end.map(|e| e.status),
        reason: end.and_then(|e| e.reason),
        error: end
            .filter(|e| e.error_code.is_some() || e.message.is_some())
            .map(|e| AttemptError {
                code: e.error_code.clone(),
                message: e.message.clone(),
            }),
    }
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
