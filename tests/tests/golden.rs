//! `/v1` answers are a promise: one golden JSON file per answer type (tests/golden/), taken
//! from a real answer, and this test replays the same requests and checks that today's
//! answers still read as the golden ones: every field a golden answer has is still there
//! with the same JSON type (fields may be added, never removed or retyped). Values (ids,
//! instants) are not compared. `CRONLEDGER_BLESS_GOLDEN=1` writes a missing file (a new
//! answer type); an existing one is never rewritten by the test: changing a promise is a
//! deliberate edit of its file.

use std::path::{Path, PathBuf};

use axum::http::{Method, StatusCode};
use cronledger_core::{Reason, RunStatus};
use cronledger_tests::api::{Answer, ApiEnv, ADMIN, OPERATOR, VIEWER};
use cronledger_tests::t;
use serde_json::{json, Value};

const NOW: &str = "2026-03-10T12:00:30Z";

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

/// Where `today` no longer reads as `golden`, as `path: what`.
fn incompatibilities(golden: &Value, today: &Value, path: &str, out: &mut Vec<String>) {
    match (golden, today) {
        // A null promised nothing about the type; a field may be null today where the golden
        // answer had a value (the answers' nullable fields are so documented).
        (Value::Null, _) | (_, Value::Null) => {}
        (Value::Object(g), Value::Object(t)) => {
            for (key, value) in g {
                match t.get(key) {
                    Some(now) => incompatibilities(value, now, &format!("{path}.{key}"), out),
                    None => out.push(format!("{path}.{key}: removed")),
                }
            }
        }
        (Value::Array(g), Value::Array(t)) => {
            if let (Some(g), Some(t)) = (g.first(), t.first()) {
                incompatibilities(g, t, &format!("{path}[0]"), out);
            }
        }
        (Value::Bool(_), Value::Bool(_))
        | (Value::String(_), Value::String(_))
        | (Value::Number(_), Value::Number(_)) => {}
        (g, t) => out.push(format!("{path}: was {}, now {}", kind(g), kind(t))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks one answer against its golden file (written when missing and blessing).
fn promise(name: &str, answer: &Answer, status: StatusCode, failures: &mut Vec<String>) {
    assert_eq!(answer.status, status, "{name}: {:?}", answer.body);
    let file = golden_dir().join(format!("{name}.json"));
    let golden: Value = match std::fs::read_to_string(&file) {
        Ok(text) => serde_json::from_str(&text).expect("a golden file is JSON"),
        Err(_) if std::env::var("CRONLEDGER_BLESS_GOLDEN").is_ok() => {
            let text = serde_json::to_string_pretty(&answer.body).expect("JSON") + "\n";
            std::fs::write(&file, text).expect("write the golden file");
            return;
        }
        Err(_) => {
            failures.push(format!(
                "{name}: no golden file {} (CRONLEDGER_BLESS_GOLDEN=1 writes it)",
                file.display()
            ));
            return;
        }
    };
    let mut found = Vec::new();
    incompatibilities(&golden, &answer.body, name, &mut found);
    failures.extend(found);
}

#[test]
fn the_comparison_finds_a_removed_and_a_retyped_field_and_allows_an_added_one() {
    let golden = json!({"id": "a", "n": 1, "items": [{"at": "x"}]});
    let mut out = Vec::new();
    incompatibilities(
        &golden,
        &json!({"id": "b", "n": 2, "items": [{"at": "y", "new": 1}], "more": true}),
        "A",
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
    incompatibilities(
        &golden,
        &json!({"n": "2", "items": [{"at": 5}]}),
        "A",
        &mut out,
    );
    assert_eq!(
        out,
        [
            "A.id: removed",
            "A.items[0].at: was a string, now a number",
            "A.n: was a number, now a string"
        ]
    );
}

/// Writes `run` and fails it (a run is never created FAILED).
async fn fail(api: &ApiEnv, run: &cronledger_core::Run) {
    use cronledger_aws::ledger::{Opening, RunChange};
    let store = api.env.store.as_ref();
    let at = t(NOW);
    store.create_run(run).await.expect("run");
    let enqueue = RunChange::enqueue(RunStatus::Pending, 0, at);
    store
        .transition_run(&run.key, &enqueue)
        .await
        .expect("enqueue");
    let start = RunChange::open(Opening::Start, RunStatus::Queued, 0, at, "w", at);
    store.transition_run(&run.key, &start).await.expect("start");
    let fail = cronledger_tests::bare(cronledger_core::RunEvent::Fail, RunStatus::Running, 1, at);
    store.transition_run(&run.key, &fail).await.expect("fail");
}

#[tokio::test]
async fn todays_answers_still_read_as_the_golden_ones() {
    let api = ApiEnv::new(t(NOW)).await;
    let mut failures = Vec::new();
    let doc = json!({"id": "s1", "cron": "0 * * * *", "timezone": "Asia/Seoul", "owner": "tests",
        "overlap": "ALLOW", "slo": {"within": "30m", "target": "99%"},
        "job": {"type": "steps", "steps": [{"name": "extract", "type": "noop"}, {"name": "load", "type": "noop"}]}});
    let created = api.post(ADMIN, "/v1/schedules", Some(doc.clone())).await;
    promise("ScheduleView", &created, StatusCode::CREATED, &mut failures);
    let one = api.get(VIEWER, "/v1/schedules/s1").await;
    promise("ScheduleView.health", &one, StatusCode::OK, &mut failures);
    let page = api.get(VIEWER, "/v1/schedules").await;
    promise("ScheduleViewPage", &page, StatusCode::OK, &mut failures);
    let preview = api
        .post(
            VIEWER,
            "/v1/preview",
            Some(json!({"schedule": doc, "count": 2})),
        )
        .await;
    promise("Preview", &preview, StatusCode::OK, &mut failures);
    let mut changed = doc.clone();
    changed["cron"] = json!("*/30 * * * *");
    let diff = api
        .post(VIEWER, "/v1/schedules/s1/diff", Some(changed))
        .await;
    promise("ChangeDiff", &diff, StatusCode::OK, &mut failures);

    // Calendars: created, listed, deleted (no schedule names it), and its log, which stays.
    let calendar = api
        .put(
            OPERATOR,
            "/v1/calendars/holidays",
            Some(json!({"exclude": ["2026-12-25", "2026-12-31..2027-01-01"]})),
        )
        .await;
    promise(
        "CalendarView",
        &calendar,
        StatusCode::CREATED,
        &mut failures,
    );
    let calendars = api.get(VIEWER, "/v1/calendars").await;
    promise(
        "CalendarViewPage",
        &calendars,
        StatusCode::OK,
        &mut failures,
    );
    let removed = api.delete(OPERATOR, "/v1/calendars/holidays", None).await;
    promise("CalendarDeleted", &removed, StatusCode::OK, &mut failures);
    let calendar_log = api.get(VIEWER, "/v1/calendars/holidays/audit").await;
    promise(
        "CalendarAuditLog",
        &calendar_log,
        StatusCode::OK,
        &mut failures,
    );

    // Runs: an operator's run, its view with attempts, the history.
    let run = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs",
            Some(json!({"note": "golden"})),
        )
        .await;
    promise("RunOutcome", &run, StatusCode::CREATED, &mut failures);
    let run_id = run.body["run"]["run_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let view = api
        .get(VIEWER, &format!("/v1/schedules/s1/runs/{run_id}"))
        .await;
    promise("RunView", &view, StatusCode::OK, &mut failures);
    let history = api.get(VIEWER, "/v1/schedules/s1/runs").await;
    promise("RunViewPage", &history, StatusCode::OK, &mut failures);

    // An approval of a held run.
    let spec = api.env.store.get_schedule("s1").await.expect("s1").spec;
    let mut held =
        cronledger_tests::scheduled_run(&spec, t("2026-03-10T08:00:00Z"), t(NOW), "tests");
    held.status = RunStatus::ManualRequired;
    held.reason = Some(Reason::PolicyManual);
    api.env.store.create_run(&held).await.expect("held run");
    let approved = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/runs/2026-03-10T08:00:00Z/approve",
            Some(json!({"note": "golden"})),
        )
        .await;
    promise("ApprovalOutcome", &approved, StatusCode::OK, &mut failures);

    // Backfills: the plan, the created one, the list, the verification.
    let range =
        json!({"from": "2026-03-09T00:00:00Z", "to": "2026-03-09T03:00:00Z", "note": "golden"});
    let mut dry = range.clone();
    dry["dry_run"] = json!(true);
    let plan = api
        .post(OPERATOR, "/v1/schedules/s1/backfills", Some(dry))
        .await;
    promise("BackfillPlan", &plan, StatusCode::OK, &mut failures);
    let backfill = api
        .post(OPERATOR, "/v1/schedules/s1/backfills", Some(range))
        .await;
    promise(
        "BackfillView",
        &backfill,
        StatusCode::CREATED,
        &mut failures,
    );
    let id = backfill.body["id"].as_str().unwrap_or_default().to_string();
    let list = api.get(VIEWER, "/v1/backfills").await;
    promise("BackfillSummaryPage", &list, StatusCode::OK, &mut failures);
    let verify = api.get(VIEWER, &format!("/v1/backfills/{id}/verify")).await;
    promise("Verification", &verify, StatusCode::OK, &mut failures);

    // The completeness audit: a schedule with a window missing, one run twice, one entry off
    // its grid.
    let audited = cronledger_tests::spec("audited", "0 * * * *");
    let meta = cronledger_aws::ChangeMeta {
        actor: "tests".into(),
        reason: "golden".into(),
        at: t("2026-03-10T00:00:00Z"),
        details: None,
    };
    let store = api.env.store.as_ref();
    store
        .create_schedule(audited.clone(), meta)
        .await
        .expect("audited");
    for at in ["2026-03-10T01:00:00Z", "2026-03-10T01:30:00Z"] {
        let run = cronledger_tests::scheduled_run(&audited, t(at), t(at), "tests");
        store.create_run(&run).await.expect("entry");
    }
    let at = t("2026-03-10T02:00:00Z");
    let ran = cronledger_tests::ended_run(store, &audited, at, cronledger_core::RunEvent::Succeed);
    let mut again = cronledger_tests::manual_run(&ran.await, "golden");
    (again.status, again.attempts, again.lease_epoch) = (RunStatus::Queued, 0, 0);
    store.create_run(&again).await.expect("manual run");
    let start = cronledger_aws::RunChange::open(
        cronledger_aws::ledger::Opening::Start,
        RunStatus::Queued,
        0,
        at,
        "w",
        t(NOW),
    );
    store
        .transition_run(&again.key, &start)
        .await
        .expect("start");
    let audit = api
        .get(
            VIEWER,
            "/v1/audit/completeness?from=2026-03-10T00:00:00Z&to=2026-03-10T04:00:00Z&schedule=audited",
        )
        .await;
    promise("CompletenessReport", &audit, StatusCode::OK, &mut failures);

    // The audit log, the system, the caller, an error.
    let audit = api.get(VIEWER, "/v1/schedules/s1/audit").await;
    promise("AuditLog", &audit, StatusCode::OK, &mut failures);
    let engaged = api
        .post(
            ADMIN,
            "/v1/system/kill-switch",
            Some(json!({"engaged": true, "note": "golden"})),
        )
        .await;
    promise("SystemStatus", &engaged, StatusCode::OK, &mut failures);
    let system_audit = api.get(VIEWER, "/v1/system/audit").await;
    promise("SystemAudit", &system_audit, StatusCode::OK, &mut failures);

    // Replays: the plan and the created one of a failed run of s1.
    let failed = cronledger_tests::scheduled_run(&spec, t("2026-03-10T07:00:00Z"), t(NOW), "tests");
    fail(&api, &failed).await;
    let filter = json!({"schedule": "s1", "status": ["FAILED"], "from": "2026-03-10T00:00:00Z",
        "to": "2026-03-10T12:00:00Z", "include_non_idempotent": true, "note": "golden"});
    let mut dry = filter.clone();
    dry["dry_run"] = json!(true);
    let plan = api.post(OPERATOR, "/v1/runs/replay", Some(dry)).await;
    promise("ReplayPlan", &plan, StatusCode::OK, &mut failures);
    let replay = api.post(OPERATOR, "/v1/runs/replay", Some(filter)).await;
    promise("ReplayView", &replay, StatusCode::CREATED, &mut failures);
    let me = api.get(OPERATOR, "/v1/whoami").await;
    promise("WhoAmI", &me, StatusCode::OK, &mut failures);
    let missing = api.get(VIEWER, "/v1/schedules/nope").await;
    promise("ErrorBody", &missing, StatusCode::NOT_FOUND, &mut failures);
    let stale = api
        .call(Some(ADMIN), Method::PUT, "/v1/schedules/s1", Some(doc))
        .await;
    promise(
        "ErrorBody.if_match",
        &stale,
        StatusCode::BAD_REQUEST,
        &mut failures,
    );

    assert!(
        failures.is_empty(),
        "answers that no longer read as their golden files (tests/golden/):\n{}",
        failures.join("\n")
    );
}
