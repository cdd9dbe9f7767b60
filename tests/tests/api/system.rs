//! The kill switch and one-off runs at an instant through the api.

use super::*;

#[tokio::test]
async fn kill_switch_and_a_one_off_run_at_an_instant() {
    let api = ApiEnv::new(t(NOW)).await;
    create(&api, schedule_doc("s1", "0 * * * *")).await;
    let status = api.get(VIEWER, "/v1/system").await;
    assert_eq!(status.body["automatic_firing"], true);
    let no_note = api
        .post(
            ADMIN,
            "/v1/system/kill-switch",
            Some(json!({"engaged": true, "note": " "})),
        )
        .await;
    assert_eq!(no_note.status, StatusCode::UNPROCESSABLE_ENTITY);
    let off = api
        .post(
            ADMIN,
            "/v1/system/kill-switch",
            Some(json!({"engaged": true, "note": "runaway jobs"})),
        )
        .await;
    assert_eq!(off.status, StatusCode::OK, "{:?}", off.body);
    assert_eq!(off.body["kill_switch_engaged"], true);
    assert!(api
        .scheduler
        .states
        .lock()
        .expect("lock")
        .values()
        .all(|on| !on));
    let on = api
        .post(
            ADMIN,
            "/v1/system/kill-switch",
            Some(json!({"engaged": false, "note": "fixed"})),
        )
        .await;
    assert_eq!(on.body["automatic_firing"], true);
    let audit = api.get(VIEWER, "/v1/system/audit").await;
    let actions: Vec<&str> = audit.body["entries"]
        .as_array()
        .map(|e| e.iter().filter_map(|x| x["action"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(actions, ["KILL_SWITCH_RELEASED", "KILL_SWITCH_ENGAGED"]);

    // Run at: a one-time schedule whose firing (delivered twice) makes one MANUAL run.
    let soon = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/run-at",
            Some(json!({"at": "2026-03-10T12:00:40Z"})),
        )
        .await;
    assert_eq!(soon.status, StatusCode::UNPROCESSABLE_ENTITY);
    let later = api
        .post(
            OPERATOR,
            "/v1/schedules/s1/run-at",
            Some(json!({"at": "2026-03-10T15:30:00Z", "note": "after the vendor window"})),
        )
        .await;
    assert_eq!(later.status, StatusCode::CREATED, "{:?}", later.body);
    let (name, at, input) = api.scheduler.one_time.lock().expect("lock")[0].clone();
    assert!(name.starts_with("cronledger-runat-"));
    assert_eq!(at, t("2026-03-10T15:30:00Z"));
    let event: RunAtEvent = serde_json::from_value(input).expect("the event the api reads back");
    api.env.clock.set(t("2026-03-10T15:30:02Z"));
    let first = api.api.fire_run_at(&event).await.expect("fired");
    let second = api.api.fire_run_at(&event).await.expect("fired again");
    assert!(first.created);
    assert!(!second.created);
    assert_eq!(first.run.run_id, second.run.run_id);
    assert_eq!(first.run.scheduled_for, t("2026-03-10T15:00:00Z"));
    assert_eq!(first.run.trigger, cronledger_core::Trigger::Manual);
    // The one-off run is the schedule's business: its note is in the schedule's log; the
    // system log keeps the kill switch alone.
    let audit = api.get(VIEWER, "/v1/schedules/s1/audit").await;
    assert!(audit.body["entries"].as_array().is_some_and(|e| e
        .iter()
        .any(|x| x["action"] == "RUN_AT" && x["reason"] == "after the vendor window")));
    let system = api.get(VIEWER, "/v1/system/audit").await;
    assert_eq!(system.body["entries"].as_array().map(Vec::len), Some(2));
    let _ = api.env.clock.now_value();
}
