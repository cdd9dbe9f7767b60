//! Run routes: history, one run, run now (idempotent), retry (with the run's own job or the
//! current one), approve, reject, cancel.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use cronledger_aws::{IdempotencyClaim, StoreError};
use cronledger_contract::{
    ApprovalOutcome, Definition, Mode, Note, RetryRequest, RunNowRequest, RunOutcome, RunPage,
    RunView,
};
use cronledger_core::run::Origin;
use cronledger_core::window::utc_text;
use cronledger_core::{Attempt, Lane, Reason, Run, RunEvent, RunKey, RunStatus, Schedule, Trigger};
use cronledger_ledger::ledger::{AuditAction, RunChange, ScheduleState, Transition};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::backfills;
use super::error::{ApiError, ApiResult};
use super::extract::{Actor, ApiJson, ApiPath, ApiQuery, IdempotencyKeyHeader};
use super::{new_id, views, Api};
use crate::runs::{claim_and_send, new_run_with_origin};
use cronledger_contract::BackfillRequest;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    pub limit: Option<u32>,
    pub cursor: Option<String>,
    pub status: Option<RunStatus>,
    pub trigger: Option<Trigger>,
}

/// Store pages read at most to fill one filtered page.
const FILTER_READS: usize = 20;

pub async fn history(
    State(api): State<Api>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> ApiResult<Json<RunPage>> {
    // The cursor is bound to this schedule and these filters.
    let scope = format!("runs|{id}|{:?}|{:?}", q.status, q.trigger);
    let mut cursor = api.cursors().open_given(&scope, q.cursor.as_deref())?;
    api.deps().store.get_schedule(&id).await?;
    let limit = api.limit(q.limit);
    let mut items = Vec::new();
    for _ in 0..FILTER_READS {
        // Never read more than the page still has room for, so the cursor never skips a match.
        let want = limit - items.len() as u32;
        let page = api
            .deps()
            .store
            .run_history(&id, want, cursor.as_deref())
            .await?;
        items.extend(page.items.into_iter().filter(|r| {
            q.status.is_none_or(|s| r.status == s) && q.trigger.is_none_or(|t| r.trigger == t)
        }));
        cursor = page.next;
        if cursor.is_none() || items.len() as u32 >= limit {
            break;
        }
    }
    let next = api.cursors().seal_next(&scope, cursor);
    Ok(Json(RunPage {
        items: items.iter().map(views::run).collect(),
        next,
    }))
}

pub async fn get_one(
    State(api): State<Api>,
    ApiPath((id, run)): ApiPath<(String, String)>,
) -> ApiResult<Json<RunView>> {
    let key = views::parse_run_id(&id, &run)?;
    let (run, attempts) = api.deps().store.get_run_with_attempts(&key).await?;
    let mut body = views::run_with_attempts(&run, &attempts);
    api.add_chain(&run, &mut body).await?;
    Ok(Json(body))
}

fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(TimeDelta::seconds(1)).unwrap_or(t)
}

/// SHA-256 (hex) of a run request as parsed, re-serialized with sorted keys: key order,
/// spacing, defaults and time formats do not change it, any field's value does.
fn body_hash(req: &RunNowRequest) -> String {
    let canonical = serde_json::to_value(req)
        .map(|v| v.to_string())
        .unwrap_or_default();
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Refuses an instant that is not a fire time of the schedule: its window would overlap the
/// real occurrence's under another idempotency key, which then no longer stops a double run.
pub(crate) fn check_occurrence(schedule: &Schedule, t: DateTime<Utc>) -> ApiResult<()> {
    if schedule.timing().is_occurrence(t) {
        return Ok(());
    }
    let timing = schedule.timing();
    Err(ApiError::invalid(
        "SCHEDULED_FOR_NOT_AN_OCCURRENCE",
        format!(
            "{} is not a fire time of `{}` ({}); name an occurrence",
            utc_text(t),
            schedule.id(),
            timing
        ),
    )
    .with_details(json!({
        "scheduled_for": utc_text(t),
        "previous": timing.prev_before(t).map(utc_text),
        "next": timing.next_after(t).map(utc_text),
    })))
}

/// A run is "the window's run" for reuse when it did or will do the window's work.
fn reusable(run: &Run) -> bool {
    run.status.is_success() || run.status.is_active()
}

/// Creates (or finds) an operator's run of one window: the route, and a one-off run's firing.
pub(crate) async fn manual_run(
    api: &Api,
    schedule_id: &str,
    req: &RunNowRequest,
    idempotency_key: Option<&str>,
    request_id: Option<String>,
) -> ApiResult<(StatusCode, RunOutcome)> {
    let stored = api.deps().store.get_schedule(schedule_id).await?;
    if stored.state == ScheduleState::Archived {
        return Err(StoreError::ScheduleArchived(schedule_id.to_string()).into());
    }
    let schedule = Schedule::new(stored.spec.clone()).map_err(|i| ApiError::issues(&[i]))?;
    let now = api.now();
    let scheduled_for = match req.scheduled_for {
        Some(t) if whole_second(t) > now => {
            return Err(ApiError::invalid(
                "RUN_IN_FUTURE",
                "scheduled_for is in the future: use run-at for a later run",
            ))
        }
        Some(t) => {
            check_occurrence(&schedule, t)?;
            t
        }
        None => schedule
            .timing()
            .prev_before(whole_second(now) + TimeDelta::seconds(1))
            .unwrap_or_else(|| whole_second(now)),
    };
    let mut chosen: Option<Run> = None;
    if req.mode == Mode::Reuse {
        let same = api
            .deps()
            .store
            .runs_between(schedule_id, scheduled_for, scheduled_for)
            .await?;
        let key = schedule.idempotency_key(&schedule.window_for(scheduled_for));
        chosen = same
            .into_iter()
            .filter(|r| r.idempotency_key == key && reusable(r))
            .min_by_key(|r| r.key.origin != Origin::Expected);
    }
    let request_id = request_id.unwrap_or_else(|| new_id("rq"));
    let run_key = match &chosen {
        Some(run) => run.key.clone(),
        None => RunKey {
            schedule_id: schedule_id.to_string(),
            scheduled_for,
            origin: Origin::Manual(request_id),
        },
    };
    let mut replay = false;
    let run_key = match idempotency_key {
        None => run_key,
        Some(key) => {
            let claim = IdempotencyClaim {
                key: format!("{schedule_id}:{key}"),
                run: run_key.clone(),
                body_hash: Some(body_hash(req)),
                created_at: now,
                expires_at: now + api.deps().config.idempotency_ttl.as_delta(),
            };
            match api.deps().ops.claim_idempotency(&claim).await? {
                None => run_key,
                Some(first) if first.body_hash.is_some() && first.body_hash != claim.body_hash => {
                    return Err(ApiError::conflict(
                        "IDEMPOTENCY_KEY_REUSED",
                        "this Idempotency-Key was used with another request body; use a new key",
                    )
                    .with_details(json!({"run": views::run_id(&first.run)})));
                }
                Some(first) => {
                    replay = true;
                    first.run
                }
            }
        }
    };
    if let Some(run) = chosen.filter(|r| r.key == run_key) {
        return Ok((StatusCode::OK, outcome(false, true, replay, &run)));
    }
    if replay {
        if let Ok(run) = api.deps().store.get_run(&run_key).await {
            return Ok((StatusCode::OK, outcome(false, false, true, &run)));
        }
        // The first request claimed the key and has not written its run (yet, or ever):
        // write that very run; whichever write lands first is the one run.
    }
    let mut run = new_run_with_origin(
        &schedule,
        stored.version,
        run_key.scheduled_for,
        Trigger::Manual,
        run_key.origin.clone(),
        now,
    );
    run.lane = Some(Lane::Manual);
    run.forced = req.mode == Mode::New;
    let created = api.deps().store.create_run(&run).await?;
    if !created.is_new() {
        return Ok((StatusCode::OK, outcome(false, false, replay, created.run())));
    }
    claim_and_send::<ApiError>(
        api.deps().store.as_ref(),
        api.deps().lanes.as_ref(),
        &run,
        Lane::Manual,
        now,
    )
    .await?;
    let run = api.deps().store.get_run(&run.key).await?;
    Ok((StatusCode::CREATED, outcome(true, false, false, &run)))
}

fn outcome(created: bool, reused: bool, idempotent_replay: bool, run: &Run) -> RunOutcome {
    RunOutcome {
        created,
        reused,
        idempotent_replay,
        run: views::run(run),
    }
}

pub async fn run_now(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    ApiJson(req): ApiJson<RunNowRequest>,
) -> ApiResult<(StatusCode, Json<RunOutcome>)> {
    let (status, body) = manual_run(&api, &id, &req, key.as_deref(), None).await?;
    if status == StatusCode::CREATED {
        let note = Note {
            note: req.note.clone(),
        };
        api.record_on(
            &id,
            &actor,
            AuditAction::RunNow,
            &note,
            json!({"run": body.run.run_id, "mode": req.mode}),
        )
        .await;
    }
    Ok((status, Json(body)))
}

/// Applies an operator's event to a run, conditioned on the status read.
async fn operate(
    api: &Api,
    key: &RunKey,
    event: RunEvent,
    reason: Option<Reason>,
) -> ApiResult<Run> {
    let run = api.deps().store.get_run(key).await?;
    let operation = match event {
        // An approved run is on the manual lane in the same write: that is how the rule
        // book knows it was approved, whoever starts it next (see `Candidate::approved`).
        RunEvent::Approve => Transition::Approve { reason },
        _ => Transition::Decide { event, reason },
    };
    let change = RunChange::new(run.status, run.lease_epoch, api.now(), operation);
    Ok(api.deps().store.transition_run(key, &change).await?)
}

/// The lane a reopened run goes to: the rule book's (an operator's runs: the manual lane).
fn lane_of(run: &Run) -> Lane {
    cronledger_core::admission::lane_of(run.trigger, run.lane, Lane::Normal)
}

/// Sends a reopened run; answers with it and its attempts (one read either way).
async fn send(api: &Api, run: &Run, lane: Lane) -> ApiResult<(Run, Vec<Attempt>)> {
    claim_and_send::<ApiError>(
        api.deps().store.as_ref(),
        api.deps().lanes.as_ref(),
        run,
        lane,
        api.now(),
    )
    .await?;
    Ok(api.deps().store.get_run_with_attempts(&run.key).await?)
}

/// Reopens a failed run as itself. With `definition: current` the same conditional write
/// re-pins it to the schedule's current version (one more read: the schedule).
pub async fn retry(
    State(api): State<Api>,
    actor: Actor,
    ApiPath((id, run_id)): ApiPath<(String, String)>,
    ApiJson(req): ApiJson<RetryRequest>,
) -> ApiResult<Json<RunView>> {
    let key = views::parse_run_id(&id, &run_id)?;
    let run = api.deps().store.get_run(&key).await?;
    let schedule_version = if req.definition == Definition::Current {
        let current = api.deps().store.get_schedule(&id).await?.version;
        (current != run.schedule_version).then_some(current)
    } else {
        None
    };
    let retry = Transition::Retry {
        reason: None,
        schedule_version,
    };
    let change = RunChange::new(run.status, run.lease_epoch, api.now(), retry);
    let reopened = api.deps().store.transition_run(&key, &change).await?;
    let lane = lane_of(&reopened);
    let (sent, attempts) = send(&api, &reopened, lane).await?;
    let note = Note {
        note: req.note.clone(),
    };
    api.record_on(
        &id,
        &actor,
        AuditAction::RunRetry,
        &note,
        json!({
            "run": run_id,
            "definition": req.definition,
            "schedule_version": reopened.schedule_version,
            "previous_schedule_version": run.schedule_version,
        }),
    )
    .await;
    Ok(Json(views::run_with_attempts(&sent, &attempts)))
}

pub async fn approve(
    State(api): State<Api>,
    actor: Actor,
    ApiPath((id, run_id)): ApiPath<(String, String)>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<ApprovalOutcome>> {
    let key = views::parse_run_id(&id, &run_id)?;
    let run = api.deps().store.get_run(&key).await?;
    if run.status != RunStatus::ManualRequired {
        return Err(ApiError::conflict(
            "RUN_NOT_AWAITING_APPROVAL",
            format!("run `{run_id}` is {}, not MANUAL_REQUIRED", run.status),
        )
        .with_details(json!({"status": run.status})));
    }
    if let Some(range_end) = run.range_end.filter(|_| run.count > 1) {
        // A range record: its windows become a backfill, and the record is folded into it.
        let req = BackfillRequest {
            from: run.key.scheduled_for,
            to: range_end,
            reprocess: Some(cronledger_aws::Reprocess::Missing),
            concurrency: None,
            batch_size: None,
            rate_per_minute: None,
            pause_when: None,
            dry_run: false,
            cascade: false,
            verify: None,
            note: Some(note.text("approved range record")),
        };
        let backfill =
            match backfills::start(&api, &id, &req, actor.name(), Some(run.key.clone())).await? {
                backfills::Started::Created(view) => *view,
                backfills::Started::Plan(_) => {
                    return Err(ApiError::internal(
                        "a range record's backfill was planned, not created",
                    ))
                }
            };
        let folded = operate(&api, &key, RunEvent::Coalesce, Some(Reason::Coalesced)).await?;
        api.record_on(
            &id,
            &actor,
            AuditAction::RunApprove,
            &note,
            json!({"run": run_id, "backfill": backfill.id}),
        )
        .await;
        return Ok(Json(ApprovalOutcome {
            run: views::run(&folded),
            backfill: Some(backfill),
        }));
    }
    let approved = operate(&api, &key, RunEvent::Approve, None).await?;
    let (sent, _) = send(&api, &approved, Lane::Manual).await?;
    api.record_on(
        &id,
        &actor,
        AuditAction::RunApprove,
        &note,
        json!({"run": run_id}),
    )
    .await;
    Ok(Json(ApprovalOutcome {
        run: views::run(&sent),
        backfill: None,
    }))
}

pub const REJECT: u8 = 0;
pub const CANCEL: u8 = 1;

/// Reject a MANUAL_REQUIRED run, or cancel one that has not started (`W`).
pub async fn close<const W: u8>(
    State(api): State<Api>,
    actor: Actor,
    ApiPath((id, run)): ApiPath<(String, String)>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<RunView>> {
    let key = views::parse_run_id(&id, &run)?;
    let (event, reason, action) = match W {
        REJECT => (RunEvent::Reject, Reason::Rejected, AuditAction::RunReject),
        _ => (
            RunEvent::Cancel,
            Reason::CancelledByOperator,
            AuditAction::RunCancel,
        ),
    };
    let closed = operate(&api, &key, event, Some(reason)).await?;
    crate::outcomes::ended(api.deps().health.as_deref(), &closed, None, api.now()).await;
    api.record_on(&id, &actor, action, &note, json!({"run": run}))
        .await;
    Ok(Json(views::run(&closed)))
}
