//! `jitter` and `retention` against the emulator: a jittered schedule is fired at its
//! occurrence plus its offset and its run keeps the occurrence; every run that ends carries
//! the TTL attribute (`expires_at`), from its end by its retention, a failure longer, and a
//! run that moves again loses it.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::dynamo::values::SdkItem;
use cronledger_aws::keys::{self, EXPIRES_AT};
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::Opening;
use cronledger_aws::ledger::RunChange;
use cronledger_aws::prelude::*;
use cronledger_core::retention::KEPT_LONGER;
use cronledger_core::{Reason, RunEvent, RunKey, RunStatus, Schedule, ScheduleSpec};
use cronledger_tests::app::AppEnv;
use cronledger_tests::{bare, because};
use cronledger_tests::{scheduled_run, spec_with, t, TestLedger};
use serde_json::json;

/// A jittered hourly schedule whose offset is at least five minutes (ids tried in turn), so
/// its nominal instant and its fire time are ticks apart.
fn jittered_hourly() -> (ScheduleSpec, TimeDelta) {
    let template = spec_with("jit", "0 * * * *", json!({ "jitter": "30m" }));
    (0..)
        .map(|i| ScheduleSpec {
            id: format!("jit-{i}"),
            ..template.clone()
        })
        .map(|spec| {
            let offset = Schedule::new(spec.clone()).expect("compiles").fire_offset();
            (spec, offset)
        })
        .find(|(_, offset)| *offset >= TimeDelta::minutes(5))
        .expect("some id has an offset of five minutes or more")
}

#[tokio::test]
async fn a_jittered_schedule_fires_at_its_offset_and_its_run_keeps_the_nominal_window() {
    let hour = t("2026-03-01T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), hour).await;
    let (spec, offset) = jittered_hourly();
    let created = env.create(spec.clone(), t("2026-03-01T09:30:00Z")).await;
    assert_eq!(
        created.next_run_at,
        Some(hour + offset),
        "next_run_at is the fire time"
    );

    // At the nominal instant nothing is due yet.
    let early = env.tick(hour).await;
    assert_eq!((early.due_schedules, early.created), (0, 0), "{early:?}");
    let key = RunKey::expected(&spec.id, hour);
    assert!(
        env.store.get_run(&key).await.is_err(),
        "no run before the fire time"
    );

    // The tick whose minute holds the fire time fires it, under the nominal occurrence.
    let fire_minute = hour + TimeDelta::minutes(offset.num_minutes());
    let fired = env.tick(fire_minute).await;
    assert_eq!((fired.created, fired.sent), (1, 1), "{fired:?}");
    assert!(fired.errors.is_empty(), "{:?}", fired.errors);
    let run = env.run(&key).await;
    assert_eq!(run.key.scheduled_for, hour);
    assert_eq!(
        (run.window.start, run.window.end),
        (t("2026-03-01T09:00:00Z"), hour)
    );
    assert_eq!(
        run.idempotency_key.as_str(),
        format!("{}:2026-03-01T09:00:00Z/2026-03-01T10:00:00Z", spec.id)
    );
    let after = env.store.get_schedule(&spec.id).await.expect("schedule");
    assert_eq!(
        after.next_fire_after(fire_minute + TimeDelta::minutes(1)),
        Some(t("2026-03-01T11:00:00Z") + offset),
        "the next fire time is the next occurrence plus the same offset"
    );
}

#[tokio::test]
async fn an_edit_of_the_jitter_keeps_the_pending_occurrence_at_its_new_fire_time() {
    let hour = t("2026-03-01T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), hour).await;
    let (spec, offset) = jittered_hourly();
    env.create(spec.clone(), t("2026-03-01T09:30:00Z")).await;
    // Past the nominal instant, before the fire time: the jitter goes away.
    let unjittered = ScheduleSpec {
        jitter: None,
        ..spec.clone()
    };
    let meta = cronledger_aws::ledger::ChangeMeta {
        actor: "tests".into(),
        at: hour + TimeDelta::minutes(1),
        reason: "jitter removed".into(),
        details: None,
    };
    let edited = env
        .store
        .update_schedule(unjittered, 1, meta)
        .await
        .expect("update");
    assert!(offset > TimeDelta::minutes(1));
    assert_eq!(
        edited.next_run_at,
        Some(hour),
        "the 10:00 window is not lost by the edit"
    );
}

async fn raw_expires_at(env: &TestLedger, key: &RunKey) -> Option<i64> {
    let item_key: SdkItem = [
        (
            "PK".to_string(),
            AttributeValue::S(keys::schedule_pk(&key.schedule_id)),
        ),
        ("SK".to_string(), AttributeValue::S(keys::run_sk(key))),
    ]
    .into();
    let item = env
        .clients
        .dynamodb
        .get_item()
        .table_name(&env.table)
        .set_key(Some(item_key))
        .consistent_read(true)
        .send()
        .await
        .expect("raw get")
        .item
        .expect("the run is stored");
    item.get(EXPIRES_AT).map(|v| {
        v.as_n()
            .expect("expires_at is a number")
            .parse()
            .expect("epoch seconds")
    })
}

fn epoch(at: DateTime<Utc>, plus: TimeDelta) -> Option<i64> {
    Some((at + plus).timestamp())
}

/// Moves a run through `events`, each at `at`, from `from` (a lease for START).
async fn walk(
    env: &TestLedger,
    key: &RunKey,
    mut from: RunStatus,
    events: &[(RunEvent, Option<Reason>)],
    at: DateTime<Utc>,
) {
    let mut epoch = 0;
    for (event, reason) in events {
        let until = at + TimeDelta::minutes(5);
        let change = match event {
            RunEvent::Start => RunChange::open(Opening::Start, from, epoch, at, "tests", until),
            RunEvent::Reclaim => RunChange::open(Opening::Reclaim, from, epoch, at, "tests", until),
            _ => because(*event, from, epoch, at, *reason),
        };
        let run = env
            .ledger
            .transition_run(key, &change)
            .await
            .unwrap_or_else(|e| panic!("{event}: {e}"));
        from = run.status;
        epoch = run.lease_epoch;
    }
}

#[tokio::test]
async fn a_run_carries_its_ttl_from_its_end_once_terminal_and_a_failure_longer() {
    let env = TestLedger::new().await;
    let spec = spec_with("ttl", "0 * * * *", json!({ "retention": "30d" }));
    let ended = t("2026-03-01T10:05:00Z");
    let run_at = |hour: u32| {
        let at = t("2026-03-01T00:00:00Z") + TimeDelta::hours(hour.into());
        scheduled_run(&spec, at, at, "tests")
    };
    let start = [(RunEvent::Enqueue, None), (RunEvent::Start, None)];

    // Non-terminal: no TTL.
    let pending = run_at(1);
    env.ledger.create_run(&pending).await.expect("create");
    assert_eq!(raw_expires_at(&env, &pending.key).await, None);
    walk(&env, &pending.key, RunStatus::Pending, &start, ended).await;
    assert_eq!(raw_expires_at(&env, &pending.key).await, None, "RUNNING");

    // SUCCESS: its end plus the schedule's retention.
    let success = run_at(2);
    env.ledger.create_run(&success).await.expect("create");
    let mut to_success = start.to_vec();
    to_success.push((RunEvent::Succeed, None));
    walk(&env, &success.key, RunStatus::Pending, &to_success, ended).await;
    assert_eq!(
        raw_expires_at(&env, &success.key).await,
        epoch(ended, TimeDelta::days(30))
    );

    // FAILED: kept longer; a retry moves it again and takes the TTL away.
    let failed = run_at(3);
    env.ledger.create_run(&failed).await.expect("create");
    let mut to_failed = start.to_vec();
    to_failed.push((RunEvent::Fail, Some(Reason::PermanentError)));
    walk(&env, &failed.key, RunStatus::Pending, &to_failed, ended).await;
    assert_eq!(
        raw_expires_at(&env, &failed.key).await,
        epoch(ended, KEPT_LONGER.as_delta())
    );
    let retry = bare(RunEvent::Retry, RunStatus::Failed, 1, ended);
    env.ledger
        .transition_run(&failed.key, &retry)
        .await
        .expect("retry");
    assert_eq!(
        raw_expires_at(&env, &failed.key).await,
        None,
        "moving again"
    );

    // Born terminal: a missed window is kept longer, a paused skip by the retention.
    let born = [
        (4, Reason::Missed, KEPT_LONGER.as_delta()),
        (5, Reason::Paused, TimeDelta::days(30)),
    ];
    for (hour, reason, horizon) in born {
        let mut skipped = run_at(hour);
        skipped.status = RunStatus::Skipped;
        skipped.reason = Some(reason);
        env.ledger.create_run(&skipped).await.expect("create");
        assert_eq!(
            raw_expires_at(&env, &skipped.key).await,
            epoch(skipped.updated_at, horizon),
            "{reason}"
        );
    }
    let paused = run_at(5);
    // The retention rides on the run: read back as written.
    assert_eq!(
        env.ledger
            .get_run(&paused.key)
            .await
            .expect("get")
            .retention,
        spec.retention
    );
}
