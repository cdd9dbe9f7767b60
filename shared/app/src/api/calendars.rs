//! Calendar routes (`/v1/calendars`): list, read (`ETag` = version), put (create, or
//! replace under `If-Match`), delete, the audit log. Each translates HTTP to the
//! [`Operator`](crate::operator::Operator) and back; the note is `Cronledger-Note`, as for a
//! schedule's create and replace.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use cronledger_contract::{CalendarAuditLog, CalendarDeleted, CalendarList, CalendarView};
use serde_json::Value;

use super::error::ApiResult;
use super::extract::{Actor, ApiJson, ApiPath, IfMatch};
use super::schedules::header_note;
use super::Api;
use crate::operator::CalendarChange;

/// The put's body among the components: the calendar document as the api reads it.
pub const CALENDAR_DOCUMENT: &str = "CalendarSpecInput";

/// A calendar's view with `ETag: "{version}"`.
fn etagged(status: StatusCode, body: CalendarView) -> Response {
    let version = body.version;
    let mut resp = (status, Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp
}

pub async fn list(State(api): State<Api>) -> ApiResult<Json<CalendarList>> {
    Ok(Json(api.operator().calendars().await?))
}

pub async fn get(State(api): State<Api>, ApiPath(name): ApiPath<String>) -> ApiResult<Response> {
    let calendar = api.operator().calendar(&name).await?;
    Ok(etagged(StatusCode::OK, calendar))
}

pub async fn put(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(name): ApiPath<String>,
    IfMatch(version): IfMatch,
    headers: HeaderMap,
    ApiJson(document): ApiJson<Value>,
) -> ApiResult<Response> {
    let default = if version.is_some() {
        "replaced through the api"
    } else {
        "created through the api"
    };
    let change = CalendarChange {
        document,
        version,
        note: header_note(&headers, default),
    };
    let put = api.operator().put_calendar(&actor, &name, change).await?;
    let status = if put.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(etagged(status, put.calendar))
}

pub async fn delete(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(name): ApiPath<String>,
    IfMatch(version): IfMatch,
    headers: HeaderMap,
) -> ApiResult<Json<CalendarDeleted>> {
    let note = header_note(&headers, "deleted through the api");
    let deleted = api
        .operator()
        .delete_calendar(&actor, &name, version, note)
        .await?;
    Ok(Json(deleted))
}

pub async fn audit(
    State(api): State<Api>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<CalendarAuditLog>> {
    Ok(Json(api.operator().calendar_audit(&name).await?))
}
