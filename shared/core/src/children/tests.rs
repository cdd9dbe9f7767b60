use proptest::prelude::*;
use serde_json::json;

use super::*;

#[test]
fn a_range_is_split_into_batches_with_the_last_one_short() {
    let list = payloads(&json!({"count": 10, "batch": 4})).unwrap();
    assert_eq!(
        list,
        vec![
            json!({"from": 0, "to": 4}),
            json!({"from": 4, "to": 8}),
            json!({"from": 8, "to": 10})
        ]
    );
    assert_eq!(payloads(&json!([{"a": 1}, 2])).unwrap().len(), 2);
}

#[test]
fn too_many_children_bad_shapes_and_large_payloads_are_refused() {
    let code = |v: Value| payloads(&v).unwrap_err().code();
    assert_eq!(
        code(json!({"count": 100_001, "batch": 10})),
        "CHILDREN_TOO_MANY"
    );
    assert_eq!(code(json!({"count": 5, "batch": 0})), "CHILDREN_INVALID");
    assert_eq!(code(json!("ten")), "CHILDREN_INVALID");
    assert_eq!(
        code(json!([{"blob": "x".repeat(5000)}])),
        "CHILD_PAYLOAD_TOO_LARGE"
    );
    assert!(payloads(&json!({"count": 100_000, "batch": 10})).is_ok());
}

#[test]
fn the_outcome_follows_the_failure_budget() {
    let counts = |failed| ChildCounts {
        total: 100,
        succeeded: 100 - failed,
        failed,
        step: 0,
    };
    assert_eq!(outcome(&counts(0), None), ChildrenOutcome::Success);
    assert_eq!(outcome(&counts(1), None), ChildrenOutcome::Failed);
    let five = FailureBudget::Count(5);
    assert_eq!(
        outcome(&counts(5), Some(&five)),
        ChildrenOutcome::PartialSuccess
    );
    assert_eq!(outcome(&counts(6), Some(&five)), ChildrenOutcome::Failed);
    let share: FailureBudget = serde_json::from_value(json!("2%")).unwrap();
    assert_eq!(share, FailureBudget::Percent(2.0));
    assert_eq!(
        outcome(&counts(2), Some(&share)),
        ChildrenOutcome::PartialSuccess
    );
    assert_eq!(outcome(&counts(3), Some(&share)), ChildrenOutcome::Failed);
    assert!(serde_json::from_value::<FailureBudget>(json!("150%")).is_err());
    assert_eq!(serde_json::to_value(share).unwrap(), json!("2%"));
}

#[test]
fn a_child_key_is_the_run_key_and_its_place() {
    let key = IdempotencyKey::from_stored("sync:2026-03-01T00:00:00Z".into());
    assert_eq!(
        idempotency_key(&key, 7).as_str(),
        "sync:2026-03-01T00:00:00Z#child-7"
    );
}

proptest! {
    /// A range's batches cover it exactly once, in order, none larger than the batch.
    #[test]
    fn batches_cover_the_range_exactly(count in 0u64..5000, batch in 1u64..700) {
        let list = payloads(&json!({"count": count, "batch": batch})).unwrap();
        let mut next = 0;
        for p in &list {
            let (from, to) = (p["from"].as_u64().unwrap(), p["to"].as_u64().unwrap());
            prop_assert_eq!(from, next);
            prop_assert!(to > from && to - from <= batch);
            next = to;
        }
        prop_assert_eq!(next, count);
    }
}
