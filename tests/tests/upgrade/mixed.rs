//! A mixed-format run: the current ticker, worker and reconciler start from the previous
//! release's ledger (runs QUEUED, RUNNING under a dead worker's lease, RETRY_PENDING, between
//! steps, WAITING for children, ended) and its messages in flight, write their own items
//! beside the old ones, and finish every run correctly, on both stores. A message of a
//! later release in the same batches is left in its lane, untouched.

use std::sync::Arc;
use std::time::Duration;

use chrono::Duration as Delta;
use cronledger_app::reconciler::Reconciler;
use cronledger_aws::item::n;
use cronledger_aws::lanes::{LaneSettings, MessageOutcome};
use cronledger_aws::schema::{CURRENT, SCHEMA_VERSION};
use cronledger_core::children::ChildStatus;
use cronledger_core::{Lane, RunKey, RunStatus};
use cronledger_tests::app::{worker_config, AppEnv};
use cronledger_tests::reconcile::{reconcile, reconciler_config, FakeSignals};
use serde_json::Value as Json;

use super::fixtures::{Release, RELEASES};
use super::generate::{hour, other_lane_runs};
use super::stores::Backend;

/// How every run of the release ends once the current code took over: the failed one stays
/// failed and the held one keeps waiting for its approval (nobody gave it).
const ENDS: &[(&str, RunStatus)] = &[
    ("plain", RunStatus::Success),
    ("queued", RunStatus::Success),
    ("leased", RunStatus::Success),
    ("retrying", RunStatus::Success),
    ("stepped", RunStatus::Success),
    ("fanout", RunStatus::Success),
    ("failing", RunStatus::Failed),
    ("held", RunStatus::ManualRequired),
];

/// A message of the next release: `v` past this code's.
fn later_release_body(body: &str) -> String {
    let mut doc: Json = serde_json::from_str(body).expect("a message body");
    doc["v"] = Json::from(2);
    doc["some_new_field"] = Json::from("whatever it means");
    doc.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_current_release_finishes_every_run_the_previous_one_left() {
    let version = RELEASES[RELEASES.len() - 1];
    let release = Release::read(version);
    for backend in Backend::both().await {
        let name = backend.name();
        let start = hour() + Delta::minutes(2);
        let mut env = AppEnv::new(LaneSettings::default(), start).await;
        env.store = backend.ledger();
        backend
            .put_all(release.items.values().flatten().cloned())
            .await;

        // The release's messages in flight, and one of the next release among them.
        let mut later = String::new();
        for (lane, bodies) in &release.messages {
            let lane: Lane = lane.parse().expect("a lane");
            let mut sent = bodies.clone();
            if later.is_empty() {
                later = later_release_body(&bodies[0]);
                sent.push(later.clone());
            }
            for body in sent {
                env.send_raw(lane, body).await;
            }
        }

        let worker = env.worker(worker_config("worker-new"));
        let reconciler = Reconciler::new(
            env.store.clone(),
            backend.control(),
            env.queue.clone(),
            Arc::new(FakeSignals::default()),
            reconciler_config(),
        );
        let mut kept_later = 0;
        let mut now = start;
        for _round in 0..8 {
            env.tick(now).await;
            for &lane in Lane::ALL {
                let batch = env
                    .receive(lane, false, 10, Duration::from_millis(600))
                    .await;
                if batch.is_empty() {
                    continue;
                }
                let report = env.deliver(&worker, lane, &batch).await;
                for (message, (_, outcome)) in batch.iter().zip(&report.outcomes) {
                    if message.body == later {
                        assert!(
                            matches!(outcome, MessageOutcome::Retry(reason) if reason.contains("LANE_MESSAGE_SCHEMA_UNSUPPORTED")),
                            "{name}: {outcome:?}"
                        );
                        kept_later += 1;
                    }
                }
            }
            reconcile(&reconciler, now).await;
            if finished(&env).await {
                break;
            }
            now += Delta::minutes(1);
            env.clock.set(now);
        }
        assert!(
            kept_later > 0,
            "{name}: the later release's message was never seen"
        );
        for (key, status) in ends() {
            let run = env.run(&key).await;
            assert_eq!(run.status, status, "{name} {key}: {run:?}");
        }
        let fanout = RunKey::expected("fanout", hour());
        let children = env
            .store
            .children_of(&fanout, 0, 10, None)
            .await
            .expect("children");
        assert!(
            children
                .items
                .iter()
                .all(|c| c.status == ChildStatus::Success),
            "{name}: {:?}",
            children.items
        );
        // The ledger is mixed now: what the current code wrote carries the schema version,
        // what it never touched is as the old release left it.
        for (pk, version) in [("SCHED#queued", Some(n(CURRENT))), ("SCHED#failing", None)] {
            let item = backend.get_raw(pk, "RUN#2026-03-01T10:00:00Z").await;
            let stored = item.and_then(|i| i.get(SCHEMA_VERSION).cloned());
            assert_eq!(stored, version, "{name} {pk}");
        }
        // Nothing the old release sent went to a DLQ, nor the later release's message (kept
        // as a batch item failure every time it came).
        for &lane in Lane::ALL {
            let dead = env.receive(lane, true, 1, Duration::from_millis(300)).await;
            assert!(dead.is_empty(), "{name}: {lane} DLQ: {dead:?}");
        }
    }
}

/// Every run of the release with how it must end.
fn ends() -> Vec<(RunKey, RunStatus)> {
    let windows = ENDS
        .iter()
        .map(|(id, status)| (RunKey::expected(*id, hour()), *status));
    // The operator's run is of the window `plain` already ran: not run again (ALREADY_DONE).
    let other_lanes = other_lane_runs().into_iter().map(|(key, lane)| {
        let end = match lane {
            Lane::Manual => RunStatus::Skipped,
            _ => RunStatus::Success,
        };
        (key, end)
    });
    windows.chain(other_lanes).collect()
}

async fn finished(env: &AppEnv) -> bool {
    for (key, status) in ends() {
        if env.run(&key).await.status != status {
            return false;
        }
    }
    true
}
