//! Every item of every release reads with the current code, on both stores, and an item of a
//! later release is refused by name and left as it is.

use std::time::Duration;

use chrono::Duration as Delta;
use cronledger_aws::item::{n, Item, Value};
use cronledger_aws::lanes::{LaneSettings, MessageOutcome};
use cronledger_aws::ledger::{Opening, RunChange};
use cronledger_aws::schema::SCHEMA_VERSION;
use cronledger_aws::{Outcome, StoreError};
use cronledger_core::children::ChildStatus;
use cronledger_core::{Lane, RunKey, RunStatus};
use cronledger_tests::app::{worker_config, AppEnv};

use super::fixtures::{Release, RELEASES};
use super::generate::{hour, meta, other_lane_runs, schedules, RUN_STATES};
use super::stores::{AllStores, Backend};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_item_of_every_release_reads_on_both_stores() {
    for version in RELEASES {
        let release = Release::read(version);
        for backend in Backend::both().await {
            backend
                .put_all(release.items.values().flatten().cloned())
                .await;
            read_everything(backend.store().as_ref())
                .await
                .unwrap_or_else(|e| panic!("{version} on {}: {e}", backend.name()));
        }
    }
}

/// Reads every kind the fixtures hold through the store traits, checking what they say.
async fn read_everything(store: &dyn AllStores) -> Result<(), StoreError> {
    for spec in schedules() {
        let id = spec.id.clone();
        let stored = store.get_schedule(&id).await?;
        assert_eq!(stored.spec, spec, "{id}");
        let audit = store.audit_log(&id).await?;
        assert!(!audit.is_empty(), "{id}");
        assert_eq!(store.schedule_spec_at(&id, 1).await?, spec, "{id}");
        let (run, _attempts) = store
            .get_run_with_attempts(&RunKey::expected(&id, hour()))
            .await?;
        if let Some((_, status)) = RUN_STATES.iter().find(|(s, _)| *s == id) {
            assert_eq!(run.status, *status, "{id}");
        }
        assert!(!store.run_history(&id, 10, None).await?.items.is_empty());
    }
    for (key, lane) in other_lane_runs() {
        let run = store.get_run(&key).await?;
        assert_eq!(
            (run.status, run.lane),
            (RunStatus::Queued, Some(lane)),
            "{key}"
        );
    }
    let listed = store.list_schedules(100, None).await?;
    assert_eq!(listed.items.len(), schedules().len());
    let mut catalog = 0;
    for shard in 0..cronledger_tests::SHARDS {
        store.fire_mark(shard).await?;
        catalog += store.shard_catalog(shard).await?.len();
    }
    assert_eq!(catalog, schedules().len());
    let leased = store.get_run(&RunKey::expected("leased", hour())).await?;
    let owner = leased.lease.map(|l| l.owner);
    assert_eq!(owner.as_deref(), Some(super::generate::GONE_WORKER));

    let fanout = RunKey::expected("fanout", hour());
    let children = store.children_of(&fanout, 0, 10, None).await?.items;
    let statuses: Vec<ChildStatus> = children.iter().map(|c| c.status).collect();
    assert_eq!(children.len(), 3, "{statuses:?}");
    assert_eq!(
        store.get_child(&fanout, 0, 0).await?.status,
        ChildStatus::Success
    );

    assert_eq!(store.get_backfill("refill-1").await?.schedule_id, "plain");
    assert_eq!(store.open_backfills().await?.len(), 1);
    let alerts = store.alerts_of("failing", 10).await?;
    assert_eq!(alerts.len(), 1);
    assert_eq!(store.unpublished_alerts(10).await?.len(), 1);
    let trackers = store.awaiting_due(hour() + Delta::days(1), 10).await?;
    assert_eq!(trackers.len(), 1);
    let day = hour().date_naive();
    assert!(!store.outcome_days("failing", day, day).await?.is_empty());
    let switch = store.kill_switch().await?.expect("the kill switch");
    assert!(!switch.engaged);
    assert_eq!(store.system_audit(10).await?.len(), 1);
    assert_eq!(store.list_calendars().await?.len(), 1);
    assert_eq!(store.calendar_audit("holidays").await?.len(), 1);
    assert!(store.release_state(Lane::Backfill).await?.is_some());
    Ok(())
}

fn with_version(mut item: Item, version: u64) -> Item {
    item.insert(SCHEMA_VERSION.to_string(), n(version));
    item
}

fn text<'a>(item: &'a Item, name: &str) -> &'a str {
    match item.get(name) {
        Some(Value::S(s)) => s,
        _ => "",
    }
}

fn assert_refused<T: std::fmt::Debug>(answer: Result<T, StoreError>, pk: &str, sk: &str) {
    let err = answer.expect_err("an item of a later release is refused");
    assert_eq!(err.code(), "ITEM_SCHEMA_UNSUPPORTED", "{err}");
    let message = err.to_string();
    assert!(
        message.contains(pk) && message.contains(sk) && message.contains("version 2"),
        "{message}"
    );
}

/// A run and a schedule of schema version 2: every read answers ITEM_SCHEMA_UNSUPPORTED
/// naming the item, every write is refused, and both items stay exactly as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_of_a_later_release_are_refused_by_name_and_left_untouched() {
    let release = Release::read(RELEASES[RELEASES.len() - 1]);
    let run = with_version(release.item("run", "SCHED#queued"), 2);
    let schedule = with_version(release.item("schedule", "SCHED#queued"), 2);
    // Outcome counters are written blind (an ADD, no read first): only the write's guard on
    // the stored version keeps this one as it is.
    let health = with_version(release.item("health", "SCHED#failing"), 2);
    let key = RunKey::expected("queued", hour());
    for backend in Backend::both().await {
        backend
            .put_all(release.items.values().flatten().cloned())
            .await;
        backend
            .put_all([run.clone(), schedule.clone(), health.clone()])
            .await;
        let store = backend.store();
        let (pk, run_sk, def_sk) = (text(&run, "PK"), text(&run, "SK"), text(&schedule, "SK"));

        assert_refused(store.get_run(&key).await, pk, run_sk);
        assert_refused(store.run_history("queued", 10, None).await, pk, run_sk);
        assert_refused(store.get_schedule("queued").await, pk, def_sk);
        let open = RunChange::open(
            Opening::Start,
            RunStatus::Queued,
            0,
            hour() + Delta::minutes(1),
            "worker-new",
            hour() + Delta::minutes(2),
        );
        assert!(store.transition_run(&key, &open).await.is_err());
        assert!(store
            .pause_schedule("queued", None, meta(hour()))
            .await
            .is_err());

        let day = hour().date_naive();
        let _ = store
            .count_outcome("failing", day, Outcome::Failed, 1)
            .await;
        assert_refused(
            store.outcome_days("failing", day, day).await,
            "SCHED#failing",
            text(&health, "SK"),
        );

        for stored in [&run, &schedule, &health] {
            let now = backend
                .get_raw(text(stored, "PK"), text(stored, "SK"))
                .await;
            assert_eq!(now.as_ref(), Some(stored), "{}", backend.name());
        }
        // The rest of the ledger reads on.
        assert_eq!(
            store
                .get_run(&RunKey::expected("plain", hour()))
                .await
                .map(|r| r.status)
                .ok(),
            Some(RunStatus::Success)
        );
    }
}

/// A worker given the message of a run that a later release rewrote keeps the message (a
/// batch item failure, not the DLQ) and leaves the run as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_leaves_a_later_releases_run_and_its_message_alone() {
    let release = Release::read(RELEASES[RELEASES.len() - 1]);
    let run = with_version(release.item("run", "SCHED#queued"), 2);
    let body = release.messages[Lane::Realtime.as_str()]
        .iter()
        .find(|b| b.contains("\"queued\""))
        .cloned()
        .expect("queued's message");
    for backend in Backend::both().await {
        let name = backend.name();
        let mut env = AppEnv::new(LaneSettings::default(), hour() + Delta::minutes(1)).await;
        env.store = backend.ledger();
        backend
            .put_all(release.items.values().flatten().cloned())
            .await;
        backend.put_raw(run.clone()).await;
        env.send_raw(Lane::Realtime, body.clone()).await;

        let batch = env
            .receive(Lane::Realtime, false, 1, Duration::from_secs(10))
            .await;
        let worker = env.worker(worker_config("worker-new"));
        let report = env.deliver(&worker, Lane::Realtime, &batch).await;
        assert!(
            matches!(&report.outcomes[0].1, MessageOutcome::Retry(reason) if reason.contains("ITEM_SCHEMA_UNSUPPORTED")),
            "{name}: {:?}",
            report.outcomes
        );
        assert_eq!(report.response().batch_item_failures.len(), 1, "{name}");
        let stored = backend.get_raw(text(&run, "PK"), text(&run, "SK")).await;
        assert_eq!(stored.as_ref(), Some(&run), "{name}");
    }
}
