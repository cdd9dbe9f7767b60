//! Ticker and worker against the emulator: throughput, requests per fired run, peak memory.
//! Results and how to read them: BENCHMARKS.md. Run with `infra/local/bench`.
//!
//!   aws_throughput ticker [SCHEDULES]   raw conditional-put rate, then one tick over SCHEDULES
//!   aws_throughput worker [RUNS]        the worker over RUNS queued runs, in batches of 10
//!   aws_throughput reconciler [SCHEDULES] [GAP_HOURS,...]
//!                                       one reconciler pass after each outage of GAP_HOURS
//!                                       (in turn, on the same schedules) over SCHEDULES
//!                                       minutely schedules of mixed misfire policies
//!
//! Each mode runs in its own process so its peak RSS is its own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use cronledger_app::clock::ManualClock;
use cronledger_app::jobs::{HttpJob, HttpOptions, JobTargets};
use cronledger_app::local::poller::{poll_once, PollerConfig};
use cronledger_app::reconciler::{QuietSignals, ReconcileEvent, Reconciler, ReconcilerConfig};
use cronledger_app::ticker::{TickEvent, Ticker, TickerConfig};
use cronledger_app::worker::{Worker, WorkerConfig};
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::ChangeMeta;
use cronledger_aws::{LedgerStore, MeterSnapshot, Usage};
use cronledger_core::Lane;
use cronledger_tests::{spec_with, TestLanes, TestLedger};
use futures_util::stream::{self, StreamExt};
use serde_json::json;

const CONCURRENCY: usize = 16;

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("bench instants are valid")
}

/// Peak resident set of this process, in MiB (Linux `VmHWM`).
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Requests made between two snapshots, per store or lane operation.
fn by_scope(after: &MeterSnapshot, before: &MeterSnapshot) -> BTreeMap<String, Usage> {
    let mut out: BTreeMap<String, Usage> = BTreeMap::new();
    for ((scope, operation), usage) in &after.usage {
        let earlier = before.usage.get(&(scope.clone(), operation.clone()));
        let entry = out.entry(format!("{scope} ({operation})")).or_default();
        entry.calls += usage.calls - earlier.map_or(0, |u| u.calls);
        entry.attempts += usage.attempts - earlier.map_or(0, |u| u.attempts);
        entry.write_units += usage.write_units - earlier.map_or(0.0, |u| u.write_units);
    }
    out.retain(|_, u| u.calls > 0);
    out
}

fn print_requests(label: &str, after: &MeterSnapshot, before: &MeterSnapshot, per: f64) {
    println!("{label}: requests by operation (per fired run, or per schedule for the reconciler):");
    let scopes = by_scope(after, before);
    let mut total = Usage::default();
    for (scope, usage) in &scopes {
        total.calls += usage.calls;
        total.attempts += usage.attempts;
        total.write_units += usage.write_units;
        println!(
            "  {scope:<22} calls {:>7}  attempts {:>7}  per run {:.2}",
            usage.calls,
            usage.attempts,
            usage.calls as f64 / per
        );
    }
    println!(
        "  total                  calls {:>7}  attempts {:>7}  per run {:.2}  WCU {:.1}",
        total.calls,
        total.attempts,
        total.calls as f64 / per,
        total.write_units
    );
}

async fn create_schedules(
    ledger: &dyn LedgerStore,
    n: usize,
    job: serde_json::Value,
    created: DateTime<Utc>,
) {
    create_schedules_with(
        ledger,
        n,
        created,
        |_| json!({ "job": job.clone(), "side_effects": false }),
    )
    .await;
}

/// `n` minutely schedules, the `i`-th with `fields(i)` over the defaults.
async fn create_schedules_with(
    ledger: &dyn LedgerStore,
    n: usize,
    created: DateTime<Utc>,
    fields: impl Fn(usize) -> serde_json::Value,
) {
    let fields = &fields;
    stream::iter(0..n)
        .for_each_concurrent(CONCURRENCY, |i| async move {
            let spec = spec_with(&format!("bench-{i:05}"), "* * * * *", fields(i));
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

async fn raw_conditional_puts(ledger: &TestLedger, n: usize) -> f64 {
    let client = ledger.clients.dynamodb.clone();
    let table = ledger.table.clone();
    let started = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(CONCURRENCY, |i| {
            let (client, table) = (client.clone(), table.clone());
            async move {
                let result = client
                    .put_item()
                    .table_name(table)
                    .item("PK", AttributeValue::S(format!("RAW#{i}")))
                    .item("SK", AttributeValue::S("RAW".into()))
                    .condition_expression("attribute_not_exists(PK)")
                    .send()
                    .await;
                if let Err(e) = result {
                    eprintln!("raw put {i}: {e}");
                }
            }
        })
        .await;
    n as f64 / started.elapsed().as_secs_f64()
}

async fn bench_ticker(schedules: usize) {
    let ledger = TestLedger::new().await;
    let lanes = TestLanes::with_clients(ledger.clients.clone(), LaneSettings::default()).await;
    let puts_per_s = raw_conditional_puts(&ledger, 3000).await;
    println!("raw conditional PutItem, concurrency {CONCURRENCY}: {puts_per_s:.0}/s");

    let created = at("2026-12-01T00:00:30Z");
    let started = Instant::now();
    create_schedules(&ledger.ledger, schedules, json!({"type": "noop"}), created).await;
    println!(
        "created {schedules} schedules in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let ticker = Ticker::new(
        Arc::new(ledger.ledger.clone()),
        Arc::new(lanes.lanes.clone()),
        TickerConfig {
            shards: cronledger_tests::SHARDS,
            concurrency: CONCURRENCY,
            ..TickerConfig::default()
        },
    )
    .with_send_clock(Arc::new(ManualClock::new(created)));
    let before = ledger.clients.meter.snapshot();
    let started = Instant::now();
    // As in production: the tick at 00:00:30 fires the 00:01 window of every schedule ahead,
    // inside its one-minute lookahead, with an SQS delay.
    let report = ticker
        .tick(&TickEvent {
            time: created,
            shards: None,
        })
        .await;
    let secs = started.elapsed().as_secs_f64();
    let fired = f64::from(report.created);
    println!(
        "tick over {} due schedules: created {} runs, sent {}, errors {} in {secs:.1}s = {:.0} runs/s ({:.2}x the raw put rate)",
        report.due_schedules,
        report.created,
        report.sent,
        report.errors.len(),
        fired / secs,
        fired / secs / puts_per_s
    );
    print_requests("ticker", &ledger.clients.meter.snapshot(), &before, fired);
    println!("ticker process peak RSS: {:.1} MiB", peak_rss_mib());
}

async fn bench_worker(runs: usize) {
    let ledger = TestLedger::new().await;
    let lanes = TestLanes::with_clients(ledger.clients.clone(), LaneSettings::default()).await;
    let created = at("2026-12-01T00:00:30Z");
    create_schedules(&ledger.ledger, runs, json!({"type": "noop"}), created).await;
    let ticker = Ticker::new(
        Arc::new(ledger.ledger.clone()),
        Arc::new(lanes.lanes.clone()),
        TickerConfig {
            shards: cronledger_tests::SHARDS,
            lookahead: cronledger_core::Span::ZERO,
            ..TickerConfig::default()
        },
    )
    .with_send_clock(Arc::new(ManualClock::new(at("2026-12-01T00:01:00Z"))));
    ticker
        .tick(&TickEvent {
            time: at("2026-12-01T00:01:00Z"),
            shards: None,
        })
        .await;
    let clock = Arc::new(ManualClock::new(at("2026-12-01T00:01:01Z")));
    let worker = Worker::new(
        Arc::new(ledger.ledger.clone()),
        Arc::new(lanes.lanes.clone()),
        JobTargets::new(HttpJob::with_options(HttpOptions::local()).expect("http client")),
        clock,
        WorkerConfig::default(),
    );
    let before = ledger.clients.meter.snapshot();
    let started = Instant::now();
    let mut done = 0;
    let mut idle = 0;
    while done < runs && idle < 5 {
        let outcome = poll_once(
            &lanes.lanes,
            &worker,
            Lane::Normal,
            PollerConfig {
                batch_size: 10,
                wait: Duration::from_millis(200),
            },
        )
        .await
        .expect("poll");
        done += outcome.done;
        idle = if outcome.received == 0 { idle + 1 } else { 0 };
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "worker: {done} runs in {secs:.1}s = {:.0} runs/s (noop jobs, batches of 10, one poller)",
        done as f64 / secs
    );
    print_requests(
        "worker",
        &ledger.clients.meter.snapshot(),
        &before,
        done.max(1) as f64,
    );
    println!("worker process peak RSS: {:.1} MiB", peak_rss_mib());
}

/// The four misfire policies in turn; catch-up capped at 10 windows and without side effects
/// (so it starts automatically), the others at their defaults.
fn mixed_policy(i: usize) -> serde_json::Value {
    match i % 4 {
        0 => json!({"misfire": "SKIP"}),
        1 => json!({"misfire": "RUN_ONCE"}),
        2 => json!({"misfire": "CATCH_UP_ALL", "max_auto_catch_up": 10, "side_effects": false}),
        _ => json!({"misfire": "MANUAL"}),
    }
}

async fn bench_reconciler(schedules: usize, gaps: &[i64]) {
    let ledger = TestLedger::new().await;
    let lanes = TestLanes::with_clients(ledger.clients.clone(), LaneSettings::default()).await;
    let created = at("2026-12-01T00:00:00Z");
    let started = Instant::now();
    create_schedules_with(&ledger.ledger, schedules, created, |i| {
        let mut fields = mixed_policy(i);
        fields["job"] = json!({"type": "noop"});
        fields
    })
    .await;
    println!(
        "created {schedules} minutely schedules (SKIP, RUN_ONCE, CATCH_UP_ALL cap 10, MANUAL in turn) in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let reconciler = Reconciler::new(
        Arc::new(ledger.ledger.clone()),
        Arc::new(ledger.ledger.clone()),
        Arc::new(lanes.lanes.clone()),
        Arc::new(QuietSignals),
        ReconcilerConfig {
            shards: cronledger_tests::SHARDS,
            concurrency: CONCURRENCY,
            ..ReconcilerConfig::default()
        },
    );
    let mut now = created;
    for &gap in gaps {
        now += chrono::TimeDelta::hours(gap);
        let before = ledger.clients.meter.snapshot();
        let started = Instant::now();
        let report = reconciler.reconcile(&ReconcileEvent::at(now)).await;
        let secs = started.elapsed().as_secs_f64();
        println!(
            "reconciler after a {gap}h outage over {} schedules: {secs:.1}s; missed windows {}, entries written {}, fired {}, skipped {}, coalesced {}, held {}, released {}, errors {}",
            report.schedules,
            report.missed_windows,
            report.entries_written,
            report.windows_fired,
            report.windows_skipped,
            report.windows_coalesced,
            report.windows_held,
            report.released,
            report.errors.len()
        );
        print_requests(
            &format!("reconciler {gap}h"),
            &ledger.clients.meter.snapshot(),
            &before,
            report.schedules.max(1) as f64,
        );
    }
    println!("reconciler process peak RSS: {:.1} MiB", peak_rss_mib());
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mode = args.next().unwrap_or_else(|| "ticker".into());
    let n: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    match mode.as_str() {
        "ticker" => bench_ticker(n).await,
        "worker" => bench_worker(n).await,
        "reconciler" => {
            let gaps: Vec<i64> = args
                .next()
                .unwrap_or_else(|| "6".into())
                .split(',')
                .filter_map(|g| g.trim().parse().ok())
                .collect();
            bench_reconciler(n, &gaps).await
        }
        other => eprintln!("unknown mode {other}; use ticker, worker or reconciler"),
    }
}
