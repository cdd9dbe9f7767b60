//! Writes this release's fixtures: the real ticker, worker and store leave a ledger with
//! every item kind and lanes with every message kind in flight, at fixed ids and times;
//! the table and the lanes are then dumped as they are. Run once per release, before its
//! format changes:
//! `cargo test -p cronledger-tests --test upgrade write_release_fixtures -- --ignored`.

use std::time::Duration;

use chrono::{DateTime, Duration as Delta, Utc};
use cronledger_app::runs::{claim_and_send, new_run_with_origin};
use cronledger_app::simulate::SimulateError;
use cronledger_aws::alerts::{Awaiting, HeldWork};
use cronledger_aws::dynamo::values::item_from_sdk;
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::ChangeMeta;
use cronledger_aws::ledger::Opening;
use cronledger_aws::{
    AlertStore, BackfillStore, CalendarStore, HealthStore, IdempotencyClaim, KillSwitch, Outcome,
    ReleaseState, ReleaseStateStore, RunChange, SystemAuditEntry, SystemStore,
};
use cronledger_core::alerts::{Alert, AlertKind, Severity};
use cronledger_core::run::Origin;
use cronledger_core::{Lane, RunKey, RunStatus, Schedule, ScheduleSpec, Trigger};
use cronledger_tests::app::{worker_config, AppEnv};
use cronledger_tests::{running_backfill, spec_with, t};
use serde_json::json;

use super::fixtures::{kind_of, Release};

/// The fixtures' hour: every window, lease and record is at or around it.
pub fn hour() -> DateTime<Utc> {
    t("2026-03-01T10:00:00Z")
}

pub fn created() -> DateTime<Utc> {
    hour() - Delta::seconds(30)
}

/// The release's schedules, each leaving its run in another state.
pub fn schedules() -> Vec<ScheduleSpec> {
    let noop = |fields: serde_json::Value| fields;
    vec![
        // SUCCESS, with a day's health counters; paused and resumed (operator audit).
        spec_with("plain", "0 * * * *", noop(json!({}))),
        // QUEUED, its message in flight on the realtime lane.
        spec_with("queued", "0 * * * *", json!({"priority": "HIGH"})),
        // RUNNING under a lease whose worker is gone; its message in flight.
        spec_with("leased", "0 * * * *", json!({"idempotent": true})),
        // RETRY_PENDING after a failed first attempt; the retry's message in flight.
        spec_with(
            "retrying",
            "0 * * * *",
            json!({"max_attempts": 3, "job": {"type": "noop", "fail_times": 1}}),
        ),
        // Between steps: the first succeeded, the second's message in flight.
        spec_with(
            "stepped",
            "0 * * * *",
            json!({"job": {"type": "steps", "steps": [
                {"name": "extract", "type": "noop"},
                {"name": "load", "type": "noop"}
            ]}}),
        ),
        // WAITING for its children: one succeeded, two messages in flight.
        spec_with(
            "fanout",
            "0 * * * *",
            json!({"job": {"type": "noop", "children": 3}}),
        ),
        // FAILED on its only attempt.
        spec_with(
            "failing",
            "0 * * * *",
            json!({"max_attempts": 1, "job": {"type": "noop", "fail_times": 9}}),
        ),
        // MANUAL_REQUIRED: waits for an operator's approval, tracked for reminders.
        spec_with("held", "0 * * * *", json!({"approval": "every_run"})),
    ]
}

pub fn meta(at: DateTime<Utc>) -> ChangeMeta {
    ChangeMeta {
        actor: "release-fixtures".into(),
        reason: "fixtures".into(),
        at,
        details: None,
    }
}

/// The run states the fixtures promise, by schedule (their windows at [`hour`]).
pub const RUN_STATES: &[(&str, RunStatus)] = &[
    ("plain", RunStatus::Success),
    ("queued", RunStatus::Queued),
    ("leased", RunStatus::Running),
    ("retrying", RunStatus::RetryPending),
    ("failing", RunStatus::Failed),
    ("held", RunStatus::ManualRequired),
];

/// Runs of `plain` on the other lanes, QUEUED with their messages in flight: a catch-up on
/// the correction lane, a backfill's on the backfill lane, an operator's on the manual lane.
pub fn other_lane_runs() -> Vec<(RunKey, Lane)> {
    other_lanes()
        .into_iter()
        .map(|(origin, _, at, lane)| {
            let key = RunKey {
                origin,
                ..RunKey::expected("plain", at)
            };
            (key, lane)
        })
        .collect()
}

fn other_lanes() -> Vec<(Origin, Trigger, DateTime<Utc>, Lane)> {
    vec![
        (
            Origin::Expected,
            Trigger::CatchUp,
            hour() - Delta::hours(1),
            Lane::Correction,
        ),
        (
            Origin::Backfill("refill-1".into()),
            Trigger::Backfill,
            hour() - Delta::hours(2),
            Lane::Backfill,
        ),
        (
            Origin::Manual("request-1".into()),
            Trigger::Manual,
            hour(),
            Lane::Manual,
        ),
    ]
}

/// Sends [`other_lane_runs`] as the reconciler, the backfill release and the api send theirs:
/// created PENDING, claimed, sent.
async fn send_on_other_lanes(env: &AppEnv) {
    let plain = Schedule::new(schedules().remove(0)).expect("plain compiles");
    for (origin, trigger, at, lane) in other_lanes() {
        let run = new_run_with_origin(&plain, 1, at, trigger, origin, created());
        env.store.create_run(&run).await.expect("run");
        let sent = claim_and_send::<SimulateError>(
            env.store.as_ref(),
            env.queue.as_ref(),
            &run,
            lane,
            hour(),
        )
        .await
        .expect("sent");
        assert!(sent, "{lane}");
    }
}

/// The worker that took `leased` and vanished.
pub const GONE_WORKER: &str = "worker-gone";

#[tokio::test]
#[ignore = "writes tests/fixtures/releases/<this version>: run once per release"]
async fn write_release_fixtures() {
    let env = AppEnv::new(LaneSettings::default(), hour()).await;
    for spec in schedules() {
        env.create(spec, created()).await;
    }
    env.store
        .pause_schedule("plain", None, meta(created()))
        .await
        .expect("pause");
    env.store
        .resume_schedule("plain", None, meta(created()))
        .await
        .expect("resume");
    assert!(env.tick(hour()).await.sent >= 7);

    // The lease of a worker that died mid-job.
    let leased = RunKey::expected("leased", hour());
    let open = RunChange::open(
        Opening::Start,
        RunStatus::Queued,
        0,
        hour() + Delta::seconds(1),
        GONE_WORKER,
        hour() + Delta::seconds(31),
    );
    env.store
        .transition_run(&leased, &open)
        .await
        .expect("lease");

    // One pass of a worker over the normal lane's messages, but not `leased`'s.
    let worker = env.worker(worker_config("worker-0"));
    let normal = receive_all(&env, Lane::Normal).await;
    let (leased_message, rest): (Vec<_>, Vec<_>) = normal
        .into_iter()
        .partition(|m| m.body.contains("\"leased\""));
    env.deliver(&worker, Lane::Normal, &rest).await;

    // One child of `fanout` done; the others, the next step's message and the retry's in
    // flight (received, not deleted: as a worker that is about to take them holds them).
    let children = receive_all(&env, Lane::Normal).await;
    let (first, others): (Vec<_>, Vec<_>) = children
        .into_iter()
        .partition(|m| m.body.contains("\"fanout\"") && m.body.contains("\"index\":0"));
    env.deliver(&worker, Lane::Normal, &first).await;
    let in_flight: Vec<String> = leased_message
        .into_iter()
        .chain(others)
        .map(|m| m.body)
        .collect();

    peripheral_items(&env).await;
    send_on_other_lanes(&env).await;

    let mut release = dump(&env).await;
    release
        .messages
        .entry(Lane::Normal.as_str().to_string())
        .or_default()
        .extend(in_flight);
    assert_states(&env).await;
    release.write(env!("CARGO_PKG_VERSION"));
}

/// The items no run writes: a calendar, a backfill, an idempotency claim, the kill switch,
/// the system audit, a lane's release state, an alert, a reminder tracker and a day's
/// outcome counters (the ones the worker keeps through the app's outcome counting).
async fn peripheral_items(env: &AppEnv) {
    let ledger = &env.ledger.ledger;
    let at = hour() + Delta::minutes(1);
    let calendar = serde_json::from_value(json!({"exclude": ["2026-12-25"]})).expect("calendar");
    ledger
        .put_calendar("holidays", calendar, None, meta(at))
        .await
        .expect("calendar");
    let window = (hour() - Delta::hours(3), hour());
    ledger
        .create_backfill(&running_backfill("refill-1", "plain", window, 3, at))
        .await
        .expect("backfill");
    let claim = IdempotencyClaim {
        key: "plain:request-1".into(),
        run: RunKey::expected("plain", hour()),
        body_hash: Some("0".repeat(64)),
        created_at: at,
        expires_at: at + Delta::days(1),
    };
    ledger.claim_idempotency(&claim).await.expect("claim");
    let switch = KillSwitch {
        engaged: false,
        since: at,
        actor: "ops".into(),
        note: "drill over".into(),
    };
    ledger.put_kill_switch(&switch).await.expect("kill switch");
    let entry = SystemAuditEntry {
        at,
        actor: "ops".into(),
        action: "kill_switch.release".into(),
        note: "drill over".into(),
        details: json!({"engaged": false}),
    };
    ledger.append_system_audit(&entry).await.expect("audit");
    let state = ReleaseState {
        lane: Lane::Backfill,
        paused: false,
        cause: None,
        since: at,
        last_release_at: Some(at),
        dlq_depth: Some(0),
        version: 0,
    };
    ledger
        .put_release_state(&state)
        .await
        .expect("release state");
    let alert = Alert {
        kind: AlertKind::ConsecutiveFailures,
        severity: Severity::Critical,
        schedule: "failing".into(),
        owner: Some("tests".into()),
        window: None,
        run: Some(RunKey::expected("failing", hour()).to_string()),
        message: "1 consecutive failure".into(),
        console_url: None,
        at,
        subject: "1".into(),
    };
    ledger.record_alert(&alert, at).await.expect("alert");
    let awaiting = Awaiting {
        schedule: "held".into(),
        group: RunKey::expected("held", hour()).to_string(),
        held: HeldWork::Run {
            key: RunKey::expected("held", hour()),
        },
        since: hour(),
        remind_at: hour() + Delta::hours(1),
    };
    ledger.track_awaiting(&awaiting, at).await.expect("tracker");
    ledger
        .count_outcome("failing", hour().date_naive(), Outcome::Failed, 1)
        .await
        .expect("health");
}

async fn receive_all(env: &AppEnv, lane: Lane) -> Vec<cronledger_aws::lanes::Received> {
    let mut got = Vec::new();
    loop {
        let batch = env.receive(lane, false, 10, Duration::from_secs(2)).await;
        if batch.is_empty() {
            return got;
        }
        got.extend(batch);
    }
}

/// The table, scanned, and every lane's messages (received: the env is dropped after).
async fn dump(env: &AppEnv) -> Release {
    let mut release = Release::default();
    let mut start = None;
    loop {
        let page = env
            .ledger
            .clients
            .dynamodb
            .scan()
            .table_name(&env.ledger.table)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        for item in page.items() {
            let item = item_from_sdk(item);
            release.items.entry(kind_of(&item)).or_default().push(item);
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    for lane in Lane::ALL {
        let bodies: Vec<String> = receive_all(env, *lane)
            .await
            .into_iter()
            .map(|m| m.body)
            .collect();
        if !bodies.is_empty() {
            release.messages.insert(lane.as_str().to_string(), bodies);
        }
    }
    release
}

/// The states the fixtures promise (their README lists them).
async fn assert_states(env: &AppEnv) {
    for &(id, status) in RUN_STATES {
        let run = env.run(&RunKey::expected(id, hour())).await;
        assert_eq!(run.status, status, "{id}: {run:?}");
    }
    for id in ["stepped", "fanout"] {
        let run = env.run(&RunKey::expected(id, hour())).await;
        assert!(!run.status.is_terminal(), "{id}: {run:?}");
    }
}
