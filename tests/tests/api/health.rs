//! Schedule health through the api: runs and outcome counters seeded through the stores,
//! then each schedule's `health` as `GET /v1/schedules/{id}` and the listing answer it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cronledger_aws::ledger::{Opening, RunChange};
use cronledger_aws::{HealthStore, Outcome};
use cronledger_core::{RunEvent, ScheduleSpec};
use cronledger_tests::scheduled_run;

use super::*;

async fn ended_run(api: &ApiEnv, spec: &ScheduleSpec, scheduled_for: &str, end: RunEvent) {
    cronledger_tests::ended_run(api.env.store.as_ref(), spec, t(scheduled_for), end).await;
}

async fn spec_of(api: &ApiEnv, id: &str) -> ScheduleSpec {
    api.env.store.get_schedule(id).await.expect("stored").spec
}

/// The first page of the listing (with health), each item under its id.
async fn listed(api: &ApiEnv) -> BTreeMap<String, Value> {
    let listed = api.get(VIEWER, "/v1/schedules?limit=10").await;
    assert_eq!(listed.status, StatusCode::OK, "{:?}", listed.body);
    let items = listed.body["items"].as_array().cloned().unwrap_or_default();
    items
        .into_iter()
        .map(|i| (i["id"].as_str().unwrap_or_default().to_string(), i))
        .collect()
}

fn day_before(now: DateTime<Utc>, days: i64) -> chrono::NaiveDate {
    (now - TimeDelta::days(days)).date_naive()
}

#[tokio::test]
async fn schedules_carry_their_health_one_and_listed() {
    let api = ApiEnv::new(t(NOW)).await;
    let mut doc = schedule_doc("billing", "*/5 * * * *");
    doc["slo"] = json!({"within": "30m", "target": "95%"});
    create(&api, doc).await;
    create(&api, schedule_doc("calm", "0 * * * *")).await;

    // Oldest first: a success, two failures, then a window awaiting approval (it neither
    // counts in nor ends the streak).
    let billing = spec_of(&api, "billing").await;
    ended_run(&api, &billing, "2026-03-10T11:00:00Z", RunEvent::Succeed).await;
    ended_run(&api, &billing, "2026-03-10T11:05:00Z", RunEvent::Fail).await;
    ended_run(&api, &billing, "2026-03-10T11:10:00Z", RunEvent::Fail).await;
    let mut held = scheduled_run(&billing, t("2026-03-10T11:15:00Z"), t(NOW), "ticker");
    held.status = RunStatus::ManualRequired;
    api.env.store.create_run(&held).await.expect("held");

    let counters = &api.env.ledger.ledger;
    let now = t(NOW);
    for (days_ago, outcome, count) in [
        (0, Outcome::Succeeded { fresh: true }, 8),
        (0, Outcome::Failed, 2),
        (1, Outcome::Skipped, 1),
        // Inside 30 days, outside 7.
        (10, Outcome::Succeeded { fresh: false }, 9),
        // Outside both.
        (40, Outcome::Failed, 50),
    ] {
        counters
            .count_outcome("billing", day_before(now, days_ago), outcome, count)
            .await
            .expect("count");
    }

    let one = api.get(VIEWER, "/v1/schedules/billing").await;
    assert_eq!(one.status, StatusCode::OK, "{:?}", one.body);
    assert_eq!(one.headers["etag"], "\"1\"");
    let h = &one.body["health"];
    assert_eq!(h["last_run"]["status"], "FAILED");
    assert_eq!(h["last_run"]["scheduled_for"], "2026-03-10T11:10:00Z");
    assert_eq!(h["last_run"]["duration_ms"], 2500);
    assert_eq!(h["next_run_at"], one.body["next_run_at"]);
    assert!(h["next_run_at"].is_string());
    assert_eq!(
        h["counts_7d"],
        json!({"succeeded": 8, "failed": 2, "skipped": 1})
    );
    assert_eq!(
        h["counts_30d"],
        json!({"succeeded": 17, "failed": 2, "skipped": 1})
    );
    assert_eq!(h["success_rate_7d"], 0.8);
    assert_eq!(h["success_rate_30d"], 17.0 / 19.0);
    assert_eq!(
        h["freshness"],
        json!({"within": "30m", "target": 0.95, "attainment_30d": 0.4, "met": false})
    );
    assert_eq!(h["consecutive_failures"], 2);
    assert_eq!(h["awaiting_approval"], 1);

    let calm = api.get(VIEWER, "/v1/schedules/calm").await;
    let c = &calm.body["health"];
    assert!(c["last_run"].is_null() && c["freshness"].is_null());
    assert!(c["success_rate_7d"].is_null() && c["success_rate_30d"].is_null());
    assert_eq!(
        (&c["consecutive_failures"], &c["awaiting_approval"]),
        (&json!(0), &json!(0))
    );

    let listed = listed(&api).await;
    assert_eq!(&listed["billing"]["health"], h);
    assert_eq!(&listed["calm"]["health"], c);

    // Without health, the listing reads nothing more and says nothing of it.
    let bare = api.get(VIEWER, "/v1/schedules?limit=10&health=false").await;
    assert_eq!(bare.status, StatusCode::OK);
    let bare_items = bare.body["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(bare_items.len(), 2);
    assert!(bare_items.iter().all(|i| i.get("health").is_none()));
    let bad = api.get(VIEWER, "/v1/schedules?health=maybe").await;
    assert_eq!(
        (bad.status, bad.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "REQUEST_INVALID")
    );
}

#[tokio::test]
async fn the_status_items_read_back_typed() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, schedule_doc("typed", "*/5 * * * *")).await;
    let listed = api.get(VIEWER, "/v1/schedules").await;
    let items: Vec<cronledger_app::api::health::ScheduleHealth> =
        serde_json::from_value(listed.body["items"].clone()).expect("typed items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].id, "typed");
    let health = items[0].health.as_ref().expect("health");
    assert_eq!(health.consecutive_failures, 0);
    assert_eq!(health.last_run, None);
}

#[tokio::test]
async fn the_next_run_is_a_window_written_ahead_and_not_started_yet() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, schedule_doc("waiting", "*/5 * * * *")).await;
    create(&api, schedule_doc("started", "*/5 * * * *")).await;
    // The ticker wrote both 12:05 runs QUEUED ahead; at 12:05:00.4 one has not started yet.
    for (id, started) in [("waiting", false), ("started", true)] {
        let spec = spec_of(&api, id).await;
        let at = t("2026-03-10T12:05:00Z");
        let mut run = scheduled_run(&spec, at, t("2026-03-10T12:04:10Z"), "ticker");
        run.status = RunStatus::Queued;
        api.env.store.create_run(&run).await.expect("run");
        if started {
            let lease = at + TimeDelta::minutes(1);
            let start = RunChange::open(Opening::Start, RunStatus::Queued, 0, at, "w", lease);
            api.env
                .store
                .transition_run(&run.key, &start)
                .await
                .expect("start");
        }
    }
    api.env.clock.set(t("2026-03-10T12:05:00.400Z"));

    let waiting = api.get(VIEWER, "/v1/schedules/waiting").await;
    assert_eq!(waiting.status, StatusCode::OK, "{:?}", waiting.body);
    assert_eq!(waiting.body["next_run_at"], "2026-03-10T12:05:00Z");
    assert_eq!(
        waiting.body["health"]["next_run_at"],
        "2026-03-10T12:05:00Z"
    );
    let started = api.get(VIEWER, "/v1/schedules/started").await;
    assert_eq!(started.body["next_run_at"], "2026-03-10T12:10:00Z");
    assert_eq!(
        started.body["health"]["next_run_at"],
        "2026-03-10T12:10:00Z"
    );

    // The console's listing says the same.
    let listed = listed(&api).await;
    assert_eq!(listed["waiting"]["next_run_at"], "2026-03-10T12:05:00Z");
    assert_eq!(listed["started"]["next_run_at"], "2026-03-10T12:10:00Z");
}

/// A success of `spec`'s window at `scheduled_for` that took `ms` from its start to its end.
async fn success_taking(api: &ApiEnv, spec: &ScheduleSpec, at: DateTime<Utc>, ms: i64) {
    let run = scheduled_run(spec, at, at, "ticker");
    let store = api.env.store.as_ref();
    store.create_run(&run).await.expect("run");
    let end = at + TimeDelta::milliseconds(ms);
    for step in [
        RunChange::enqueue(RunStatus::Pending, 0, at),
        RunChange::open(Opening::Start, RunStatus::Queued, 0, at, "w", end),
        cronledger_tests::bare(RunEvent::Succeed, RunStatus::Running, 1, end),
    ] {
        store.transition_run(&run.key, &step).await.expect("step");
    }
}

async fn health_shows_the_successes_duration_percentiles(memory: bool) {
    let api = ApiEnv::on(memory, t(NOW)).await;
    create(&api, schedule_doc("timed", "*/5 * * * *")).await;
    let spec = spec_of(&api, "timed").await;
    // Before any success: nothing measured, null rather than zero.
    let none = api.get(VIEWER, "/v1/schedules/timed").await;
    assert_eq!(none.status, StatusCode::OK, "{:?}", none.body);
    assert!(none.body["health"]["duration_p50_ms"].is_null());
    assert!(none.body["health"]["duration_p95_ms"].is_null());
    // Twenty successes of 1 to 20 seconds, and a failure of ten minutes that does not count.
    for i in 1..=20i64 {
        let at = t("2026-03-10T10:00:00Z") + TimeDelta::minutes(5 * (i - 1));
        success_taking(&api, &spec, at, i * 1000).await;
    }
    ended_run(&api, &spec, "2026-03-10T11:45:00Z", RunEvent::Fail).await;
    let one = api.get(VIEWER, "/v1/schedules/timed").await;
    let h = &one.body["health"];
    assert_eq!(h["duration_p50_ms"], 10_000, "{h:?}");
    assert_eq!(h["duration_p95_ms"], 19_000, "{h:?}");
    // The listing says the same.
    assert_eq!(&listed(&api).await["timed"]["health"], h);
}

#[tokio::test]
async fn health_shows_the_successes_duration_percentiles_on_dynamodb() {
    health_shows_the_successes_duration_percentiles(false).await;
}

#[tokio::test]
async fn health_shows_the_successes_duration_percentiles_in_memory() {
    health_shows_the_successes_duration_percentiles(true).await;
}
