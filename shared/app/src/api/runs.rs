//! Run routes: history and one run; run now, retry, approve, reject and cancel translate
//! HTTP to the [`Operator`](crate::operator::Operator) and back.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use cronledger_contract::{
    ApprovalOutcome, Note, RetryRequest, RunNowRequest, RunOutcome, RunPage, RunView,
};
use cronledger_core::{RunStatus, Trigger};
use serde::Deserialize;

use super::error::ApiResult;
use super::extract::{Actor, ApiJson, ApiPath, ApiQuery, IdempotencyKeyHeader};
use super::{views, Api};
use crate::operator::Made;

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

/// Run now: `201` with the run it wrote, `200` with the one it found (reused, or an
/// idempotent replay).
pub async fn run_now(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    ApiJson(req): ApiJson<RunNowRequest>,
) -> ApiResult<(StatusCode, Json<RunOutcome>)> {
    let (made, body) = api
        .operator()
        .run_now(&actor, &id, req, key.as_deref())
        .await?;
    let status = match made {
        Made::Created => StatusCode::CREATED,
        Made::Existing => StatusCode::OK,
    };
    Ok((status, Json(body)))
}

pub async fn retry(
    State(api): State<Api>,
    actor: Actor,
    ApiPath((id, run)): ApiPath<(String, String)>,
    ApiJson(req): ApiJson<RetryRequest>,
) -> ApiResult<Json<RunView>> {
    Ok(Json(api.operator().retry(&actor, &id, &run, req).await?))
}

pub async fn approve(
    State(api): State<Api>,
    actor: Actor,
    ApiPath((id, run)): ApiPath<(String, String)>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<ApprovalOutcome>> {
    Ok(Json(api.operator().approve(&actor, &id, &run, note).await?))
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
    let operator = api.operator();
    let closed = match W {
        REJECT => operator.reject(&actor, &id, &run, note).await?,
        _ => operator.cancel(&actor, &id, &run, note).await?,
    };
    Ok(Json(closed))
}
