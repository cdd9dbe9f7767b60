//! A run executes the job of the schedule version it was created under (invariant 12): an
//! operator's retry keeps the run's version unless it asks for the current definition. (The
//! store's side, an older version's job read once from its audit entry, is in the
//! conformance suite.)

use std::time::Duration;

use axum::http::{Method, StatusCode};
use cronledger_app::api::Caller;
use cronledger_app::pinned::{job_of_run, PinnedJobs};
use cronledger_aws::ledger::ChangeMeta;
use cronledger_core::{JobSpec, Lane};
use cronledger_tests::api::{ApiEnv, ADMIN, OPERATOR, VIEWER};
use cronledger_tests::app::worker_config;
use cronledger_tests::{spec_with, t};
use serde_json::{json, Value};

const NOW: &str = "2026-03-10T12:00:30Z";

fn noop_job(target: &str) -> Value {
    json!({"type": "noop", "fail_times": 5, "payload": {"target": target}})
}

fn target_of(job: &JobSpec) -> &str {
    job.payload()["target"].as_str().unwrap_or("")
}

fn meta(at: &str) -> ChangeMeta {
    ChangeMeta {
        actor: "tests".into(),
        reason: "edit".into(),
        at: t(at),
        details: None,
    }
}

/// Hands what the manual lane holds to a worker until nothing comes.
async fn drain_manual(api: &ApiEnv) {
    let worker = api.env.worker(worker_config("pinned-tests"));
    loop {
        let got = api
            .env
            .receive(Lane::Manual, false, 10, Duration::from_millis(600))
            .await;
        if got.is_empty() {
            return;
        }
        api.env.deliver(&worker, Lane::Manual, &got).await;
    }
}

fn schedule_doc(target: &str) -> Value {
    json!({"id": "edited", "cron": "0 * * * *", "timezone": "UTC", "owner": "tests",
           "overlap": "ALLOW", "max_attempts": 1, "job": noop_job(target)})
}

#[tokio::test]
async fn a_retry_keeps_the_run_version_unless_asked_for_the_current_definition() {
    let api = ApiEnv::new(t(NOW)).await;
    let created = api
        .post(ADMIN, "/v1/schedules", Some(schedule_doc("old")))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    // Two runs of version 1 that fail (one attempt allowed).
    let mut runs = Vec::new();
    for _ in 0..2 {
        let made = api
            .post(
                OPERATOR,
                "/v1/schedules/edited/runs",
                Some(json!({"mode": "new"})),
            )
            .await;
        assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
        assert_eq!(made.body["run"]["schedule_version"], 1);
        runs.push(
            made.body["run"]["run_id"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        );
    }
    drain_manual(&api).await;
    let path = |run: &str| format!("/v1/schedules/edited/runs/{run}");
    let mut windows = Vec::new();
    for run in &runs {
        let failed = api.get(VIEWER, &path(run)).await;
        assert_eq!(failed.body["status"], "FAILED", "{:?}", failed.body);
        windows.push(failed.body["window_start"].clone());
    }
    // The job is edited: version 2.
    let edited = api
        .call_with(
            Some(Caller::new(ADMIN)),
            Method::PUT,
            "/v1/schedules/edited",
            Some(schedule_doc("new")),
            &[("If-Match", "\"1\"")],
        )
        .await;
    assert_eq!(edited.body["version"], 2, "{:?}", edited.body);

    // A bad choice is refused before anything changes.
    let retry = |run: &str| format!("{}/retry", path(run));
    let bad = api
        .post(
            OPERATOR,
            &retry(&runs[0]),
            Some(json!({"definition": "newest"})),
        )
        .await;
    assert_eq!(
        (bad.status, bad.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "REQUEST_INVALID")
    );

    // A plain retry keeps the run's own version; the current definition re-pins it.
    let kept = api
        .post(OPERATOR, &retry(&runs[0]), Some(json!({"note": "plain"})))
        .await;
    assert_eq!(kept.status, StatusCode::OK, "{:?}", kept.body);
    assert_eq!(kept.body["schedule_version"], 1);
    let repinned = api
        .post(
            OPERATOR,
            &retry(&runs[1]),
            Some(json!({"note": "use the fix", "definition": "current"})),
        )
        .await;
    assert_eq!(repinned.status, StatusCode::OK, "{:?}", repinned.body);
    assert_eq!(repinned.body["schedule_version"], 2);
    assert_eq!(repinned.body["status"], "QUEUED");
    // Its window stays the one it was created for (invariant 5).
    assert_eq!(repinned.body["window_start"], windows[1]);

    // What each retried run executes from now on.
    let store = api.env.store.as_ref();
    let stored = store.get_schedule("edited").await.expect("schedule");
    let cache = PinnedJobs::default();
    let history = store.run_history("edited", 10, None).await.expect("runs");
    let mut executes = Vec::new();
    for run in &history.items {
        let job = job_of_run(store, &stored, run, &cache).await.expect("job");
        executes.push((run.schedule_version, target_of(&job).to_string()));
    }
    executes.sort();
    assert_eq!(executes, [(1, "old".to_string()), (2, "new".to_string())]);

    // The audit log says which definition each retry chose.
    let audit = api.get(VIEWER, "/v1/schedules/edited/audit").await;
    // (Both retries happened at the same virtual instant: their entries' order is not
    // the point, so each is looked up by its run.)
    let entries = audit.body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let retry_of = |run: &str| {
        entries
            .iter()
            .find(|e| e["action"] == "RUN_RETRY" && e["details"]["run"] == run)
            .map(|e| {
                (
                    e["details"]["definition"].clone(),
                    e["details"]["schedule_version"].clone(),
                )
            })
    };
    assert_eq!(retry_of(&runs[0]), Some((json!("original"), json!(1))));
    assert_eq!(retry_of(&runs[1]), Some((json!("current"), json!(2))));

    // The document offers the choice.
    let doc = api.call(None, Method::GET, "/openapi.json", None).await;
    let body = &doc.body["paths"]["/v1/schedules/{id}/runs/{run}/retry"]["post"]["requestBody"];
    assert_eq!(
        body["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/RetryRequest"
    );
    assert_eq!(body["required"], false);
    let schemas = &doc.body["components"]["schemas"];
    let definition = &schemas["RetryRequest"]["properties"]["definition"];
    assert_eq!(definition["default"], "original");
    assert_eq!(definition["$ref"], "#/components/schemas/Definition");
    let choices: Vec<&Value> = schemas["Definition"]["oneOf"]
        .as_array()
        .expect("the choices")
        .iter()
        .map(|choice| &choice["const"])
        .collect();
    assert_eq!(choices, [&json!("original"), &json!("current")]);
}

/// Through the worker: a run that failed, then waited while the schedule's job was edited,
/// retries the job it was created under; a run fired after the edit does the new one.
#[tokio::test]
async fn a_retry_after_an_edit_executes_the_job_of_its_own_version() {
    use chrono::Duration as Delta;
    use cronledger_aws::lanes::{LaneSettings, MessageOutcome};
    use cronledger_core::{RunKey, RunStatus};
    use cronledger_tests::app::AppEnv;
    use cronledger_tests::webhook::{Answer, Webhook};

    let hour = t("2026-03-01T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), hour).await;
    let old = Webhook::start(Answer::Succeed).await;
    let new = Webhook::start(Answer::Succeed).await;
    old.script(&[Answer::Fail(500)]);
    let with_url = |url: &str| {
        spec_with(
            "edited",
            "0 * * * *",
            json!({"max_attempts": 3, "job": {"type": "http", "url": url, "timeout": "20s"}}),
        )
    };
    env.create(with_url(&old.url), hour - Delta::seconds(30))
        .await;
    assert_eq!(env.tick(hour).await.sent, 1);
    let worker = env.worker(worker_config("w"));
    let got = env
        .receive(Lane::Normal, false, 1, Duration::from_secs(5))
        .await;
    let report = env.deliver(&worker, Lane::Normal, &got).await;
    assert!(matches!(report.outcomes[0].1, MessageOutcome::Retry(_)));
    let key = RunKey::expected("edited", hour);
    assert_eq!(env.run(&key).await.status, RunStatus::RetryPending);

    // The job's target changes while the run waits for its retry.
    let current = env.store.get_schedule("edited").await.expect("schedule");
    env.store
        .update_schedule(with_url(&new.url), current.version, meta(NOW))
        .await
        .expect("edit");
    let got = env
        .receive(Lane::Normal, false, 1, Duration::from_secs(5))
        .await;
    let report = env.deliver(&worker, Lane::Normal, &got).await;
    assert_eq!(report.outcomes[0].1, MessageOutcome::Done);
    let done = env.run(&key).await;
    assert_eq!(
        (done.status, done.schedule_version),
        (RunStatus::Success, 1)
    );
    assert_eq!(
        (old.arrived(), new.arrived()),
        (2, 0),
        "the retry kept its job"
    );

    // The next window is created under version 2: the new target.
    let next = hour + Delta::hours(1);
    assert_eq!(env.tick(next).await.sent, 1);
    let got = env
        .receive(Lane::Normal, false, 1, Duration::from_secs(5))
        .await;
    env.deliver(&worker, Lane::Normal, &got).await;
    assert_eq!(
        env.run(&RunKey::expected("edited", next)).await.status,
        RunStatus::Success
    );
    assert_eq!((old.arrived(), new.arrived()), (2, 1));
}

/// A steps run whose last step failed for good is retried by an operator: it resumes at
/// that step. The step before it, which succeeded, is not executed again, even when the
/// retry takes the current definition (checkpoints follow the steps by name).
#[tokio::test]
async fn a_retried_steps_run_resumes_at_the_step_that_failed() {
    let api = ApiEnv::new(t(NOW)).await;
    let doc = |upload: Value| {
        json!({"id": "report", "cron": "0 * * * *", "timezone": "UTC", "owner": "tests",
        "overlap": "ALLOW", "max_attempts": 1, "job": {"type": "steps", "steps": [
            {"name": "collect", "type": "noop", "payload": {"output": {"rows": 7}}},
            upload
        ]}})
    };
    let broken = json!({"name": "upload", "type": "noop", "fail_times": 9});
    let created = api.post(ADMIN, "/v1/schedules", Some(doc(broken))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let made = api
        .post(
            OPERATOR,
            "/v1/schedules/report/runs",
            Some(json!({"mode": "new"})),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
    let run = made.body["run"]["run_id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    drain_manual(&api).await;
    let path = format!("/v1/schedules/report/runs/{run}");
    let failed = api.get(VIEWER, &path).await;
    assert_eq!(failed.body["status"], "FAILED", "{:?}", failed.body);
    let steps = |body: &Value| -> Vec<(String, String, u64)> {
        body["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                (
                    s["name"].as_str().unwrap_or("").to_string(),
                    s["status"].as_str().unwrap_or("").to_string(),
                    s["attempts"].as_u64().unwrap_or(0),
                )
            })
            .collect()
    };
    assert_eq!(
        steps(&failed.body),
        vec![
            ("collect".into(), "SUCCESS".into(), 1),
            ("upload".into(), "FAILED".into(), 1)
        ]
    );
    assert_eq!(failed.body["steps"][0]["output"], json!({"rows": 7}));
    // Two attempts, one per step: collect's from the first message, upload's from its own.
    assert_eq!(failed.body["attempts"], 2);

    let fixed = json!({"name": "upload", "type": "noop"});
    fix_and_retry(&api, "report", doc(fixed), &path).await;
    drain_manual(&api).await;
    let done = api.get(VIEWER, &path).await;
    assert_eq!(done.body["status"], "SUCCESS", "{:?}", done.body);
    assert_eq!(
        steps(&done.body),
        vec![
            ("collect".into(), "SUCCESS".into(), 1),
            ("upload".into(), "SUCCESS".into(), 2)
        ]
    );
    assert_eq!(done.body["attempts"], 3);
}

/// A run whose children failed is retried by an operator: only the failed children run
/// again; the ones that succeeded keep their single attempt.
#[tokio::test]
async fn a_retried_run_reruns_only_its_failed_children() {
    let api = ApiEnv::new(t(NOW)).await;
    let doc = |fail: u32| {
        json!({"id": "fan", "cron": "0 * * * *", "timezone": "UTC", "owner": "tests",
               "overlap": "ALLOW", "max_attempts": 1,
               "job": {"type": "noop", "children": 10, "fail_children": fail}})
    };
    let created = api.post(ADMIN, "/v1/schedules", Some(doc(2))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let made = api
        .post(
            OPERATOR,
            "/v1/schedules/fan/runs",
            Some(json!({"mode": "new"})),
        )
        .await;
    let run = made.body["run"]["run_id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    drain_manual(&api).await;
    let path = format!("/v1/schedules/fan/runs/{run}");
    let failed = api.get(VIEWER, &path).await;
    assert_eq!(failed.body["status"], "FAILED", "{:?}", failed.body);
    assert_eq!(failed.body["result"]["error_code"], "CHILDREN_FAILED");
    assert_eq!(
        failed.body["children"],
        json!({"total": 10, "succeeded": 8, "failed": 2, "running": 0})
    );

    fix_and_retry(&api, "fan", doc(0), &path).await;
    drain_manual(&api).await;
    let done = api.get(VIEWER, &path).await;
    assert_eq!(done.body["status"], "SUCCESS", "{:?}", done.body);
    assert_eq!(
        done.body["children"],
        json!({"total": 10, "succeeded": 10, "failed": 0, "running": 0})
    );
    let store = api.env.store.as_ref();
    let runs = store.run_history("fan", 10, None).await.expect("runs");
    let parent = &runs.items[0].key;
    let children = store
        .children_of(parent, 0, 100, None)
        .await
        .expect("children");
    let attempts: Vec<u32> = children.items.iter().map(|c| c.attempts).collect();
    assert_eq!(attempts, vec![2, 2, 1, 1, 1, 1, 1, 1, 1, 1]);
}

/// Edits schedule `id` (version 1) to `doc` and retries the run at `path` with the current
/// definition, as an operator fixing a job would.
async fn fix_and_retry(api: &ApiEnv, id: &str, doc: Value, path: &str) {
    let edited = api
        .call_with(
            Some(Caller::new(ADMIN)),
            Method::PUT,
            &format!("/v1/schedules/{id}"),
            Some(doc),
            &[("If-Match", "\"1\"")],
        )
        .await;
    assert_eq!(edited.body["version"], 2, "{:?}", edited.body);
    let retried = api
        .post(
            OPERATOR,
            &format!("{path}/retry"),
            Some(json!({"note": "fixed", "definition": "current"})),
        )
        .await;
    assert_eq!(retried.status, StatusCode::OK, "{:?}", retried.body);
}
