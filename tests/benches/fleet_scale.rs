//! The 100,000-schedule fleet: index partition load, ticks and the stuck-run scan.
//! Not run in CI. Run with the emulators up (`infra/local/up`, then source its env):
//!
//!   cargo bench -p cronledger-tests --bench fleet_scale -- [FLEET] [DRIVEN] [QUEUED]
//!
//! FLEET (default 100,000) minutely schedules size the shard count (`auto`'s rule) and the
//! partition table: the writes each index partition key takes per second, from the keys the
//! fleet's fires write (`due`: 2 per fire, `active`: 6 per run; see `keys::shards_for_fleet`).
//! DRIVEN (default 2,000) of them are created on the emulator and ticked for three minutes
//! (the emulator serves about a thousand requests a second: the whole fleet would take hours,
//! the in-memory store is the place for that once it is complete). Then QUEUED (default
//! 12,000) QUEUED runs and 3 RUNNING runs with expired leases in one shard, and one
//! reconciler pass: how many of the RUNNING runs it stalls.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_app::clock::ManualClock;
use cronledger_app::reconciler::{QuietSignals, ReconcileEvent, Reconciler, ReconcilerConfig};
use cronledger_app::ticker::{TickEvent, Ticker, TickerConfig};
use cronledger_aws::keys::{self, shards_for_fleet, ACTIVE_WRITES_PER_RUN};
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::{ChangeMeta, Opening, RunChange, Transition};
use cronledger_aws::prelude::*;
use cronledger_aws::{DynamoLedger, LedgerStore, ReleaseStateStore};
use cronledger_core::{RunKey, RunStatus};
use cronledger_tests::{bench_arg, scheduled_run, spec_with, TestLanes, TestLedger};
use futures_util::stream::{self, StreamExt};
use serde_json::json;

const CONCURRENCY: usize = 16;
/// `due` index writes per fire: the sort key moves to the next time (a delete and a put).
const DUE_WRITES_PER_FIRE: u64 = 2;

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("bench instants are valid")
}

fn id(i: usize) -> String {
    format!("fleet-{i:06}")
}

/// The busiest partition key's writes per second in each index, for `fleet` minutely
/// schedules over `shards` shards.
fn partition_load(fleet: usize, shards: u32) -> (u32, f64, f64) {
    let mut per_shard: BTreeMap<u32, u64> = BTreeMap::new();
    for i in 0..fleet {
        *per_shard.entry(keys::shard_of(&id(i), shards)).or_default() += 1;
    }
    let busiest = per_shard.values().copied().max().unwrap_or(0);
    let per_second = |writes: u64| (busiest * writes) as f64 / 60.0;
    (
        shards,
        per_second(DUE_WRITES_PER_FIRE),
        per_second(ACTIVE_WRITES_PER_RUN),
    )
}

async fn create_fleet(ledger: &DynamoLedger, n: usize, created: DateTime<Utc>) {
    stream::iter(0..n)
        .for_each_concurrent(CONCURRENCY, |i| async move {
            let spec = spec_with(&id(i), "* * * * *", json!({"job": {"type": "noop"}}));
            let meta = ChangeMeta {
                actor: "bench".into(),
                reason: "bench".into(),
                at: created,
                details: None,
            };
            if let Err(e) = ledger.create_schedule(spec, meta).await {
                eprintln!("create schedule {i}: {e}");
            }
        })
        .await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let fleet = bench_arg(0, 100_000);
    let driven = bench_arg(1, 2_000);
    let queued = bench_arg(2, 12_000);
    let shards = shards_for_fleet(fleet as u64);

    println!("fleet of {fleet} minutely schedules ({fleet} runs a minute)");
    println!("  shards   busiest `due` key   busiest `active` key   (writes/s; limit 1,000)");
    for layout in [1, shards] {
        let (n, due, active) = partition_load(fleet, layout);
        println!("  {n:>6}   {due:>17.0}   {active:>20.0}");
    }

    let ledger = TestLedger::new().await;
    // The test table, sharded as the fleet's deployment would be.
    let sharded = DynamoLedger::new(&ledger.clients, &ledger.table, shards);
    let lanes = TestLanes::with_clients(ledger.clients.clone(), LaneSettings::default()).await;
    let store: Arc<dyn LedgerStore> = Arc::new(sharded.clone());
    let created = at("2026-12-01T00:00:10Z");
    let started = Instant::now();
    create_fleet(&sharded, driven, created).await;
    println!(
        "\ncreated {driven} schedules over {shards} shards in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let clock = ManualClock::new(created);
    let ticker = Ticker::new(
        store.clone(),
        Arc::new(lanes.lanes.clone()),
        TickerConfig {
            shards,
            concurrency: CONCURRENCY,
            ..TickerConfig::default()
        },
    )
    .with_send_clock(Arc::new(clock.clone()));
    println!("tick      due  created  errors  requests  requests/run   wall s");
    for minute in 0..3 {
        // Ticks at :30 fire the next minute's windows ahead, as in production.
        let now = at("2026-12-01T00:00:30Z") + TimeDelta::minutes(minute);
        clock.set(now);
        let before = ledger.clients.meter.snapshot();
        let started = Instant::now();
        let report = ticker
            .tick(&TickEvent {
                time: now,
                shards: None,
            })
            .await;
        let secs = started.elapsed().as_secs_f64();
        let requests = ledger.clients.meter.snapshot().total().calls - before.total().calls;
        println!(
            "{}  {:>6}  {:>7}  {:>6}  {requests:>8}  {:>12.2}  {secs:>7.1}",
            now.format("%H:%M:%S"),
            report.due_schedules,
            report.created,
            report.errors.len(),
            requests as f64 / f64::from(report.created.max(1)),
        );
    }

    stuck_scan(&ledger, sharded, lanes, queued).await;
}

/// QUEUED runs in shard 0 and three RUNNING runs behind them whose leases ran out.
async fn stuck_scan(ledger: &TestLedger, sharded: DynamoLedger, lanes: TestLanes, queued: usize) {
    let shards = sharded.shards();
    let store: Arc<dyn LedgerStore> = Arc::new(sharded.clone());
    let window = at("2026-12-01T01:00:00Z");
    let in_shard_zero = |prefix: &'static str, n: usize| -> Vec<String> {
        (0..)
            .map(move |i| format!("{prefix}-{i:06}"))
            .filter(|id| keys::shard_of(id, shards) == 0)
            .take(n)
            .collect()
    };
    let fields = json!({"idempotent": false, "overlap": "ALLOW", "grace": "5m"});
    let started = Instant::now();
    stream::iter(in_shard_zero("waiting", queued))
        .for_each_concurrent(CONCURRENCY, |id| {
            let (store, fields) = (store.clone(), fields.clone());
            async move {
                let spec = spec_with(&id, "0 * * * *", fields);
                let run = scheduled_run(&spec, window, window, "bench");
                let sent = Transition::Enqueue {
                    lane: run.lane,
                    lane_was: None,
                    job_id: Some(format!("message-{id}")),
                    reason: None,
                };
                let queue = RunChange::new(RunStatus::Pending, 0, window, sent);
                let queued = match store.create_run(&run).await {
                    Ok(_) => store.transition_run(&run.key, &queue).await.map(|_| ()),
                    Err(e) => Err(e),
                };
                if let Err(e) = queued {
                    eprintln!("queued run {id}: {e}");
                }
            }
        })
        .await;
    let running = in_shard_zero("lost", 3);
    for id in &running {
        let spec = spec_with(id, "0 * * * *", fields.clone());
        let meta = ChangeMeta {
            actor: "bench".into(),
            reason: "bench".into(),
            at: window - TimeDelta::minutes(5),
            details: None,
        };
        store
            .create_schedule(spec.clone(), meta)
            .await
            .expect("schedule");
        let run = scheduled_run(&spec, window, window, "bench");
        store.create_run(&run).await.expect("run");
        let until = window + TimeDelta::minutes(1);
        let start = RunChange::open(Opening::Start, RunStatus::Pending, 0, window, "gone", until);
        store
            .transition_run(&RunKey::expected(id, window), &start)
            .await
            .expect("running");
    }
    println!(
        "\nseeded {queued} QUEUED and 3 RUNNING runs in shard 0 in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let control: Arc<dyn ReleaseStateStore> = Arc::new(sharded);
    let reconciler = Reconciler::new(
        store,
        control,
        Arc::new(lanes.lanes.clone()),
        Arc::new(QuietSignals),
        ReconcilerConfig {
            shards,
            ..ReconcilerConfig::default()
        },
    );
    let before = ledger.clients.meter.snapshot();
    let started = Instant::now();
    let report = reconciler
        .reconcile(&ReconcileEvent::at(window + TimeDelta::minutes(10)))
        .await;
    let requests = ledger.clients.meter.snapshot().total().calls - before.total().calls;
    println!(
        "stuck scan: RUNNING with expired leases stalled {} of 3 (held {}), errors {}, {requests} requests, {:.1}s",
        report.stuck.stalled,
        report.stuck.held,
        report.errors.len(),
        started.elapsed().as_secs_f64()
    );
}
