//! Manual runs keep the ledger's meaning (issue 17, points 4 and 6): an `Idempotency-Key`
//! names one request body (another body with it is 409 IDEMPOTENCY_KEY_REUSED, also when two
//! race), and a manual run names an occurrence of the schedule, never an instant inside one.

use axum::http::{Method, StatusCode};
use chrono::Utc;
use cronledger_app::api::Caller;
use cronledger_aws::{IdempotencyClaim, OpsStore};
use cronledger_core::run::Origin;
use cronledger_core::RunKey;
use cronledger_tests::api::{Answer, ApiEnv, ADMIN, OPERATOR};
use cronledger_tests::t;
use serde_json::{json, Value};

const NOW: &str = "2026-03-10T12:00:30Z";

async fn hourly(api: &ApiEnv, id: &str) {
    let doc = json!({"id": id, "cron": "0 * * * *", "timezone": "UTC", "owner": "tests",
                     "overlap": "ALLOW", "job": {"type": "noop"}});
    let a = api.post(ADMIN, "/v1/schedules", Some(doc)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.body);
}

async fn run_now(api: &ApiEnv, schedule: &str, body: Value, key: &str) -> Answer {
    api.call_with(
        Some(Caller::new(OPERATOR)),
        Method::POST,
        &format!("/v1/schedules/{schedule}/runs"),
        Some(body),
        &[("Idempotency-Key", key)],
    )
    .await
}

/// Run now of the occurrence at `scheduled_for` (no Idempotency-Key).
async fn run_of(api: &ApiEnv, schedule: &str, scheduled_for: &str) -> Answer {
    let path = format!("/v1/schedules/{schedule}/runs");
    api.post(
        OPERATOR,
        &path,
        Some(json!({"scheduled_for": scheduled_for})),
    )
    .await
}

/// A one-off run at 15:30 naming `scheduled_for`.
async fn run_at(api: &ApiEnv, scheduled_for: &str) -> Answer {
    let body = json!({"at": "2026-03-10T15:30:00Z", "scheduled_for": scheduled_for});
    api.post(OPERATOR, "/v1/schedules/later/run-at", Some(body))
        .await
}

async fn manual_runs(api: &ApiEnv, schedule: &str) -> usize {
    api.env
        .store
        .runs_between(schedule, t("2026-03-01T00:00:00Z"), t(NOW))
        .await
        .expect("runs")
        .iter()
        .filter(|r| matches!(r.key.origin, Origin::Manual(_)))
        .count()
}

#[tokio::test]
async fn a_reused_idempotency_key_with_another_body_is_refused() {
    let api = ApiEnv::new(t(NOW)).await;
    hourly(&api, "idem").await;
    let first = run_now(&api, "idem", json!({"mode": "new", "note": "a"}), "k-1").await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);

    // The same body, in another key order and spacing: the same run, replayed.
    let same = api
        .raw(
            Some(Caller::new(OPERATOR)),
            Method::POST,
            "/v1/schedules/idem/runs",
            br#"{ "note": "a",  "mode": "new" }"#.to_vec(),
            &[("Idempotency-Key", "k-1")],
        )
        .await;
    assert_eq!(same.status, StatusCode::OK, "{:?}", same.body);
    assert_eq!(same.body["idempotent_replay"], true);
    assert_eq!(same.body["run"]["run_id"], first.body["run"]["run_id"]);

    // Another body with that key: refused, and no second run.
    let other = run_now(
        &api,
        "idem",
        json!({"mode": "new", "scheduled_for": "2026-03-10T11:00:00Z", "note": "a"}),
        "k-1",
    )
    .await;
    assert_eq!(other.status, StatusCode::CONFLICT, "{:?}", other.body);
    assert_eq!(other.code(), "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(other.body["details"]["run"], first.body["run"]["run_id"]);
    assert_eq!(manual_runs(&api, "idem").await, 1);
}

#[tokio::test]
async fn two_bodies_racing_on_one_key_make_one_run_and_one_refusal() {
    let api = ApiEnv::new(t(NOW)).await;
    hourly(&api, "race").await;
    let a = run_now(
        &api,
        "race",
        json!({"mode": "new", "note": "left"}),
        "race-key",
    );
    let b = run_now(
        &api,
        "race",
        json!({"mode": "new", "note": "right"}),
        "race-key",
    );
    let (a, b) = tokio::join!(a, b);
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::CREATED, StatusCode::CONFLICT],
        "{:?} {:?}",
        a.body,
        b.body
    );
    let refused = if a.status == StatusCode::CONFLICT {
        &a
    } else {
        &b
    };
    assert_eq!(refused.code(), "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(manual_runs(&api, "race").await, 1);
    assert_eq!(api.env.queue.sends().len(), 1, "one message for one run");
}

#[tokio::test]
async fn a_claim_stored_without_a_hash_replays_whatever_the_body() {
    let api = ApiEnv::new(t(NOW)).await;
    hourly(&api, "old").await;
    // A claim as stored before bodies were hashed: its request wrote no run yet.
    let claimed = RunKey {
        schedule_id: "old".into(),
        scheduled_for: t("2026-03-10T12:00:00Z"),
        origin: Origin::Manual("rq-before-hashes".into()),
    };
    let claim = IdempotencyClaim {
        key: "old:legacy".into(),
        run: claimed.clone(),
        body_hash: None,
        created_at: t(NOW),
        expires_at: Utc::now() + chrono::TimeDelta::days(1),
    };
    let ops: &dyn OpsStore = &api.env.ledger.ledger;
    assert_eq!(ops.claim_idempotency(&claim).await.expect("claim"), None);
    let any = run_now(
        &api,
        "old",
        json!({"mode": "new", "note": "whatever"}),
        "legacy",
    )
    .await;
    assert!(any.status.is_success(), "{:?}", any.body);
    assert_eq!(any.body["run"]["scheduled_for"], "2026-03-10T12:00:00Z");
    assert_eq!(manual_runs(&api, "old").await, 1);
}

#[tokio::test]
async fn a_manual_run_names_an_occurrence_of_the_schedule() {
    let api = ApiEnv::new(t(NOW)).await;
    hourly(&api, "occ").await;
    // 10:17 on an hourly schedule would make the window [10:00, 10:17) under a key of its own.
    let inside = run_of(&api, "occ", "2026-03-10T10:17:00Z").await;
    assert_eq!(inside.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(inside.code(), "SCHEDULED_FOR_NOT_AN_OCCURRENCE");
    assert_eq!(inside.body["details"]["previous"], "2026-03-10T10:00:00Z");
    assert_eq!(inside.body["details"]["next"], "2026-03-10T11:00:00Z");
    let off_by_a_second = run_of(&api, "occ", "2026-03-10T10:00:01Z").await;
    assert_eq!(off_by_a_second.code(), "SCHEDULED_FOR_NOT_AN_OCCURRENCE");
    assert_eq!(manual_runs(&api, "occ").await, 0);

    // An occurrence: its own window and the idempotency key the scheduled run has.
    let ten = run_of(&api, "occ", "2026-03-10T10:00:00Z").await;
    assert_eq!(ten.status, StatusCode::CREATED, "{:?}", ten.body);
    assert_eq!(ten.body["run"]["window_start"], "2026-03-10T09:00:00Z");
    assert_eq!(ten.body["run"]["window_end"], "2026-03-10T10:00:00Z");
    assert_eq!(
        ten.body["run"]["idempotency_key"],
        "occ:2026-03-10T09:00:00Z/2026-03-10T10:00:00Z"
    );
    // No instant: the latest occurrence at or before now.
    let latest = api
        .post(OPERATOR, "/v1/schedules/occ/runs", Some(json!({})))
        .await;
    assert_eq!(latest.status, StatusCode::CREATED, "{:?}", latest.body);
    assert_eq!(latest.body["run"]["scheduled_for"], "2026-03-10T12:00:00Z");
}

#[tokio::test]
async fn a_run_at_names_an_occurrence_too() {
    let api = ApiEnv::new(t(NOW)).await;
    hourly(&api, "later").await;
    let inside = run_at(&api, "2026-03-10T14:45:00Z").await;
    assert_eq!(inside.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(inside.code(), "SCHEDULED_FOR_NOT_AN_OCCURRENCE");
    let after_at = run_at(&api, "2026-03-10T16:00:00Z").await;
    assert_eq!(after_at.code(), "RUN_IN_FUTURE");
    assert!(api.scheduler.one_time.lock().expect("lock").is_empty());
    let fine = run_at(&api, "2026-03-10T15:00:00Z").await;
    assert_eq!(fine.status, StatusCode::CREATED, "{:?}", fine.body);
}
