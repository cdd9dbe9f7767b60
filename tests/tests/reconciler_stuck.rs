//! The reconciler's stuck-run rules and the catch-up pause, against the emulator: every
//! stuck case, each resolved by conditional transitions only, and catch-up release paused by
//! a realtime backlog, DLQ growth and an alarm, then resumed when they clear.

use cronledger_aws::ledger::{Ending, Opening, Transition};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use cronledger_app::alerting::Alerter;
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::RunChange;
use cronledger_aws::notify::{MemoryNotifier, Tee};
use cronledger_aws::ReleaseStateStore;
use cronledger_aws::SnsNotifier;
use cronledger_core::alerts::{Alert, AlertKind};
use cronledger_core::{Lane, Reason, RunEvent, RunKey, RunStatus, Schedule};
use cronledger_tests::app::{AppEnv, LaneCall};
use cronledger_tests::reconcile::{
    assert_every_window_once, reconcile, reconciler, reconciler_config, FakeSignals,
};
use cronledger_tests::sns::TestTopic;
use cronledger_tests::{spec_with, t};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stuck_run_is_resolved_by_its_rule_and_nothing_else() {
    let created = t("2026-03-06T09:59:00Z");
    let ten = t("2026-03-06T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), ten).await;
    let cases = [
        ("stuck-pending", false, "14m"),
        ("stuck-queued", false, "14m"),
        ("stale-idempotent", true, "14m"),
        ("stale-not-idempotent", false, "14m"),
        ("overrun", true, "10m"),
        ("stalled-found", false, "14m"),
        ("retry-lost", true, "14m"),
    ];
    for (id, idempotent, max_runtime) in cases {
        let fields = json!({"idempotent": idempotent, "max_runtime": max_runtime, "overlap": "ALLOW", "grace": "5m"});
        env.create(spec_with(id, "0 * * * *", fields), created)
            .await;
    }
    // Seven live runs written and never sent (PENDING, no message; a path that sends after
    // writing died in between): the rules' common start.
    for (id, _, _) in cases {
        let spec = env.store.get_schedule(id).await.expect("schedule").spec;
        let run = cronledger_tests::scheduled_run(&spec, ten, ten, "ticker");
        env.store.create_run(&run).await.expect("run");
    }
    let key = |id: &str| RunKey::expected(id, ten);
    let apply = |id: &'static str, change: RunChange| {
        let store = env.store.clone();
        async move {
            store
                .transition_run(&RunKey::expected(id, ten), &change)
                .await
                .expect("setup transition")
        }
    };
    let start =
        |until: &str| RunChange::open(Opening::Start, RunStatus::Pending, 0, ten, "w1", t(until));
    // QUEUED, but its message was lost.
    let lost = Transition::Enqueue {
        lane: Some(Lane::Normal),
        lane_was: None,
        job_id: Some("lost".into()),
        reason: None,
    };
    let queued = RunChange::new(RunStatus::Pending, 0, ten, lost);
    apply("stuck-queued", queued).await;
    // Workers that died: leases ran out at 10:01.
    apply("stale-idempotent", start("2026-03-06T10:01:00Z")).await;
    apply("stale-not-idempotent", start("2026-03-06T10:01:00Z")).await;
    // A worker still heartbeating (live lease) but far past max_runtime.
    apply("overrun", start("2026-03-06T11:00:00Z")).await;
    // A reconciler that died between STALLED and resolving it.
    apply("stalled-found", start("2026-03-06T10:01:00Z")).await;
    let stall = RunChange::decide(
        RunEvent::Stall,
        RunStatus::Running,
        1,
        t("2026-03-06T10:04:00Z"),
        Some(Reason::HeartbeatLost),
    );
    apply("stalled-found", stall).await;
    // An attempt failed retryably, and its message was lost.
    apply("retry-lost", start("2026-03-06T10:01:00Z")).await;
    apply(
        "retry-lost",
        RunChange::end(Ending::FailRetryable, 1, ten, Default::default()),
    )
    .await;

    let mut config = reconciler_config();
    config.stuck.retry_pending_after = cronledger_core::Span::minutes(30);
    let r = reconciler(&env, Arc::new(FakeSignals::default()), config);

    // 10:01: inside every threshold but the STALLED one (resolved at once).
    let early = reconcile(&r, t("2026-03-06T10:01:00Z")).await;
    assert_eq!(early.stuck.held, 1, "{:?}", early.stuck);
    assert_eq!(
        early.stuck.pending_sent + early.stuck.stalled + early.stuck.queued_resent,
        0
    );

    let report = reconcile(&r, t("2026-03-06T10:20:00Z")).await;
    let s = &report.stuck;
    assert_eq!(s.pending_sent, 1, "{s:?}");
    assert_eq!(s.stalled, 3, "{s:?}");
    assert_eq!((s.retried, s.held), (2, 1), "{s:?}");
    assert_eq!((s.queued_resent, s.retry_resent), (0, 0), "{s:?}");

    let run = env.run(&key("stuck-pending")).await;
    assert_eq!(run.status, RunStatus::Queued);
    assert!(run.job_id.is_some());
    let idem = env.run(&key("stale-idempotent")).await;
    assert_eq!((idem.status, idem.attempts), (RunStatus::RetryPending, 1));
    let not_idem = env.run(&key("stale-not-idempotent")).await;
    assert_eq!(not_idem.status, RunStatus::ManualRequired);
    assert_eq!(not_idem.reason, Some(Reason::WorkerLost));
    let overrun = env.run(&key("overrun")).await;
    assert_eq!(overrun.status, RunStatus::RetryPending);
    let found = env.run(&key("stalled-found")).await;
    assert_eq!(found.status, RunStatus::ManualRequired);
    assert_eq!(found.reason, Some(Reason::WorkerLost));

    // Messages: the PENDING run once, each retried stall as its next attempt, all on the
    // schedule's live lane; nothing for the held ones.
    let sends: Vec<(RunKey, Lane)> = env
        .queue
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            LaneCall::Send { run, lane, .. } => Some((run, lane)),
            _ => None,
        })
        .collect();
    let mut sent: Vec<&str> = sends.iter().map(|(k, _)| k.schedule_id.as_str()).collect();
    sent.sort_unstable();
    assert_eq!(sent, vec!["overrun", "stale-idempotent", "stuck-pending"]);
    assert!(sends.iter().all(|(_, lane)| *lane == Lane::Normal));
    let received = env
        .receive(Lane::Normal, false, 3, std::time::Duration::from_secs(5))
        .await;
    let attempts: Vec<(String, u32)> = {
        let mut a: Vec<(String, u32)> = received
            .iter()
            .map(|m| {
                let msg = cronledger_aws::LaneMessage::parse(&m.body).expect("envelope");
                (msg.run.schedule_id, msg.attempt)
            })
            .collect();
        a.sort();
        a
    };
    assert_eq!(
        attempts,
        vec![
            ("overrun".to_string(), 2),
            ("stale-idempotent".to_string(), 2),
            ("stuck-pending".to_string(), 1)
        ]
    );

    // 10:55: QUEUED far too long (and the lost retry) are sent again, same identity.
    let before = env.queue.sends().len();
    let late = reconcile(&r, t("2026-03-06T10:55:00Z")).await;
    assert!(late.stuck.queued_resent >= 1, "{:?}", late.stuck);
    assert!(late.stuck.retry_resent >= 1, "{:?}", late.stuck);
    let resent: Vec<RunKey> = env.queue.sends()[before..].to_vec();
    assert!(resent.contains(&key("stuck-queued")));
    assert!(resent.contains(&key("retry-lost")));
    let queued = env.run(&key("stuck-queued")).await;
    assert_eq!(queued.status, RunStatus::Queued);
    assert_ne!(queued.job_id.as_deref(), Some("lost"));
    let received = env
        .receive(Lane::Normal, false, 10, std::time::Duration::from_secs(3))
        .await;
    let again = received
        .iter()
        .filter_map(|m| cronledger_aws::LaneMessage::parse(&m.body).ok())
        .find(|m| m.run == key("stuck-queued"))
        .expect("the QUEUED run's message again");
    assert_eq!(again.idempotency_key, queued.idempotency_key);
    assert_eq!(again.window, queued.window);
    // Nothing terminal was touched, and no run was duplicated.
    for (id, _, _) in cases {
        let spec = env.store.get_schedule(id).await.expect("schedule").spec;
        let schedule = Schedule::new(spec).expect("compiles");
        assert_every_window_once(env.store.as_ref(), &schedule, created, ten).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_pauses_while_live_work_is_in_trouble_and_resumes_when_it_clears() {
    let now = t("2026-03-07T12:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), now).await;
    let fields = json!({"misfire": "CATCH_UP_ALL", "grace": "1m", "side_effects": false, "overlap": "ALLOW", "max_auto_catch_up": 100});
    // A 3-hour gap: the backfill tier, throttled on the backfill lane.
    env.create(
        spec_with("paused-backfill", "*/10 * * * *", fields),
        t("2026-03-07T08:55:00Z"),
    )
    .await;
    let signals = Arc::new(FakeSignals::default());
    let mut config = reconciler_config();
    config.pause.alarms = vec!["cronledger-errors".into()];
    // Published to a topic on the emulator, then listed (the list is what reached it).
    let mut topic = TestTopic::new().await;
    let subscriber = topic.subscribe_queue(None).await;
    let notifier = Arc::new(MemoryNotifier::new());
    let sns = SnsNotifier::new(topic.clients.sns.clone(), Some(topic.arn.clone()), None);
    let tee = Tee {
        first: Arc::new(sns),
        then: notifier.clone(),
    };
    let r = reconciler(&env, signals.clone(), config).with_alerts(Arc::new(Alerter::new(
        Arc::new(env.ledger.ledger.clone()),
        Arc::new(tee),
    )));
    let control = env.ledger.ledger.clone();
    let published = |kind: AlertKind| -> Vec<Alert> {
        notifier
            .sent()
            .into_iter()
            .map(|s| s.alert)
            .filter(|a| a.kind == kind)
            .collect()
    };

    // The realtime lane is backed up: nothing is released, and the pause is recorded.
    signals.backlog.store(500, Ordering::SeqCst);
    let report = reconcile(&r, now).await;
    assert_eq!(report.released, 0);
    assert_eq!(
        report.entries_written, 18,
        "the plan is written even while paused"
    );
    let gate = report
        .lanes
        .iter()
        .find(|g| g.lane == Lane::Backfill)
        .expect("gate");
    assert!(gate.paused);
    assert!(gate
        .cause
        .as_deref()
        .is_some_and(|c| c.starts_with("REALTIME_BACKLOG")));
    let state = control
        .release_state(Lane::Backfill)
        .await
        .expect("state")
        .expect("stored");
    assert!(state.paused);
    assert_eq!(state.since, now);
    assert!(state
        .cause
        .as_deref()
        .is_some_and(|c| c.contains("500 visible")));
    assert!(env.queue.sends().is_empty());
    // The owners hear of the gap, and everyone of the paused release, once a lane.
    let paused = published(AlertKind::BackfillPaused);
    assert!(
        paused
            .iter()
            .any(|a| a.schedule.ends_with("backfill") && a.message.contains("REALTIME_BACKLOG")),
        "{paused:#?}"
    );
    let mut lanes: Vec<&str> = paused.iter().map(|a| a.schedule.as_str()).collect();
    lanes.dedup();
    assert_eq!(lanes.len(), paused.len(), "one alert a lane: {paused:#?}");
    let gaps = published(AlertKind::MissedWindows);
    assert_eq!(gaps.len(), 1, "{gaps:#?}");
    assert_eq!(gaps[0].schedule, "paused-backfill");
    // A second pass while still paused tells no one again.
    reconcile(&r, now + chrono::Duration::minutes(1)).await;
    assert_eq!(published(AlertKind::BackfillPaused).len(), paused.len());
    // (The 12:00 window, missed meanwhile, is a gap of its own; the 3-hour gap is not told again.)
    let gaps = published(AlertKind::MissedWindows);
    assert_eq!(
        gaps.iter().filter(|a| a.subject == gaps[0].subject).count(),
        1,
        "{gaps:#?}"
    );

    // It clears: release resumes (two in flight for the schedule), the resume is recorded.
    signals.backlog.store(0, Ordering::SeqCst);
    let resumed_at = t("2026-03-07T12:05:00Z");
    let report = reconcile(&r, resumed_at).await;
    let gate = report
        .lanes
        .iter()
        .find(|g| g.lane == Lane::Backfill)
        .expect("gate");
    assert_eq!((gate.paused, gate.released), (false, 2));
    // (plus the 12:00 window, missed by 5 minutes: the immediate tier, on the correction lane)
    assert_eq!(report.released, 3);
    let state = control
        .release_state(Lane::Backfill)
        .await
        .expect("state")
        .expect("stored");
    assert!(!state.paused);
    assert_eq!(state.since, resumed_at);
    assert_eq!(state.last_release_at, Some(resumed_at));
    assert!(env
        .queue
        .sends()
        .iter()
        .all(|k| k.schedule_id == "paused-backfill"));

    // DLQ growth pauses; no further growth resumes.
    signals.dlq.store(3, Ordering::SeqCst);
    let report = reconcile(&r, t("2026-03-07T12:06:00Z")).await;
    let gate = report
        .lanes
        .iter()
        .find(|g| g.lane == Lane::Backfill)
        .expect("gate");
    assert!(
        gate.cause
            .as_deref()
            .is_some_and(|c| c.starts_with("DLQ_GROWTH")),
        "{gate:?}"
    );
    let report = reconcile(&r, t("2026-03-07T12:07:00Z")).await;
    assert!(report.lanes.iter().all(|g| !g.paused), "{:?}", report.lanes);

    // A named alarm in ALARM pauses both catch-up lanes.
    if let Ok(mut a) = signals.alarms.lock() {
        a.push("cronledger-errors".into());
    }
    let report = reconcile(&r, t("2026-03-07T12:08:00Z")).await;
    assert!(report
        .lanes
        .iter()
        .all(|g| g.paused && g.cause.as_deref() == Some("ALARM: cronledger-errors")));
    assert_eq!(report.released, 0);

    // Every alert reached the topic once: the lane pauses (BACKFILL_PAUSED) among them.
    let sent = notifier.sent();
    let delivered = topic
        .received(&subscriber, sent.len(), std::time::Duration::from_secs(5))
        .await;
    let subjects = |kinds: Vec<(String, String)>| {
        let mut kinds = kinds;
        kinds.sort();
        kinds
    };
    assert_eq!(
        subjects(
            delivered
                .iter()
                .map(|m| (
                    m.body["kind"].as_str().unwrap_or_default().to_string(),
                    m.body["subject"].as_str().unwrap_or_default().to_string()
                ))
                .collect()
        ),
        subjects(
            sent.iter()
                .map(|s| (s.alert.kind.to_string(), s.alert.subject.clone()))
                .collect()
        )
    );
    assert!(delivered
        .iter()
        .any(|m| m.body["kind"] == "BACKFILL_PAUSED"));
}

/// A worker outage leaves live runs QUEUED past the re-send threshold with their messages
/// still in the lane: a copy per pass would multiply the backlog, so the re-send waits while
/// a later run of the schedule waits untaken in the same lane. Once a later one is taken the
/// lane has moved past the message (it was lost): it is re-sent, however busy the lane.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_runs_are_not_resent_while_the_lane_has_not_reached_them() {
    let ten = t("2026-03-08T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), ten).await;
    let fields = json!({"priority": "HIGH", "overlap": "ALLOW"});
    env.create(
        spec_with("outage", "*/10 * * * *", fields),
        t("2026-03-08T09:59:00Z"),
    )
    .await;
    assert_eq!(env.tick(ten).await.sent, 1);
    assert_eq!(env.tick(t("2026-03-08T10:10:00Z")).await.sent, 1);
    let key = RunKey::expected("outage", ten);
    let signals = Arc::new(FakeSignals::default());
    signals.backlog.store(40, Ordering::SeqCst);
    let r = reconciler(&env, signals.clone(), reconciler_config());
    let sent = env.queue.sends().len();

    // 10:00 is QUEUED 31 minutes; 10:10 waits untaken behind it.
    let backed_up = reconcile(&r, t("2026-03-08T10:31:00Z")).await;
    assert_eq!(
        (
            backed_up.stuck.queued_resent,
            backed_up.stuck.resend_deferred
        ),
        (0, 1),
        "{:?}",
        backed_up.stuck
    );
    assert_eq!(env.queue.sends().len(), sent);
    assert_eq!(env.run(&key).await.status, RunStatus::Queued);
    // Still reported: the stuck-run metric is how a worker outage shows.
    let docs = r.metrics().drain("reconciler", t("2026-03-08T10:31:00Z"));
    let stuck = docs
        .iter()
        .find(|d| d["Schedule"] == "outage")
        .expect("a per-schedule EMF document");
    assert_eq!(stuck["StuckRuns"], 1.0);

    // A worker takes 10:10 while the lane still shows 40 messages (a busy lane is never
    // empty): 10:00's message is behind the lane, lost; it is sent again.
    let later = RunKey::expected("outage", t("2026-03-08T10:10:00Z"));
    let at = t("2026-03-08T10:35:00Z");
    env.store
        .transition_run(
            &later,
            &RunChange::open(
                Opening::Start,
                RunStatus::Queued,
                0,
                at,
                "w",
                at + chrono::Duration::minutes(5),
            ),
        )
        .await
        .expect("start 10:10");
    let moved_on = reconcile(&r, t("2026-03-08T10:36:00Z")).await;
    assert_eq!(
        (moved_on.stuck.queued_resent, moved_on.stuck.resend_deferred),
        (1, 0),
        "{:?}",
        moved_on.stuck
    );
    assert_eq!(env.queue.sends()[sent..], [key]);
}

/// The ticker writes a run QUEUED ahead of its fire time: a successor whose message is not
/// due yet says nothing about the lane, and a lost message is sent again however busy the
/// lane looks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_written_ahead_of_its_fire_time_does_not_hold_back_a_lost_message() {
    let ten = t("2026-03-08T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), ten).await;
    env.create(
        spec_with("hourly", "0 * * * *", json!({"overlap": "ALLOW"})),
        t("2026-03-08T09:59:00Z"),
    )
    .await;
    assert_eq!(env.tick(ten).await.sent, 1);
    // 11:00 is written and sent within the 10:59 tick's lookahead, due at 11:00.
    assert_eq!(env.tick(t("2026-03-08T10:59:00Z")).await.sent, 1);
    let ahead = env
        .run(&RunKey::expected("hourly", t("2026-03-08T11:00:00Z")))
        .await;
    assert_eq!((ahead.status, ahead.attempts), (RunStatus::Queued, 0));
    let signals = Arc::new(FakeSignals::default());
    signals.backlog.store(40, Ordering::SeqCst);
    let r = reconciler(&env, signals, reconciler_config());
    let sent = env.queue.sends().len();

    // 10:00's message was lost an hour ago; 11:00's is not due: 10:00 is sent again.
    let pass = reconcile(&r, t("2026-03-08T10:59:10Z")).await;
    assert_eq!(
        (pass.stuck.queued_resent, pass.stuck.resend_deferred),
        (1, 0),
        "{:?}",
        pass.stuck
    );
    assert_eq!(env.queue.sends()[sent..], [RunKey::expected("hourly", ten)]);
}

/// A shard's active index sorts by status: QUEUED entries come before RUNNING ones, so a
/// scan that stopped after a fixed number of entries never reached the RUNNING runs of a
/// busy shard. With pages of two, seven QUEUED runs take four pages before the first
/// RUNNING one: every RUNNING run with an expired lease is still found and stalled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stuck_scan_sees_every_running_run_behind_any_number_of_queued_ones() {
    let created = t("2026-03-06T09:59:00Z");
    let ten = t("2026-03-06T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), ten).await;
    let in_shard_zero = |prefix: &'static str, n: usize| -> Vec<String> {
        (0..)
            .map(move |i| format!("{prefix}-{i}"))
            .filter(|id| cronledger_aws::keys::shard_of(id, cronledger_tests::SHARDS) == 0)
            .take(n)
            .collect()
    };
    let fields = json!({"idempotent": false, "overlap": "ALLOW", "grace": "5m"});
    for id in in_shard_zero("busy", 7) {
        let spec = spec_with(&id, "0 * * * *", fields.clone());
        let mut run = cronledger_tests::scheduled_run(&spec, ten, created, "test");
        run.lane = Some(cronledger_core::Lane::Normal);
        env.store.create_run(&run).await.expect("pending run");
        let sent = Transition::Enqueue {
            lane: Some(Lane::Normal),
            lane_was: None,
            job_id: Some(format!("message-{id}")),
            reason: None,
        };
        let queue = RunChange::new(RunStatus::Pending, 0, ten, sent);
        env.store
            .transition_run(&run.key, &queue)
            .await
            .expect("queued run");
    }
    let running = in_shard_zero("lost", 3);
    for id in &running {
        let spec = spec_with(id, "0 * * * *", fields.clone());
        env.create(spec.clone(), created).await;
        let run = cronledger_tests::scheduled_run(&spec, ten, created, "test");
        env.store.create_run(&run).await.expect("pending run");
        let until = t("2026-03-06T10:01:00Z");
        let start = RunChange::open(Opening::Start, RunStatus::Pending, 0, ten, "w1", until);
        env.store
            .transition_run(&RunKey::expected(id, ten), &start)
            .await
            .expect("running");
    }
    let mut config = reconciler_config();
    config.stuck.scan_page_size = 2;
    let r = reconciler(&env, Arc::new(FakeSignals::default()), config);
    let report = reconcile(&r, t("2026-03-06T10:10:00Z")).await;
    assert_eq!(
        (report.stuck.stalled, report.stuck.held),
        (3, 3),
        "{:?}",
        report.stuck
    );
    for id in &running {
        let run = env.run(&RunKey::expected(id, ten)).await;
        assert_eq!(
            (run.status, run.reason),
            (RunStatus::ManualRequired, Some(Reason::WorkerLost))
        );
    }
}

/// A run left waiting behind another (QUEUED_BEHIND) whose blocker ended without releasing
/// it is released by the pass once the rule book would start it: a later live run already
/// queued in its lane does not hold it back, a RUNNING one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_left_waiting_is_released_once_nothing_of_its_schedule_runs() {
    use cronledger_core::run::Origin;
    use cronledger_core::Trigger;
    let ten = t("2026-03-06T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), ten).await;
    let spec = spec_with(
        "waits",
        "* * * * *",
        json!({"overlap": "SKIP_NEW", "misfire": "CATCH_UP_ALL", "side_effects": false}),
    );
    env.create(spec.clone(), t("2026-03-06T09:00:00Z")).await;
    let schedule = Schedule::new(spec).expect("schedule");
    let run_at = |at: &str, trigger: Trigger, created: &str| {
        schedule.pending_run(
            t(at),
            schedule.window_for(t(at)),
            Origin::Expected,
            trigger,
            t(created),
            1,
        )
    };
    // A catch-up run parked behind a run that has since ended.
    let mut waiting = run_at(
        "2026-03-06T09:30:00Z",
        Trigger::CatchUp,
        "2026-03-06T09:40:00Z",
    );
    waiting.reason = Some(Reason::QueuedBehind);
    waiting.lane = Some(Lane::Correction);
    env.store.create_run(&waiting).await.expect("waiting");
    // The next live window, RUNNING at first.
    let live = run_at(
        "2026-03-06T10:00:00Z",
        Trigger::Scheduled,
        "2026-03-06T09:59:00Z",
    );
    env.store.create_run(&live).await.expect("live");
    let until = t("2026-03-06T10:30:00Z");
    let start = RunChange::open(Opening::Start, RunStatus::Pending, 0, ten, "w1", until);
    env.store
        .transition_run(&live.key, &start)
        .await
        .expect("start");

    let r = reconciler(&env, Arc::new(FakeSignals::default()), reconciler_config());
    let held = reconcile(&r, t("2026-03-06T10:01:00Z")).await;
    assert_eq!(held.stuck.queued_behind_released, 0, "{:?}", held.stuck);
    assert_eq!(env.run(&waiting.key).await.status, RunStatus::Pending);

    // The live run ends, and the window after it is already queued in its lane.
    let done = env.run(&live.key).await;
    let succeed = RunChange::end(Ending::Succeed, done.lease_epoch, ten, Default::default());
    env.store
        .transition_run(&live.key, &succeed)
        .await
        .expect("end");
    let next = run_at(
        "2026-03-06T10:02:00Z",
        Trigger::Scheduled,
        "2026-03-06T10:01:00Z",
    );
    env.store.create_run(&next).await.expect("next");
    let sent = Transition::Enqueue {
        lane: Some(Lane::Normal),
        lane_was: None,
        job_id: None,
        reason: None,
    };
    let enqueue = RunChange::new(RunStatus::Pending, 0, ten, sent);
    env.store
        .transition_run(&next.key, &enqueue)
        .await
        .expect("queued");

    let released = reconcile(&r, t("2026-03-06T10:02:00Z")).await;
    assert_eq!(
        released.stuck.queued_behind_released, 1,
        "{:?}",
        released.stuck
    );
    let sent = env.run(&waiting.key).await;
    assert_eq!(
        (sent.status, sent.reason, sent.lane),
        (
            RunStatus::Queued,
            Some(Reason::QueuedBehind),
            Some(Lane::Correction)
        )
    );
}
