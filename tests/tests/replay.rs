//! Replay by filter (issue 35, point 4): `POST /v1/runs/replay` retries every run of a
//! schedule (or of an owner's schedules) in a status of the filter, scheduled in
//! `[from, to)`, on the correction lane at the backfill throttle, each retry audited with the
//! replay's id; a dry run changes nothing; non-idempotent runs are listed and left out
//! unless asked; side-effecting runs wait for one admin approval; a cancel stops the rest;
//! a replayed success re-opens its dependents' skipped windows unless `cascade: false`.
//! Through the router, on DynamoDB and on the in-memory store.

use axum::http::StatusCode;
use chrono::{DateTime, TimeDelta, Utc};
use cronledger_app::backfill::{BackfillPassReport, BackfillReleaser};
use cronledger_aws::ledger::{Opening, RunChange};
use cronledger_core::{Lane, Run, RunEvent, RunKey, RunStatus};
use cronledger_tests::api::{Answer, ApiEnv, NowValue, ADMIN, OPERATOR, VIEWER};
use cronledger_tests::{bare, scheduled_run, t};
use serde_json::{json, Value};

const NOW: &str = "2026-03-10T12:00:30Z";
const FROM: &str = "2026-03-10T00:00:00Z";
const TO: &str = "2026-03-10T10:00:00Z";

/// An hourly noop schedule of `owner`.
async fn schedule(api: &ApiEnv, id: &str, owner: &str, idempotent: bool, side_effects: bool) {
    schedule_with(api, id, owner, idempotent, side_effects, json!({})).await;
}

/// [`schedule`] with more of the document (`extra`'s fields).
async fn schedule_with(
    api: &ApiEnv,
    id: &str,
    owner: &str,
    idempotent: bool,
    side_effects: bool,
    extra: Value,
) {
    let mut doc = json!({"id": id, "cron": "0 * * * *", "timezone": "UTC", "owner": owner,
                     "overlap": "ALLOW", "idempotent": idempotent,
                     "side_effects": side_effects, "job": {"type": "noop"}});
    if let (Some(doc), Some(extra)) = (doc.as_object_mut(), extra.as_object()) {
        doc.extend(extra.clone());
    }
    let a = api.post(ADMIN, "/v1/schedules", Some(doc)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.body);
}

/// The expected run of `id` at `hour` o'clock on the 10th, ended `ending` (FAILED or SUCCESS).
async fn ended_run(api: &ApiEnv, id: &str, hour: i64, ending: RunEvent) -> RunKey {
    let store = api.env.store.as_ref();
    let spec = store.get_schedule(id).await.expect("schedule").spec;
    let at = t(FROM) + TimeDelta::hours(hour);
    let run = scheduled_run(&spec, at, at, "ticker");
    store.create_run(&run).await.expect("run");
    let enqueue = RunChange::enqueue(RunStatus::Pending, 0, at);
    store
        .transition_run(&run.key, &enqueue)
        .await
        .expect("enqueue");
    end(api, &run.key, RunStatus::Queued, ending, at).await;
    run.key
}

/// Starts the run (from `from`) and ends it with `ending`.
async fn end(api: &ApiEnv, key: &RunKey, from: RunStatus, ending: RunEvent, at: DateTime<Utc>) {
    let store = api.env.store.as_ref();
    let epoch = store.get_run(key).await.expect("run").lease_epoch;
    let done = at + TimeDelta::seconds(2);
    let start = RunChange::open(Opening::Start, from, epoch, at, "w", done);
    store.transition_run(key, &start).await.expect("start");
    let change = bare(ending, RunStatus::Running, epoch + 1, done);
    store.transition_run(key, &change).await.expect("end");
}

async fn status(api: &ApiEnv, key: &RunKey) -> Run {
    api.env.store.get_run(key).await.expect("run")
}

fn request(filter: Value, dry_run: bool) -> Value {
    let mut body = json!({"status": ["FAILED"], "from": FROM, "to": TO,
                          "note": "vendor outage", "dry_run": dry_run});
    if let (Some(body), Some(filter)) = (body.as_object_mut(), filter.as_object()) {
        body.extend(filter.clone());
    }
    body
}

async fn ask(api: &ApiEnv, filter: Value, dry_run: bool) -> Answer {
    let a = api
        .post(OPERATOR, "/v1/runs/replay", Some(request(filter, dry_run)))
        .await;
    let expected = if dry_run {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    assert_eq!(a.status, expected, "{:?}", a.body);
    a
}

/// The release step of the reconciler's pass, on the api's own stores.
async fn release(api: &ApiEnv) -> BackfillPassReport {
    let releaser = BackfillReleaser {
        store: api.env.store.clone(),
        ops: api.api.deps().ops.clone(),
        lanes: api.env.queue.clone(),
        signals: None,
        alerter: None,
    };
    let report = releaser.pass(api.env.clock.now_value()).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    report
}

fn run_ids(list: &Value) -> Vec<String> {
    let items = list.as_array().cloned().unwrap_or_default();
    items
        .iter()
        .map(|r| {
            format!(
                "{}/{}",
                r["schedule"].as_str().unwrap_or(""),
                r["run"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn id_of(a: &Answer) -> String {
    a.body["id"].as_str().unwrap_or_default().to_string()
}

async fn progress(api: &ApiEnv, id: &str) -> Value {
    let a = api.get(VIEWER, &format!("/v1/replays/{id}")).await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.body);
    a.body
}

async fn the_filter_matches_and_a_dry_run_changes_nothing(memory: bool) {
    let api = ApiEnv::on(memory, t(NOW)).await;
    schedule(&api, "etl-a", "data", true, false).await;
    schedule(&api, "etl-b", "data", true, false).await;
    schedule(&api, "other", "web", true, false).await;
    let a1 = ended_run(&api, "etl-a", 1, RunEvent::Fail).await;
    ended_run(&api, "etl-a", 2, RunEvent::Succeed).await;
    // At `to`: outside [from, to).
    ended_run(&api, "etl-a", 10, RunEvent::Fail).await;
    let b3 = ended_run(&api, "etl-b", 3, RunEvent::Fail).await;
    ended_run(&api, "other", 4, RunEvent::Fail).await;

    let plan = ask(&api, json!({"owner": "data"}), true).await;
    assert_eq!(plan.body["size"], 2, "{:?}", plan.body);
    assert_eq!(
        run_ids(&plan.body["runs"]),
        vec!["etl-a/2026-03-10T01:00:00Z", "etl-b/2026-03-10T03:00:00Z"]
    );
    assert_eq!(plan.body["approval_required"], false);
    assert_eq!(plan.body["estimate"]["runs"], 2);
    let one = ask(&api, json!({"schedule": "etl-a"}), true).await;
    assert_eq!(
        run_ids(&one.body["runs"]),
        vec!["etl-a/2026-03-10T01:00:00Z"]
    );

    // Nothing was written: no replay to release, the runs still FAILED.
    let report = release(&api).await;
    assert_eq!((report.replays, report.released), (0, 0));
    for key in [&a1, &b3] {
        assert_eq!(status(&api, key).await.status, RunStatus::Failed);
    }

    let refused = api
        .post(
            OPERATOR,
            "/v1/runs/replay",
            Some(request(
                json!({"owner": "data", "status": ["SUCCESS"]}),
                false,
            )),
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(refused.code(), "REPLAY_INVALID");
    let budget = api
        .post(
            OPERATOR,
            "/v1/runs/replay",
            Some(request(
                json!({"owner": "data", "max_cost_usd": 0.0}),
                false,
            )),
        )
        .await;
    assert_eq!(
        budget.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{:?}",
        budget.body
    );
    assert_eq!(budget.code(), "REPLAY_OVER_BUDGET");
    let unknown = api.get(VIEWER, "/v1/replays/rp-none").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.code(), "REPLAY_NOT_FOUND");
}

#[tokio::test]
async fn the_filter_matches_and_a_dry_run_changes_nothing_on_dynamodb() {
    the_filter_matches_and_a_dry_run_changes_nothing(false).await;
}

#[tokio::test]
async fn the_filter_matches_and_a_dry_run_changes_nothing_in_memory() {
    the_filter_matches_and_a_dry_run_changes_nothing(true).await;
}

async fn retries_go_at_the_throttle_audited_with_the_replay(memory: bool) {
    let api = ApiEnv::on(memory, t(NOW)).await;
    schedule(&api, "etl", "data", true, false).await;
    let mut keys = Vec::new();
    for hour in 0..5 {
        keys.push(ended_run(&api, "etl", hour, RunEvent::Fail).await);
    }
    let created = ask(&api, json!({"schedule": "etl"}), false).await;
    assert_eq!(created.body["state"], "RUNNING");
    assert_eq!(created.body["total"], 5);
    let id = id_of(&created);

    // Concurrency 2: the first pass retries the two oldest, on the correction lane.
    let first = release(&api).await;
    assert_eq!((first.replays, first.released), (1, 2));
    for key in &keys[..2] {
        let run = status(&api, key).await;
        assert_eq!(run.status, RunStatus::Queued);
        assert_eq!(run.lane, Some(Lane::Correction));
        assert_eq!(run.attempts, 1, "the same run, reopened");
    }
    for key in &keys[2..] {
        assert_eq!(status(&api, key).await.status, RunStatus::Failed);
    }
    // Two in flight: nothing more until they end, however late.
    api.env.clock.advance(TimeDelta::minutes(5));
    assert_eq!(release(&api).await.released, 0);
    let now = api.env.clock.now_value();
    end(&api, &keys[0], RunStatus::Queued, RunEvent::Succeed, now).await;
    end(&api, &keys[1], RunStatus::Queued, RunEvent::Fail, now).await;
    assert_eq!(release(&api).await.released, 2);
    let view = progress(&api, &id).await;
    assert_eq!(
        (view["succeeded"].clone(), view["failed"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(
        (view["released"].clone(), view["remaining"].clone()),
        (json!(4), json!(1))
    );
    // The rate (7 a minute) holds the next one back within the same instant.
    let now = api.env.clock.now_value();
    end(&api, &keys[2], RunStatus::Queued, RunEvent::Succeed, now).await;
    assert_eq!(release(&api).await.released, 0);
    api.env.clock.advance(TimeDelta::minutes(1));
    assert_eq!(release(&api).await.released, 1);

    let log = api.env.store.audit_log("etl").await.expect("audit");
    let retried: Vec<&Value> = log
        .iter()
        .filter(|e| e.action.as_str() == "RUN_RETRY")
        .filter_map(|e| e.details.as_ref())
        .collect();
    assert_eq!(retried.len(), 5, "{log:?}");
    assert!(
        retried.iter().all(|d| d["replay"] == json!(id)),
        "{retried:?}"
    );
}

#[tokio::test]
async fn retries_go_at_the_throttle_audited_with_the_replay_on_dynamodb() {
    retries_go_at_the_throttle_audited_with_the_replay(false).await;
}

#[tokio::test]
async fn retries_go_at_the_throttle_audited_with_the_replay_in_memory() {
    retries_go_at_the_throttle_audited_with_the_replay(true).await;
}

async fn non_idempotent_runs_are_listed_and_left_out_unless_asked(memory: bool) {
    let api = ApiEnv::on(memory, t(NOW)).await;
    schedule(&api, "safe", "data", true, false).await;
    schedule(&api, "unsafe", "data", false, false).await;
    let safe = ended_run(&api, "safe", 1, RunEvent::Fail).await;
    let unsafe_run = ended_run(&api, "unsafe", 2, RunEvent::Fail).await;

    let plan = ask(&api, json!({"owner": "data"}), true).await;
    assert_eq!(
        run_ids(&plan.body["runs"]),
        vec!["safe/2026-03-10T01:00:00Z"]
    );
    assert_eq!(
        run_ids(&plan.body["non_idempotent"]),
        vec!["unsafe/2026-03-10T02:00:00Z"]
    );
    let created = ask(&api, json!({"owner": "data"}), false).await;
    assert_eq!(
        created.body["non_idempotent"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(release(&api).await.released, 1);
    assert_eq!(status(&api, &safe).await.status, RunStatus::Queued);
    assert_eq!(status(&api, &unsafe_run).await.status, RunStatus::Failed);

    let asked = ask(
        &api,
        json!({"schedule": "unsafe", "include_non_idempotent": true}),
        false,
    )
    .await;
    assert_eq!(asked.body["total"], 1);
    release(&api).await;
    assert_eq!(status(&api, &unsafe_run).await.status, RunStatus::Queued);
}

#[tokio::test]
async fn non_idempotent_runs_are_listed_and_left_out_unless_asked_on_dynamodb() {
    non_idempotent_runs_are_listed_and_left_out_unless_asked(false).await;
}

#[tokio::test]
async fn non_idempotent_runs_are_listed_and_left_out_unless_asked_in_memory() {
    non_idempotent_runs_are_listed_and_left_out_unless_asked(true).await;
}

async fn side_effecting_runs_wait_for_one_admin_approval(memory: bool) {
    let api = ApiEnv::on(memory, t(NOW)).await;
    schedule(&api, "mailer", "crm", true, true).await;
    let key = ended_run(&api, "mailer", 1, RunEvent::Fail).await;
    let plan = ask(&api, json!({"schedule": "mailer"}), true).await;
    assert_eq!(plan.body["approval_reasons"], json!(["SIDE_EFFECTS"]));

    let created = ask(&api, json!({"schedule": "mailer"}), false).await;
    assert_eq!(created.body["state"], "PAUSED");
    assert_eq!(created.body["held"], "APPROVAL_REQUIRED: SIDE_EFFECTS");
    let id = id_of(&created);
    release(&api).await;
    assert_eq!(status(&api, &key).await.status, RunStatus::Failed, "held");

    let approve = format!("/v1/replays/{id}/approve");
    let by_operator = api
        .post(OPERATOR, &approve, Some(json!({"note": "ok"})))
        .await;
    assert_eq!(by_operator.status, StatusCode::FORBIDDEN);
    let without_note = api.post(ADMIN, &approve, None).await;
    assert_eq!(without_note.code(), "NOTE_REQUIRED");
    let approved = api
        .post(
            ADMIN,
            &approve,
            Some(json!({"note": "the mails never left"})),
        )
        .await;
    assert_eq!(approved.status, StatusCode::OK, "{:?}", approved.body);
    assert_eq!(approved.body["state"], "RUNNING");
    assert_eq!(approved.body["approved_by"], ADMIN);
    let again = api
        .post(ADMIN, &approve, Some(json!({"note": "twice"})))
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(release(&api).await.released, 1);
    assert_eq!(status(&api, &key).await.status, RunStatus::Queued);
    let log = api.env.store.audit_log("mailer").await.expect("audit");
    let retry = log.iter().find(|e| e.action.as_str() == "RUN_RETRY");
    assert_eq!(
        retry.map(|e| e.actor.as_str()),
        Some(ADMIN),
        "the approver's retry"
    );
}

#[tokio::test]
async fn side_effecting_runs_wait_for_one_admin_approval_on_dynamodb() {
    side_effecting_runs_wait_for_one_admin_approval(false).await;
}

#[tokio::test]
async fn side_effecting_runs_wait_for_one_admin_approval_in_memory() {
    side_effecting_runs_wait_for_one_admin_approval(true).await;
}

async fn a_cancel_stops_the_rest(memory: bool) {
    let api = ApiEnv::on(memory, t(NOW)).await;
    schedule(&api, "etl", "data", true, false).await;
    let mut keys = Vec::new();
    for hour in 0..4 {
        keys.push(ended_run(&api, "etl", hour, RunEvent::Fail).await);
    }
    let id = id_of(&ask(&api, json!({"schedule": "etl"}), false).await);
    assert_eq!(release(&api).await.released, 2);
    let cancel = format!("/v1/replays/{id}/cancel");
    let cancelled = api
        .post(OPERATOR, &cancel, Some(json!({"note": "enough"})))
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{:?}", cancelled.body);
    assert_eq!(cancelled.body["state"], "CANCELLED");
    assert_eq!(cancelled.body["remaining"], 2);

    let now = api.env.clock.now_value();
    for key in &keys[..2] {
        end(&api, key, RunStatus::Queued, RunEvent::Succeed, now).await;
    }
    api.env.clock.advance(TimeDelta::minutes(10));
    let after = release(&api).await;
    assert_eq!((after.replays, after.released), (0, 0));
    for key in &keys[2..] {
        assert_eq!(
            status(&api, key).await.status,
            RunStatus::Failed,
            "not retried"
        );
    }
    let twice = api.post(OPERATOR, &cancel, None).await;
    assert_eq!(twice.status, StatusCode::CONFLICT);
    assert_eq!(twice.code(), "REPLAY_STATE_CONFLICT");
}

#[tokio::test]
async fn a_cancel_stops_the_rest_on_dynamodb() {
    a_cancel_stops_the_rest(false).await;
}

#[tokio::test]
async fn a_cancel_stops_the_rest_in_memory() {
    a_cancel_stops_the_rest(true).await;
}

/// An upstream whose 13:00 run FAILED and left its dependent's window SKIPPED
/// (UPSTREAM_NOT_SUCCEEDED); replayed with `cascade`, the retried run's SUCCESS re-opens the
/// dependent's window (its repair run), or, with `cascade: false`, leaves it skipped.
async fn a_replayed_success_repairs_the_dependents_unless_cascade_false(
    memory: bool,
    cascade: bool,
) {
    let api = ApiEnv::on(memory, t(NOW)).await;
    let failing_once = json!({"max_attempts": 1, "job": {"type": "noop", "fail_times": 1}});
    schedule_with(&api, "up", "data", true, false, failing_once).await;
    schedule_with(&api, "down", "data", true, false, json!({"after": ["up"]})).await;
    let store = api.env.store.as_ref();
    store
        .set_downstream("up", &["down".to_string()])
        .await
        .expect("downstream");
    let hour = t("2026-03-10T13:00:00Z");
    api.env.tick(hour).await;
    for lane in [Lane::Realtime, Lane::Normal] {
        api.drain(lane).await;
    }
    let up = RunKey::expected("up", hour);
    assert_eq!(status(&api, &up).await.status, RunStatus::Failed);
    let skipped = status(&api, &RunKey::expected("down", hour)).await;
    assert_eq!(skipped.status, RunStatus::Skipped);

    let filter = json!({"schedule": "up", "from": "2026-03-10T13:00:00Z",
                        "to": "2026-03-10T14:00:00Z", "cascade": cascade});
    ask(&api, filter, false).await;
    assert_eq!(release(&api).await.released, 1);
    api.drain(Lane::Correction).await;
    assert_eq!(status(&api, &up).await.status, RunStatus::Success);
    let repair = api
        .get(
            VIEWER,
            "/v1/schedules/down/runs/2026-03-10T13:00:00Z~M~repair",
        )
        .await;
    let expected = if cascade {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    assert_eq!(repair.status, expected, "{:?}", repair.body);
}

#[tokio::test]
async fn a_replayed_success_repairs_the_dependents_on_dynamodb() {
    a_replayed_success_repairs_the_dependents_unless_cascade_false(false, true).await;
}

#[tokio::test]
async fn a_replayed_success_repairs_the_dependents_in_memory() {
    a_replayed_success_repairs_the_dependents_unless_cascade_false(true, true).await;
}

#[tokio::test]
async fn cascade_false_leaves_the_dependents_skipped_on_dynamodb() {
    a_replayed_success_repairs_the_dependents_unless_cascade_false(false, false).await;
}

#[tokio::test]
async fn cascade_false_leaves_the_dependents_skipped_in_memory() {
    a_replayed_success_repairs_the_dependents_unless_cascade_false(true, false).await;
}
