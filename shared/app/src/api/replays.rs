//! Replay routes: create (or dry-run), progress, approve and cancel translate HTTP to the
//! [`Operator`](crate::operator::Operator) and back. The retries themselves are released by
//! [`crate::replay::ReplayReleaser`] in the reconciler's pass.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cronledger_contract::{Note, ReplayRequest, ReplayView};

use super::error::ApiResult;
use super::extract::{Actor, ApiJson, ApiPath};
use super::Api;
use crate::operator::ReplayStarted;

/// Create: `201` with the replay, or `200` with the plan of a dry run.
pub async fn create(
    State(api): State<Api>,
    actor: Actor,
    ApiJson(req): ApiJson<ReplayRequest>,
) -> ApiResult<Response> {
    Ok(match api.operator().create_replay(&actor, req).await? {
        ReplayStarted::Plan(plan) => (StatusCode::OK, Json(plan)).into_response(),
        ReplayStarted::Created(view) => (StatusCode::CREATED, Json(view)).into_response(),
    })
}

pub async fn progress(
    State(api): State<Api>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ReplayView>> {
    let r = api.deps().ops.get_replay(&id).await?;
    Ok(Json(crate::replay::progress(&r, api.now())))
}

pub async fn cancel(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<ReplayView>> {
    Ok(Json(api.operator().cancel_replay(&actor, &id, note).await?))
}

/// An admin's approval of a replay held for it.
pub async fn approve(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Json<ReplayView>> {
    Ok(Json(
        api.operator().approve_replay(&actor, &id, note).await?,
    ))
}
