//! A record of every answer the api gives, for the contract test of a process the test does
//! not hold: with `CRONLEDGER_ANSWER_LOG=FILE`, the local runner appends one JSON line per
//! answer (method, path, status, content type, body) to FILE, and the console's browser test
//! checks each against `/openapi.json`. Off unless the variable is set; never in AWS (the
//! template does not set it).

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use serde::{Deserialize, Serialize};

/// The variable naming the file.
pub const ANSWER_LOG_VARIABLE: &str = "CRONLEDGER_ANSWER_LOG";

/// Bodies larger than the api ever answers are not buffered (the api bounds its answers).
const BODY_MAX: usize = 8 * 1024 * 1024;

/// One answer as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedAnswer {
    pub method: String,
    pub path: String,
    pub status: u16,
    pub content_type: Option<String>,
    /// The body as text (the console's files and JSON are text).
    pub body: String,
}

/// `router` recording its answers to the file the environment names, if it names one.
pub fn from_env(router: Router) -> Router {
    match std::env::var_os(ANSWER_LOG_VARIABLE) {
        Some(path) => record_to(router, PathBuf::from(path)),
        None => router,
    }
}

/// `router` appending each answer to `path`.
pub fn record_to(router: Router, path: PathBuf) -> Router {
    let file = Arc::new(Mutex::new(path));
    router.layer(middleware::from_fn(move |req: Request, next: Next| {
        let file = file.clone();
        async move {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let response = next.run(req).await;
            let (parts, body) = response.into_parts();
            let bytes = to_bytes(body, BODY_MAX).await.unwrap_or_default();
            let recorded = RecordedAnswer {
                method,
                path,
                status: parts.status.as_u16(),
                content_type: parts
                    .headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string),
                body: String::from_utf8_lossy(&bytes).into_owned(),
            };
            append(&file, &recorded);
            Response::from_parts(parts, Body::from(bytes))
        }
    }))
}

fn append(file: &Mutex<PathBuf>, recorded: &RecordedAnswer) {
    let path = file.lock().unwrap_or_else(PoisonError::into_inner);
    let Ok(mut line) = serde_json::to_string(recorded) else {
        return;
    };
    line.push('\n');
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&*path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        tracing::warn!(error = %e, "answer not recorded");
    }
}
