//! The control-plane api through its router, against the emulator: schedules under If-Match,
//! runs (double click, reuse and forced runs, retry as a new attempt, approval), backfills
//! (concurrency measured, pause/resume, cancel, verify finding a punched hole), the kill
//! switch and one-off runs, every role allowed and refused, and bad input of every kind.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use chrono::TimeDelta;
use cronledger_app::api::{ApiConfig, Caller, RunAtEvent};
use cronledger_aws::keys;
use cronledger_core::run::Origin;
use cronledger_core::{Lane, RunStatus};
use cronledger_tests::api::{ApiEnv, NowValue, ADMIN, LAMBDA_ADMIN, OPERATOR, STRANGER, VIEWER};
use cronledger_tests::app::worker_config;
use cronledger_tests::t;
use serde_json::{json, Value};

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
    let worker = api.env.worker(worker_config("api-tests"));
    let mut handled = 0;
    loop {
        let got = api
            .env
            .receive(lane, false, 10, Duration::from_millis(600))
            .await;
        if got.is_empty() {
            return handled;
        }
        handled += got.len();
        api.env.deliver(&worker, lane, &got).await;
    }
}

#[tokio::test]
async fn schedules_crud_with_if_match_preview_diff_and_audit() {
    let api = ApiEnv::new(t(NOW)).await;
    let created = create(&api, schedule_doc("nightly", "0 2 * * *")).await;
    assert_eq!(created["version"], 1);
    assert_eq!(created["state"], "ACTIVE");

    let got = api.get(VIEWER, "/v1/schedules/nightly").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.headers["etag"], "\"1\"");
    let listed = api.get(VIEWER, "/v1/schedules?limit=10").await;
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(1));

    // A second create of the same id conflicts.
    let again = api
        .post(
            ADMIN,
            "/v1/schedules",
            Some(schedule_doc("nightly", "0 3 * * *")),
        )
        .await;
    assert_eq!(
        (again.status, again.code()),
        (StatusCode::CONFLICT, "SCHEDULE_ALREADY_EXISTS")
    );

    // Update: If-Match required, stale is 412 with the current version, fresh applies. (An
    // hour earlier: the first new window reaches back over an hour the 02:00 run covered,
    // MEDIUM; a later hour would leave data no run covers.)
    let update = || Some(schedule_doc("nightly", "0 1 * * *"));
    let missing = api.put(ADMIN, "/v1/schedules/nightly", update()).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    let admin = || Some(Caller::new(ADMIN));
    let ok = api
        .call_with(
            admin(),
            Method::PUT,
            "/v1/schedules/nightly",
            update(),
            &[("If-Match", "\"1\""), ("Cronledger-Note", "move to 1am")],
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{:?}", ok.body);
    assert_eq!(ok.body["version"], 2);
    let stale = api
        .call_with(
            admin(),
            Method::PUT,
            "/v1/schedules/nightly",
            update(),
            &[("If-Match", "\"1\"")],
        )
        .await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(stale.code(), "SCHEDULE_VERSION_CONFLICT");
    assert_eq!(stale.body["details"]["current_version"], 2);
    let mismatch = api
        .call_with(
            admin(),
            Method::PUT,
            "/v1/schedules/nightly",
            Some(schedule_doc("other", "0 4 * * *")),
            &[("If-Match", "2")],
        )
        .await;
    assert_eq!(
        (mismatch.status, mismatch.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "SCHEDULE_ID_MISMATCH")
    );

    // Pause and resume with notes; pausing twice conflicts; a stale If-Match is 412.
    let paused = api
        .post(
            ADMIN,
            "/v1/schedules/nightly/pause",
            Some(json!({"note": "vendor outage"})),
        )
        .await;
    assert_eq!(paused.body["state"], "PAUSED");
    let twice = api.post(ADMIN, "/v1/schedules/nightly/pause", None).await;
    assert_eq!(twice.status, StatusCode::CONFLICT);
    let stale_resume = api
        .call_with(
            admin(),
            Method::POST,
            "/v1/schedules/nightly/resume",
            None,
            &[("If-Match", "1")],
        )
        .await;
    assert_eq!(stale_resume.status, StatusCode::PRECONDITION_FAILED);
    let resumed = api
        .post(
            ADMIN,
            "/v1/schedules/nightly/resume",
            Some(json!({"note": "vendor back"})),
        )
        .await;
    assert_eq!(resumed.body["state"], "ACTIVE");

    // Preview of the stored schedule and of a document, with DST notes.
    let preview = api
        .get(VIEWER, "/v1/schedules/nightly/preview?count=3")
        .await;
    assert_eq!(preview.body["fire_times"].as_array().map(Vec::len), Some(3));
    let dst = api
        .post(VIEWER, "/v1/preview", Some(json!({
            "schedule": {"id": "ny", "cron": "30 2 * * *", "timezone": "America/New_York", "job": {"type": "noop"}},
            "count": 2, "after": "2026-03-07T12:00:00Z"})))
        .await;
    assert_eq!(dst.status, StatusCode::OK, "{:?}", dst.body);
    assert_eq!(
        dst.body["fire_times"][0]["dst"], "SHIFTED_PAST_GAP",
        "{:?}",
        dst.body
    );
    assert!(dst.body["fire_times"][0]["dst_note"].is_string());

    // The risk diff without saving.
    let diff = api
        .post(
            VIEWER,
            "/v1/schedules/nightly/diff",
            Some(schedule_doc("nightly", "*/5 * * * *")),
        )
        .await;
    assert_eq!(diff.status, StatusCode::OK, "{:?}", diff.body);
    assert_eq!(diff.body["report"]["level"], "HIGH");
    // At 12:00:30 the last nightly run covered up to 01:00; the first five-minutely one
    // covers [12:00, 12:05): no run would cover [01:00, 12:00).
    assert_eq!(
        diff.body["report"]["window_gap"],
        json!({"start": "2026-03-10T01:00:00Z", "end": "2026-03-10T12:00:00Z", "duration": "11h"})
    );
    let still = api.get(VIEWER, "/v1/schedules/nightly").await;
    assert_eq!(still.body["spec"]["cron"], "0 1 * * *");

    // Archive, then nothing changes any more.
    let archived = api
        .post(
            ADMIN,
            "/v1/schedules/nightly/archive",
            Some(json!({"note": "retired"})),
        )
        .await;
    assert_eq!(archived.body["state"], "ARCHIVED");
    let after = api.post(ADMIN, "/v1/schedules/nightly/pause", None).await;
    assert_eq!(
        (after.status, after.code()),
        (StatusCode::CONFLICT, "SCHEDULE_ARCHIVED")
    );

    // The audit log has every change with its actor and note.
    let audit = api.get(VIEWER, "/v1/schedules/nightly/audit").await;
    let entries = audit.body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let actions: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(actions, ["CREATE", "UPDATE", "PAUSE", "RESUME", "ARCHIVE"]);
    assert_eq!(entries[1]["reason"], "move to 1am");
    assert_eq!(entries[2]["reason"], "vendor outage");
    assert!(entries.iter().all(|e| e["actor"] == ADMIN));

    let unknown = api.get(VIEWER, "/v1/schedules/nope").await;
    assert_eq!(
        (unknown.status, unknown.code()),
        (StatusCode::NOT_FOUND, "SCHEDULE_NOT_FOUND")
    );
    let no_audit = api.get(VIEWER, "/v1/schedules/nope/audit").await;
    assert_eq!(no_audit.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_high_risk_update_needs_a_confirmation_and_is_audited_with_its_risk() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, schedule_doc("hourly", "0 * * * *")).await;
    let put = |path: &'static str, cron: &'static str, headers: Vec<(&'static str, String)>| {
        let api = &api;
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            api.call_with(
                Some(Caller::new(ADMIN)),
                Method::PUT,
                path,
                Some(schedule_doc("hourly", cron)),
                &headers,
            )
            .await
        }
    };
    let version = |v: u64| ("If-Match", format!("\"{v}\""));

    // Every five minutes instead of hourly: twelve times as often, HIGH, refused unconfirmed.
    let refused = put("/v1/schedules/hourly", "*/5 * * * *", vec![version(1)]).await;
    assert_eq!(
        (refused.status, refused.code()),
        (
            StatusCode::PRECONDITION_REQUIRED,
            "SCHEDULE_CHANGE_NEEDS_CONFIRMATION"
        ),
        "{:?}",
        refused.body
    );
    assert_eq!(refused.body["details"]["risk"], "HIGH");
    assert!(refused.body["details"]["findings"][0]
        .as_str()
        .is_some_and(|f| f.contains("as often")));
    let wrong = put(
        "/v1/schedules/hourly",
        "*/5 * * * *",
        vec![version(1), ("X-Cronledger-Confirm", "yes".into())],
    )
    .await;
    assert_eq!(
        (wrong.status, wrong.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "REQUEST_INVALID")
    );
    let still = api.get(VIEWER, "/v1/schedules/hourly").await;
    assert_eq!(
        (
            still.body["version"].clone(),
            still.body["spec"]["cron"].clone()
        ),
        (json!(1), json!("0 * * * *"))
    );

    // Confirmed by header, then back by query parameter (LOW needs nothing, but may carry it).
    let applied = put(
        "/v1/schedules/hourly",
        "*/5 * * * *",
        vec![version(1), ("X-Cronledger-Confirm", "high-risk".into())],
    )
    .await;
    assert_eq!(applied.status, StatusCode::OK, "{:?}", applied.body);
    let back = put("/v1/schedules/hourly", "0 * * * *", vec![version(2)]).await;
    assert_eq!(back.status, StatusCode::OK, "{:?}", back.body);
    let again = put("/v1/schedules/hourly", "* * * * *", vec![version(3)]).await;
    assert_eq!(again.status, StatusCode::PRECONDITION_REQUIRED);
    let by_query = put(
        "/v1/schedules/hourly?confirm=high-risk",
        "* * * * *",
        vec![version(3)],
    )
    .await;
    assert_eq!(by_query.status, StatusCode::OK, "{:?}", by_query.body);

    // Each update's audit entry records its assessed risk and whether it was confirmed.
    let audit = api.get(VIEWER, "/v1/schedules/hourly/audit").await;
    let details: Vec<(Value, Value)> = audit.body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|e| e["action"] == "UPDATE")
        .map(|e| {
            (
                e["details"]["risk"].clone(),
                e["details"]["confirmed"].clone(),
            )
        })
        .collect();
    assert_eq!(
        details,
        vec![
            (json!("HIGH"), json!(true)),
            (json!("MEDIUM"), json!(false)),
            (json!("HIGH"), json!(true)),
        ]
    );
    let first = &audit.body["entries"][1]["details"]["findings"][0];
    assert!(
        first.as_str().is_some_and(|f| f.contains("as often")),
        "{first}"
    );
}

#[tokio::test]
async fn bad_input_gets_the_right_codes_and_never_a_panic() {
    let api = ApiEnv::with_config(
        t(NOW),
        ApiConfig {
            body_limit: 4096,
            ..ApiConfig::default()
        },
    )
    .await;
    create(&api, schedule_doc("s1", "*/5 * * * *")).await;
    let admin = || Some(Caller::new(ADMIN));

    let broken = api
        .raw(
            admin(),
            Method::POST,
            "/v1/schedules",
            b"{\"id\": ".to_vec(),
            &[],
        )
        .await;
    assert_eq!(
        (broken.status, broken.code()),
        (StatusCode::BAD_REQUEST, "REQUEST_MALFORMED")
    );
    let not_json = api
        .raw(
            admin(),
            Method::POST,
            "/v1/schedules/s1/runs",
            b"mode=new".to_vec(),
            &[],
        )
        .await;
    assert_eq!(
        not_json.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        not_json.body
    );
    let wrong_type = api
        .raw(
            admin(),
            Method::POST,
            "/v1/schedules",
            b"{}".to_vec(),
            &[("content-type", "text/plain")],
        )
        .await;
    assert_eq!(wrong_type.status, StatusCode::BAD_REQUEST);

    // Unknown fields: in a schedule (the core's code, every issue) and in a request type.
    let mut doc = schedule_doc("s2", "61 * * * *");
    doc["colour"] = json!("blue");
    let invalid = api.post(ADMIN, "/v1/schedules", Some(doc)).await;
    assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
    let codes: Vec<&str> = invalid.body["details"]["issues"]
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["code"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        codes.contains(&"SCHEDULE_UNKNOWN_FIELD") && codes.contains(&"SCHEDULE_INVALID_CRON"),
        "{codes:?}"
    );
    let extra = api
        .post(
            ADMIN,
            "/v1/schedules/s1/runs",
            Some(json!({"mode": "new", "force": true})),
        )
        .await;
    assert_eq!(
        (extra.status, extra.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "REQUEST_INVALID")
    );
    let bad_mode = api
        .post(
            ADMIN,
            "/v1/schedules/s1/runs",
            Some(json!({"mode": "twice"})),
        )
        .await;
    assert_eq!(bad_mode.status, StatusCode::UNPROCESSABLE_ENTITY);
    let bad_query = api.get(ADMIN, "/v1/schedules/s1/runs?status=DONE").await;
    assert_eq!(bad_query.status, StatusCode::UNPROCESSABLE_ENTITY);
    let unknown_query = api.get(ADMIN, "/v1/schedules?colour=1").await;
    assert_eq!(unknown_query.status, StatusCode::UNPROCESSABLE_ENTITY);

    // Oversize body: 413 with the JSON error.
    let big = format!("{{\"note\": \"{}\"}}", "x".repeat(10_000));
    let oversize = api
        .raw(
            admin(),
            Method::POST,
            "/v1/schedules/s1/pause",
            big.into_bytes(),
            &[],
        )
        .await;
    assert_eq!(
        (oversize.status, oversize.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "REQUEST_TOO_LARGE")
    );

    // Headers, ids, cursors, routes.
    let bad_if_match = api
        .call_with(
            admin(),
            Method::PUT,
            "/v1/schedules/s1",
            Some(schedule_doc("s1", "*/5 * * * *")),
            &[("If-Match", "yesterday")],
        )
        .await;
    assert_eq!(bad_if_match.status, StatusCode::BAD_REQUEST);
    let bad_key = api
        .call_with(
            admin(),
            Method::POST,
            "/v1/schedules/s1/runs",
            None,
            &[("Idempotency-Key", &"k".repeat(200))],
        )
        .await;
    assert_eq!(bad_key.status, StatusCode::BAD_REQUEST);
    let bad_run = api.get(ADMIN, "/v1/schedules/s1/runs/not-a-time").await;
    assert_eq!(
        (bad_run.status, bad_run.code()),
        (StatusCode::NOT_FOUND, "RUN_NOT_FOUND")
    );
    let no_run = api
        .get(ADMIN, "/v1/schedules/s1/runs/2026-03-10T11:00:00Z")
        .await;
    assert_eq!(no_run.status, StatusCode::NOT_FOUND);
    let bad_cursor = api.get(ADMIN, "/v1/schedules?cursor=zz").await;
    assert_eq!(
        (bad_cursor.status, bad_cursor.code()),
        (StatusCode::BAD_REQUEST, "CURSOR_INVALID")
    );
    let no_route = api.get(ADMIN, "/v1/nothing").await;
    assert_eq!(
        (no_route.status, no_route.code()),
        (StatusCode::NOT_FOUND, "ROUTE_NOT_FOUND")
    );
    let wrong_method = api.delete(ADMIN, "/v1/schedules/s1", None).await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
    let future = api
        .post(
            ADMIN,
            "/v1/schedules/s1/runs",
            Some(json!({"scheduled_for": "2027-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(
        (future.status, future.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "RUN_IN_FUTURE")
    );
    let backwards = api
        .post(ADMIN, "/v1/schedules/s1/backfills", Some(json!({"from": "2026-03-10T10:00:00Z", "to": "2026-03-10T09:00:00Z", "concurrency": 0})))
        .await;
    assert_eq!(backwards.status, StatusCode::UNPROCESSABLE_ENTITY);
    // Every error has the one shape.
    for a in [
        &broken,
        &invalid,
        &oversize,
        &no_route,
        &wrong_method,
        &bad_run,
    ] {
        assert!(
            a.body["code"].is_string()
                && a.body["message"].is_string()
                && a.body.get("details").is_some(),
            "{:?}",
            a.body
        );
    }
    // The document lists every route.
    let doc = api.call(None, Method::GET, "/openapi.json", None).await;
    assert_eq!(doc.body["openapi"], "3.0.3");
    assert!(doc.body["paths"]["/v1/schedules/{id}/runs/{run}/retry"]["post"].is_object());
}

#[tokio::test]
async fn each_role_is_allowed_and_refused() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, schedule_doc("s1", "*/5 * * * *")).await;

    let nobody = api.call(None, Method::GET, "/v1/schedules", None).await;
    assert_eq!(
        (nobody.status, nobody.code()),
        (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED")
    );
    let stranger = api.get(STRANGER, "/v1/schedules").await;
    assert_eq!(
        (stranger.status, stranger.code()),
        (StatusCode::FORBIDDEN, "FORBIDDEN")
    );

    // Viewer: reads yes, operator work no.
    assert_eq!(
        api.get(VIEWER, "/v1/schedules/s1/runs").await.status,
        StatusCode::OK
    );
    let viewer_run = api.post(VIEWER, "/v1/schedules/s1/runs", None).await;
    assert_eq!(viewer_run.status, StatusCode::FORBIDDEN);
    let viewer_backfill = api
        .post(VIEWER, "/v1/schedules/s1/backfills", Some(json!({"from": "2026-03-10T10:00:00Z", "to": "2026-03-10T11:00:00Z", "dry_run": true})))
        .await;
    assert_eq!(viewer_backfill.status, StatusCode::FORBIDDEN);

    // Operator (an assumed-role session, matched by prefix): runs and backfills yes, schedules no.
    let op_run = api.post(OPERATOR, "/v1/schedules/s1/runs", None).await;
    assert_eq!(op_run.status, StatusCode::CREATED, "{:?}", op_run.body);
    let op_dry = api
        .post(OPERATOR, "/v1/schedules/s1/backfills", Some(json!({"from": "2026-03-10T10:00:00Z", "to": "2026-03-10T11:00:00Z", "dry_run": true})))
        .await;
    assert_eq!(op_dry.status, StatusCode::OK, "{:?}", op_dry.body);
    let op_create = api
        .post(
            OPERATOR,
            "/v1/schedules",
            Some(schedule_doc("s2", "0 * * * *")),
        )
        .await;
    assert_eq!(op_create.status, StatusCode::FORBIDDEN);
    let op_pause = api.post(OPERATOR, "/v1/schedules/s1/pause", None).await;
    assert_eq!(op_pause.status, StatusCode::FORBIDDEN);
    let op_kill = api
        .post(
            OPERATOR,
            "/v1/system/kill-switch",
            Some(json!({"engaged": true, "note": "x"})),
        )
        .await;
    assert_eq!(op_kill.status, StatusCode::FORBIDDEN);

    // Admin: everything an operator may, and schedules; the job-type allowlist still applies.
    let lambda = json!({"id": "inv", "cron": "0 * * * *", "timezone": "UTC", "job": {"type": "lambda", "function": "arn:aws:lambda:us-east-1:1:function:f"}});
    let admin_lambda = api.post(ADMIN, "/v1/schedules", Some(lambda.clone())).await;
    assert_eq!(admin_lambda.status, StatusCode::FORBIDDEN);
    assert_eq!(admin_lambda.body["details"]["job_type"], "lambda");
    let allowed = api.post(LAMBDA_ADMIN, "/v1/schedules", Some(lambda)).await;
    assert_eq!(allowed.status, StatusCode::CREATED, "{:?}", allowed.body);
    // A JWT caller in the admin group.
    let jwt = Caller::new("user-123").with_groups(&["platform-admins"]);
    let by_group = api
        .call_with(
            Some(jwt),
            Method::POST,
            "/v1/schedules",
            Some(schedule_doc("s3", "0 * * * *")),
            &[],
        )
        .await;
    assert_eq!(by_group.status, StatusCode::CREATED);
    assert_eq!(
        api.post(ADMIN, "/v1/schedules/s1/runs", None).await.status,
        StatusCode::OK
    );
    // The local runner's fixed identity.
    let local = Caller::local("operator").expect("a local identity");
    let local_run = api
        .call_with(Some(local), Method::GET, "/v1/schedules/s1/runs", None, &[])
        .await;
    assert_eq!(local_run.status, StatusCode::OK);
}

#[tokio::test]
async fn a_double_click_is_one_run_reuse_finds_it_and_new_forces_another() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, schedule_doc("s1", "0 * * * *")).await;
    let op = || Some(Caller::new(OPERATOR));
    let click = || {
        api.call_with(
            op(),
            Method::POST,
            "/v1/schedules/s1/runs",
            Some(json!({"mode": "new", "note": "rerun"})),
            &[("Idempotency-Key", "click-1")],
        )
    };
    let (a, b) = tokio::join!(click(), click());
    let created = [&a, &b]
        .iter()
        .filter(|x| x.status == StatusCode::CREATED)
        .count();
    assert_eq!(created, 1, "{:?} {:?}", a.body, b.body);
    assert_eq!(a.body["run"]["run_id"], b.body["run"]["run_id"]);
    let third = click().await;
    assert_eq!(third.status, StatusCode::OK);
    assert_eq!(third.body["idempotent_replay"], true);
    assert_eq!(third.body["run"]["run_id"], a.body["run"]["run_id"]);
    // The click that created the run answers after sending it; the other one may have read
    // the run a moment before it was marked QUEUED.
    let creator = if a.status == StatusCode::CREATED {
        &a
    } else {
        &b
    };
    let run = &creator.body["run"];
    assert_eq!(run["trigger"], "MANUAL");
    assert_eq!(run["forced"], true);
    assert_eq!(run["lane"], "manual");
    assert_eq!(run["scheduled_for"], "2026-03-10T12:00:00Z");
    assert_eq!(run["status"], "QUEUED");
    let sends = api.env.queue.sends();
    assert_eq!(sends.len(), 1, "one message for one run");

    // Reuse answers with the window's run while it is in flight or done.
    let reuse = api.post(OPERATOR, "/v1/schedules/s1/runs", None).await;
    assert_eq!(reuse.status, StatusCode::OK);
    assert_eq!(reuse.body["reused"], true);
    assert_eq!(reuse.body["run"]["run_id"], a.body["run"]["run_id"]);
    // New always makes another run of the same window.
    let forced = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs",
            Some(json!({"mode": "new"})),
        )
        .await;
    assert_eq!(forced.status, StatusCode::CREATED);
    assert_ne!(forced.body["run"]["run_id"], a.body["run"]["run_id"]);
    assert_eq!(
        forced.body["run"]["idempotency_key"],
        a.body["run"]["idempotency_key"]
    );

    // History: newest first, filtered by trigger and status.
    let history = api
        .get(
            VIEWER,
            "/v1/schedules/s1/runs?trigger=MANUAL&status=QUEUED&limit=1",
        )
        .await;
    assert_eq!(history.body["items"].as_array().map(Vec::len), Some(1));
    let page2 = api
        .get(
            VIEWER,
            &format!(
                "/v1/schedules/s1/runs?trigger=MANUAL&status=QUEUED&limit=1&cursor={}",
                history.body["next"].as_str().unwrap_or("")
            ),
        )
        .await;
    assert_eq!(page2.body["items"].as_array().map(Vec::len), Some(1));
    assert_ne!(
        page2.body["items"][0]["run_id"],
        history.body["items"][0]["run_id"]
    );
    let none = api
        .get(VIEWER, "/v1/schedules/s1/runs?trigger=BACKFILL")
        .await;
    assert_eq!(none.body["items"].as_array().map(Vec::len), Some(0));
}

#[tokio::test]
async fn retry_is_a_new_attempt_of_the_same_run() {
    let api = ApiEnv::new(t(NOW)).await;
    let mut doc = schedule_doc("flaky", "0 * * * *");
    doc["max_attempts"] = json!(1);
    doc["job"] = json!({"type": "noop", "fail_times": 1});
    create(&api, doc).await;
    let made = api.post(OPERATOR, "/v1/schedules/flaky/runs", None).await;
    assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
    let run_id = made.body["run"]["run_id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    drain(&api, Lane::Manual).await;
    let path = format!("/v1/schedules/flaky/runs/{run_id}");
    let failed = api.get(VIEWER, &path).await;
    assert_eq!(failed.body["status"], "FAILED", "{:?}", failed.body);
    assert_eq!(failed.body["attempts"], 1);

    // Retrying something that has not failed is refused; a failed run goes back as itself.
    let retry = api
        .post(
            OPERATOR,
            &format!("{path}/retry"),
            Some(json!({"note": "vendor fixed"})),
        )
        .await;
    assert_eq!(retry.status, StatusCode::OK, "{:?}", retry.body);
    assert_eq!(retry.body["run_id"], run_id.as_str());
    assert_eq!(retry.body["status"], "QUEUED");
    drain(&api, Lane::Manual).await;
    let done = api.get(VIEWER, &path).await;
    assert_eq!(done.body["status"], "SUCCESS", "{:?}", done.body);
    assert_eq!(done.body["attempts"], 2);
    assert_eq!(done.body["attempt_detail"]["current"]["number"], 2);
    let again = api.post(OPERATOR, &format!("{path}/retry"), None).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    // Still one run for the schedule: retries never make runs.
    let history = api.get(VIEWER, "/v1/schedules/flaky/runs").await;
    assert_eq!(history.body["items"].as_array().map(Vec::len), Some(1));
    // Two attempts of the one run: the failed one, then the operator's retry that succeeded.
    let history = done.body["attempt_history"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let outcomes: Vec<&str> = history
        .iter()
        .filter_map(|a| a["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, ["FAILED", "SUCCESS"], "{history:?}");
    assert_eq!(
        history[0]["error"]["code"], "NOOP_INJECTED_FAILURE",
        "{history:?}"
    );
    assert_eq!(history[1]["number"], 2);
    assert_eq!(done.body["attempts_unlisted"], 0);
    // The operator's note is in the schedule's audit log, after its CREATE; not in the
    // system log, which keeps system-wide actions.
    let audit = api.get(VIEWER, "/v1/schedules/flaky/audit").await;
    let entries = audit.body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let actions: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(actions, ["CREATE", "RUN_NOW", "RUN_RETRY"], "{entries:?}");
    assert_eq!(entries[2]["reason"], "vendor fixed");
    assert_eq!(entries[2]["actor"], OPERATOR);
    assert_eq!(entries[2]["details"]["run"], run_id.as_str());
    assert_eq!(entries[2]["version"], 1);
    let system = api.get(VIEWER, "/v1/system/audit").await;
    assert_eq!(system.body["entries"], json!([]));
}

#[tokio::test]
async fn approval_rejection_cancel_and_a_range_record_becoming_a_backfill() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, schedule_doc("s1", "0 * * * *")).await;
    let spec = api
        .env
        .store
        .get_schedule("s1")
        .await
        .expect("schedule")
        .spec;
    let held = |at: &str| {
        let mut run = cronledger_tests::scheduled_run(&spec, t(at), t(NOW), "tests");
        run.status = RunStatus::ManualRequired;
        run.reason = Some(cronledger_core::Reason::PolicyManual);
        run
    };
    for at in ["2026-03-10T08:00:00Z", "2026-03-10T09:00:00Z"] {
        api.env.store.create_run(&held(at)).await.expect("held run");
    }
    let mut range = held("2026-03-09T01:00:00Z");
    range.range_end = Some(t("2026-03-09T04:00:00Z"));
    range.count = 4;
    api.env
        .store
        .create_run(&range)
        .await
        .expect("range record");
    let mut pending =
        cronledger_tests::scheduled_run(&spec, t("2026-03-10T10:00:00Z"), t(NOW), "tests");
    pending.status = RunStatus::Pending;
    api.env
        .store
        .create_run(&pending)
        .await
        .expect("pending run");

    let approve = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs/2026-03-10T08:00:00Z/approve",
            Some(json!({"note": "checked"})),
        )
        .await;
    assert_eq!(approve.status, StatusCode::OK, "{:?}", approve.body);
    assert_eq!(approve.body["run"]["status"], "QUEUED");
    assert_eq!(approve.body["run"]["lane"], "manual");
    let twice = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs/2026-03-10T08:00:00Z/approve",
            None,
        )
        .await;
    assert_eq!(
        (twice.status, twice.code()),
        (StatusCode::CONFLICT, "RUN_NOT_AWAITING_APPROVAL")
    );
    drain(&api, Lane::Manual).await;
    let ran = api
        .get(VIEWER, "/v1/schedules/s1/runs/2026-03-10T08:00:00Z")
        .await;
    assert_eq!(ran.body["status"], "SUCCESS");

    let reject = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs/2026-03-10T09:00:00Z/reject",
            Some(json!({"note": "not needed"})),
        )
        .await;
    assert_eq!(reject.body["status"], "CANCELLED");
    assert_eq!(reject.body["reason"], "REJECTED");
    let cancel = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs/2026-03-10T10:00:00Z/cancel",
            None,
        )
        .await;
    assert_eq!(cancel.body["status"], "CANCELLED");
    assert_eq!(cancel.body["reason"], "CANCELLED_BY_OPERATOR");
    let cancel_done = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs/2026-03-10T08:00:00Z/cancel",
            None,
        )
        .await;
    assert_eq!(
        (cancel_done.status, cancel_done.code()),
        (StatusCode::CONFLICT, "RUN_INVALID_TRANSITION")
    );

    // The range record's four windows become a backfill; the record is folded into it.
    let range = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs/2026-03-09T01:00:00Z/approve",
            None,
        )
        .await;
    assert_eq!(range.status, StatusCode::OK, "{:?}", range.body);
    assert_eq!(range.body["run"]["status"], "COALESCED");
    assert_eq!(range.body["backfill"]["total"], 4);
    assert_eq!(range.body["backfill"]["state"], "RUNNING");
}

#[tokio::test]
async fn a_backfill_respects_its_concurrency_pauses_resumes_and_verify_finds_a_hole() {
    let api = ApiEnv::new(t(NOW)).await;
    // Without side effects: history before the schedule existed needs no admin's approval.
    let mut doc = schedule_doc("hist", "*/10 * * * *");
    doc["side_effects"] = json!(false);
    create(&api, doc).await;
    let range = json!({"from": "2026-03-10T08:00:00Z", "to": "2026-03-10T10:00:00Z", "concurrency": 2, "batch_size": 5, "rate_per_minute": 100});

    // A dry run: the plan and its size, nothing written.
    let mut dry = range.clone();
    dry["dry_run"] = json!(true);
    let plan = api
        .post(OPERATOR, "/v1/schedules/hist/backfills", Some(dry))
        .await;
    assert_eq!(plan.status, StatusCode::OK, "{:?}", plan.body);
    assert_eq!(plan.body["size"], 13);
    assert!(api
        .env
        .ledger
        .ledger
        .runs_between("hist", t("2026-03-10T00:00:00Z"), t(NOW))
        .await
        .expect("runs")
        .is_empty());
    use cronledger_aws::LedgerStore;

    let created = api
        .post(OPERATOR, "/v1/schedules/hist/backfills", Some(range))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let id = created.body["id"].as_str().unwrap_or("").to_string();
    let progress_path = format!("/v1/backfills/{id}");

    let in_flight = |runs: &[cronledger_core::Run]| {
        runs.iter()
            .filter(|r| {
                matches!(&r.key.origin, Origin::Backfill(b) if *b == id) && r.status.is_active()
            })
            .count()
    };
    let mut max_in_flight = 0;
    let mut passes = 0;
    let mut paused_once = false;
    loop {
        passes += 1;
        assert!(passes < 40, "the backfill did not finish");
        api.env.clock.advance(TimeDelta::minutes(1));
        let report = api.release().await;
        let runs = api
            .env
            .store
            .runs_between("hist", t("2026-03-10T08:00:00Z"), t("2026-03-10T10:00:00Z"))
            .await
            .expect("runs");
        let now_in_flight = in_flight(&runs);
        max_in_flight = max_in_flight.max(now_in_flight);
        assert!(
            now_in_flight <= 2,
            "{now_in_flight} backfill runs in flight, allowed 2"
        );
        if passes == 2 && !paused_once {
            // Paused: the next pass releases nothing, even with room.
            let p = api
                .post(
                    OPERATOR,
                    &format!("{progress_path}/pause"),
                    Some(json!({"note": "month end"})),
                )
                .await;
            assert_eq!(p.body["state"], "PAUSED", "{:?}", p.body);
            drain(&api, Lane::Backfill).await;
            api.env.clock.advance(TimeDelta::minutes(1));
            assert_eq!(api.release().await.released, 0);
            let r = api
                .post(OPERATOR, &format!("{progress_path}/resume"), None)
                .await;
            assert_eq!(r.body["state"], "RUNNING");
            paused_once = true;
            continue;
        }
        if report.finished.contains(&id) {
            break;
        }
        drain(&api, Lane::Backfill).await;
    }
    assert_eq!(
        max_in_flight, 2,
        "the measured concurrency reached its limit and never passed it"
    );
    let progress = api.get(VIEWER, &progress_path).await;
    assert_eq!(progress.body["state"], "DONE", "{:?}", progress.body);
    assert_eq!(progress.body["succeeded"], 13);
    assert_eq!(progress.body["failed"], 0);
    assert!(progress.body["rate_per_minute"]
        .as_f64()
        .is_some_and(|r| r > 0.0));

    let verify_path = format!("/v1/backfills/{id}/verify");
    let clean = api.get(VIEWER, &verify_path).await;
    assert_eq!(clean.body["complete"], true, "{:?}", clean.body);
    assert_eq!(clean.body["expected_windows"], 13);

    // Punch a hole: delete one window's run straight from the table.
    let hole = cronledger_core::RunKey {
        schedule_id: "hist".into(),
        scheduled_for: t("2026-03-10T09:10:00Z"),
        origin: Origin::Backfill(id.clone()),
    };
    api.env
        .ledger
        .clients
        .dynamodb
        .delete_item()
        .table_name(&api.env.ledger.table)
        .key(
            keys::PK,
            aws_sdk_dynamodb::types::AttributeValue::S(keys::schedule_pk("hist")),
        )
        .key(
            keys::SK,
            aws_sdk_dynamodb::types::AttributeValue::S(keys::run_sk(&hole)),
        )
        .send()
        .await
        .expect("delete one run");
    let found = api.get(VIEWER, &verify_path).await;
    assert_eq!(found.body["complete"], false);
    assert_eq!(found.body["missing"], 1);
    assert_eq!(
        found.body["problems"][0]["scheduled_for"],
        "2026-03-10T09:10:00Z"
    );
    assert_eq!(found.body["problems"][0]["problem"], "MISSING");

    // Reprocess missing: a new backfill plans exactly the hole.
    let refill = api
        .post(OPERATOR, "/v1/schedules/hist/backfills", Some(json!({"from": "2026-03-10T08:00:00Z", "to": "2026-03-10T10:00:00Z", "reprocess": "missing", "dry_run": true})))
        .await;
    assert_eq!(refill.body["windows"], json!(["2026-03-10T09:10:00Z"]));

    // Cancel: a second backfill's unstarted runs end CANCELLED.
    let all = api
        .post(OPERATOR, "/v1/schedules/hist/backfills", Some(json!({"from": "2026-03-10T08:00:00Z", "to": "2026-03-10T09:00:00Z", "reprocess": "all", "concurrency": 3})))
        .await;
    let second = all.body["id"].as_str().unwrap_or("").to_string();
    api.env.clock.advance(TimeDelta::minutes(1));
    assert_eq!(api.release().await.released, 3);
    let listed = api.get(VIEWER, "/v1/backfills").await;
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(1));
    let cancelled = api
        .post(OPERATOR, &format!("/v1/backfills/{second}/cancel"), None)
        .await;
    assert_eq!(cancelled.body["state"], "CANCELLED", "{:?}", cancelled.body);
    assert_eq!(
        cancelled.body["skipped"].as_u64().map(|s| s >= 3),
        Some(true)
    );
    let again = api
        .post(OPERATOR, &format!("/v1/backfills/{second}/resume"), None)
        .await;
    assert_eq!(
        (again.status, again.code()),
        (StatusCode::CONFLICT, "BACKFILL_STATE_CONFLICT")
    );
    let unknown = api.get(VIEWER, "/v1/backfills/nope").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn kill_switch_and_a_one_off_run_at_an_instant() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, schedule_doc("s1", "0 * * * *")).await;
    let status = api.get(VIEWER, "/v1/system").await;
    assert_eq!(status.body["automatic_firing"], true);
    let no_note = api
        .post(
            ADMIN,
            "/v1/system/kill-switch",
            Some(json!({"engaged": true, "note": " "})),
        )
        .await;
    assert_eq!(no_note.status, StatusCode::UNPROCESSABLE_ENTITY);
    let off = api
        .post(
            ADMIN,
            "/v1/system/kill-switch",
            Some(json!({"engaged": true, "note": "runaway jobs"})),
        )
        .await;
    assert_eq!(off.status, StatusCode::OK, "{:?}", off.body);
    assert_eq!(off.body["kill_switch_engaged"], true);
    assert!(api
        .scheduler
        .states
        .lock()
        .expect("lock")
        .values()
        .all(|on| !on));
    let on = api
        .post(
            ADMIN,
            "/v1/system/kill-switch",
            Some(json!({"engaged": false, "note": "fixed"})),
        )
        .await;
    assert_eq!(on.body["automatic_firing"], true);
    let audit = api.get(VIEWER, "/v1/system/audit").await;
    let actions: Vec<&str> = audit.body["entries"]
        .as_array()
        .map(|e| e.iter().filter_map(|x| x["action"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(actions, ["KILL_SWITCH_RELEASED", "KILL_SWITCH_ENGAGED"]);

    // Run at: a one-time schedule whose firing (delivered twice) makes one MANUAL run.
    let soon = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/run-at",
            Some(json!({"at": "2026-03-10T12:00:40Z"})),
        )
        .await;
    assert_eq!(soon.status, StatusCode::UNPROCESSABLE_ENTITY);
    let later = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/run-at",
            Some(json!({"at": "2026-03-10T15:30:00Z", "note": "after the vendor window"})),
        )
        .await;
    assert_eq!(later.status, StatusCode::CREATED, "{:?}", later.body);
    let (name, at, input) = api.scheduler.one_time.lock().expect("lock")[0].clone();
    assert!(name.starts_with("cronledger-runat-"));
    assert_eq!(at, t("2026-03-10T15:30:00Z"));
    let event: RunAtEvent = serde_json::from_value(input).expect("the event the api reads back");
    api.env.clock.set(t("2026-03-10T15:30:02Z"));
    let first = api.api.fire_run_at(&event).await.expect("fired");
    let second = api.api.fire_run_at(&event).await.expect("fired again");
    assert_eq!(first["created"], true);
    assert_eq!(second["created"], false);
    assert_eq!(first["run"]["run_id"], second["run"]["run_id"]);
    assert_eq!(first["run"]["scheduled_for"], "2026-03-10T15:00:00Z");
    assert_eq!(first["run"]["trigger"], "MANUAL");
    // The one-off run is the schedule's business: its note is in the schedule's log; the
    // system log keeps the kill switch alone.
    let audit = api.get(VIEWER, "/v1/schedules/s1/audit").await;
    assert!(audit.body["entries"].as_array().is_some_and(|e| e
        .iter()
        .any(|x| x["action"] == "RUN_AT" && x["reason"] == "after the vendor window")));
    let system = api.get(VIEWER, "/v1/system/audit").await;
    assert_eq!(system.body["entries"].as_array().map(Vec::len), Some(2));
    let _ = api.env.clock.now_value();
}

#[tokio::test]
async fn a_forced_run_executes_past_already_done_and_an_unforced_one_does_not() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, schedule_doc("s1", "0 * * * *")).await;
    let first = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs",
            Some(json!({"mode": "new"})),
        )
        .await;
    drain(&api, Lane::Manual).await;
    let path = |a: &cronledger_tests::api::Answer| {
        format!(
            "/v1/schedules/s1/runs/{}",
            a.body["run"]["run_id"].as_str().unwrap_or("")
        )
    };
    let done = api.get(VIEWER, &path(&first)).await;
    assert_eq!(done.body["status"], "SUCCESS");

    // Forced: a second run of the same window executes.
    let forced = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs",
            Some(json!({"mode": "new"})),
        )
        .await;
    drain(&api, Lane::Manual).await;
    let ran = api.get(VIEWER, &path(&forced)).await;
    assert_eq!(ran.body["status"], "SUCCESS", "{:?}", ran.body);
    assert_eq!(ran.body["forced"], true);

    // Not forced: the same window's key already succeeded, so it ends ALREADY_DONE.
    let stored = api.env.store.get_schedule("s1").await.expect("schedule");
    let schedule = cronledger_core::Schedule::new(stored.spec).expect("compiles");
    let mut run = cronledger_app::runs::new_run_with_origin(
        &schedule,
        1,
        t("2026-03-10T12:00:00Z"),
        cronledger_core::Trigger::Manual,
        Origin::Manual("again".into()),
        t(NOW),
    );
    run.lane = Some(Lane::Manual);
    api.env.store.create_run(&run).await.expect("run");
    api.env.resend(&run).await;
    drain(&api, Lane::Manual).await;
    let skipped = api.env.run(&run.key).await;
    assert_eq!(skipped.status, RunStatus::Skipped);
    assert_eq!(skipped.reason, Some(cronledger_core::Reason::AlreadyDone));
}
