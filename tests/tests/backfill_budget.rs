//! Recovery priced before it runs (issue 35, point 3): a backfill's dry run answers what it
//! would cost and the caps its estimate goes over; over `max_cost_usd` or
//! `max_target_calls` the backfill is refused (422 BACKFILL_OVER_BUDGET); a running one is
//! paused (BUDGET, BACKFILL_PAUSED) once its measured spend reaches its cap, and resuming it
//! needs a note and lifts the budget. On DynamoDB and on the in-memory store.

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{DateTime, TimeDelta, Utc};
use cronledger_app::alerting::Alerter;
use cronledger_app::backfill::{BackfillPassReport, BackfillReleaser};
use cronledger_aws::ledger::{Opening, RunChange};
use cronledger_aws::{MemoryStore, RequestMeter};
use cronledger_core::alerts::AlertKind;
use cronledger_core::run::Origin;
use cronledger_core::{Run, RunEvent, RunStatus, ScheduleSpec};
use cronledger_tests::api::{ApiEnv, NowValue, ADMIN, OPERATOR};
use cronledger_tests::{bare, scheduled_run, t, SHARDS};
use serde_json::{json, Value};

const NOW: &str = "2026-03-10T12:00:30Z";

/// An hourly noop schedule with ten successes of 2.5 s on the 9th (its estimate's history).
async fn schedule_with_history(api: &ApiEnv) -> ScheduleSpec {
    let doc = json!({"id": "priced", "cron": "0 * * * *", "timezone": "UTC", "owner": "tests",
                     "overlap": "ALLOW", "side_effects": false, "job": {"type": "noop"}});
    let a = api.post(ADMIN, "/v1/schedules", Some(doc)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.body);
    let spec = api
        .env
        .store
        .get_schedule("priced")
        .await
        .expect("schedule")
        .spec;
    for hour in 0..10 {
        let at = t("2026-03-09T00:00:00Z") + TimeDelta::hours(hour);
        let run = scheduled_run(&spec, at, at, "ticker");
        api.env.store.create_run(&run).await.expect("run");
        let queued = api
            .env
            .store
            .transition_run(&run.key, &RunChange::enqueue(RunStatus::Pending, 0, at))
            .await
            .expect("enqueue");
        end_taking(api, &queued, at, 2_500).await;
    }
    spec
}

/// Starts `run` (QUEUED) at `at` and ends it a success `ms` later.
async fn end_taking(api: &ApiEnv, run: &Run, at: DateTime<Utc>, ms: i64) {
    let end = at + TimeDelta::milliseconds(ms);
    let epoch = run.lease_epoch;
    let start = RunChange::open(Opening::Start, RunStatus::Queued, epoch, at, "w", end);
    let store = api.env.store.as_ref();
    store.transition_run(&run.key, &start).await.expect("start");
    let succeed = bare(RunEvent::Succeed, RunStatus::Running, epoch + 1, end);
    store.transition_run(&run.key, &succeed).await.expect("end");
}

/// The six windows of the 10th from midnight to 05:00, with `caps`.
fn request(caps: Value, dry_run: bool) -> Value {
    let mut body = json!({"from": "2026-03-10T00:00:00Z", "to": "2026-03-10T05:00:00Z",
                          "rate_per_minute": 100, "dry_run": dry_run});
    if let (Some(body), Some(caps)) = (body.as_object_mut(), caps.as_object()) {
        body.extend(caps.clone());
    }
    body
}

async fn ask(api: &ApiEnv, caps: Value, dry_run: bool) -> cronledger_tests::api::Answer {
    api.post(
        OPERATOR,
        "/v1/schedules/priced/backfills",
        Some(request(caps, dry_run)),
    )
    .await
}

/// The release step on the api's stores, raising its alerts to the api's notifier.
fn releaser(api: &ApiEnv) -> BackfillReleaser {
    let alerts = Arc::new(MemoryStore::new(SHARDS, RequestMeter::new()));
    BackfillReleaser {
        store: api.env.store.clone(),
        ops: api.api.deps().ops.clone(),
        lanes: api.env.queue.clone(),
        signals: None,
        alerter: Some(Arc::new(Alerter::new(alerts, api.notifier.clone()))),
    }
}

async fn release(api: &ApiEnv, releaser: &BackfillReleaser) -> BackfillPassReport {
    let report = releaser.pass(api.env.clock.now_value()).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    report
}

async fn queued_runs(api: &ApiEnv, backfill: &str) -> Vec<Run> {
    let runs = api
        .env
        .store
        .runs_between("priced", t("2026-03-10T00:00:00Z"), t(NOW))
        .await
        .expect("runs");
    runs.into_iter()
        .filter(|r| matches!(&r.key.origin, Origin::Backfill(b) if b == backfill))
        .filter(|r| r.status == RunStatus::Queued)
        .collect()
}

async fn a_dry_run_prices_it_and_caps_refuse_it(memory: bool) {
    let api = ApiEnv::on(memory, t(NOW)).await;
    schedule_with_history(&api).await;

    let plan = ask(&api, json!({}), true).await;
    assert_eq!(plan.status, StatusCode::OK, "{:?}", plan.body);
    let estimate = &plan.body["estimate"];
    assert_eq!(estimate["runs"], 6, "{estimate:?}");
    assert_eq!(estimate["target_calls"], 6);
    // At the p95 of the history (2.5 s) plus the worker's 70 ms, at 256 MB.
    let gb_seconds = estimate["lambda_gb_seconds"].as_f64().unwrap_or_default();
    assert!(
        (gb_seconds - 6.0 * 2.57 * 0.25).abs() < 1e-6,
        "{estimate:?}"
    );
    let cost = estimate["cost_usd"].as_f64().unwrap_or_default();
    assert!(cost > 0.0 && cost < 0.001, "{estimate:?}");
    // Two in flight at most, released by the reconciler's pass every 5 minutes: the last two
    // at the third pass, done 2.5 s later.
    assert_eq!(estimate["finishes_at"], "2026-03-10T12:10:32.500Z");
    assert_eq!(plan.body["over_budget"], json!([]));

    // A dry run over a cap says so and does not fail.
    let over = ask(
        &api,
        json!({"max_cost_usd": cost / 2.0, "max_target_calls": 5}),
        true,
    )
    .await;
    assert_eq!(over.status, StatusCode::OK, "{:?}", over.body);
    assert_eq!(
        over.body["over_budget"],
        json!(["max_cost_usd", "max_target_calls"])
    );
    assert_eq!(over.body["budget"]["max_target_calls"], 5);

    // The backfill itself is refused, naming the cap, and nothing is stored.
    for (caps, named) in [
        (json!({"max_cost_usd": cost / 2.0}), "max_cost_usd"),
        (json!({"max_target_calls": 5}), "max_target_calls"),
    ] {
        let refused = ask(&api, caps, false).await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{:?}",
            refused.body
        );
        assert_eq!(refused.code(), "BACKFILL_OVER_BUDGET");
        assert_eq!(refused.body["details"]["over_budget"], json!([named]));
    }
    let open = api.get(OPERATOR, "/v1/backfills").await;
    assert_eq!(open.body["items"], json!([]), "{:?}", open.body);

    // Within its caps it is created and carries its estimate.
    let created = ask(
        &api,
        json!({"max_cost_usd": cost * 2.0, "max_target_calls": 6}),
        false,
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    assert_eq!(created.body["estimate"]["runs"], 6);
    assert_eq!(created.body["budget"]["max_target_calls"], 6);
    assert!(created.body["pause_reason"].is_null());
}

#[tokio::test]
async fn a_dry_run_prices_it_and_caps_refuse_it_on_dynamodb() {
    a_dry_run_prices_it_and_caps_refuse_it(false).await;
}

#[tokio::test]
async fn a_dry_run_prices_it_and_caps_refuse_it_in_memory() {
    a_dry_run_prices_it_and_caps_refuse_it(true).await;
}

async fn a_backfill_pauses_when_its_spend_reaches_its_cap(memory: bool) {
    let api = ApiEnv::on(memory, t(NOW)).await;
    schedule_with_history(&api).await;
    // Estimated at 2.5 s a run, about $0.0001 for the six; capped at $0.0002.
    let created = ask(&api, json!({"max_cost_usd": 0.0002}), false).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let id = created.body["id"].as_str().unwrap_or_default().to_string();
    let releaser = releaser(&api);

    let first = release(&api, &releaser).await;
    assert_eq!(first.released, 2, "{first:?}");
    // The two runs take a minute each: about $0.0002 apiece, measured.
    for run in queued_runs(&api, &id).await {
        end_taking(&api, &run, t(NOW), 60_000).await;
    }
    api.env.clock.set(t(NOW) + TimeDelta::minutes(5));
    let paused = release(&api, &releaser).await;
    assert_eq!(paused.released, 0, "{paused:?}");
    assert_eq!(paused.budget_paused, vec![id.clone()]);

    let path = format!("/v1/backfills/{id}");
    let view = api.get(OPERATOR, &path).await;
    assert_eq!(view.body["state"], "PAUSED", "{:?}", view.body);
    assert_eq!(view.body["pause_reason"], "BUDGET");
    let held = view.body["held"].as_str().unwrap_or_default();
    assert!(held.starts_with("BUDGET: spent $0.0004"), "{held}");
    assert_eq!(view.body["spent"]["runs"], 2);
    assert_eq!(view.body["spent"]["target_calls"], 2);
    let alerts: Vec<_> = api
        .notifier
        .sent()
        .into_iter()
        .filter(|s| s.alert.kind == AlertKind::BackfillPaused)
        .collect();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(alerts[0].alert.message.contains("BUDGET"), "{alerts:?}");

    // Paused, it releases nothing more.
    api.env.clock.set(t(NOW) + TimeDelta::minutes(10));
    assert_eq!(release(&api, &releaser).await.released, 0);

    // A resume lifts the budget, so it needs a note saying why.
    let resume = format!("/v1/backfills/{id}/resume");
    let bare_resume = api.post(OPERATOR, &resume, None).await;
    assert_eq!(
        bare_resume.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{:?}",
        bare_resume.body
    );
    assert_eq!(bare_resume.code(), "NOTE_REQUIRED");
    let resumed = api
        .post(
            OPERATOR,
            &resume,
            Some(json!({"note": "finish it, cost agreed"})),
        )
        .await;
    assert_eq!(resumed.status, StatusCode::OK, "{:?}", resumed.body);
    assert_eq!(resumed.body["state"], "RUNNING");
    assert_eq!(resumed.body["budget"], json!({}));
    assert!(resumed.body["pause_reason"].is_null());
    api.env.clock.set(t(NOW) + TimeDelta::minutes(15));
    assert_eq!(release(&api, &releaser).await.released, 2);
}

#[tokio::test]
async fn a_backfill_pauses_when_its_spend_reaches_its_cap_on_dynamodb() {
    a_backfill_pauses_when_its_spend_reaches_its_cap(false).await;
}

#[tokio::test]
async fn a_backfill_pauses_when_its_spend_reaches_its_cap_in_memory() {
    a_backfill_pauses_when_its_spend_reaches_its_cap(true).await;
}
