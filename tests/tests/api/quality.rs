//! A run's quality in the api's run views, on both stores: a success whose `count` is
//! outside its schedule's `expect` band reads `quality: SUSPECT` with its `quality_reason`
//! at the top of the run (one run and the listing), and any other run reads them null.

use super::*;

async fn a_suspect_success_shows_its_quality(memory: bool) {
    let api = ApiEnv::on(memory, t(NOW)).await;
    let mut doc = schedule_doc("counted", "0 * * * *");
    doc["expect"] = json!({"min_count": 50});
    doc["job"] = json!({"type": "noop", "count_sequence": [5, 80]});
    create(&api, doc).await;
    for hour in ["2026-03-10T13:00:00Z", "2026-03-10T14:00:00Z"] {
        api.env.tick(t(hour)).await;
        drain(&api, Lane::Normal).await;
    }
    let suspect = api
        .get(VIEWER, "/v1/schedules/counted/runs/2026-03-10T13:00:00Z")
        .await;
    assert_eq!(suspect.status, StatusCode::OK, "{:?}", suspect.body);
    assert_eq!(suspect.body["status"], "SUCCESS", "{:?}", suspect.body);
    assert_eq!(suspect.body["quality"], "SUSPECT", "{:?}", suspect.body);
    assert_eq!(suspect.body["quality_reason"], "BELOW_MIN");
    let fine = api
        .get(VIEWER, "/v1/schedules/counted/runs/2026-03-10T14:00:00Z")
        .await;
    assert_eq!(fine.body["status"], "SUCCESS", "{:?}", fine.body);
    assert!(fine.body["quality"].is_null() && fine.body["quality_reason"].is_null());
    let listed = api.get(VIEWER, "/v1/schedules/counted/runs").await;
    let items = listed.body["items"].as_array().cloned().unwrap_or_default();
    let qualities: Vec<(&Value, &Value)> = items
        .iter()
        .map(|r| (&r["scheduled_for"], &r["quality"]))
        .collect();
    assert!(
        qualities.contains(&(&json!("2026-03-10T13:00:00Z"), &json!("SUSPECT")))
            && qualities.contains(&(&json!("2026-03-10T14:00:00Z"), &Value::Null)),
        "{qualities:?}"
    );
}

#[tokio::test]
async fn a_suspect_success_shows_its_quality_on_dynamodb() {
    a_suspect_success_shows_its_quality(false).await;
}

#[tokio::test]
async fn a_suspect_success_shows_its_quality_in_memory() {
    a_suspect_success_shows_its_quality(true).await;
}
