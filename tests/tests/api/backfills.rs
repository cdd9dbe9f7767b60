//! Backfills through the api: concurrency measured, pause/resume, cancel, and verify finding a
//! punched hole.

use super::*;
use cronledger_aws::prelude::*;

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

/// A schedule with `verify`: each successful run records what the source expected beside
/// what the job reported, and a backfill's verify lists the one window whose checksum
/// differs as that window's MISMATCH, with both sides, while the others verify clean.
#[tokio::test]
async fn verify_by_results_reports_the_window_whose_checksum_differs() {
    checksum_mismatch_is_that_windows_problem(Source::Schedule).await;
}

/// The same with the source declared on the backfill instead of the schedule.
#[tokio::test]
async fn a_backfills_own_verify_source_reports_the_window_whose_checksum_differs() {
    checksum_mismatch_is_that_windows_problem(Source::Backfill).await;
}

/// Where the `verify` source is declared.
enum Source {
    Schedule,
    Backfill,
}

async fn checksum_mismatch_is_that_windows_problem(source: Source) {
    use axum::extract::Json as Body;
    use axum::http::Uri;
    let app = axum::Router::new().fallback(|uri: Uri, Body(ask): Body<Value>| async move {
        let start = ask["window"]["start"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let checksum = if uri.path() == "/verify" && start.starts_with("2026-03-10T08:30") {
            "sum-other".to_string()
        } else {
            format!("sum-{start}")
        };
        axum::Json(json!({"count": 10, "checksum": checksum}))
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    // The source and the job listen on 127.0.0.1: loopback allowed, as locally.
    let config = ApiConfig {
        rules: cronledger_core::ValidationRules::local(),
        ..ApiConfig::default()
    };
    let api = ApiEnv::with_config(t(NOW), config).await;
    let mut doc = schedule_doc("checked", "*/10 * * * *");
    doc["side_effects"] = json!(false);
    doc["job"] = json!({"type": "http", "url": format!("{base}/job")});
    let verify = json!({"type": "http", "url": format!("{base}/verify")});
    let mut range = json!({"from": "2026-03-10T08:00:00Z", "to": "2026-03-10T09:00:00Z",
                           "concurrency": 10, "rate_per_minute": 100});
    match source {
        Source::Schedule => doc["verify"] = verify,
        Source::Backfill => range["verify"] = verify,
    }
    create(&api, doc).await;
    let id = backfill_to_the_end(&api, "checked", range).await;

    let found = api.get(VIEWER, &format!("/v1/backfills/{id}/verify")).await;
    let body = &found.body;
    assert_eq!(body["expected_windows"], 7, "{body:?}");
    assert_eq!(body["complete"], false, "{body:?}");
    assert_eq!(
        (
            body["mismatched"].clone(),
            body["unverified"].clone(),
            body["missing"].clone()
        ),
        (json!(1), json!(0), json!(0)),
        "{body:?}"
    );
    let problems = body["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 1, "{body:?}");
    let mismatch = &problems[0];
    assert_eq!(mismatch["problem"], "MISMATCH");
    assert_eq!(mismatch["expected"]["checksum"], "sum-other");
    assert_eq!(mismatch["expected"]["count"], 10);
    assert_eq!(mismatch["reported"]["count"], 10);
    let reported = mismatch["reported"]["checksum"]
        .as_str()
        .unwrap_or_default();
    assert!(reported.starts_with("sum-2026-03-10T08:30"), "{mismatch:?}");
}

/// A cascading backfill of `collect` re-runs the same windows of `report` (which runs after
/// it) under the same backfill, each once `collect`'s run for it succeeded; a window whose
/// `collect` run failed is recorded SKIPPED (UPSTREAM_NOT_SUCCEEDED) for `report`.
#[tokio::test]
async fn a_cascading_backfill_reruns_the_dependents_windows_after_each_upstream_run() {
    use cronledger_core::run::Origin;
    let api = ApiEnv::new(t(NOW)).await;
    let mut upstream = schedule_doc("collect", "0 * * * *");
    upstream["side_effects"] = json!(false);
    upstream["max_attempts"] = json!(1);
    // The 09:00 window's run fails for good.
    upstream["job"] = json!({"type": "noop", "fail_before": "2026-03-10T09:30:00Z"});
    create(&api, upstream).await;
    let mut report = schedule_doc("report", "0 * * * *");
    report["side_effects"] = json!(false);
    report["after"] = json!(["collect"]);
    create(&api, report).await;
    // The reconciler keeps `downstream` from the specs' `after`; here, directly.
    let store = api.env.store.clone();
    store
        .set_downstream("collect", &["report".to_string()])
        .await
        .expect("downstream");

    let range = json!({"from": "2026-03-10T09:00:00Z", "to": "2026-03-10T11:00:00Z",
                       "reprocess": "all", "cascade": true, "rate_per_minute": 100});
    let id = backfill_to_the_end(&api, "collect", range).await;
    let runs_of = |schedule: &'static str| {
        let store = store.clone();
        let id = id.clone();
        async move {
            let mut runs: Vec<_> = store
                .runs_between(
                    schedule,
                    t("2026-03-10T09:00:00Z"),
                    t("2026-03-10T11:00:00Z"),
                )
                .await
                .expect("runs")
                .into_iter()
                .filter(|r| r.key.origin == Origin::Backfill(id.clone()))
                .map(|r| (r.key.scheduled_for, r.trigger, r.status, r.reason))
                .collect();
            runs.sort();
            runs
        }
    };
    use cronledger_core::{Reason, RunStatus, Trigger};
    let bf = Trigger::Backfill;
    assert_eq!(
        runs_of("collect").await,
        vec![
            (
                t("2026-03-10T09:00:00Z"),
                bf,
                RunStatus::Failed,
                Some(Reason::PermanentError)
            ),
            (t("2026-03-10T10:00:00Z"), bf, RunStatus::Success, None),
            (t("2026-03-10T11:00:00Z"), bf, RunStatus::Success, None),
        ]
    );
    assert_eq!(
        runs_of("report").await,
        vec![
            (
                t("2026-03-10T09:00:00Z"),
                bf,
                RunStatus::Skipped,
                Some(Reason::UpstreamNotSucceeded)
            ),
            (t("2026-03-10T10:00:00Z"), bf, RunStatus::Success, None),
            (t("2026-03-10T11:00:00Z"), bf, RunStatus::Success, None),
        ]
    );
}

/// Creates a backfill of `schedule` over `range` and releases and runs it, a minute a pass,
/// until it is done (what it released last included); its id.
async fn backfill_to_the_end(api: &ApiEnv, schedule: &str, range: Value) -> String {
    let created = api
        .post(
            OPERATOR,
            &format!("/v1/schedules/{schedule}/backfills"),
            Some(range),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let id = created.body["id"].as_str().unwrap_or("").to_string();
    for pass in 0.. {
        assert!(pass < 20, "the backfill did not finish");
        api.env.clock.advance(TimeDelta::minutes(1));
        let done = api.release().await.finished.contains(&id);
        drain(api, Lane::Backfill).await;
        if done {
            return id;
        }
    }
    id
}
