//! Items come from outside: a malformed one is a typed error naming the item and the
//! attribute, never a panic.

use aws_sdk_dynamodb::types::AttributeValue;
use cronledger_aws::codec::run as attrs;
use cronledger_aws::dynamo::values::{item_to_sdk, SdkItem};
use cronledger_aws::keys;
use cronledger_aws::prelude::*;
use cronledger_aws::StoreError;
use cronledger_tests::{scheduled_run, spec, t, TestLedger};

/// Writes `item` as it is, past the store (the SDK's own types, as anyone with table access).
async fn put_raw(env: &TestLedger, item: SdkItem) {
    env.clients
        .dynamodb
        .put_item()
        .table_name(&env.table)
        .set_item(Some(item))
        .send()
        .await
        .expect("raw put");
}

fn assert_names(err: StoreError, pk: &str, sk: &str, attribute: &str) {
    match &err {
        StoreError::Malformed {
            pk: p,
            sk: s,
            attribute: a,
            ..
        } => {
            assert_eq!(
                (p.as_str(), s.as_str(), a.as_str()),
                (pk, sk, attribute),
                "{err}"
            );
            assert_eq!(err.code(), "STORE_MALFORMED_ITEM");
            let text = err.to_string();
            assert!(
                text.contains(pk) && text.contains(sk) && text.contains(attribute),
                "{text}"
            );
        }
        other => panic!("expected STORE_MALFORMED_ITEM for {attribute}, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_runs_give_typed_errors_naming_the_item_and_attribute() {
    let env = TestLedger::new().await;
    let at = t("2026-03-01T00:00:00Z");
    let good = scheduled_run(&spec("broken", "0 * * * *"), at, at, "ticker");
    let good_item = item_to_sdk(cronledger_aws::codec::run::encode(&good, 4));
    let pk = "SCHED#broken";
    let sk = "RUN#2026-03-01T00:00:00Z";

    // (attribute, what to store instead; `None` removes it)
    let cases: Vec<(&str, Option<AttributeValue>)> = vec![
        (attrs::STATUS, None),
        (attrs::STATUS, Some(AttributeValue::N("3".into()))),
        (attrs::STATUS, Some(AttributeValue::S("EXPLODED".into()))),
        (attrs::LEASE_EPOCH, Some(AttributeValue::S("one".into()))),
        (attrs::LEASE_EPOCH, Some(AttributeValue::N("-1".into()))),
        (
            attrs::WINDOW_START,
            Some(AttributeValue::S("yesterday".into())),
        ),
        (attrs::ATTEMPTS, Some(AttributeValue::Bool(true))),
        (attrs::TRIGGER, None),
        (
            attrs::SCHEDULED_FOR,
            Some(AttributeValue::S("2026-03-01T01:00:00Z".into())),
        ),
    ];
    for (attribute, replacement) in cases {
        let mut item = good_item.clone();
        match replacement {
            Some(value) => item.insert(attribute.to_string(), value),
            None => item.remove(attribute),
        };
        put_raw(&env, item).await;
        let err = env.ledger.get_run(&good.key).await.unwrap_err();
        // A run whose scheduled_for disagrees with its key is reported against the key.
        let named = if attribute == attrs::SCHEDULED_FOR {
            "SK"
        } else {
            attribute
        };
        assert_names(err, pk, sk, named);
        // Listings fail the same way instead of panicking or hiding the item.
        let err = env
            .ledger
            .run_history("broken", 10, None)
            .await
            .unwrap_err();
        assert_names(err, pk, sk, named);
    }
}

#[tokio::test]
async fn malformed_schedules_give_typed_errors_naming_the_item_and_attribute() {
    let env = TestLedger::new().await;
    let meta = cronledger_aws::ChangeMeta {
        actor: "t".into(),
        reason: "t".into(),
        at: t("2026-03-01T00:00:00Z"),
        details: None,
    };
    env.ledger
        .create_schedule(spec("sched", "0 * * * *"), meta)
        .await
        .expect("create");
    let key: SdkItem = [
        ("PK".to_string(), AttributeValue::S("SCHED#sched".into())),
        (
            "SK".to_string(),
            AttributeValue::S(keys::SCHEDULE_SK.into()),
        ),
    ]
    .into();
    let raw = env
        .clients
        .dynamodb
        .get_item()
        .table_name(&env.table)
        .set_key(Some(key))
        .send()
        .await
        .expect("raw get")
        .item
        .expect("stored");

    let spoiled: Vec<(&str, AttributeValue)> = vec![
        ("spec", AttributeValue::S("{not json".into())),
        ("spec", AttributeValue::S(r#"{"id":"sched"}"#.into())),
        ("version", AttributeValue::S("2".into())),
        ("state", AttributeValue::S("SLEEPING".into())),
        ("next_run_at", AttributeValue::N("1".into())),
    ];
    for (attribute, value) in spoiled {
        let mut item = raw.clone();
        item.insert(attribute.to_string(), value);
        put_raw(&env, item).await;
        let err = env.ledger.get_schedule("sched").await.unwrap_err();
        assert_names(err, "SCHED#sched", keys::SCHEDULE_SK, attribute);
    }

    // An item of another kind under the schedule's key.
    let mut item = raw.clone();
    item.insert("type".into(), AttributeValue::S("RUN".into()));
    put_raw(&env, item).await;
    assert_names(
        env.ledger.get_schedule("sched").await.unwrap_err(),
        "SCHED#sched",
        keys::SCHEDULE_SK,
        "type",
    );
}
