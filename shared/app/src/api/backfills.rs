//! Backfill routes: list, progress, verify; create (or dry-run), approve, pause, resume and
//! cancel translate HTTP to the [`Operator`](crate::operator::Operator) and back. The runs
//! themselves are released by [`crate::backfill::BackfillReleaser`] in the reconciler's pass.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cronledger_contract::{
    BackfillList, BackfillRequest, BackfillSummary, BackfillView, Note, Verification,
};
use serde::Deserialize;

use super::error::{ApiError, ApiResult};
use super::extract::{Actor, ApiJson, ApiPath, ApiQuery};
use super::paging::offset_page;
use super::schedules::PageQuery;
use super::Api;
use crate::backfill::{self, BackfillError};
use crate::operator::BackfillStarted;

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

/// Create: `201` with the backfill, or `200` with the plan of a dry run.
pub async fn create(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<BackfillRequest>,
) -> ApiResult<Response> {
    Ok(
        match api.operator().create_backfill(&actor, &id, req).await? {
            BackfillStarted::Plan(plan) => (StatusCode::OK, Json(plan)).into_response(),
            BackfillStarted::Created(view) => (StatusCode::CREATED, Json(view)).into_response(),
        },
    )
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

pub const PAUSE: u8 = 0;
pub const RESUME: u8 = 1;

/// An operator's pause or resume (`W`).
pub async fn pause_resume<const W: u8>(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<BackfillView>> {
    let operator = api.operator();
    let b = match W {
        PAUSE => operator.pause_backfill(&actor, &id, note).await?,
        _ => operator.resume_backfill(&actor, &id, note).await?,
    };
    Ok(Json(b))
}

pub async fn cancel(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<BackfillView>> {
    Ok(Json(
        api.operator().cancel_backfill(&actor, &id, note).await?,
    ))
}

/// An admin's approval of a backfill held for it.
pub async fn approve(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<BackfillView>> {
    Ok(Json(
        api.operator().approve_backfill(&actor, &id, note).await?,
    ))
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
    let schedule = stored.schedule().map_err(|i| ApiError::issues(&[i]))?;
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
