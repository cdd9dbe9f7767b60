//! The control-plane api through its router, against the emulator: schedules under If-Match,
//! runs (double click, reuse and forced runs, retry as a new attempt, approval), backfills
//! (concurrency measured, pause/resume, cancel, verify finding a punched hole), the kill
//! switch and one-off runs, every role allowed and refused, and bad input of every kind.

use axum::http::{Method, StatusCode};
use chrono::TimeDelta;
use cronledger_app::api::{ApiConfig, Caller, RunAtEvent};
use cronledger_aws::keys;
use cronledger_core::run::Origin;
use cronledger_core::{Lane, RunStatus};
use cronledger_tests::api::{
    Answer, ApiEnv, NowValue, ADMIN, LAMBDA_ADMIN, OPERATOR, STRANGER, VIEWER,
};
use cronledger_tests::t;
use serde_json::{json, Value};

mod audit;
mod backfills;
mod calendars;
mod health;
mod quality;
mod repair;
mod runs;
mod schedules;
mod system;

const NOW: &str = "2026-03-10T12:00:30Z";

fn schedule_doc(id: &str, cron: &str) -> Value {
    json!({"id": id, "cron": cron, "timezone": "UTC", "owner": "tests", "overlap": "ALLOW",
           "job": {"type": "noop"}})
}

async fn create(api: &ApiEnv, doc: Value) -> Value {
    let a = api.post(ADMIN, "/v1/schedules", Some(doc)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.body);
    a.body
}

/// Receives what a lane holds and hands it to a worker, until nothing comes.
async fn drain(api: &ApiEnv, lane: Lane) -> usize {
    api.drain(lane).await
}
