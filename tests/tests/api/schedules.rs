//! Schedules through the api: CRUD under If-Match with preview, diff and audit, a high-risk
//! update needing confirmation, bad input of every kind, and every role allowed and refused.

use super::*;

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
    assert_eq!(
        invalid.body["details"]["issues"][0]["id"], "s2",
        "each issue names its schedule"
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
    assert_eq!(doc.body["openapi"], "3.1.0");
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

/// An admin's update of a schedule still at its first version.
async fn update_first_version(api: &ApiEnv, path: &str, doc: Value) -> Answer {
    api.call_with(
        Some(Caller::new(ADMIN)),
        Method::PUT,
        path,
        Some(doc),
        &[("If-Match", "\"1\"")],
    )
    .await
}

/// `after` through the api is checked against the stored schedules: an unknown or archived
/// upstream, a cycle and a different window grid are refused with their codes, and a
/// dependent is never due; its upstream's view lists it once the reconciler has kept it.
#[tokio::test]
async fn dependencies_are_checked_against_the_stored_schedules() {
    let api = ApiEnv::new(t(NOW)).await;
    let with_after = |id: &str, cron: &str, after: &[&str]| {
        let mut doc = schedule_doc(id, cron);
        doc["after"] = json!(after);
        doc
    };
    create(&api, schedule_doc("collect", "0 * * * *")).await;
    let refused = |body: &Answer| {
        assert_eq!(
            body.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{:?}",
            body.body
        );
        body.code().to_string()
    };
    let unknown = api
        .post(
            ADMIN,
            "/v1/schedules",
            Some(with_after("report", "0 * * * *", &["nobody"])),
        )
        .await;
    assert_eq!(refused(&unknown), "DEPENDENCY_UNKNOWN_UPSTREAM");
    let grid = api
        .post(
            ADMIN,
            "/v1/schedules",
            Some(with_after("report", "30 * * * *", &["collect"])),
        )
        .await;
    assert_eq!(refused(&grid), "DEPENDENCY_GRID_MISMATCH");

    let aggregate = create(&api, with_after("aggregate", "0 * * * *", &["collect"])).await;
    assert_eq!(aggregate["next_run_at"], Value::Null);
    create(&api, with_after("report", "0 * * * *", &["aggregate"])).await;

    // collect after report would close collect -> aggregate -> report -> collect.
    let cycle = update_first_version(
        &api,
        "/v1/schedules/collect",
        with_after("collect", "0 * * * *", &["report"]),
    )
    .await;
    assert_eq!(refused(&cycle), "DEPENDENCY_CYCLE");

    // Once the reconciler kept the lists, moving collect to another grid is refused too.
    api.env
        .store
        .set_downstream("collect", &["aggregate".to_string()])
        .await
        .expect("downstream");
    let listed = api.get(VIEWER, "/v1/schedules/collect").await;
    assert_eq!(listed.body["downstream"], json!(["aggregate"]));
    let moved = update_first_version(
        &api,
        "/v1/schedules/collect?confirm=high-risk",
        schedule_doc("collect", "5 * * * *"),
    )
    .await;
    assert_eq!(refused(&moved), "DEPENDENCY_GRID_MISMATCH");

    // Archiving an upstream others still run after is refused, naming them.
    let archive = api
        .post(
            ADMIN,
            "/v1/schedules/collect/archive",
            Some(json!({"note": "retire"})),
        )
        .await;
    assert_eq!(archive.status, StatusCode::CONFLICT, "{:?}", archive.body);
    assert_eq!(archive.code(), "SCHEDULE_HAS_DEPENDENTS");
    assert_eq!(archive.body["details"]["dependents"], json!(["aggregate"]));
}

/// A dependent written without `cron` and `timezone` takes its upstream's grid and is stored
/// with it; it keeps it, so moving the upstream to another grid is refused while it runs
/// after it. Two upstreams on different grids need the dependent's own `cron`, and issues
/// name the schedule by its id.
#[tokio::test]
async fn a_dependent_without_cron_inherits_its_stored_upstreams_grid() {
    let api = ApiEnv::new(t(NOW)).await;
    let mut collect = schedule_doc("collect", "15 * * * *");
    collect["timezone"] = json!("Asia/Seoul");
    create(&api, collect).await;
    create(&api, schedule_doc("hourly", "0 * * * *")).await;
    let dependent = |id: &str, after: &[&str]| json!({"id": id, "after": after, "owner": "tests", "job": {"type": "noop"}});
    let created = create(&api, dependent("aggregate", &["collect"])).await;
    assert_eq!(
        (&created["spec"]["cron"], &created["spec"]["timezone"]),
        (&json!("15 * * * *"), &json!("Asia/Seoul")),
        "stored with the grid it inherited"
    );
    assert_eq!(
        created["next_run_at"],
        Value::Null,
        "a dependent is never due"
    );
    // Through a chain of stored schedules, and on an update that leaves the grid out too.
    let report = create(&api, dependent("report", &["aggregate"])).await;
    assert_eq!(report["spec"]["cron"], "15 * * * *");
    let mut edited = dependent("report", &["aggregate"]);
    edited["grace"] = json!("5m");
    let updated = update_first_version(&api, "/v1/schedules/report", edited).await;
    assert_eq!(updated.status, StatusCode::OK, "{:?}", updated.body);
    assert_eq!(updated.body["spec"]["timezone"], "Asia/Seoul");

    let refused = |answer: &Answer| {
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{:?}",
            answer.body
        );
        answer.body["details"]["issues"][0].clone()
    };
    let mixed = api
        .post(
            ADMIN,
            "/v1/schedules",
            Some(dependent("join", &["collect", "hourly"])),
        )
        .await;
    let issue = refused(&mixed);
    assert_eq!(
        (&issue["code"], &issue["field"], &issue["id"]),
        (
            &json!("DEPENDENCY_GRID_MISMATCH"),
            &json!("after"),
            &json!("join")
        )
    );
    let unknown = api
        .post(ADMIN, "/v1/schedules", Some(dependent("lost", &["nobody"])))
        .await;
    assert_eq!(refused(&unknown)["code"], "DEPENDENCY_UNKNOWN_UPSTREAM");

    // The upstream cannot move while its dependent keeps the old grid.
    api.env
        .store
        .set_downstream("collect", &["aggregate".to_string()])
        .await
        .expect("downstream");
    let moved = update_first_version(
        &api,
        "/v1/schedules/collect?confirm=high-risk",
        schedule_doc("collect", "15 * * * *"),
    )
    .await;
    let issue = refused(&moved);
    assert_eq!(
        (&issue["code"], &issue["id"]),
        (&json!("DEPENDENCY_GRID_MISMATCH"), &json!("collect"))
    );
}
