//! A repaired upstream repairs its dependents, on both stores: an upstream window that
//! FAILED left its dependents' windows SKIPPED (UPSTREAM_NOT_SUCCEEDED); an operator's retry
//! that ends it SUCCESS re-opens each of them as the window's repair run (`~M~repair`,
//! trigger DEPENDENCY), audited RUN_REPAIR naming the run that repaired it, down the chain;
//! `cascade: false` leaves them skipped; a dependent's own approval still holds its repair.

use super::*;

/// The hour whose window each test fires.
const HOUR: &str = "2026-03-10T13:00:00Z";

/// An hourly upstream whose first attempt fails for good (one attempt allowed): its retry
/// succeeds.
fn failing_once(id: &str) -> Value {
    let mut doc = schedule_doc(id, "0 * * * *");
    doc["max_attempts"] = json!(1);
    doc["job"] = json!({"type": "noop", "fail_times": 1});
    doc
}

fn after(id: &str, upstream: &str) -> Value {
    let mut doc = schedule_doc(id, "0 * * * *");
    doc["after"] = json!([upstream]);
    doc
}

/// Hands every lane's messages to a worker until none is left.
async fn settle(api: &ApiEnv) {
    loop {
        let mut handled = 0;
        for lane in [Lane::Realtime, Lane::Normal, Lane::Manual] {
            handled += drain(api, lane).await;
        }
        if handled == 0 {
            return;
        }
    }
}

async fn run(api: &ApiEnv, schedule: &str, run_id: &str) -> Answer {
    api.get(VIEWER, &format!("/v1/schedules/{schedule}/runs/{run_id}"))
        .await
}

fn repair_id() -> String {
    format!("{HOUR}~M~repair")
}

/// The schedules of `docs` created, then `HOUR`'s window fired and worked until the
/// upstream `first` FAILED and each dependent's window is SKIPPED for it.
async fn failed_chain(memory: bool, docs: Vec<Value>) -> ApiEnv {
    let api = ApiEnv::on(memory, t(NOW)).await;
    let first = docs[0]["id"].as_str().unwrap_or_default().to_string();
    let dependents: Vec<String> = docs[1..]
        .iter()
        .map(|d| d["id"].as_str().unwrap_or_default().to_string())
        .collect();
    // The reconciler keeps each upstream's `downstream` from the specs' `after`; here,
    // directly.
    let mut downstream: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for doc in docs {
        for upstream in doc["after"].as_array().into_iter().flatten() {
            let id = doc["id"].as_str().unwrap_or_default().to_string();
            let upstream = upstream.as_str().unwrap_or_default().to_string();
            downstream.entry(upstream).or_default().push(id);
        }
        create(&api, doc).await;
    }
    for (upstream, ids) in &downstream {
        api.env
            .store
            .set_downstream(upstream, ids)
            .await
            .expect("downstream");
    }
    api.env.tick(t(HOUR)).await;
    settle(&api).await;
    let failed = run(&api, &first, HOUR).await;
    assert_eq!(failed.body["status"], "FAILED", "{:?}", failed.body);
    for id in &dependents {
        let skipped = run(&api, id, HOUR).await;
        assert_eq!(
            (&skipped.body["status"], &skipped.body["reason"]),
            (&json!("SKIPPED"), &json!("UPSTREAM_NOT_SUCCEEDED")),
            "{id}: {:?}",
            skipped.body
        );
    }
    api
}

async fn retry(api: &ApiEnv, schedule: &str, body: Value) {
    let path = format!("/v1/schedules/{schedule}/runs/{HOUR}/retry");
    let retried = api.post(OPERATOR, &path, Some(body)).await;
    assert_eq!(retried.status, StatusCode::OK, "{:?}", retried.body);
    settle(api).await;
    let done = run(api, schedule, HOUR).await;
    assert_eq!(done.body["status"], "SUCCESS", "{:?}", done.body);
}

/// The RUN_REPAIR entries of `schedule`'s audit log.
async fn repairs_audited(api: &ApiEnv, schedule: &str) -> Vec<Value> {
    let audit = api
        .get(VIEWER, &format!("/v1/schedules/{schedule}/audit"))
        .await;
    assert_eq!(audit.status, StatusCode::OK, "{:?}", audit.body);
    audit.body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["action"] == "RUN_REPAIR")
        .collect()
}

async fn a_retry_repairs_a_chain_of_three(memory: bool) {
    let docs = vec![
        failing_once("extract"),
        after("load", "extract"),
        after("report", "load"),
    ];
    let api = failed_chain(memory, docs).await;
    retry(&api, "extract", json!({"note": "source fixed"})).await;

    // Each level's repair run ran, its success repairing the next level.
    for (id, upstream, upstream_run) in [
        ("load", "extract", HOUR.to_string()),
        ("report", "load", repair_id()),
    ] {
        let repaired = run(&api, id, &repair_id()).await;
        assert_eq!(repaired.status, StatusCode::OK, "{id}: {:?}", repaired.body);
        assert_eq!(
            repaired.body["status"], "SUCCESS",
            "{id}: {:?}",
            repaired.body
        );
        assert_eq!(repaired.body["trigger"], "DEPENDENCY");
        assert_eq!(repaired.body["attempts"], 1);
        // The skipped entry stays: it was skipped, and why.
        let skipped = run(&api, id, HOUR).await;
        assert_eq!(skipped.body["status"], "SKIPPED", "{id}");
        assert_eq!(
            repaired.body["idempotency_key"], skipped.body["idempotency_key"],
            "{id}: the repair is the window's work"
        );
        let audited = repairs_audited(&api, id).await;
        assert_eq!(audited.len(), 1, "{id}: {audited:?}");
        let entry = &audited[0];
        assert_eq!(entry["details"]["run"], repair_id());
        assert_eq!(entry["details"]["repaired_by"]["schedule"], upstream);
        assert_eq!(
            entry["details"]["repaired_by"]["run"],
            upstream_run.as_str()
        );
    }
    // The window is still accounted once: the completeness audit finds no duplicate.
    api.env.clock.set(t("2026-03-10T13:30:00Z"));
    let report = api
        .get(
            VIEWER,
            "/v1/audit/completeness?from=2026-03-10T12:30:00Z&to=2026-03-10T13:30:00Z",
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{:?}", report.body);
    let schedules = report.body["schedules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!schedules.is_empty(), "{:?}", report.body);
    for s in schedules {
        assert_eq!(s["duplicates"], json!([]), "{s:?}");
        assert_eq!(s["missing"], json!([]), "{s:?}");
    }
}

#[tokio::test]
async fn a_retry_repairs_a_chain_of_three_on_dynamodb() {
    a_retry_repairs_a_chain_of_three(false).await;
}

#[tokio::test]
async fn a_retry_repairs_a_chain_of_three_in_memory() {
    a_retry_repairs_a_chain_of_three(true).await;
}

async fn cascade_false_leaves_the_dependent_skipped(memory: bool) {
    let docs = vec![failing_once("extract"), after("load", "extract")];
    let api = failed_chain(memory, docs).await;
    retry(&api, "extract", json!({"cascade": false})).await;
    let none = run(&api, "load", &repair_id()).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND, "{:?}", none.body);
    assert_eq!(run(&api, "load", HOUR).await.body["status"], "SKIPPED");
    assert!(repairs_audited(&api, "load").await.is_empty());
    // The retry's audit says it did not cascade.
    let audit = api.get(VIEWER, "/v1/schedules/extract/audit").await;
    let entries = audit.body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let retried = entries
        .iter()
        .find(|e| e["action"] == "RUN_RETRY")
        .expect("the retry is audited");
    assert_eq!(retried["details"]["cascade"], false);
}

#[tokio::test]
async fn cascade_false_leaves_the_dependent_skipped_on_dynamodb() {
    cascade_false_leaves_the_dependent_skipped(false).await;
}

#[tokio::test]
async fn cascade_false_leaves_the_dependent_skipped_in_memory() {
    cascade_false_leaves_the_dependent_skipped(true).await;
}

async fn a_repair_goes_through_the_dependents_own_rule_book(memory: bool) {
    let mut guarded = after("load", "extract");
    guarded["approval"] = json!("every_run");
    let docs = vec![failing_once("extract"), guarded];
    let api = failed_chain(memory, docs).await;
    retry(&api, "extract", json!({})).await;
    // The dependent asks for approval of every run: its repair waits for one too.
    let held = run(&api, "load", &repair_id()).await;
    assert_eq!(held.status, StatusCode::OK, "{:?}", held.body);
    assert_eq!(
        (&held.body["status"], &held.body["reason"]),
        (&json!("MANUAL_REQUIRED"), &json!("APPROVAL_REQUIRED")),
        "{:?}",
        held.body
    );
    assert_eq!(held.body["attempts"], 0);
    // Approved, it runs.
    let path = format!("/v1/schedules/load/runs/{}/approve", repair_id());
    let approved = api.post(OPERATOR, &path, None).await;
    assert_eq!(approved.status, StatusCode::OK, "{:?}", approved.body);
    settle(&api).await;
    assert_eq!(
        run(&api, "load", &repair_id()).await.body["status"],
        "SUCCESS"
    );
}

#[tokio::test]
async fn a_repair_goes_through_the_dependents_own_rule_book_on_dynamodb() {
    a_repair_goes_through_the_dependents_own_rule_book(false).await;
}

#[tokio::test]
async fn a_repair_goes_through_the_dependents_own_rule_book_in_memory() {
    a_repair_goes_through_the_dependents_own_rule_book(true).await;
}
