//! The api's one error shape: JSON `{code, message, details}` with a status that says which
//! kind of problem it is. Codes are stable (the core's and the adapters' codes pass through).
//!
//! A server-side failure (5xx) never shows its cause: AWS SDK and store texts go to the log
//! only ([`ApiError::log_detail`]); the body says `INTERNAL` (500) or which call failed (502),
//! and the request scope ([`super::request`]) adds `details.request_id`, the id the log line
//! carries too.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cronledger_aws::{LaneError, StoreError};
use cronledger_contract::ErrorBody;
use cronledger_core::run::TransitionError;
use cronledger_core::Issue;
use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    pub details: Value,
    /// What went wrong inside, for the log only (never in a body).
    pub log_detail: Option<String>,
}

/// The code of every 500: what failed is in the log, under the answer's request id.
pub const INTERNAL: &str = "INTERNAL";

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code: code.to_string(),
            message: message.into(),
            details: Value::Null,
            log_detail: None,
        }
    }

    /// 500 INTERNAL: `detail` goes to the log, the body stays generic.
    pub fn internal(detail: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            INTERNAL,
            "the service failed to answer; details.request_id finds the cause in its log",
        )
        .logging(detail)
    }

    /// 502: a call to another AWS service failed. The body names the call (`call`, e.g.
    /// `UpdateSchedule cronledger-ticker`), never its error text, which goes to the log.
    pub fn upstream(code: &str, call: &str, detail: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            code,
            format!("{call} failed; details.request_id finds the cause in the log"),
        )
        .logging(detail)
    }

    /// Keeps `detail` for the log.
    pub fn logging(mut self, detail: impl Into<String>) -> ApiError {
        self.log_detail = Some(detail.into());
        self
    }

    pub fn with_details(mut self, details: Value) -> ApiError {
        self.details = details;
        self
    }

    /// 400: the request is not shaped as HTTP/JSON the api reads.
    pub fn malformed(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "REQUEST_MALFORMED", message)
    }

    /// 422: well-formed, but a field is wrong (unknown, missing, out of range).
    pub fn invalid(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    /// 400 CURSOR_INVALID: the cursor is corrupt, or was issued for another query.
    pub fn cursor_invalid() -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "CURSOR_INVALID",
            "the cursor is not one this listing issued (another query's, or altered); start again without it",
        )
    }

    pub fn not_found(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn conflict(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, code, message)
    }

    pub fn unauthenticated(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED", message)
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "FORBIDDEN", message)
    }

    /// 422 with every validation issue of the core, each with its own code and field.
    pub fn issues(issues: &[Issue]) -> ApiError {
        let code = issues
            .first()
            .map(|i| i.code.as_str())
            .unwrap_or("REQUEST_INVALID");
        let message = issues
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        ApiError::invalid(code, message).with_details(json!({ "issues": issues }))
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            code: self.code.to_string(),
            message: self.message.clone(),
            details: (!self.details.is_null()).then(|| self.details.clone()),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl IntoResponse for ApiError {
    /// A 5xx carries itself in the response's extensions: the request scope logs its
    /// detail and adds the request id to its body.
    fn into_response(self) -> Response {
        let mut resp = (self.status, Json(self.body())).into_response();
        if self.status.is_server_error() {
            resp.extensions_mut().insert(self);
        }
        resp
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let code = e.code();
        let message = e.to_string();
        let status = match &e {
            StoreError::ScheduleNotFound(_)
            | StoreError::VersionNotFound { .. }
            | StoreError::RunNotFound(_)
            | StoreError::ChildNotFound(_)
            | StoreError::BackfillNotFound(_)
            | StoreError::ReplayNotFound(_)
            | StoreError::CalendarNotFound(_) => StatusCode::NOT_FOUND,
            StoreError::VersionConflict { actual, .. }
            | StoreError::CalendarVersionConflict { actual, .. } => {
                return ApiError::new(StatusCode::PRECONDITION_FAILED, code, message)
                    .with_details(json!({ "current_version": actual }))
            }
            StoreError::CalendarAlreadyExists { version, .. } => {
                return ApiError::conflict(code, message)
                    .with_details(json!({ "current_version": version }))
            }
            StoreError::CalendarInUse { schedules, .. } => {
                return ApiError::conflict(code, message)
                    .with_details(json!({ "schedules": schedules }))
            }
            StoreError::ScheduleAlreadyExists(_)
            | StoreError::BackfillAlreadyExists(_)
            | StoreError::ReplayAlreadyExists(_)
            | StoreError::ScheduleArchived(_)
            | StoreError::StatusConflict { .. }
            | StoreError::ChildConflict(_)
            | StoreError::LeaseLost { .. }
            | StoreError::InvalidTransition(_)
            | StoreError::Contention(_) => StatusCode::CONFLICT,
            StoreError::InvalidRequest(_) => StatusCode::CONFLICT,
            StoreError::ScheduleInvalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            StoreError::BadCursor => return ApiError::cursor_invalid(),
            StoreError::Malformed { .. }
            | StoreError::SchemaUnsupported { .. }
            | StoreError::TableDefinition(_)
            | StoreError::ShardCountDecreased { .. }
            | StoreError::Request { .. } => {
                return ApiError::internal(message).with_details(json!({"cause": code}))
            }
        };
        ApiError::new(status, code, message)
    }
}

impl From<TransitionError> for ApiError {
    fn from(e: TransitionError) -> ApiError {
        ApiError::conflict(e.code().as_str(), e.to_string())
            .with_details(json!({"status": e.from, "event": e.event}))
    }
}

impl From<LaneError> for ApiError {
    fn from(e: LaneError) -> ApiError {
        match &e {
            LaneError::Request { operation, .. } => {
                ApiError::upstream(e.code(), operation, e.to_string())
            }
            _ => ApiError::internal(e.to_string()).with_details(json!({"cause": e.code()})),
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
