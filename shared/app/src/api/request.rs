//! The scope of one request, around every route: its request id, what a server-side failure
//! shows (the error's code and message, plus `details.request_id`; its cause only in the
//! log, at ERROR under the same id) and the answer's size bound.

use std::panic::AssertUnwindSafe;

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cronledger_contract::ErrorBody;
use futures_util::FutureExt;
use serde_json::{json, Value};

use super::error::ApiError;
use super::new_id;

/// The largest answer the api sends. Every listing pages or summarizes to stay well under it
/// (Lambda's own limit is 6 MB); past it the answer is refused here, a backstop.
pub const RESPONSE_MAX_BYTES: usize = 1024 * 1024;

/// The header every answer carries its request id in.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The id API Gateway or Lambda gave the request; set by the function before routing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

pub async fn scope(mut req: Request, next: Next) -> Response {
    let id = match req.extensions().get::<RequestId>() {
        Some(known) => known.clone(),
        None => {
            let fresh = RequestId(new_id("req"));
            req.extensions_mut().insert(fresh.clone());
            fresh
        }
    };
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    // A handler that panics (a bug) answers INTERNAL like any other server-side failure,
    // instead of failing the whole invocation with the panic's text.
    let resp = match AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            let cause = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let error = ApiError::internal(format!("the handler panicked: {cause}"))
                .with_details(json!({"cause": "HANDLER_PANICKED"}));
            return with_id(report(&id, method.as_str(), &path, error), &id);
        }
    };
    let resp = if resp.status().is_server_error() {
        let error = resp.extensions().get::<ApiError>().cloned();
        let error = error.unwrap_or_else(|| {
            ApiError::internal(format!("{} answered without an api error", resp.status()))
        });
        report(&id, method.as_str(), &path, error)
    } else {
        bounded(&id, method.as_str(), &path, resp).await
    };
    with_id(resp, &id)
}

fn with_id(mut resp: Response, id: &RequestId) -> Response {
    if let Ok(value) = HeaderValue::from_str(&id.0) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    resp
}

/// Logs a server-side failure with its cause and answers it without the cause.
fn report(id: &RequestId, method: &str, path: &str, error: ApiError) -> Response {
    tracing::error!(
        request_id = %id.0,
        method,
        path,
        status = error.status.as_u16(),
        code = %error.code,
        cause = error.log_detail.as_deref().unwrap_or(""),
        "api request failed"
    );
    let base = error.body();
    let details = match error.details {
        Value::Object(mut map) => {
            map.insert("request_id".into(), json!(id.0));
            Value::Object(map)
        }
        Value::Null => json!({"request_id": id.0}),
        other => json!({"request_id": id.0, "info": other}),
    };
    let body = ErrorBody {
        details: Some(details),
        ..base
    };
    (error.status, axum::Json(body)).into_response()
}

/// The answer, or a 500 when its body passes [`RESPONSE_MAX_BYTES`].
async fn bounded(id: &RequestId, method: &str, path: &str, resp: Response) -> Response {
    let (parts, body) = resp.into_parts();
    match to_bytes(body, RESPONSE_MAX_BYTES).await {
        Ok(bytes) => Response::from_parts(parts, Body::from(bytes)),
        Err(e) => {
            let error = ApiError::internal(format!(
                "the answer ({}) passed {RESPONSE_MAX_BYTES} bytes: {e}",
                parts.status
            ))
            .with_details(json!({"cause": "RESPONSE_TOO_LARGE"}));
            report(id, method, path, error)
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_internal_with_a_request_id_and_no_panic_text() {
        async fn broken() -> &'static str {
            panic!("secret detail of a bug")
        }
        let app = Router::new()
            .route("/broken", get(broken))
            .layer(axum::middleware::from_fn(scope));
        let resp = app
            .clone()
            .oneshot(Request::get("/broken").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), 500);
        assert!(resp.headers().contains_key(REQUEST_ID_HEADER));
        let body = to_bytes(resp.into_body(), 1 << 16).await.unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["code"], "INTERNAL");
        assert_eq!(body["details"]["cause"], "HANDLER_PANICKED");
        assert!(body["details"]["request_id"].is_string());
        assert!(!body.to_string().contains("secret detail"), "{body}");
        // The router still answers after a panic.
        let again = app
            .oneshot(Request::get("/broken").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(again.status(), 500);
    }
}
