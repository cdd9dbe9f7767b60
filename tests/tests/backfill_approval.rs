//! Backfills of side-effecting schedules wait for an admin when they are large or reach back
//! before the schedule existed (issue 17, point 7): created PAUSED with the reasons, the dry
//! run says so, a plain resume is refused, and an admin's approval (noted, audited) starts it.

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::Duration;
use cronledger_app::alerting::Alerter;
use cronledger_app::api::ApiConfig;
use cronledger_aws::notify::MemoryNotifier;
use cronledger_core::alerts::AlertKind;
use cronledger_core::run::Origin;
use cronledger_tests::api::{Answer, ApiEnv, NowValue, ADMIN, OPERATOR, VIEWER};
use cronledger_tests::reconcile::{reconcile, reconciler, reconciler_config, FakeSignals};
use cronledger_tests::t;
use serde_json::{json, Value};

const NOW: &str = "2026-03-10T12:00:30Z";

async fn schedule(api: &ApiEnv, id: &str, cron: &str, side_effects: bool) {
    let doc = json!({"id": id, "cron": cron, "timezone": "UTC", "owner": "tests",
                     "overlap": "ALLOW", "side_effects": side_effects, "job": {"type": "noop"}});
    let a = api.post(ADMIN, "/v1/schedules", Some(doc)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.body);
}

async fn backfill_runs(api: &ApiEnv, schedule: &str, backfill: &str) -> usize {
    api.env
        .store
        .runs_between(
            schedule,
            t("2026-03-01T00:00:00Z"),
            api.env.clock.now_value(),
        )
        .await
        .expect("runs")
        .iter()
        .filter(|r| matches!(&r.key.origin, Origin::Backfill(b) if b == backfill))
        .count()
}

/// An operator's backfill request over `range` (a dry run when `dry_run`).
async fn ask(api: &ApiEnv, schedule: &str, range: &Value, dry_run: bool) -> Answer {
    let mut body = range.clone();
    body["dry_run"] = json!(dry_run);
    let path = format!("/v1/schedules/{schedule}/backfills");
    let answer = api.post(OPERATOR, &path, Some(body)).await;
    let expected = if dry_run {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    assert_eq!(answer.status, expected, "{:?}", answer.body);
    answer
}

/// The api with an approval limit of three windows.
fn approval_over_three() -> ApiConfig {
    ApiConfig {
        backfill_approval_over: 3,
        ..ApiConfig::default()
    }
}

fn id_of(body: &Value) -> String {
    body["id"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_backfill_before_the_schedule_existed_waits_for_an_admin() {
    let api = ApiEnv::new(t(NOW)).await;
    schedule(&api, "early", "0 * * * *", true).await;
    let range = json!({"from": "2026-03-10T08:00:00Z", "to": "2026-03-10T10:00:00Z", "rate_per_minute": 100});

    let plan = ask(&api, "early", &range, true).await;
    assert_eq!(plan.body["approval_required"], true);
    assert_eq!(
        plan.body["approval_reasons"],
        json!(["BEFORE_SCHEDULE_CREATED"])
    );

    let created = ask(&api, "early", &range, false).await;
    assert_eq!(created.body["state"], "PAUSED");
    assert_eq!(created.body["approval_required"], true);
    assert_eq!(
        created.body["held"],
        "APPROVAL_REQUIRED: BEFORE_SCHEDULE_CREATED"
    );
    let id = id_of(&created.body);
    api.release().await;
    assert_eq!(backfill_runs(&api, "early", &id).await, 0, "nothing starts");

    // An operator's plain resume does not start it; nor may an operator approve.
    let resume = api
        .post(OPERATOR, &format!("/v1/backfills/{id}/resume"), None)
        .await;
    assert_eq!(resume.status, StatusCode::CONFLICT, "{:?}", resume.body);
    assert_eq!(resume.code(), "BACKFILL_APPROVAL_REQUIRED");
    let approve = format!("/v1/backfills/{id}/approve");
    let by_operator = api
        .post(OPERATOR, &approve, Some(json!({"note": "looks fine"})))
        .await;
    assert_eq!(by_operator.status, StatusCode::FORBIDDEN);
    let without_note = api.post(ADMIN, &approve, Some(json!({"note": " "}))).await;
    assert_eq!(without_note.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(without_note.code(), "NOTE_REQUIRED");
    api.release().await;
    assert_eq!(backfill_runs(&api, "early", &id).await, 0);

    let approved = api
        .post(
            ADMIN,
            &approve,
            Some(json!({"note": "vendor asked for the history"})),
        )
        .await;
    assert_eq!(approved.status, StatusCode::OK, "{:?}", approved.body);
    assert_eq!(approved.body["state"], "RUNNING");
    assert_eq!(approved.body["approval_required"], false);
    assert_eq!(approved.body["approved_by"], ADMIN);
    assert_eq!(approved.body["held"], Value::Null);
    api.release().await;
    assert!(
        backfill_runs(&api, "early", &id).await > 0,
        "it runs once approved"
    );

    let again = api
        .post(ADMIN, &approve, Some(json!({"note": "twice"})))
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    let audit = api.get(VIEWER, "/v1/schedules/early/audit").await;
    assert!(
        audit.body["entries"]
            .as_array()
            .is_some_and(|e| e.iter().any(|x| {
                x["action"] == "BACKFILL_APPROVE"
                    && x["reason"] == "vendor asked for the history"
                    && x["actor"] == ADMIN
            })),
        "{:?}",
        audit.body
    );
    // Once approved, an operator's pause and resume work as for any backfill.
    let pause = api
        .post(OPERATOR, &format!("/v1/backfills/{id}/pause"), None)
        .await;
    assert_eq!(pause.status, StatusCode::OK, "{:?}", pause.body);
    let resume = api
        .post(OPERATOR, &format!("/v1/backfills/{id}/resume"), None)
        .await;
    assert_eq!(resume.status, StatusCode::OK, "{:?}", resume.body);
}

#[tokio::test]
async fn a_backfill_over_the_window_limit_waits_and_one_at_the_limit_starts() {
    let api = ApiEnv::with_config(t("2026-03-10T00:00:30Z"), approval_over_three()).await;
    schedule(&api, "big", "0 * * * *", true).await;
    api.env.clock.set(t(NOW));
    // Four windows after the schedule's creation: over the limit of 3.
    let over = ask(
        &api,
        "big",
        &json!({"from": "2026-03-10T01:00:00Z", "to": "2026-03-10T04:00:00Z"}),
        false,
    )
    .await;
    assert_eq!(over.body["state"], "PAUSED");
    assert_eq!(over.body["approval_reasons"], json!(["OVER_LIMIT"]));
    // Three windows: at the limit, it starts at once.
    let at_limit = ask(
        &api,
        "big",
        &json!({"from": "2026-03-10T05:00:00Z", "to": "2026-03-10T07:00:00Z"}),
        false,
    )
    .await;
    assert_eq!(at_limit.body["state"], "RUNNING");
    assert_eq!(at_limit.body["approval_required"], false);
    assert_eq!(at_limit.body["approval_reasons"], json!([]));
}

#[tokio::test]
async fn a_century_of_history_on_a_new_schedule_is_held_and_the_dry_run_says_why() {
    assert_eq!(ApiConfig::default().backfill_approval_over, 1_000);
    let api = ApiEnv::new(t(NOW)).await;
    schedule(&api, "daily", "0 6 * * *", true).await;
    let range = json!({"from": "1926-01-01T00:00:00Z", "to": "2026-03-10T00:00:00Z"});
    let plan = ask(&api, "daily", &range, true).await;
    assert_eq!(plan.body["approval_required"], true);
    assert_eq!(
        plan.body["approval_reasons"],
        json!(["OVER_LIMIT", "BEFORE_SCHEDULE_CREATED"])
    );
    assert_eq!(plan.body["approval_over"], 1_000);
    let created = ask(&api, "daily", &range, false).await;
    assert_eq!(created.body["state"], "PAUSED");
    api.release().await;
    let id = id_of(&created.body);
    assert_eq!(backfill_runs(&api, "daily", &id).await, 0);
}

#[tokio::test]
async fn a_schedule_without_side_effects_backfills_as_before() {
    let api = ApiEnv::with_config(t(NOW), approval_over_three()).await;
    schedule(&api, "pure", "0 * * * *", false).await;
    let created = ask(
        &api,
        "pure",
        &json!({"from": "2026-03-10T01:00:00Z", "to": "2026-03-10T10:00:00Z"}),
        false,
    )
    .await;
    assert_eq!(created.body["state"], "RUNNING");
    assert_eq!(created.body["approval_required"], false);
    let approve = api
        .post(
            ADMIN,
            &format!("/v1/backfills/{}/approve", id_of(&created.body)),
            Some(json!({"note": "not needed"})),
        )
        .await;
    assert_eq!(approve.status, StatusCode::CONFLICT);
}

/// A backfill waiting for an admin is told to its schedule's owner once, reminded each
/// `alerts.remind_after` while it waits, and never again once approved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_awaiting_approval_is_told_once_then_reminded_until_approved() {
    let created_at = t("2026-03-10T00:00:30Z");
    let api = ApiEnv::with_config(created_at, approval_over_three()).await;
    let doc = json!({"id": "held", "cron": "0 * * * *", "timezone": "UTC", "owner": "team-h",
                     "overlap": "ALLOW", "side_effects": true, "job": {"type": "noop"},
                     "alerts": {"remind_after": "1h"}});
    let a = api.post(ADMIN, "/v1/schedules", Some(doc)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.body);
    let asked_at = t(NOW);
    api.env.clock.set(asked_at);
    let range = json!({"from": "2026-03-10T01:00:00Z", "to": "2026-03-10T06:00:00Z"});
    let created = ask(&api, "held", &range, false).await;
    assert_eq!(created.body["state"], "PAUSED");
    let id = id_of(&created.body);

    let notifier = Arc::new(MemoryNotifier::new());
    let r = reconciler(
        &api.env,
        Arc::new(FakeSignals::default()),
        reconciler_config(),
    )
    .with_backfills(Arc::new(api.env.ledger.ledger.clone()))
    .with_alerts(Arc::new(Alerter::new(
        Arc::new(api.env.ledger.ledger.clone()),
        notifier.clone(),
    )));
    let group = format!("backfill:{id}");
    // (The windows the schedule missed before the backfill, held for approval too, are
    // told and reminded on their own.)
    let told = || -> Vec<String> {
        notifier
            .sent()
            .into_iter()
            .map(|s| s.alert)
            .filter(|a| a.kind == AlertKind::AwaitingApproval && a.subject.starts_with(&group))
            .map(|a| a.subject)
            .collect()
    };
    // Every pass looks; the first tells, the next ones within the hour add nothing.
    for minutes in [0, 1, 30, 59] {
        reconcile(&r, asked_at + Duration::minutes(minutes)).await;
    }
    assert_eq!(told(), std::slice::from_ref(&group));
    reconcile(&r, asked_at + Duration::minutes(61)).await;
    reconcile(&r, asked_at + Duration::minutes(90)).await;
    reconcile(&r, asked_at + Duration::minutes(121)).await;
    let reminders = [format!("{group}#reminder-1"), format!("{group}#reminder-2")];
    assert_eq!(
        told(),
        [group.clone(), reminders[0].clone(), reminders[1].clone()]
    );

    api.env.clock.set(asked_at + Duration::minutes(130));
    let approved = api
        .post(
            ADMIN,
            &format!("/v1/backfills/{id}/approve"),
            Some(json!({"note": "go"})),
        )
        .await;
    assert_eq!(approved.status, StatusCode::OK, "{:?}", approved.body);
    for hours in [3, 4, 8] {
        reconcile(&r, asked_at + Duration::hours(hours) + Duration::minutes(1)).await;
    }
    assert_eq!(told().len(), 3, "nothing after the approval: {:?}", told());
    let sent = notifier.sent();
    assert!(sent
        .iter()
        .all(|s| s.alert.owner.as_deref() == Some("team-h")));
    assert!(sent
        .iter()
        .any(|s| s.alert.message.contains("still await approval")));
}

/// `approval: every_run`: a backfill is approved once, as a whole (EVERY_RUN, whatever its
/// size and side effects), and its windows then run without a hold each.
#[tokio::test]
async fn a_backfill_of_an_every_run_schedule_is_approved_once_as_a_whole() {
    let api = ApiEnv::new(t("2026-03-10T00:00:30Z")).await;
    let doc = json!({"id": "careful", "cron": "0 * * * *", "timezone": "UTC", "owner": "tests",
                     "overlap": "ALLOW", "side_effects": false, "approval": "every_run",
                     "job": {"type": "noop"}});
    let a = api.post(ADMIN, "/v1/schedules", Some(doc)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.body);
    api.env.clock.set(t(NOW));
    let range = json!({"from": "2026-03-10T08:00:00Z", "to": "2026-03-10T09:00:00Z",
                       "rate_per_minute": 100});
    let created = ask(&api, "careful", &range, false).await;
    assert_eq!(created.body["state"], "PAUSED");
    assert_eq!(created.body["approval_reasons"], json!(["EVERY_RUN"]));
    let id = id_of(&created.body);
    api.release().await;
    assert_eq!(
        backfill_runs(&api, "careful", &id).await,
        0,
        "nothing starts"
    );

    let approve = format!("/v1/backfills/{id}/approve");
    let approved = api
        .post(
            ADMIN,
            &approve,
            Some(json!({"note": "replay the two hours"})),
        )
        .await;
    assert_eq!(approved.status, StatusCode::OK, "{:?}", approved.body);
    api.release().await;
    let worker = api
        .env
        .worker(cronledger_tests::app::worker_config("backfill-approval"));
    for _ in 0..5 {
        let got = api
            .env
            .receive(
                cronledger_core::Lane::Backfill,
                false,
                10,
                std::time::Duration::from_millis(600),
            )
            .await;
        if got.is_empty() {
            break;
        }
        api.env
            .deliver(&worker, cronledger_core::Lane::Backfill, &got)
            .await;
    }
    let runs: Vec<_> = api
        .env
        .store
        .runs_between(
            "careful",
            t("2026-03-10T08:00:00Z"),
            t("2026-03-10T09:00:00Z"),
        )
        .await
        .expect("runs")
        .into_iter()
        .filter(|r| matches!(&r.key.origin, Origin::Backfill(b) if *b == id))
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    for run in &runs {
        assert_eq!(run.status, cronledger_core::RunStatus::Success, "{run:?}");
    }
}
