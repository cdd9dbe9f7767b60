//! The api's boundary against the emulator: ids no resource can have are refused before the
//! table sees them, on every route; a server-side failure answers INTERNAL with a request id
//! and never the AWS text; cursors only open for the query that issued them; and a verify of
//! a 99,000-window backfill stays under 1 MB a page.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use cronledger_app::api::request::RESPONSE_MAX_BYTES;
use cronledger_app::api::Api;
use cronledger_aws::DynamoLedger;
use cronledger_tests::api::{Answer, ApiEnv, ADMIN, OPERATOR, VIEWER};
use cronledger_tests::t;
use serde_json::{json, Value};

const NOW: &str = "2026-03-10T12:00:30Z";

/// Texts of AWS SDK errors no answer may carry.
const SDK_TEXTS: &[&str] = &[
    "service error",
    "ValidationException",
    "dispatch failure",
    "ResourceNotFoundException",
    "STORE_REQUEST_FAILED:",
];

fn schedule_doc(id: &str, cron: &str) -> Value {
    json!({"id": id, "cron": cron, "timezone": "UTC", "owner": "tests", "overlap": "ALLOW",
           "job": {"type": "noop"}})
}

async fn create(api: &ApiEnv, id: &str, cron: &str) {
    let a = api
        .post(ADMIN, "/v1/schedules", Some(schedule_doc(id, cron)))
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.body);
}

fn assert_no_sdk_text(a: &Answer) {
    let text = a.body.to_string();
    for sdk in SDK_TEXTS {
        assert!(!text.contains(sdk), "{sdk} in {text}");
    }
}

/// Every route of the OpenAPI document with a path id, its method and template.
async fn routes_with_ids(api: &ApiEnv) -> Vec<(Method, String)> {
    let doc = api.get(VIEWER, "/openapi.json").await.body;
    let mut found = Vec::new();
    for (path, ops) in doc["paths"].as_object().into_iter().flatten() {
        if !path.contains('{') {
            continue;
        }
        for method in ops.as_object().into_iter().flatten().map(|(m, _)| m) {
            let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes());
            found.push((method.expect("a method"), path.clone()));
        }
    }
    found
}

#[tokio::test]
async fn ids_no_resource_can_have_are_not_found_on_every_route_for_every_role() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, "real", "0 2 * * *").await;
    let long = "a".repeat(2100);
    let run_suffix = format!("2026-03-01T02:00:00Z~M~{}", "r".repeat(1000));
    let routes = routes_with_ids(&api).await;
    assert!(routes.len() >= 15, "{routes:?}");
    let mut checked = 0;
    for (method, template) in &routes {
        // Each id in turn is the bad one; the others are well-formed.
        for bad in ["{id}", "{backfill}", "{run}", "{calendar}"] {
            if !template.contains(bad) {
                continue;
            }
            let path = template
                .replace("{id}", if bad == "{id}" { &long } else { "real" })
                .replace("{backfill}", &long)
                .replace("{run}", &run_suffix)
                .replace("{calendar}", &long);
            for who in [ADMIN, VIEWER] {
                let a = api
                    .call(Some(who), method.clone(), &path, Some(json!({})))
                    .await;
                assert_no_sdk_text(&a);
                if a.status == StatusCode::FORBIDDEN {
                    continue;
                }
                let expected = match bad {
                    "{id}" => "SCHEDULE_NOT_FOUND",
                    "{backfill}" => "BACKFILL_NOT_FOUND",
                    "{calendar}" => "CALENDAR_NOT_FOUND",
                    _ => "RUN_NOT_FOUND",
                };
                assert_eq!(
                    (a.status, a.code()),
                    (StatusCode::NOT_FOUND, expected),
                    "{method} {template} as {who}: {:?}",
                    a.body
                );
                assert!(a.body.to_string().len() < 400, "{:?}", a.body);
                checked += 1;
            }
        }
    }
    assert!(checked >= 15, "{checked}");
}

#[tokio::test]
async fn a_store_failure_answers_internal_with_a_request_id_and_no_aws_text() {
    let api = ApiEnv::new(t(NOW)).await;
    // The same api on a table that does not exist: every store call fails inside AWS.
    let mut deps = api.api.deps().clone();
    deps.store = Arc::new(DynamoLedger::new(
        &api.env.ledger.clients,
        format!("{}-missing", api.env.ledger.table),
        4,
    ));
    let broken = Api::new(deps).router();
    let broken = ApiEnv {
        router: broken,
        ..api
    };
    for path in [
        "/v1/schedules/real",
        "/v1/schedules",
        "/v1/schedules/real/runs",
    ] {
        let a = broken.get(VIEWER, path).await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
            "{path}: {:?}",
            a.body
        );
        assert_no_sdk_text(&a);
        let id = a.body["details"]["request_id"].as_str().unwrap_or("");
        assert!(!id.is_empty(), "{:?}", a.body);
        assert_eq!(a.headers["x-request-id"], id);
    }
}

/// The `next` of a listing page.
fn next_of(a: &Answer) -> String {
    a.body["next"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_cursor_opens_only_for_the_query_that_issued_it() {
    let api = ApiEnv::new(t(NOW)).await;
    for id in ["alpha", "beta"] {
        create(&api, id, "0 2 * * *").await;
        for _ in 0..3 {
            let a = api
                .post(
                    OPERATOR,
                    &format!("/v1/schedules/{id}/runs"),
                    Some(json!({"mode": "new"})),
                )
                .await;
            assert!(a.status.is_success(), "{:?}", a.body);
        }
    }
    let first = api.get(VIEWER, "/v1/schedules/alpha/runs?limit=1").await;
    let cursor = next_of(&first);
    assert!(!cursor.is_empty(), "{:?}", first.body);

    // Its own query continues with the next run.
    let second = api
        .get(
            VIEWER,
            &format!("/v1/schedules/alpha/runs?limit=1&cursor={cursor}"),
        )
        .await;
    assert_eq!(second.status, StatusCode::OK, "{:?}", second.body);
    assert_ne!(second.body["items"][0], first.body["items"][0]);

    let schedules = api.get(VIEWER, "/v1/schedules?limit=1").await;
    let schedules_cursor = next_of(&schedules);
    assert!(!schedules_cursor.is_empty());
    let mut altered = cursor.clone();
    altered.insert(2, 'x');
    for path in [
        // Another schedule, another filter, another route, altered, not a cursor at all.
        format!("/v1/schedules/beta/runs?limit=1&cursor={cursor}"),
        format!("/v1/schedules/alpha/runs?limit=1&status=FAILED&cursor={cursor}"),
        format!("/v1/schedules?cursor={cursor}"),
        format!("/v1/schedules/alpha/runs?cursor={schedules_cursor}"),
        format!("/v1/schedules/alpha/audit?cursor={cursor}"),
        format!("/v1/schedules/alpha/runs?cursor={altered}"),
        "/v1/schedules/alpha/runs?cursor=7b22504b223a22227d".to_string(),
    ] {
        let a = api.get(VIEWER, &path).await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::BAD_REQUEST, "CURSOR_INVALID"),
            "{path}: {:?}",
            a.body
        );
    }
}

#[tokio::test]
async fn verify_of_a_99_000_window_backfill_answers_pages_under_1_mb() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, "minutely", "* * * * *").await;
    // Every minute from noon on 2025-12-31 to now: 99,361 windows, none run yet (all MISSING).
    let created = api
        .post(
            OPERATOR,
            "/v1/schedules/minutely/backfills",
            Some(json!({"from": "2025-12-31T12:00:00Z", "to": NOW})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let id = created.body["id"].as_str().expect("an id").to_string();
    let path = format!("/v1/backfills/{id}/verify");

    let first = api.get(VIEWER, &path).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    let bytes = serde_json::to_vec(&first.body).expect("json").len();
    println!("verify page: {bytes} bytes");
    assert!(bytes < RESPONSE_MAX_BYTES, "{bytes}");
    let windows = first.body["expected_windows"].as_u64().unwrap_or(0);
    assert!(windows > 99_000, "{windows}");
    assert_eq!(first.body["missing"], windows);
    assert_eq!(first.body["problems_total"], windows);
    assert_eq!(first.body["truncated"], true);
    let problems = first.body["problems"].as_array().map(Vec::len);
    assert_eq!(problems, Some(1000));

    let cursor = first.body["next_cursor"].as_str().unwrap_or_default();
    let second = api.get(VIEWER, &format!("{path}?cursor={cursor}")).await;
    assert_eq!(second.status, StatusCode::OK, "{:?}", second.body);
    assert_eq!(
        second.body["problems"][0]["scheduled_for"], "2026-01-01T04:40:00Z",
        "the second page starts at the 1001st window"
    );
    let foreign = api
        .get(
            VIEWER,
            &format!("/v1/schedules/minutely/runs?cursor={cursor}"),
        )
        .await;
    assert_eq!(foreign.code(), "CURSOR_INVALID");
}
