//! A live run delivered past its schedule's grace period (it sat in its lane through an
//! outage, a backlog or a crashed ticker's recovery) is judged by the misfire policy when
//! the worker would start it, as the planner judges a missed window of the same age. Retries,
//! approved runs and QUEUE_NEW runs that waited behind an earlier one are not.

use cronledger_aws::ledger::Transition;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Duration as Delta, Utc};
use cronledger_app::worker::{Worker, WorkerConfig};
use cronledger_aws::lanes::{LaneSettings, MessageOutcome, Received};
use cronledger_aws::RunChange;
use cronledger_core::{Lane, Reason, RunKey, RunStatus, Span, Trigger};
use cronledger_tests::app::{spawn_poller, worker_config, AppEnv};
use cronledger_tests::reconcile::{
    assert_every_window_once, reconcile, reconciler, reconciler_config, FakeSignals,
};
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{spec_with, t};
use serde_json::{json, Value};

const LANE: Lane = Lane::Normal;

fn minute(m: i64) -> DateTime<Utc> {
    t("2026-03-01T10:00:00Z") + Delta::minutes(m)
}

/// An `http` schedule on the receiver (grace 2 minutes, the default), created just before
/// 10:00 so its first window is 10:00.
async fn schedule(env: &AppEnv, hook: &Webhook, id: &str, cron: &str, mut fields: Value) {
    fields["job"] = json!({ "type": "http", "url": hook.url, "timeout": "20s" });
    env.create(spec_with(id, cron, fields), t("2026-03-01T09:59:30Z"))
        .await;
}

async fn hourly(env: &AppEnv, hook: &Webhook, id: &str, fields: Value) {
    schedule(env, hook, id, "0 * * * *", fields).await;
}

async fn messages(env: &AppEnv, lane: Lane, n: usize) -> Vec<Received> {
    let got = env.receive(lane, false, n, Duration::from_secs(10)).await;
    assert_eq!(got.len(), n, "{n} message(s) expected on {lane}");
    got
}

/// Delivers one message and expects it acknowledged.
async fn deliver_done(env: &AppEnv, worker: &Worker, lane: Lane, message: Received) {
    let report = env.deliver(worker, lane, &[message]).await;
    let outcomes: Vec<_> = report.outcomes.into_iter().map(|(_, o)| o).collect();
    assert_eq!(outcomes, [MessageOutcome::Done]);
}

/// The idempotency keys the receiver was called with, sorted.
fn called(hook: &Webhook) -> Vec<String> {
    let mut keys: Vec<String> = hook
        .calls()
        .into_iter()
        .map(|c| c.idempotency_key)
        .collect();
    keys.sort();
    keys
}

/// Takes the message of schedule `id`'s run out of `messages`.
fn take(messages: &mut Vec<Received>, id: &str) -> Received {
    let quoted = format!("\"{id}\"");
    let at = messages
        .iter()
        .position(|m| m.body.contains(&quoted))
        .unwrap_or_else(|| panic!("no message for {id}"));
    messages.remove(at)
}

#[tokio::test]
async fn a_live_run_delivered_past_its_grace_follows_the_misfire_policy() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    let policies = [
        ("skip", json!({"misfire": "SKIP"})),
        ("manual", json!({"misfire": "MANUAL"})),
        (
            "once",
            json!({"misfire": "RUN_ONCE", "side_effects": false}),
        ),
        (
            "once-effects",
            json!({"misfire": "RUN_ONCE", "side_effects": true}),
        ),
        // A lone late run (no neighbouring window waits with it): the oldest window of the
        // gap it opens, which the reconciler plans from the missing windows; it runs.
        (
            "catch-up",
            json!({"misfire": "CATCH_UP_ALL", "side_effects": false}),
        ),
        ("on-time", json!({"misfire": "SKIP"})),
    ];
    for (id, fields) in &policies {
        hourly(&env, &hook, id, fields.clone()).await;
    }
    assert_eq!(env.tick(minute(0)).await.sent, 6);
    let mut got = messages(&env, LANE, 6).await;
    let worker = env.worker(worker_config("w"));

    // Two minutes late is inside the grace period: the run starts.
    env.clock.set(minute(2));
    deliver_done(&env, &worker, LANE, take(&mut got, "on-time")).await;

    // Thirty minutes late (the 5 minutes - 1 hour tier): each policy decides.
    env.clock.set(minute(30));
    for id in ["skip", "manual", "once", "once-effects", "catch-up"] {
        deliver_done(&env, &worker, LANE, take(&mut got, id)).await;
    }
    let mut entries = Vec::new();
    for id in [
        "on-time",
        "skip",
        "manual",
        "once",
        "once-effects",
        "catch-up",
    ] {
        let run = env.run(&RunKey::expected(id, minute(0))).await;
        entries.push((id, run.status, run.reason, run.attempts));
    }
    assert_eq!(
        entries,
        [
            ("on-time", RunStatus::Success, None, 1),
            ("skip", RunStatus::Skipped, Some(Reason::GraceExpired), 0),
            (
                "manual",
                RunStatus::ManualRequired,
                Some(Reason::PolicyManual),
                0
            ),
            ("once", RunStatus::Success, None, 1),
            (
                "once-effects",
                RunStatus::ManualRequired,
                Some(Reason::SideEffects),
                0
            ),
            ("catch-up", RunStatus::Success, None, 1),
        ]
    );
    // Only the runs that started reached the receiver.
    assert_eq!(
        called(&hook),
        [
            "catch-up:2026-03-01T09:00:00Z/2026-03-01T10:00:00Z",
            "on-time:2026-03-01T09:00:00Z/2026-03-01T10:00:00Z",
            "once:2026-03-01T09:00:00Z/2026-03-01T10:00:00Z",
        ]
    );
}

#[tokio::test]
async fn retries_and_approved_runs_start_however_late() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    hook.script(&[Answer::Fail(503)]);
    hourly(&env, &hook, "retried", json!({"misfire": "SKIP"})).await;
    hourly(&env, &hook, "approved", json!({"misfire": "MANUAL"})).await;
    assert_eq!(env.tick(minute(0)).await.sent, 2);
    let mut got = messages(&env, LANE, 2).await;
    let worker = env.worker(worker_config("w"));

    // The first attempt fails retryably on time; its retry comes back an hour later.
    let retried = RunKey::expected("retried", minute(0));
    let first = take(&mut got, "retried");
    let report = env.deliver(&worker, LANE, &[first]).await;
    assert!(matches!(
        report.outcomes[..],
        [(_, MessageOutcome::Retry(_))]
    ));
    assert_eq!(env.run(&retried).await.status, RunStatus::RetryPending);
    env.clock.set(minute(60));
    let again = messages(&env, LANE, 1).await.remove(0);
    deliver_done(&env, &worker, LANE, again).await;
    let run = env.run(&retried).await;
    assert_eq!((run.status, run.attempts), (RunStatus::Success, 2));

    // Delivered late, the MANUAL schedule's run waits for approval; approved (onto the
    // manual lane, as the api does), it runs, later still.
    let held = RunKey::expected("approved", minute(0));
    deliver_done(&env, &worker, LANE, take(&mut got, "approved")).await;
    let run = env.run(&held).await;
    assert_eq!(
        (run.status, run.reason),
        (RunStatus::ManualRequired, Some(Reason::PolicyManual))
    );
    env.clock.set(minute(90));
    let approved = env
        .store
        .transition_run(
            &held,
            &RunChange::new(
                RunStatus::ManualRequired,
                run.lease_epoch,
                minute(90),
                Transition::Approve { reason: None },
            ),
        )
        .await
        .expect("approve");
    cronledger_app::runs::send_run(
        env.store.as_ref(),
        env.queue.as_ref(),
        &approved,
        RunStatus::Pending,
        Lane::Manual,
        minute(90),
    )
    .await
    .expect("send approved run");
    let message = messages(&env, Lane::Manual, 1).await.remove(0);
    deliver_done(&env, &worker, Lane::Manual, message).await;
    let run = env.run(&held).await;
    assert_eq!((run.status, run.attempts), (RunStatus::Success, 1));
}

#[tokio::test]
async fn a_queue_new_run_released_late_runs_because_it_waited_by_policy() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Hang).await;
    let fields = json!({"misfire": "SKIP", "overlap": "QUEUE_NEW"});
    schedule(&env, &hook, "behind", "* * * * *", fields).await;
    let key = |m| RunKey::expected("behind", minute(m));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = Arc::new(env.worker(WorkerConfig {
        lease: Span::hours(2),
        ..worker_config("w")
    }));
    let poller = spawn_poller(env.lanes.lanes.clone(), worker, LANE, stopped);

    // 10:00 runs (and hangs); the 10:01 window waits behind it, QUEUED_BEHIND.
    let ticker = env.ticker_with(cronledger_app::ticker::TickerConfig {
        lookahead: Span::ZERO,
        ..cronledger_tests::app::ticker_config()
    });
    assert_eq!(env.tick_with(&ticker, minute(0)).await.sent, 1);
    hook.wait_arrived(1, Duration::from_secs(10)).await;
    let report = env.tick_with(&ticker, minute(1)).await;
    assert_eq!((report.queued_behind, report.sent), (1, 0));

    // The job ends 40 minutes later: the waiting run is released and runs, though it is
    // far past its grace period, because it waited by policy, not by accident.
    env.clock.set(minute(40));
    hook.set_default(Answer::Succeed);
    hook.release(1);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while env.run(&key(1)).await.status != RunStatus::Success {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            env.run(&key(1)).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.send(true).expect("stop");
    poller.await.expect("poller");
    let run = env.run(&key(1)).await;
    assert_eq!(
        (run.status, run.reason, run.attempts),
        (RunStatus::Success, None, 1)
    );
    assert_eq!(hook.arrived(), 2);
}

#[tokio::test]
async fn run_once_folds_a_late_run_into_the_gap_it_opens() {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    let fields = json!({"misfire": "RUN_ONCE", "side_effects": false});
    schedule(&env, &hook, "gap", "*/10 * * * *", fields).await;
    // 10:00 is fired, then the scheduler is down: 10:10..10:30 get no run.
    assert_eq!(env.tick(minute(0)).await.sent, 1);
    env.clock.set(minute(33));
    let worker = env.worker(worker_config("w"));
    let message = messages(&env, LANE, 1).await.remove(0);
    deliver_done(&env, &worker, LANE, message).await;
    let run = env.run(&RunKey::expected("gap", minute(0))).await;
    assert_eq!(
        (run.status, run.reason, run.coalesced_into),
        (
            RunStatus::Coalesced,
            Some(Reason::Coalesced),
            Some(minute(30))
        )
    );
    // The reconciler fires 10:30 as its gap's latest; nothing ran here.
    assert_eq!(hook.arrived(), 0);
}

fn run_once(side_effects: bool) -> Value {
    json!({"misfire": "RUN_ONCE", "side_effects": side_effects})
}

/// A schedule every 10 minutes (misfire `fields`) whose windows at `minutes` the ticker fired
/// on time while no worker took them (a broken deploy, a backlog): each has a live run
/// waiting in the lane. Queued runs do not overlap-skip each other (ALLOW) while no worker
/// runs them.
async fn backlog(id: &str, mut fields: Value, minutes: &[i64]) -> (AppEnv, Webhook) {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    let hook = Webhook::start(Answer::Succeed).await;
    fields["overlap"] = json!("ALLOW");
    schedule(&env, &hook, id, "*/10 * * * *", fields).await;
    for m in minutes {
        assert_eq!(env.tick(minute(*m)).await.sent, 1);
    }
    (env, hook)
}

#[tokio::test]
async fn runs_late_behind_a_backlog_fold_into_the_latest_which_moves_ahead_and_runs_once() {
    // 10:00..10:30 wait in the lane.
    let (env, hook) = backlog("slow", run_once(false), &[0, 10, 20, 30]).await;
    // Workers return at 10:33 and take the oldest first. 10:00 folds into 10:30, the latest
    // window past its grace; 10:30's own run waits at the back of the same backlog (and in
    // a lasting backlog would fold into the next), so it is moved to the correction lane.
    env.clock.set(minute(33));
    let worker = env.worker(worker_config("w"));
    let mut queued = messages(&env, LANE, 4).await;
    queued.sort_by_key(|m| m.body.clone());
    let mut queued = queued.into_iter();
    let oldest = queued.next().expect("10:00");
    deliver_done(&env, &worker, LANE, oldest).await;
    let moved = messages(&env, Lane::Correction, 1).await.remove(0);
    // 10:10 and 10:20 fold into 10:30 too, without moving it again.
    for message in queued.by_ref().take(2) {
        deliver_done(&env, &worker, LANE, message).await;
    }
    let none = env
        .receive(Lane::Correction, false, 1, Duration::from_millis(500))
        .await;
    assert!(none.is_empty(), "10:30 was moved once");
    // The moved message starts 10:30; its message in the live lane then finds it done.
    deliver_done(&env, &worker, Lane::Correction, moved).await;
    let left = queued.next().expect("10:30's own message");
    deliver_done(&env, &worker, LANE, left).await;
    for m in [0, 10, 20] {
        let run = env.run(&RunKey::expected("slow", minute(m))).await;
        assert_eq!(
            (m, run.status, run.coalesced_into),
            (m, RunStatus::Coalesced, Some(minute(30)))
        );
    }
    let latest = env.run(&RunKey::expected("slow", minute(30))).await;
    assert_eq!(
        (latest.status, latest.attempts, latest.lane),
        (RunStatus::Success, 1, Some(Lane::Correction))
    );
    assert_eq!(hook.calls().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_runs_handled_at_once_move_the_latest_window_ahead_once() {
    let (env, _hook) = backlog("racing", run_once(false), &[0, 10, 20, 30]).await;
    env.clock.set(minute(33));
    let mut queued = messages(&env, LANE, 4).await;
    queued.sort_by_key(|m| m.body.clone());
    // 10:00, 10:10 and 10:20 reach three workers at once: each finds 10:30's run still
    // waiting in the lane; it is moved to the correction lane once, not three times.
    let workers: Vec<Worker> = (0..3)
        .map(|i| env.worker(worker_config(&format!("w{i}"))))
        .collect();
    let deliveries = workers
        .iter()
        .zip(queued.drain(..3))
        .map(|(worker, message)| deliver_done(&env, worker, LANE, message));
    futures_util::future::join_all(deliveries).await;
    let moved = env
        .receive(Lane::Correction, false, 3, Duration::from_secs(2))
        .await;
    assert_eq!(moved.len(), 1);
    for m in [0, 10, 20] {
        let run = env.run(&RunKey::expected("racing", minute(m))).await;
        assert_eq!((m, run.status), (m, RunStatus::Coalesced));
    }
}

#[tokio::test]
async fn a_backlog_of_a_side_effecting_run_once_schedule_asks_for_one_approval() {
    let (env, hook) = backlog("effects", run_once(true), &[0, 10, 20, 30, 40, 50]).await;
    // Workers return at 10:57, in whatever order: late past the 5-minute tier, the windows
    // fold into 10:50 and 10:50 waits for approval, once, rather than six times.
    env.clock.set(minute(57));
    let worker = env.worker(worker_config("w"));
    for message in messages(&env, LANE, 6).await {
        deliver_done(&env, &worker, LANE, message).await;
    }
    for message in env
        .receive(Lane::Correction, false, 10, Duration::from_millis(500))
        .await
    {
        deliver_done(&env, &worker, Lane::Correction, message).await;
    }
    let mut statuses = Vec::new();
    for m in [0, 10, 20, 30, 40, 50] {
        statuses.push(
            env.run(&RunKey::expected("effects", minute(m)))
                .await
                .status,
        );
    }
    assert_eq!(
        statuses,
        [
            RunStatus::Coalesced,
            RunStatus::Coalesced,
            RunStatus::Coalesced,
            RunStatus::Coalesced,
            RunStatus::Coalesced,
            RunStatus::ManualRequired
        ]
    );
    assert_eq!(hook.calls().len(), 0);
}

/// A CATCH_UP_ALL schedule (cap 3, no side effects) whose 10:00..10:50 were fired on time
/// while no worker took them. Workers return at 10:53 and take the three oldest; the other
/// three messages are returned, oldest first.
async fn catch_up_backlog_half_parked(id: &str) -> (AppEnv, Webhook, Worker, Vec<Received>) {
    let fields = json!({"misfire": "CATCH_UP_ALL", "side_effects": false, "max_auto_catch_up": 3});
    let (env, hook) = backlog(id, fields, &[0, 10, 20, 30, 40, 50]).await;
    env.clock.set(minute(53));
    let worker = env.worker(worker_config("w"));
    let mut queued = messages(&env, LANE, 6).await;
    queued.sort_by_key(|m| m.body.clone());
    let rest = queued.split_off(3);
    for message in queued {
        deliver_done(&env, &worker, LANE, message).await;
    }
    (env, hook, worker, rest)
}

#[tokio::test]
async fn a_catch_up_all_backlog_is_planned_as_its_gap_capped_and_replayed_one_by_one() {
    let (env, hook, worker, queued) = catch_up_backlog_half_parked("replay").await;
    let key = |m| RunKey::expected("replay", minute(m));
    // The oldest are a replay, which one run cannot place in its gap: they wait for the
    // reconciler.
    for m in [0, 10, 20] {
        let run = env.run(&key(m)).await;
        assert_eq!(
            (m, run.status, run.reason, run.attempts),
            (m, RunStatus::Pending, Some(Reason::LateAwaitingPlan), 0)
        );
    }
    // More of the gap is still on its way to a worker (10:30.. QUEUED, late): wait for it.
    let r = reconciler(&env, Arc::new(FakeSignals::default()), reconciler_config());
    let report = reconcile(&r, minute(54)).await;
    assert_eq!(report.backlog.deferred, 3);
    assert_eq!(env.run(&key(0)).await.status, RunStatus::Pending);
    // The rest arrives: 10:30 and 10:40 wait too; 10:50, 3 minutes late (the immediate
    // tier), runs.
    for message in queued {
        deliver_done(&env, &worker, LANE, message).await;
    }
    assert_eq!(env.run(&key(50)).await.status, RunStatus::Success);
    assert_eq!(hook.calls().len(), 1);

    // The five are planned as one gap (55 minutes, the serial tier) with the schedule's
    // cap of 3, exactly as the same windows missed outright would be.
    let report = reconcile(&r, minute(55)).await;
    assert_eq!((report.backlog.fired, report.backlog.held), (3, 2));
    let group = Some("catchup:replay:2026-03-01T10:00:00Z".to_string());
    for m in [0, 10, 20] {
        let run = env.run(&key(m)).await;
        assert_eq!(
            (m, run.trigger, run.lane, run.replay_group_id, run.reason),
            (
                m,
                Trigger::CatchUp,
                Some(Lane::Correction),
                group.clone(),
                None
            )
        );
    }
    for m in [30, 40] {
        let run = env.run(&key(m)).await;
        assert_eq!(
            (m, run.status, run.reason, run.trigger),
            (
                m,
                RunStatus::ManualRequired,
                Some(Reason::CapExceeded),
                Trigger::CatchUp
            )
        );
    }
    // A stray copy of a planned run's live message does not start it outside its release.
    let mut copy = env.run(&key(20)).await;
    copy.lane = Some(LANE);
    env.resend(&copy).await;
    let stray = messages(&env, LANE, 1).await.remove(0);
    deliver_done(&env, &worker, LANE, stray).await;
    assert_eq!(env.run(&key(20)).await.attempts, 0);

    // The correction lane replays them one at a time, oldest first.
    for (pass, m) in [(55, 0), (56, 10), (57, 20)] {
        if pass > 55 {
            assert_eq!(reconcile(&r, minute(pass)).await.released, 1);
        }
        let message = messages(&env, Lane::Correction, 1).await.remove(0);
        deliver_done(&env, &worker, Lane::Correction, message).await;
        let run = env.run(&key(m)).await;
        assert_eq!((m, run.status, run.attempts), (m, RunStatus::Success, 1));
    }
    assert_eq!(
        called(&hook),
        [
            "replay:2026-03-01T09:50:00Z/2026-03-01T10:00:00Z",
            "replay:2026-03-01T10:00:00Z/2026-03-01T10:10:00Z",
            "replay:2026-03-01T10:10:00Z/2026-03-01T10:20:00Z",
            "replay:2026-03-01T10:40:00Z/2026-03-01T10:50:00Z",
        ]
    );
    let stored = env.store.get_schedule("replay").await.expect("schedule");
    let compiled = cronledger_core::Schedule::new(stored.spec).expect("compiles");
    assert_every_window_once(env.store.as_ref(), &compiled, minute(-1), minute(50)).await;
}

#[tokio::test]
async fn a_backlog_that_keeps_arriving_is_planned_in_parts_once_it_has_waited() {
    // A lane that stays behind: when the first late runs are parked, more of the gap is
    // always still queued. Waiting for all of it would keep the schedule from running.
    let (env, _hook, worker, queued) = catch_up_backlog_half_parked("lagging").await;
    let key = |m| RunKey::expected("lagging", minute(m));
    let mut config = reconciler_config();
    config.backlog_wait = Span::minutes(5);
    let r = reconciler(&env, Arc::new(FakeSignals::default()), config);
    // Parked at 10:53; 10:30.. still queued: the gap waits, up to the 5 minutes.
    let report = reconcile(&r, minute(57)).await;
    assert_eq!((report.backlog.deferred, report.backlog.fired), (3, 0));
    // Still arriving at 10:58, but the parked part has waited long enough: it is planned.
    assert_part_planned(&env, &r, "lagging", 58, [0, 10, 20], 1).await;
    // The rest reaches a worker, is parked in turn, and is planned as the next part
    // (with its own cap) once nothing more is queued.
    env.clock.set(minute(59));
    for message in queued {
        deliver_done(&env, &worker, LANE, message).await;
    }
    for m in [30, 40, 50] {
        let run = env.run(&key(m)).await;
        assert_eq!((m, run.reason), (m, Some(Reason::LateAwaitingPlan)));
    }
    assert_part_planned(&env, &r, "lagging", 60, [30, 40, 50], 0).await;
    let stored = env.store.get_schedule("lagging").await.expect("schedule");
    let compiled = cronledger_core::Schedule::new(stored.spec).expect("compiles");
    assert_every_window_once(env.store.as_ref(), &compiled, minute(-1), minute(50)).await;
}

/// A pass at `at` plans the parked `windows` as catch-up runs, all within the cap of 3;
/// `in_part`: whether more of the gap was still queued.
async fn assert_part_planned(
    env: &AppEnv,
    r: &cronledger_app::reconciler::Reconciler,
    id: &str,
    at: i64,
    windows: [i64; 3],
    in_part: u32,
) {
    let report = reconcile(r, minute(at)).await;
    let b = &report.backlog;
    assert_eq!((b.fired, b.held, b.planned_in_part), (3, 0, in_part));
    for m in windows {
        let run = env.run(&RunKey::expected(id, minute(m))).await;
        assert_eq!((m, run.trigger), (m, Trigger::CatchUp));
    }
}
