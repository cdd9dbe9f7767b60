//! Extractors that turn every bad input into the api's JSON error, never a panic or a plain
//! text rejection: bodies (size-limited, JSON, unknown fields refused by the request types),
//! query strings, path segments, `If-Match`, and the authorized caller.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;

use super::auth::{Caller, Role};
use super::error::ApiError;
use super::ids::check_path_param;

/// A JSON body. Syntax errors are 400, shape errors (unknown or missing fields, wrong types)
/// are 422, a body over the limit is 413. An empty body reads as `{}`.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
            let ct = ct.to_str().unwrap_or("");
            if !ct.is_empty() && !ct.starts_with("application/json") {
                return Err(ApiError::malformed(format!(
                    "Content-Type `{ct}` is not application/json"
                )));
            }
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "REQUEST_TOO_LARGE",
                    "the request body is larger than the api accepts",
                )
            } else {
                ApiError::malformed(format!("the body could not be read: {e}"))
            }
        })?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        parse_json(bytes).map(ApiJson)
    }
}

pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => {
            ApiError::invalid("REQUEST_INVALID", format!("the body does not fit: {e}"))
        }
        _ => ApiError::malformed(format!("the body is not valid JSON: {e}")),
    })
}

/// A query string; unknown parameters and bad values are 422.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| ApiQuery(q))
            .map_err(|e| ApiError::invalid("REQUEST_INVALID", e.body_text()))
    }
}

/// Path segments, each checked against its id's grammar ([`super::ids`]) first.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let raw = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::malformed(e.body_text()))?;
        for (name, value) in &raw {
            check_path_param(name, value)?;
        }
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(p)| ApiPath(p))
            .map_err(|e| ApiError::malformed(e.body_text()))
    }
}

/// `If-Match: "7"` (or `7`, or `W/"7"`): the version the change is based on.
pub struct IfMatch(pub Option<u64>);

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(header::IF_MATCH) else {
            return Ok(IfMatch(None));
        };
        let text = value.to_str().unwrap_or("").trim();
        let bare = text.trim_start_matches("W/").trim_matches('"');
        bare.parse::<u64>().map(|v| IfMatch(Some(v))).map_err(|_| {
            ApiError::malformed(format!(
                "If-Match `{text}` is not a version like \"3\" (the ETag of what the change is based on)"
            ))
        })
    }
}

/// The `Idempotency-Key` header, if any: 1 to 128 visible ASCII characters.
pub struct IdempotencyKeyHeader(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKeyHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get("idempotency-key") else {
            return Ok(IdempotencyKeyHeader(None));
        };
        let text = value.to_str().unwrap_or("");
        if text.is_empty() || text.len() > 128 || !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ApiError::malformed(
                "Idempotency-Key must be 1 to 128 visible ASCII characters",
            ));
        }
        Ok(IdempotencyKeyHeader(Some(text.to_string())))
    }
}

/// The caller a route admitted, and the role it was admitted with (set by the route's
/// authorization layer).
#[derive(Debug, Clone)]
pub struct Actor {
    pub caller: Caller,
    pub role: Role,
}

impl Actor {
    pub fn name(&self) -> &str {
        &self.caller.principal
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Actor>()
            .cloned()
            .ok_or_else(|| ApiError::unauthenticated("no authorized caller"))
    }
}
