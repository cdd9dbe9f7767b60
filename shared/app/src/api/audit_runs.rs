//! `POST /v1/audit/runs`: an operator's audit of a range, now. The same pass as the auditor
//! function's on-demand event ([`crate::auditor::Auditor::run`]): the report is the answer,
//! and the metric and the alerts go out as the function's do.

use axum::extract::State;
use axum::Json;

pub use cronledger_contract::{AuditRunRequest, CompletenessReport};

use super::error::{ApiError, ApiResult};
use super::extract::{Actor, ApiJson};
use super::Api;
use crate::auditor::{range_of, AuditEvent, AuditOutcome, AuditorError};

impl From<AuditorError> for ApiError {
    fn from(e: AuditorError) -> ApiError {
        match e {
            AuditorError::Store(e) => e.into(),
            AuditorError::Event(_) | AuditorError::Range(_) | AuditorError::RangeTooLong(_) => {
                ApiError::invalid(e.code(), e.to_string())
            }
            AuditorError::Config(_) => ApiError::internal(e.to_string()),
        }
    }
}

pub async fn run(
    State(api): State<Api>,
    actor: Actor,
    ApiJson(request): ApiJson<AuditRunRequest>,
) -> ApiResult<Json<CompletenessReport>> {
    let Some(auditor) = &api.deps().auditor else {
        return Err(ApiError::conflict(
            "AUDITOR_UNAVAILABLE",
            "this deployment's api runs no audits",
        ));
    };
    tracing::debug!(principal = %actor.name(), "audit requested");
    match auditor
        .run(&AuditEvent::OnDemand(range_of(request)))
        .await?
    {
        AuditOutcome::Audited(audited) => Ok(Json(audited.report)),
        // Only a daily pass is held by the kill switch.
        AuditOutcome::Held(_) => Err(ApiError::conflict(
            "KILL_SWITCH_ENGAGED",
            "the kill switch holds the audit",
        )),
    }
}
