//! Operator levers hold in flight: a pause, an archive or a disable stops runs that were
//! already in a lane (fired ahead, waiting to retry, released catch-up), and a paused
//! schedule's catch-up waits unreleased until the resume, losing nothing. The kill switch
//! stops every start everywhere (worker, ticker, reconciler) and loses nothing.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Duration as Delta, TimeDelta, Utc};
use cronledger_app::kill_switch::KillSwitchCheck;
use cronledger_app::reconciler::QuietSignals;
use cronledger_app::ticker::TickerConfig;
use cronledger_aws::lanes::{LaneSettings, MessageOutcome, Received};
use cronledger_aws::ledger::ChangeMeta;
use cronledger_aws::{KillSwitch, OpsStore};
use cronledger_core::{Lane, Reason, RunKey, RunStatus, ScheduleSpec, Span};
use cronledger_tests::app::{ticker_config, worker_config, AppEnv};
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
        details: None,
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

    // Three more schedules fire their 11:00 windows into the lane, and so does the retrying
    // one (a run backing off before its retry is not running: SKIP_NEW skips nothing behind
    // it); then each is stopped.
    let next = hour() + Delta::hours(1);
    for id in ["paused", "archived", "disabled"] {
        env.create(
            http_spec(&hook, id, "0 * * * *", json!({})),
            next - Delta::minutes(5),
        )
        .await;
    }
    env.clock.set(next);
    assert_eq!(env.tick(next).await.sent, 4);
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
            &messages(&env, Lane::Normal, 5).await,
        )
        .await;
    assert!(report
        .outcomes
        .iter()
        .all(|(_, o)| *o == MessageOutcome::Done));
    assert_eq!(hook.arrived(), 1, "no job call after the stop");
    for (id, at, reason) in [
        ("retrying", hour(), Reason::Paused),
        ("retrying", next, Reason::Paused),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kill_switch_starts_nothing_anywhere_and_loses_nothing() {
    let env = AppEnv::new(LaneSettings::default(), hour()).await;
    let hook = Webhook::start(Answer::Succeed).await;
    let created = hour() - Delta::seconds(30);
    // RUN_ONCE on a minutely schedule; a grace of 2 minutes.
    let fields = json!({"misfire": "RUN_ONCE", "side_effects": false});
    env.create(http_spec(&hook, "minutely", "* * * * *", fields), created)
        .await;
    let ops: Arc<dyn OpsStore> = Arc::new(env.ledger.ledger.clone());
    // A zero TTL: every check reads the flag (the functions cache it for seconds).
    let check = Arc::new(KillSwitchCheck::with_ttl(ops.clone(), TimeDelta::zero()));
    // Only windows already due (no lookahead): the test moves through minutes in seconds.
    let ticker = env
        .ticker_with(TickerConfig {
            lookahead: Span::ZERO,
            ..ticker_config()
        })
        .with_kill_switch(check.clone());
    let worker = env
        .worker(worker_config("w"))
        .with_kill_switch(check.clone());
    let r = reconciler(&env, Arc::new(QuietSignals), reconciler_config())
        .with_kill_switch(check.clone());

    // 10:00 fires and its message waits in the lane; then the switch goes on.
    assert_eq!(env.tick_with(&ticker, hour()).await.sent, 1);
    let switch = |engaged: bool, at: DateTime<Utc>| KillSwitch {
        engaged,
        since: at,
        actor: "admin".into(),
        note: "incident".into(),
    };
    ops.put_kill_switch(&switch(true, hour()))
        .await
        .expect("engage");

    // The batch in hand goes back untouched; ticks and passes do nothing.
    let in_hand = messages(&env, Lane::Normal, 1).await;
    let report = env.deliver(&worker, Lane::Normal, &in_hand).await;
    assert!(report
        .outcomes
        .iter()
        .all(|(_, o)| matches!(o, MessageOutcome::Retry(_))));
    let first = env.run(&RunKey::expected("minutely", hour())).await;
    assert_eq!(first.status, RunStatus::Queued, "untouched");
    for minute in 1..=10 {
        let at = hour() + Delta::minutes(minute);
        let tick = env.tick_with(&ticker, at).await;
        assert!(tick.kill_switch_engaged && tick.created == 0, "{tick:?}");
    }
    let pass = r
        .reconcile(&cronledger_app::reconciler::ReconcileEvent::at(
            hour() + Delta::minutes(10),
        ))
        .await;
    assert!(
        pass.kill_switch_engaged && pass.entries_written == 0,
        "{pass:?}"
    );
    assert_eq!(hook.arrived(), 0, "no job call while the switch is on");

    // Released at 10:10: the waiting run is judged as a late start by its misfire policy
    // (RUN_ONCE: folded into the latest window past its grace), the missed windows are
    // planned by the reconciler, and every window of the stretch is accounted for.
    let released = hour() + Delta::minutes(10);
    ops.put_kill_switch(&switch(false, released))
        .await
        .expect("release");
    env.clock.set(released);
    reconcile(&r, released).await;
    env.tick_with(&ticker, released).await;
    // The held message shows again after its hide; deliver what the lanes hold.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for _round in 0..4 {
        let mut delivered = 0;
        for lane in [Lane::Normal, Lane::Correction] {
            let got = env.receive(lane, false, 10, Duration::from_secs(2)).await;
            delivered += got.len();
            if !got.is_empty() {
                env.deliver(&worker, lane, &got).await;
            }
        }
        if delivered == 0 {
            break;
        }
    }
    let entries = ledger(env.store.as_ref(), "minutely", hour(), released).await;
    let covered: u32 = entries.iter().map(|r| r.count.max(1)).sum();
    assert_eq!(covered, 11, "10:00..10:10 each accounted once: {entries:?}");
    assert!(
        entries.iter().all(|r| !r.status.is_active()),
        "nothing left in flight: {entries:?}"
    );
    assert!(hook.arrived() >= 1, "work resumed after the release");
}
