//! The remote commands read each api answer as its contract type: an answer with a field the
//! contract does not know, or without one it requires, is refused with an error that names
//! the route and the field (never printed as `-`). A stand-in api on 127.0.0.1 (any free
//! port) answers with a well-formed `ScheduleView` and with broken ones (no emulator needed).

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use chrono::TimeZone;
use cronledger_contract::{Page, ScheduleView};
use cronledger_ledger::ledger::ScheduleState;

use super::*;

/// A stored schedule as the api shows it.
fn view(id: &str) -> ScheduleView {
    let at = Utc
        .with_ymd_and_hms(2026, 3, 1, 2, 0, 0)
        .single()
        .expect("an instant");
    ScheduleView {
        id: id.into(),
        version: 3,
        state: ScheduleState::Active,
        describe: Some("at minute 0 of every hour (UTC)".into()),
        spec: cronledger_tests::spec(id, "0 * * * *"),
        next_run_at: Some(at),
        ends_at: None,
        reconciled_through: at,
        downstream: Vec::new(),
        pauses: Vec::new(),
        created_at: at,
        updated_at: at,
        health: None,
    }
}

fn as_json(view: &ScheduleView) -> Value {
    serde_json::to_value(view).expect("a view is JSON")
}

/// `fine`: a well-formed answer; `surprise`: one field more; `versionless`: one field less;
/// `listing`: a page whose item has one field more.
async fn answer(Path(id): Path<String>) -> (StatusCode, Json<Value>) {
    let mut body = as_json(&view(&id));
    let fields = body.as_object_mut().expect("an object");
    match id.as_str() {
        "fine" => {}
        "surprise" => {
            fields.insert("surprise".into(), json!(1));
        }
        "versionless" => {
            fields.remove("version");
        }
        _ => {
            return (
                StatusCode::NOT_FOUND,
                Json(
                    json!({"code": "SCHEDULE_NOT_FOUND", "message": "no schedule", "details": null}),
                ),
            )
        }
    }
    (StatusCode::OK, Json(body))
}

async fn listing() -> Json<Value> {
    let mut item = as_json(&view("listed"));
    item.as_object_mut()
        .expect("an object")
        .insert("renamed_field".into(), json!("x"));
    let page = Page {
        items: vec![as_json(&view("fine")), item],
        next: None,
    };
    Json(serde_json::to_value(page).expect("a page is JSON"))
}

/// The stand-in api, its base URL.
async fn stand_in() -> String {
    listen(
        Router::new()
            .route("/v1/schedules", get(listing))
            .route("/v1/schedules/{id}", get(answer)),
    )
    .await
}

/// The CLI failed, printed nothing, and its error names the route and `words`.
fn refused(out: &Out, route: &str, words: &str) {
    assert_eq!(
        out.code, 1,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert_eq!(out.stdout, "", "{}", out.stderr);
    assert!(
        out.stderr.starts_with("REMOTE_ANSWER_UNREADABLE: ")
            && out.stderr.contains(route)
            && out.stderr.contains(words),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_with_an_unknown_or_missing_field_is_refused_naming_it() {
    let url = stand_in().await;

    // The stand-in's well-formed answer reads, as a table and as the same JSON.
    let fine = cli_at(&url, &["get", "fine"]).await;
    assert_eq!(fine.code, 0, "{}", fine.stderr);
    assert!(
        fine.stdout
            .contains("fine  3        ACTIVE  0 * * * *  UTC       2026-03-01T02:00:00Z"),
        "{}",
        fine.stdout
    );
    let json = cli_at(&url, &["get", "fine", "--format", "json"]).await;
    assert_eq!(json.code, 0, "{}", json.stderr);
    let printed: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(printed, as_json(&view("fine")));

    let surprise = cli_at(&url, &["get", "surprise"]).await;
    refused(
        &surprise,
        "GET /v1/schedules/surprise answered 200",
        "not a ScheduleView: unknown field `surprise`",
    );
    let versionless = cli_at(&url, &["get", "versionless", "--format", "json"]).await;
    refused(
        &versionless,
        "GET /v1/schedules/versionless answered 200",
        "not a ScheduleView: missing field `version`",
    );
    // A listing's item too: `get` and `status` read every page.
    for args in [&["get"][..], &["status"]] {
        let listed = cli_at(&url, args).await;
        refused(
            &listed,
            "GET /v1/schedules?limit=200",
            "not a Page<ScheduleView>: unknown field `renamed_field`",
        );
    }

    // An error answer still reads as the api's code and message.
    let missing = cli_at(&url, &["get", "gone"]).await;
    assert_eq!(missing.code, 1);
    assert_eq!(
        missing.stderr.trim_end(),
        "SCHEDULE_NOT_FOUND: no schedule (HTTP 404)"
    );
}
