//! Operator levers hold in flight: a pause, an archive or a disable stops runs that were
//! already in a lane (fired ahead, waiting to retry, released catch-up), and a paused
//! schedule's catch-up waits unreleased until the resume, losing nothing.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Duration as Delta, Utc};
use cronledger_app::reconciler::QuietSignals;
use cronledger_aws::lanes::{LaneSettings, MessageOutcome, Received};
use cronledger_aws::ledger::ChangeMeta;
use cronledger_core::{Lane, Reason, RunKey, RunStatus, ScheduleSpec};
use cronledger_tests::app::{worker_config, AppEnv};
use cronledger_tests::reconcile::{ledger, reconcile, reconciler, reconciler_config};
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{spec_with, t};
use serde_json::{json, Value};

fn hour() -> DateTime<Utc> {
    t("2026-03-01T10:00:00Z")
}

fn meta(at: DateTime<Utc>) -> ChangeMeta {
    ChangeMeta {
        actor: "operator".into(),
        reason: "incident".into(),
        at,
    }
}

fn http_spec(hook: &Webhook, id: &str, cron: &str, mut fields: Value) -> ScheduleSpec {
    fields["job"] = json!({ "type": "http", "url": hook.url, "timeout": "20s" });
    spec_with(id, cron, fields)
}

async fn messages(env: &AppEnv, lane: Lane, count: usize) -> Vec<Received> {
    let got = env
        .receive(lane, false, count, Duration::from_secs(10))
        .await;
    assert_eq!(got.len(), count, "messages on {lane}");
    got
}

#[tokio::test]
async fn runs_already_in_a_lane_do_not_start_once_their_schedule_is_stopped() {
    let env = AppEnv::new(LaneSettings::default(), hour()).await;
    let hook = Webhook::start(Answer::Succeed).await;
    // One answer of 500 first: the retrying schedule's first attempt fails.
    hook.script(&[Answer::Fail(500)]);
    let created = hour() - Delta::seconds(30);
    env.create(
        http_spec(&hook, "retrying", "0 * * * *", json!({"max_attempts": 3})),
        created,
    )
    .await;
    let worker = env.worker(worker_config("w"));
    assert_eq!(env.tick(hour()).await.sent, 1);
    let report = env
        .deliver(
            &worker,
            Lane::Normal,
            &messages(&env, Lane::Normal, 1).await,
        )
        .await;
    assert!(matches!(report.outcomes[0].1, MessageOutcome::Retry(_)));
    let retrying = RunKey::expected("retrying", hour());
    assert_eq!(env.run(&retrying).await.status, RunStatus::RetryPending);
    assert_eq!(hook.arrived(), 1);

    // Three more schedules fire their 11:00 windows into the lane; then each is stopped.
    let next = hour() + Delta::hours(1);
    for id in ["paused", "archived", "disabled"] {
        env.create(
            http_spec(&hook, id, "0 * * * *", json!({})),
            next - Delta::minutes(5),
        )
        .await;
    }
    env.clock.set(next);
    assert_eq!(env.tick(next).await.sent, 3);
    let store = &env.store;
    store
        .pause_schedule("retrying", None, meta(next))
        .await
        .expect("pause");
    store
        .pause_schedule("paused", None, meta(next))
        .await
        .expect("pause");
    store
        .archive_schedule("archived", None, meta(next))
        .await
        .expect("archive");
    let current = store.get_schedule("disabled").await.expect("schedule");
    let mut off = current.spec.clone();
    off.enabled = false;
    store
        .update_schedule(off, current.version, meta(next))
        .await
        .expect("disable");

    // Every message is acknowledged; nothing is called; each run ends with its reason. (The
    // retry's message shows again after its one-second backoff.)
    env.clock.advance(Delta::seconds(5));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let report = env
        .deliver(
            &worker,
            Lane::Normal,
            &messages(&env, Lane::Normal, 4).await,
        )
        .await;
    assert!(report
        .outcomes
        .iter()
        .all(|(_, o)| *o == MessageOutcome::Done));
    assert_eq!(hook.arrived(), 1, "no job call after the stop");
    for (id, at, reason) in [
        ("retrying", hour(), Reason::Paused),
        ("paused", next, Reason::Paused),
        ("archived", next, Reason::Archived),
        ("disabled", next, Reason::Disabled),
    ] {
        let run = env.run(&RunKey::expected(id, at)).await;
        assert_eq!(
            (run.status, run.reason),
            (RunStatus::Skipped, Some(reason)),
            "{id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_schedules_catch_up_waits_unreleased_and_goes_on_after_the_resume() {
    let now = t("2026-03-03T12:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), now).await;
    let hook = Webhook::start(Answer::Succeed).await;
    // A 30-minute gap: the serial tier, released one at a time on the correction lane.
    let fields = json!({"misfire": "CATCH_UP_ALL", "grace": "1m", "side_effects": false,
                        "overlap": "ALLOW", "max_auto_catch_up": 1000});
    env.create(
        http_spec(&hook, "serial", "* * * * *", fields),
        t("2026-03-03T11:29:30Z"),
    )
    .await;
    let r = reconciler(&env, Arc::new(QuietSignals), reconciler_config());
    reconcile(&r, now).await;
    let first = RunKey::expected("serial", t("2026-03-03T11:30:00Z"));
    assert_eq!(env.run(&first).await.status, RunStatus::Queued);

    // Paused with the first released run in its lane: the worker parks it, unexecuted.
    env.store
        .pause_schedule("serial", None, meta(now))
        .await
        .expect("pause");
    let worker = env.worker(worker_config("w"));
    let report = env
        .deliver(
            &worker,
            Lane::Correction,
            &messages(&env, Lane::Correction, 1).await,
        )
        .await;
    assert_eq!(report.outcomes[0].1, MessageOutcome::Done);
    let parked = env.run(&first).await;
    assert_eq!(
        (parked.status, parked.reason),
        (RunStatus::Pending, Some(Reason::Paused))
    );
    assert_eq!(hook.arrived(), 0);

    // While paused, passes release nothing and drop nothing.
    for minute in [2, 7] {
        let pass = reconcile(&r, now + Delta::minutes(minute)).await;
        assert_eq!(pass.released, 0, "{pass:?}");
    }
    let waiting = ledger(
        env.store.as_ref(),
        "serial",
        t("2026-03-03T11:30:00Z"),
        t("2026-03-03T11:59:00Z"),
    )
    .await;
    assert_eq!(waiting.len(), 30);
    assert!(waiting.iter().all(|r| r.status == RunStatus::Pending));

    // Resumed: the next pass releases the oldest window again, which then runs.
    let resumed_at = now + Delta::minutes(10);
    env.store
        .resume_schedule("serial", None, meta(resumed_at))
        .await
        .expect("resume");
    let pass = reconcile(&r, resumed_at).await;
    assert_eq!(pass.released, 1, "{pass:?}");
    assert_eq!(env.run(&first).await.status, RunStatus::Queued);
    env.clock.set(resumed_at);
    env.deliver(
        &worker,
        Lane::Correction,
        &messages(&env, Lane::Correction, 1).await,
    )
    .await;
    assert_eq!(env.run(&first).await.status, RunStatus::Success);
    assert_eq!(hook.arrived(), 1);
}
