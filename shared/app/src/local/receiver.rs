//! A webhook receiver for local runs: answers `POST /hooks/{name}` like a job endpoint would,
//! remembers which idempotency keys it executed, and says so on the console. A hook that an
//! `auth: {type: hmac}` job calls checks `Cronledger-Signature` as a real receiver would,
//! with the same secret, and refuses a bad one (401) without executing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use cronledger_core::http_target::HttpAuth;
use cronledger_core::JobSpec;
use serde_json::{json, Value};

use crate::clock::{Clock, SystemClock};
use crate::jobs::http_auth::SecretCache;
use crate::jobs::webhook_signature::{verify, DEFAULT_TOLERANCE_SECONDS, SIGNATURE_HEADER};

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

/// Which hooks check signatures, with which secrets (read through the cache, so a rotated
/// secret is picked up as the worker picks it up).
#[derive(Clone)]
pub struct HookSigning {
    secrets: Arc<SecretCache>,
    hooks: BTreeMap<String, Vec<String>>,
    clock: Arc<dyn Clock>,
}

impl HookSigning {
    /// The hooks the `auth: {type: hmac}` http jobs among `jobs` call (`.../hooks/{name}`),
    /// each with the secrets that sign its calls.
    pub fn for_jobs<'a>(
        jobs: impl IntoIterator<Item = &'a JobSpec>,
        secrets: Arc<SecretCache>,
    ) -> HookSigning {
        let mut hooks: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for job in jobs {
            let JobSpec::Http {
                url,
                auth: Some(HttpAuth::Hmac(hmac)),
                ..
            } = job
            else {
                continue;
            };
            let Some(name) = hook_name(url) else { continue };
            let secrets = hooks.entry(name).or_default();
            if !secrets.contains(&hmac.secret) {
                secrets.push(hmac.secret.clone());
            }
        }
        HookSigning {
            secrets,
            hooks,
            clock: Arc::new(SystemClock),
        }
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> HookSigning {
        self.clock = clock;
        self
    }

    /// Whether `hook`'s call may run: unsigned hooks always; signed ones when some key of
    /// their secrets (current or pending) verifies the signature within 5 minutes.
    async fn check(&self, hook: &str, headers: &HeaderMap, body: &[u8]) -> Result<(), Refusal> {
        let Some(secrets) = self.hooks.get(hook) else {
            return Ok(());
        };
        let mut keys = Vec::new();
        for secret in secrets {
            let read = self
                .secrets
                .signing_keys(secret)
                .await
                .map_err(|e| Refusal {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    code: "SIGNATURE_KEY_UNAVAILABLE",
                    message: e.to_string(),
                })?;
            keys.extend(read);
        }
        let header = headers.get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok());
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        verify(
            header,
            &keys,
            body,
            self.clock.now().timestamp(),
            DEFAULT_TOLERANCE_SECONDS,
        )
        .map_err(|e| Refusal {
            status: StatusCode::UNAUTHORIZED,
            code: e.code(),
            message: e.to_string(),
        })
    }
}

/// `name` of a url whose path is `/hooks/{name}`.
fn hook_name(url: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    let name = url.path().strip_prefix("/hooks/")?;
    (!name.is_empty() && !name.contains('/')).then(|| name.to_string())
}

/// Why a call was not executed.
struct Refusal {
    status: StatusCode,
    code: &'static str,
    message: String,
}

#[derive(Clone)]
struct Receiver {
    executions: Executions,
    signing: Option<HookSigning>,
}

/// The receiver's routes, to mount on the local runner's port; with `signing`, the hooks it
/// names check signatures.
pub fn router(executions: Executions, signing: Option<HookSigning>) -> Router {
    Router::new()
        .route("/hooks/{name}", post(hook))
        .with_state(Receiver {
            executions,
            signing,
        })
}

async fn hook(
    State(receiver): State<Receiver>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    if let Some(signing) = &receiver.signing {
        if let Err(refused) = signing.check(&name, &headers, &body).await {
            tracing::warn!(
                target: "receiver",
                hook = %name,
                code = refused.code,
                reason = %refused.message,
                "webhook refused"
            );
            return (
                refused.status,
                Json(json!({"code": refused.code, "message": refused.message})),
            );
        }
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": "BODY_NOT_JSON"})),
        );
    };
    let executions = receiver.executions;
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
