//! The lanes on SQS: poison messages go to the lane's DLQ without failing their batch-mates,
//! and a message that keeps failing is redriven after the configured receive count.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use cronledger_aws::lanes::sqs::ERROR_CODE_ATTRIBUTE;
use cronledger_aws::lanes::{
    process_batch, HandlerFailure, LaneSettings, MessageOutcome, Received, SqsRecord,
};
use cronledger_aws::{LaneMessage, LaneQueue};
use cronledger_core::{IdempotencyKey, Lane, RunKey, Window};
use cronledger_tests::{t, TestLanes};

fn message(minute: u32, lane: Lane) -> LaneMessage {
    let end = t("2026-03-01T00:00:00Z") + chrono::Duration::minutes(minute.into());
    let window = Window::new(end - chrono::Duration::minutes(1), end);
    LaneMessage::new(
        RunKey::expected("lanes", end),
        IdempotencyKey::for_window("lanes", &window, None),
        window,
        lane,
        1,
    )
}

/// Receives until `count` messages arrived (SQS hands out batches of any size).
async fn receive_n(env: &TestLanes, lane: Lane, dlq: bool, count: usize) -> Vec<Received> {
    let mut got = Vec::new();
    for _ in 0..20 {
        if got.len() >= count {
            break;
        }
        let batch = env
            .lanes
            .receive(lane, dlq, 10, Duration::from_secs(1))
            .await
            .expect("receive");
        got.extend(batch);
    }
    got
}

#[tokio::test]
async fn poison_messages_are_dead_lettered_without_failing_their_batch() {
    let env = TestLanes::new(LaneSettings::default()).await;
    let lane = Lane::Correction;
    let queue: &dyn LaneQueue = &env.lanes;
    for minute in 1..=4 {
        queue
            .send(&message(minute, lane), Duration::ZERO)
            .await
            .expect("send");
    }
    // Poison: a version no release writes (a later release's is kept instead: see the
    // upgrade tests), and something that is not an envelope at all.
    let mut future = serde_json::to_value(message(5, lane)).expect("json");
    future["v"] = 0.into();
    let urls = env.lanes.urls(lane).expect("urls").clone();
    for body in [future.to_string(), "not an envelope".to_string()] {
        env.clients
            .sqs
            .send_message()
            .queue_url(&urls.queue)
            .message_body(body)
            .send()
            .await
            .expect("raw send");
    }

    let received = receive_n(&env, lane, false, 6).await;
    assert_eq!(received.len(), 6);
    let records: Vec<SqsRecord> = received.iter().map(SqsRecord::from).collect();
    assert!(records.iter().all(|r| r.receive_count == 1));

    // The handler fails minute 3 for a retryable reason, and succeeds on the rest.
    let handled = Mutex::new(BTreeSet::new());
    let report = process_batch(
        lane,
        &records,
        queue,
        None,
        |msg: LaneMessage, record| {
            assert!(!record.receipt_handle.is_empty());
            let minute = msg.run.scheduled_for.format("%M").to_string();
            handled.lock().expect("lock").insert(minute.clone());
            async move {
                if minute == "03" {
                    Err(HandlerFailure::Retry("target busy".into()))
                } else {
                    Ok(())
                }
            }
        },
        &|_, _| {},
    )
    .await;

    let handled = handled.into_inner().expect("lock");
    assert_eq!(
        handled,
        BTreeSet::from(["01", "02", "03", "04"].map(String::from))
    );
    let by_body: BTreeMap<&str, &MessageOutcome> = records
        .iter()
        .zip(&report.outcomes)
        .map(|(r, (id, outcome))| {
            assert_eq!(&r.message_id, id);
            (r.body.as_str(), outcome)
        })
        .collect();
    assert_eq!(
        by_body["not an envelope"],
        &MessageOutcome::DeadLettered {
            code: "LANE_MESSAGE_MALFORMED".into()
        }
    );
    assert_eq!(
        by_body[future.to_string().as_str()],
        &MessageOutcome::DeadLettered {
            code: "LANE_MESSAGE_UNKNOWN_VERSION".into()
        }
    );
    let done = report
        .outcomes
        .iter()
        .filter(|(_, o)| *o == MessageOutcome::Done)
        .count();
    assert_eq!(done, 3);

    // Only the retryable failure is reported back to SQS.
    let retry_id = records
        .iter()
        .find(|r| LaneMessage::parse(&r.body).is_ok_and(|m| m.run == message(3, lane).run))
        .map(|r| r.message_id.clone())
        .expect("minute 3 was received");
    let failures: Vec<String> = report
        .response()
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect();
    assert_eq!(failures, [retry_id]);
    let response_json = serde_json::to_value(report.response()).expect("json");
    assert!(
        response_json.get("batchItemFailures").is_some(),
        "{response_json}"
    );

    // The DLQ holds the two poison bodies, each with its code.
    let dead = receive_n(&env, lane, true, 2).await;
    let codes: BTreeMap<String, String> = dead
        .iter()
        .map(|m| (m.body.clone(), m.attributes[ERROR_CODE_ATTRIBUTE].clone()))
        .collect();
    assert_eq!(codes.len(), 2);
    assert_eq!(codes["not an envelope"], "LANE_MESSAGE_MALFORMED");
    assert_eq!(codes[&future.to_string()], "LANE_MESSAGE_UNKNOWN_VERSION");
}

#[tokio::test]
async fn a_message_that_keeps_failing_is_redriven_after_the_receive_count() {
    let settings = LaneSettings {
        max_receive_count: 2,
        // Visible again at once, so the test can receive it repeatedly without waiting.
        visibility_timeout: Duration::ZERO,
    };
    let env = TestLanes::new(settings).await;
    let lane = Lane::Backfill;
    env.lanes
        .send(&message(1, lane), Duration::ZERO)
        .await
        .expect("send");

    let mut receives = 0;
    for _ in 0..10 {
        let got = env
            .lanes
            .receive(lane, false, 10, Duration::ZERO)
            .await
            .expect("receive");
        if got.is_empty() {
            break;
        }
        receives += got.len();
        // Never deleted: as if the worker failed every time.
    }
    assert_eq!(receives, 2, "received max_receive_count times, then moved");
    let dead = receive_n(&env, lane, true, 1).await;
    assert_eq!(dead.len(), 1);
    let moved = LaneMessage::parse(&dead[0].body).expect("the original envelope");
    assert_eq!(moved, message(1, lane));
}
