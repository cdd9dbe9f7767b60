//! A webhook receiver for local runs: answers `POST /hooks/{name}` like a job endpoint would,
//! remembers which idempotency keys it executed, and says so on the console.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// What the receiver has seen, per idempotency key: how many times it executed.
#[derive(Debug, Clone, Default)]
pub struct Executions(Arc<Mutex<BTreeMap<String, u32>>>);

impl Executions {
    pub fn count(&self, key: &str) -> u32 {
        self.lock().get(key).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u32 {
        self.lock().values().sum()
    }

    fn record(&self, key: &str) -> u32 {
        let mut map = self.lock();
        let n = map.entry(key.to_string()).or_default();
        *n += 1;
        *n
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u32>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The receiver's routes, to mount on the local runner's port.
pub fn router(executions: Executions) -> Router {
    Router::new()
        .route("/hooks/{name}", post(hook))
        .with_state(executions)
}

async fn hook(
    State(executions): State<Executions>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let Some(key) = headers
        .get("Idempotency-Key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": "MISSING_IDEMPOTENCY_KEY"})),
        );
    };
    let n = executions.record(&key);
    let attempt = body.get("attempt").and_then(serde_json::Value::as_u64);
    tracing::info!(
        target: "receiver",
        hook = %name,
        idempotency_key = %key,
        attempt,
        executions_of_key = n,
        "webhook executed"
    );
    (
        StatusCode::OK,
        Json(json!({"count": 1, "executions_of_key": n})),
    )
}

/// Serves `router` on `addr` until the future is dropped.
pub async fn serve(addr: SocketAddr, router: Router) -> std::io::Result<()> {
    serve_on(tokio::net::TcpListener::bind(addr).await?, router).await
}

/// Serves `router` on a listener already bound (the local runner binds its port before it
/// starts anything else) until the future is dropped.
pub async fn serve_on(listener: tokio::net::TcpListener, router: Router) -> std::io::Result<()> {
    axum::serve(listener, router).await
}
