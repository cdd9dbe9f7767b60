//! `GET /v1/audit/completeness`: the completeness audit of a range ([`crate::audit`]), read
//! only. The range is checked here; the engine does the rest.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::StoreError;
use cronledger_contract::CompletenessReport;
use serde::Deserialize;

use super::error::{ApiError, ApiResult};
use super::extract::ApiQuery;
use super::ids::check_path_param;
use super::Api;
use crate::audit::{completeness as audit, AuditPage, AuditRange};

/// The longest range one request audits.
pub const AUDIT_RANGE_MAX: TimeDelta = TimeDelta::days(31);
/// Most missing windows listed per schedule and page (and the default).
pub const AUDIT_MISSING_MAX: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletenessQuery {
    pub from: Option<String>,
    pub to: Option<String>,
    pub schedule: Option<String>,
    pub max_missing: Option<usize>,
    pub cursor: Option<String>,
}

fn range_invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "AUDIT_RANGE_INVALID", message)
}

/// `from` or `to`: a required RFC3339 instant.
fn instant(name: &str, text: Option<&str>) -> ApiResult<DateTime<Utc>> {
    let text = text.ok_or_else(|| range_invalid(format!("`{name}` is required")))?;
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            range_invalid(format!(
                "`{name}` `{}` is not an RFC3339 instant ({e})",
                super::ids::shown(text)
            ))
        })
}

pub async fn completeness(
    State(api): State<Api>,
    ApiQuery(q): ApiQuery<CompletenessQuery>,
) -> ApiResult<Json<CompletenessReport>> {
    let from = instant("from", q.from.as_deref())?;
    let to = instant("to", q.to.as_deref())?;
    if to <= from {
        return Err(range_invalid(format!(
            "`to` {to} is not after `from` {from}"
        )));
    }
    if to - from > AUDIT_RANGE_MAX {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "AUDIT_RANGE_TOO_LONG",
            format!("{from} to {to} is longer than 31 days: audit it in parts"),
        ));
    }
    let now = api.now();
    if to > now {
        return Err(range_invalid(format!(
            "`to` {to} is after now ({now}): windows not yet due would read as missing"
        )));
    }
    if let Some(id) = &q.schedule {
        check_path_param("id", id)?;
    }
    let max_missing = q
        .max_missing
        .unwrap_or(AUDIT_MISSING_MAX)
        .clamp(1, AUDIT_MISSING_MAX);
    let scope = format!(
        "audit|{from}|{to}|{}|{max_missing}",
        q.schedule.as_deref().unwrap_or("")
    );
    let after = q
        .cursor
        .as_deref()
        .map(|c| api.cursors().open(&scope, c))
        .transpose()?;
    let range = AuditRange {
        from,
        to,
        schedule: q.schedule,
    };
    let page = AuditPage { max_missing, after };
    let mut report = audit(api.deps().store.as_ref(), range, page)
        .await
        .map_err(|e| match e {
            StoreError::BadCursor => ApiError::cursor_invalid(),
            e => e.into(),
        })?;
    report.next = api.cursors().seal_next(&scope, report.next);
    Ok(Json(report))
}
