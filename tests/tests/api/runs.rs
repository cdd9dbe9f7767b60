//! Runs through the api: a double click is one run, retry is a new attempt, approval,
//! rejection and cancel, and forced runs past ALREADY_DONE.

use super::*;

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
    // Both ends are counted on the schedule's health, like any writer's.
    let day = t("2026-03-10T00:00:00Z").date_naive();
    let tallies = cronledger_aws::HealthStore::outcome_days(&api.env.ledger.ledger, "s1", day, day)
        .await
        .expect("counters");
    assert_eq!(
        tallies.iter().map(|d| d.skipped).sum::<u64>(),
        2,
        "{tallies:?}"
    );
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

/// One run's view shows its dependency chain: the same window's run of the schedule it
/// runs after, and of the schedule that runs after it, with their statuses.
#[tokio::test]
async fn a_runs_view_shows_its_upstream_and_downstream_runs() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, schedule_doc("collect", "0 * * * *")).await;
    let mut report = schedule_doc("report", "0 * * * *");
    report["after"] = json!(["collect"]);
    create(&api, report).await;
    // The reconciler keeps `downstream` from the specs' `after`; here, directly.
    api.env
        .store
        .set_downstream("collect", &["report".to_string()])
        .await
        .expect("downstream");
    let at = t("2026-03-10T13:00:00Z");
    assert_eq!(api.env.tick(at).await.sent, 1, "only collect is fired");
    drain(&api, Lane::Normal).await;
    drain(&api, Lane::Normal).await;
    let collect = api
        .get(VIEWER, "/v1/schedules/collect/runs/2026-03-10T13:00:00Z")
        .await;
    assert_eq!(collect.body["status"], "SUCCESS", "{:?}", collect.body);
    assert_eq!(collect.body["downstream"][0]["schedule"], "report");
    assert_eq!(collect.body["downstream"][0]["status"], "SUCCESS");
    assert!(collect.body.get("upstream").is_none());
    let report = api
        .get(VIEWER, "/v1/schedules/report/runs/2026-03-10T13:00:00Z")
        .await;
    assert_eq!(report.body["trigger"], "DEPENDENCY", "{:?}", report.body);
    assert_eq!(
        report.body["upstream"],
        json!([{"schedule": "collect", "scheduled_for": "2026-03-10T13:00:00Z",
                "run_id": "2026-03-10T13:00:00Z", "status": "SUCCESS"}])
    );
}
