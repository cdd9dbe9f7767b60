//! Backfill routes: create (or dry-run), list, progress, pause, resume, cancel, verify. The
//! runs themselves are released by [`crate::backfill::BackfillReleaser`] in the reconciler's
//! pass.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cronledger_aws::{
    ApprovalReason, Backfill, BackfillLimits, BackfillState, Reprocess, StoreError,
};
use cronledger_contract::{
    BackfillList, BackfillPlan, BackfillRequest, BackfillSummary, BackfillView, Note, Verification,
};
use cronledger_core::spec::validate_target;
use cronledger_core::window::utc_text;
use cronledger_core::{RunEvent, RunKey, RunStatus, Schedule};
use cronledger_ledger::ledger::{AuditAction, RunChange, ScheduleState};
use serde::Deserialize;
use serde_json::json;

use super::error::{ApiError, ApiResult};
use super::extract::{Actor, ApiJson, ApiPath, ApiQuery};
use super::paging::offset_page;
use super::schedules::PageQuery;
use super::{new_id, Api};
use crate::backfill::{self, BackfillError};

impl From<BackfillError> for ApiError {
    fn from(e: BackfillError) -> ApiError {
        match e {
            BackfillError::Store(s) => s.into(),
            BackfillError::Lane(l) => l.into(),
            BackfillError::TooLarge(max) => ApiError::invalid(
                "BACKFILL_TOO_LARGE",
                format!("the range has more than {max} windows; split it"),
            ),
            BackfillError::Invalid(m) => ApiError::invalid("BACKFILL_INVALID", m),
        }
    }
}

fn limits(req: &BackfillRequest) -> ApiResult<BackfillLimits> {
    let d = BackfillLimits::default();
    let l = BackfillLimits {
        concurrency: req.concurrency.unwrap_or(d.concurrency),
        batch_size: req.batch_size.unwrap_or(d.batch_size),
        rate_per_minute: req.rate_per_minute.unwrap_or(d.rate_per_minute),
    };
    let bad = |field: &str, rule: &str| {
        Err(
            ApiError::invalid("BACKFILL_INVALID", format!("`{field}` must be {rule}"))
                .with_details(json!({"field": field})),
        )
    };
    if !(1..=100).contains(&l.concurrency) {
        return bad("concurrency", "from 1 to 100");
    }
    if !(1..=500).contains(&l.batch_size) {
        return bad("batch_size", "from 1 to 500");
    }
    if !(l.rate_per_minute.is_finite() && l.rate_per_minute > 0.0 && l.rate_per_minute <= 10_000.0)
    {
        return bad("rate_per_minute", "above 0 and at most 10000");
    }
    if let Some(rate) = req.pause_when.as_ref().and_then(|p| p.error_rate) {
        if !(0.0..=1.0).contains(&rate) {
            return bad("pause_when.error_rate", "a share from 0 to 1");
        }
    }
    Ok(l)
}

/// Creates a backfill over `[from, to]` (the api route, and approval of a range record).
/// A backfill created, or (a dry run) its plan.
pub(crate) enum Started {
    Plan(Box<BackfillPlan>),
    Created(Box<BackfillView>),
}

pub(crate) async fn start(
    api: &Api,
    schedule_id: &str,
    req: &BackfillRequest,
    actor: &str,
    source_record: Option<RunKey>,
) -> ApiResult<Started> {
    let limits = limits(req)?;
    let stored = api.deps().store.get_schedule(schedule_id).await?;
    if stored.state == ScheduleState::Archived {
        return Err(StoreError::ScheduleArchived(schedule_id.to_string()).into());
    }
    let schedule = Schedule::new(stored.spec.clone()).map_err(|i| ApiError::issues(&[i]))?;
    let now = api.now();
    if req.from > now {
        return Err(ApiError::invalid(
            "BACKFILL_INVALID",
            "a backfill replays history: `from` is in the future",
        ));
    }
    let to = req.to.min(now);
    let reprocess = req.reprocess.unwrap_or(Reprocess::Missing);
    let plan = backfill::plan(
        api.deps().store.as_ref(),
        &schedule,
        req.from,
        to,
        reprocess,
        api.deps().config.backfill_max_windows,
        source_record.as_ref(),
    )
    .await?;
    // A range record's windows were expected by the schedule and held for an operator: the
    // operator approving the record is their approval. The rule is for backfills asked for.
    let asked_for = source_record.is_none();
    let approval = backfill::approval_reasons(
        asked_for && cronledger_core::admission::every_run_approval(&stored.spec),
        stored.spec.side_effects && asked_for,
        &plan.selected,
        stored.created_at,
        api.deps().config.backfill_approval_over,
    );
    if req.dry_run {
        return Ok(Started::Plan(Box::new(BackfillPlan {
            dry_run: true,
            schedule: schedule_id.to_string(),
            from: req.from,
            to,
            reprocess,
            limits,
            total_windows: plan.total_windows,
            size: plan.selected.len() as u64,
            approval_required: !approval.is_empty(),
            approval_reasons: approval,
            approval_over: api.deps().config.backfill_approval_over,
            windows: plan.selected.iter().take(1000).copied().collect(),
        })));
    }
    let verify = match &req.verify {
        Some(value) => Some(
            validate_target(value, "verify", &api.deps().config.rules)
                .map_err(|issues| ApiError::issues(&issues))?,
        ),
        None => None,
    };
    let b = Backfill {
        id: new_id("bf"),
        schedule_id: schedule_id.to_string(),
        from: req.from,
        to,
        reprocess,
        limits,
        pause_when: req.pause_when.clone().unwrap_or_default(),
        state: if approval.is_empty() {
            BackfillState::Running
        } else {
            BackfillState::Paused
        },
        held: approval_hold(&approval),
        cursor: None,
        total_windows: plan.total_windows,
        planned: plan.selected.len() as u64,
        written: 0,
        passed_over: 0,
        created_at: now,
        created_by: actor.to_string(),
        note: Note {
            note: req.note.clone(),
        }
        .text("backfill through the api"),
        updated_at: now,
        last_release_at: None,
        source_record,
        replay_group: None,
        approval_required: approval,
        approved_by: None,
        approved_at: None,
        cascade: req.cascade,
        verify,
        version: 0,
    };
    let stored = api.deps().ops.create_backfill(&b).await?;
    let view = backfill::progress(api.deps().store.as_ref(), &stored, now).await?;
    Ok(Started::Created(Box::new(view)))
}

/// What `held` says of a backfill waiting for an admin (the CLI's progress line shows it).
fn approval_hold(reasons: &[ApprovalReason]) -> Option<String> {
    (!reasons.is_empty()).then(|| {
        let why: Vec<&str> = reasons.iter().map(|r| r.as_str()).collect();
        format!("APPROVAL_REQUIRED: {}", why.join(", "))
    })
}

pub async fn create(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<BackfillRequest>,
) -> ApiResult<Response> {
    let created = match start(&api, &id, &req, actor.name(), None).await? {
        Started::Plan(plan) => return Ok((StatusCode::OK, Json(plan)).into_response()),
        Started::Created(view) => *view,
    };
    let note = Note {
        note: req.note.clone(),
    };
    let details = json!({
        "backfill": created.id, "from": utc_text(req.from), "to": utc_text(req.to),
        "approval_reasons": created.approval_reasons,
    });
    api.record_on(&id, &actor, AuditAction::BackfillCreate, &note, details)
        .await;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// The query identity of the open backfills listing's cursors.
const BACKFILLS_SCOPE: &str = "backfills";

pub async fn list(
    State(api): State<Api>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Json<BackfillList>> {
    let offset = api
        .cursors()
        .open_offset(BACKFILLS_SCOPE, q.cursor.as_deref())?;
    let open = api.deps().ops.open_backfills().await?;
    let limit = api.limit_or_max(q.limit);
    let (items, next) = offset_page(&open, offset, limit, |b| BackfillSummary {
        id: b.id.clone(),
        schedule: b.schedule_id.clone(),
        state: b.state,
        held: b.held.clone(),
        from: b.from,
        to: b.to,
        total: b.planned,
        written: b.written,
        created_by: b.created_by.clone(),
    });
    let next = next.map(|n| n.to_string());
    Ok(Json(BackfillList {
        items,
        next: api.cursors().seal_next(BACKFILLS_SCOPE, next),
    }))
}

pub async fn progress(
    State(api): State<Api>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<BackfillView>> {
    let b = api.deps().ops.get_backfill(&id).await?;
    Ok(Json(
        backfill::progress(api.deps().store.as_ref(), &b, api.now()).await?,
    ))
}

/// Moves a backfill between states under its version, re-reading when a releaser wrote.
/// `also` checks (and changes) more of the backfill as read, before the write.
async fn change_state(
    api: &Api,
    id: &str,
    allowed_from: &[BackfillState],
    to: BackfillState,
    also: impl Fn(&mut Backfill) -> ApiResult<()>,
) -> ApiResult<Backfill> {
    for _ in 0..5 {
        let mut b = api.deps().ops.get_backfill(id).await?;
        if !allowed_from.contains(&b.state) {
            return Err(ApiError::conflict(
                "BACKFILL_STATE_CONFLICT",
                format!("backfill `{id}` is {}, cannot become {to}", b.state),
            )
            .with_details(json!({"state": b.state})));
        }
        also(&mut b)?;
        b.state = to;
        b.held = None;
        b.updated_at = api.now();
        if let Some(stored) = api.deps().ops.put_backfill(&b).await? {
            return Ok(stored);
        }
    }
    Err(ApiError::conflict(
        "BACKFILL_CHANGED",
        format!("backfill `{id}` kept changing; try again"),
    ))
}

async fn answer(api: &Api, b: &Backfill) -> ApiResult<Json<BackfillView>> {
    Ok(Json(
        backfill::progress(api.deps().store.as_ref(), b, api.now()).await?,
    ))
}

pub const PAUSE: u8 = 0;
pub const RESUME: u8 = 1;

/// An operator's pause or resume (`W`).
pub async fn pause_resume<const W: u8>(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<BackfillView>> {
    let (from, to, action) = match W {
        PAUSE => (
            BackfillState::Running,
            BackfillState::Paused,
            AuditAction::BackfillPause,
        ),
        _ => (
            BackfillState::Paused,
            BackfillState::Running,
            AuditAction::BackfillResume,
        ),
    };
    let b = change_state(&api, &id, &[from], to, |b| {
        if W == RESUME && b.awaiting_approval() {
            return Err(ApiError::conflict(
                "BACKFILL_APPROVAL_REQUIRED",
                format!("backfill `{id}` waits for an admin's approval (POST .../approve), not a resume"),
            )
            .with_details(json!({"approval_reasons": b.approval_required})));
        }
        Ok(())
    })
    .await?;
    api.record_on(
        &b.schedule_id,
        &actor,
        action,
        &note,
        json!({"backfill": id}),
    )
    .await;
    answer(&api, &b).await
}

pub async fn cancel(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<BackfillView>> {
    let b = change_state(
        &api,
        &id,
        &[BackfillState::Running, BackfillState::Paused],
        BackfillState::Cancelled,
        |_| Ok(()),
    )
    .await?;
    // Its runs not yet started end CANCELLED; running ones finish.
    let runs = api
        .deps()
        .store
        .runs_between(&b.schedule_id, b.from, b.to)
        .await?;
    let now = api.now();
    for run in runs.iter().filter(|r| {
        matches!(&r.key.origin, cronledger_core::run::Origin::Backfill(x) if *x == b.id)
            && matches!(r.status, RunStatus::Pending | RunStatus::Queued)
    }) {
        let change = RunChange::decide(
            RunEvent::Cancel,
            run.status,
            run.lease_epoch,
            now,
            Some(cronledger_core::Reason::CancelledByOperator),
        );
        match api.deps().store.transition_run(&run.key, &change).await {
            Ok(cancelled) => {
                let health = api.deps().health.as_deref();
                crate::outcomes::ended(health, &cancelled, None, now).await;
            }
            Err(e) => {
                tracing::info!(run = %run.key, error = %e, "backfill run not cancelled (it moved on)")
            }
        }
    }
    api.record_on(
        &b.schedule_id,
        &actor,
        AuditAction::BackfillCancel,
        &note,
        json!({"backfill": id}),
    )
    .await;
    answer(&api, &b).await
}

/// An admin's approval of a backfill held for it: it starts (RUNNING) and the approval is
/// audited with the admin's note (required) and the reasons it was held.
pub async fn approve(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<BackfillView>> {
    if note.text("").is_empty() {
        return Err(ApiError::invalid(
            "NOTE_REQUIRED",
            "approving a backfill needs a note saying why",
        ));
    }
    let now = api.now();
    let b = change_state(
        &api,
        &id,
        &[BackfillState::Paused],
        BackfillState::Running,
        |b| {
            if !b.awaiting_approval() {
                return Err(ApiError::conflict(
                    "BACKFILL_NOT_AWAITING_APPROVAL",
                    format!("backfill `{id}` is not waiting for an approval"),
                )
                .with_details(json!({"state": b.state, "approved_by": b.approved_by})));
            }
            b.approved_by = Some(actor.name().to_string());
            b.approved_at = Some(now);
            Ok(())
        },
    )
    .await?;
    api.record_on(
        &b.schedule_id,
        &actor,
        AuditAction::BackfillApprove,
        &note,
        json!({"backfill": id, "approval_reasons": b.approval_required}),
    )
    .await;
    answer(&api, &b).await
}

/// Most problem and reported windows one verify page lists (each list; the counts always
/// cover every window).
pub const VERIFY_PAGE_MAX: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyQuery {
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

/// The backfill's verification: every count, and one page of its problem and reported
/// windows (`next_cursor` continues both lists; `truncated` says there is more).
pub async fn verify(
    State(api): State<Api>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<VerifyQuery>,
) -> ApiResult<Json<Verification>> {
    let scope = format!("verify|{id}");
    let offset = api.cursors().open_offset(&scope, q.cursor.as_deref())?;
    let b = api.deps().ops.get_backfill(&id).await?;
    let stored = api.deps().store.get_schedule(&b.schedule_id).await?;
    let schedule = Schedule::new(stored.spec).map_err(|i| ApiError::issues(&[i]))?;
    let mut found = backfill::verify(
        api.deps().store.as_ref(),
        &schedule,
        &b,
        api.deps().config.backfill_max_windows,
    )
    .await?;
    let limit = q.limit.unwrap_or(VERIFY_PAGE_MAX).clamp(1, VERIFY_PAGE_MAX);
    let next = page_verification(&mut found, offset, limit);
    found.truncated = next.is_some();
    found.next_cursor = api.cursors().seal_next(&scope, next.map(|n| n.to_string()));
    Ok(Json(found))
}

/// Keeps one page (`offset`, `limit`) of a verification's `problems` and `reported` lists,
/// adding their full lengths; the offset of the next page when either list has more.
pub fn page_verification(found: &mut Verification, offset: usize, limit: usize) -> Option<usize> {
    found.problems_total = found.problems.len() as u64;
    found.reported_total = found.reported.len() as u64;
    let (problems, more_problems) = offset_page(&found.problems, offset, limit, Clone::clone);
    let (reported, more_reported) = offset_page(&found.reported, offset, limit, Clone::clone);
    found.problems = problems;
    found.reported = reported;
    // The next page starts where the shorter of the unfinished lists stopped.
    match (more_problems, more_reported) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
