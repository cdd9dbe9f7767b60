//! The ticker against the emulator: racing tickers fire each window once and send it once,
//! and a ticker that dies between its writes leaves a state nothing loses.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::Duration as Delta;
use cronledger_app::faults::CrashPoint;
use cronledger_app::ticker::{TickEvent, TickReport, Ticker};
use cronledger_aws::keys::shard_of;
use cronledger_aws::lanes::{LaneSettings, MessageOutcome};
use cronledger_aws::DynamoLedger;
use cronledger_core::{Lane, RunKey, RunStatus};
use cronledger_tests::app::{ticker_config, worker_config, AppEnv, CrashAt};
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{spec_with, t, SHARDS};
use futures_util::stream::{self, StreamExt};

const SCHEDULES: usize = 1000;
const TICKERS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tickers_on_the_same_minute_fire_each_window_exactly_once() {
    // The windows are due: each is checked against its schedule's running work.
    race_for_the_hour(t("2026-03-01T10:00:00Z")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tickers_batching_windows_in_their_lookahead_fire_each_window_exactly_once() {
    // The windows are 30 s ahead: sent with an SQS delay to their second.
    race_for_the_hour(t("2026-03-01T09:59:30Z")).await;
}

/// One race at a time: two of them at once overload the emulator's SQS, and sends fail.
static ONE_RACE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Eight tickers tick at `tick_at` over 1,000 schedules whose window is 10:00.
async fn race_for_the_hour(tick_at: chrono::DateTime<chrono::Utc>) {
    let _alone = ONE_RACE.lock().await;
    let t0 = t("2026-03-01T09:59:30Z");
    let minute = t("2026-03-01T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), minute).await;
    let ids: Vec<String> = (0..SCHEDULES).map(|i| format!("race-{i:04}")).collect();
    // Validated once (validation walks a real calendar), then copied under each id. ALLOW:
    // the race is the subject here; overlap has its own tests.
    let template = spec_with(
        "race",
        "0 * * * *",
        serde_json::json!({ "overlap": "ALLOW" }),
    );
    stream::iter(&ids)
        .for_each_concurrent(16, |id| {
            let mut spec = template.clone();
            spec.id = id.clone();
            async {
                let created = env.create(spec, t0).await;
                assert_eq!(created.next_run_at, Some(minute));
            }
        })
        .await;

    // Eight tickers, each with its own store client as separate Lambdas would have, on the
    // event time of the same minute (the wall clock is years away from it).
    let tickers: Vec<Ticker> = (0..TICKERS)
        .map(|_| {
            let store = DynamoLedger::new(&env.ledger.clients, &env.ledger.table, SHARDS);
            Ticker::new(Arc::new(store), env.queue.clone(), ticker_config())
                .with_send_clock(Arc::new(env.clock.clone()))
        })
        .collect();
    let event = TickEvent {
        time: tick_at,
        shards: None,
    };
    let reports: Vec<TickReport> =
        futures_util::future::join_all(tickers.iter().map(|ticker| ticker.tick(&event))).await;

    for r in &reports {
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(
            r.due_schedules,
            r.created + r.lost_race,
            "every due schedule a ticker saw it either fired or lost: {r:?}"
        );
        assert_eq!((r.unsent, r.left_for_reconciler), (0, 0), "{r:?}");
    }
    // Whoever moved the shard's mark over the window sent it: the ticker that wrote it, or
    // the one that found it written and never started (its writer lost the move).
    let sends: u32 = reports.iter().map(|r| r.sent + r.redispatched).sum();
    assert_eq!(sends as usize, SCHEDULES, "{reports:?}");
    let created: u32 = reports.iter().map(|r| r.created).sum();
    let lost: u32 = reports.iter().map(|r| r.lost_race).sum();
    let seen: u32 = reports.iter().map(|r| r.due_schedules).sum();
    assert_eq!(created as usize, SCHEDULES);
    assert_eq!(lost, seen - created);
    assert!(lost > 0, "the tickers raced: {reports:?}");
    eprintln!(
        "{TICKERS} tickers: created {:?}, lost {:?}",
        reports.iter().map(|r| r.created).collect::<Vec<_>>(),
        reports.iter().map(|r| r.lost_race).collect::<Vec<_>>()
    );

    // One message per window, one run per schedule, and no schedule item written by a fire.
    let sent = env.queue.sends();
    let distinct: BTreeSet<&RunKey> = sent.iter().collect();
    assert_eq!((sent.len(), distinct.len()), (SCHEDULES, SCHEDULES));
    for shard in 0..SHARDS {
        let mark = env.store.fire_mark(shard).await.expect("mark");
        assert_eq!(mark.fired_through, Some(tick_at + Delta::seconds(60)));
        assert_eq!(mark.sent_through, mark.fired_through, "shard {shard}");
    }
    stream::iter(&ids)
        .for_each_concurrent(16, |id| {
            let store = env.store.clone();
            async move {
                let schedule = store.get_schedule(id).await.expect("get schedule");
                assert_eq!(schedule.version, 1, "{id}");
                let runs = store
                    .run_history(id, 10, None)
                    .await
                    .expect("history")
                    .items;
                assert_eq!(runs.len(), 1, "{id}: {runs:?}");
                assert_eq!(runs[0].key, RunKey::expected(id.as_str(), minute));
                assert_eq!(runs[0].status, RunStatus::Queued, "{id}");
                assert_eq!(runs[0].attempts, 0);
            }
        })
        .await;
}

#[tokio::test]
async fn a_crash_between_the_run_write_and_the_send_is_recovered_by_the_next_tick_within_grace() {
    let t0 = t("2026-03-01T09:59:30Z");
    let minute = t("2026-03-01T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), minute).await;
    let hook = Webhook::start(Answer::Succeed).await;
    let id = "crash-after-write";
    let job = serde_json::json!({ "job": { "type": "http", "url": hook.url } });
    env.create(spec_with(id, "0 * * * *", job), t0).await;

    let ticker = env
        .ticker()
        .with_faults(CrashAt::new(CrashPoint::AfterRunWrite, 1));
    let event = TickEvent {
        time: minute,
        shards: None,
    };
    let report = ticker.tick(&event).await;
    assert_eq!((report.created, report.sent), (1, 0));

    // The run is written QUEUED, with no message anywhere; the shard's mark moved over it
    // but `sent_through` stayed behind.
    let key = RunKey::expected(id, minute);
    let run = env.run(&key).await;
    assert_eq!((run.status, run.attempts), (RunStatus::Queued, 0));
    assert!(env.queue.sends().is_empty());
    assert!(env
        .receive(Lane::Normal, false, 1, Duration::from_secs(1))
        .await
        .is_empty());
    let shard = shard_of(id, SHARDS);
    let mark = env.store.fire_mark(shard).await.expect("mark");
    assert!(mark.sent_through < mark.fired_through, "{mark:?}");

    // The same event again (EventBridge retries the failed tick) writes nothing twice and
    // sends nothing yet: a run sent with a delay may simply not be due. The next tick finds
    // it never started 30 s past its fire time and sends it, `sent_through` follows, and a
    // racing ticker on that minute finds nothing left to send.
    let again = env.ticker().tick(&event).await;
    assert_eq!((again.created, again.redispatched), (0, 0), "{again:?}");
    let next = minute + Delta::minutes(1);
    let next_event = TickEvent {
        time: next,
        shards: None,
    };
    let resent = env.ticker().tick(&next_event).await;
    assert_eq!(resent.redispatched, 1, "{resent:?}");
    let after = env.store.fire_mark(shard).await.expect("mark");
    assert_eq!(
        after.sent_through, after.fired_through,
        "{mark:?} -> {after:?}"
    );
    let racing = env.ticker().tick(&next_event).await;
    assert_eq!(racing.redispatched, 0, "{racing:?}");
    let received = env
        .receive(Lane::Normal, false, 1, Duration::from_secs(5))
        .await;
    assert_eq!(received.len(), 1);
    env.clock.set(next + Delta::seconds(2));
    let worker = env.worker(worker_config("w"));
    let batch = env.deliver(&worker, Lane::Normal, &received).await;
    assert_eq!(batch.outcomes[0].1, MessageOutcome::Done);
    let done = env.run(&key).await;
    assert_eq!((done.status, done.attempts), (RunStatus::Success, 1));
    assert_eq!(hook.by_key()[run.idempotency_key.as_str()], (1, 1));
}

#[tokio::test]
async fn a_crash_after_the_send_is_sent_again_by_the_next_tick_and_runs_once() {
    let t0 = t("2026-03-01T09:59:30Z");
    let minute = t("2026-03-01T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), minute).await;
    let hook = Webhook::start(Answer::Succeed).await;
    let id = "crash-after-send";
    let job = serde_json::json!({ "job": { "type": "http", "url": hook.url } });
    env.create(spec_with(id, "0 * * * *", job), t0).await;

    let ticker = env
        .ticker()
        .with_faults(CrashAt::new(CrashPoint::AfterSend, 1));
    let report = ticker
        .tick(&TickEvent {
            time: minute,
            shards: None,
        })
        .await;
    assert_eq!((report.created, report.sent, report.unsent), (1, 1, 0));
    let key = RunKey::expected(id, minute);
    let run = env.run(&key).await;
    assert_eq!(run.status, RunStatus::Queued);
    assert_eq!(env.queue.sends(), std::slice::from_ref(&key));
    // The ticker died before `sent_through` followed `fired_through`.
    let mark = env
        .store
        .fire_mark(shard_of(id, SHARDS))
        .await
        .expect("mark");
    assert!(mark.sent_through < mark.fired_through, "{mark:?}");

    // The next tick cannot tell whether the send went out and sends the never-started run
    // again: the worker gets two messages for it and runs the job once.
    let next = env
        .ticker()
        .tick(&TickEvent {
            time: minute + Delta::minutes(1),
            shards: None,
        })
        .await;
    assert_eq!(next.redispatched, 1, "{next:?}");
    let received = env
        .receive(Lane::Normal, false, 2, Duration::from_secs(5))
        .await;
    assert_eq!(received.len(), 2);
    let worker = env.worker(worker_config("w"));
    for one in &received {
        let batch = env
            .deliver(&worker, Lane::Normal, std::slice::from_ref(one))
            .await;
        assert_eq!(batch.outcomes[0].1, MessageOutcome::Done);
    }
    let done = env.run(&key).await;
    assert_eq!((done.status, done.attempts), (RunStatus::Success, 1));
    assert_eq!(hook.calls().len(), 1);
    assert_eq!(hook.by_key()[run.idempotency_key.as_str()], (1, 1));
}

#[tokio::test]
async fn one_tick_fires_every_due_schedule_of_a_shard_however_many_pages_they_take() {
    let t0 = t("2026-03-01T09:59:10Z");
    let tick = t("2026-03-01T09:59:30Z");
    let minute = t("2026-03-01T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), minute).await;
    // Eleven schedules in one shard, all read from its catalog (a query that follows its
    // pages; the `due` index's read limit once left the rest for later ticks).
    let ids: Vec<String> = (0..)
        .map(|i| format!("paged-{i}"))
        .filter(|id| shard_of(id, SHARDS) == 0)
        .take(11)
        .collect();
    let grace = serde_json::json!({ "grace": "5m" });
    for id in &ids {
        env.create(spec_with(id, "* * * * *", grace.clone()), t0)
            .await;
    }
    let ticker = env.ticker_with(ticker_config());
    let report = env.tick_with(&ticker, tick).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!((report.due_schedules, report.created), (11, 11));
    for id in &ids {
        let run = env.run(&RunKey::expected(id, minute)).await;
        assert_eq!(run.status, RunStatus::Queued, "{id}");
    }
}
