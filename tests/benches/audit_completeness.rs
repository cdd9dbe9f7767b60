//! The completeness audit on the in-memory store: one minutely schedule over 10,080 windows
//! (a week), every window recorded, an edit of its job mid-range, and one window in fifty retried after
//! a reported failure (a job not declared idempotent: its attempts are read); then a fleet of
//! FLEET hourly schedules over a day. No emulator. Results: BENCHMARKS.md.
//!
//!   cargo bench -p cronledger-tests --bench audit_completeness -- [WINDOWS] [FLEET]

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_app::audit::{completeness, AuditPage, AuditRange};
use cronledger_aws::ledger::{ChangeMeta, Opening, RunChange};
use cronledger_aws::prelude::*;
use cronledger_aws::{LedgerStore, MemoryStore, RequestMeter};
use cronledger_core::{RunEvent, RunStatus};
use cronledger_tests::{bare, bench_arg, scheduled_run, spec, spec_with};
use serde_json::json;

/// Audits timed per measurement; the median is reported.
const ROUNDS: usize = 5;

fn meta(at: DateTime<Utc>) -> ChangeMeta {
    ChangeMeta {
        actor: "bench".into(),
        reason: "bench".into(),
        at,
        details: None,
    }
}

/// The median of `ROUNDS` audits of `range`, and the last report's completeness and
/// expected windows.
async fn time(store: &dyn LedgerStore, range: &AuditRange) -> (Duration, f64, u64) {
    let mut took = Vec::with_capacity(ROUNDS);
    let mut last = (1.0, 0);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let report = completeness(store, range.clone(), AuditPage::default())
            .await
            .expect("audit");
        took.push(started.elapsed());
        last = (
            report.completeness,
            report.schedules.iter().map(|s| s.expected).sum(),
        );
    }
    took.sort();
    (took[ROUNDS / 2], last.0, last.1)
}

async fn one_schedule(windows: usize) {
    let store = MemoryStore::new(1, RequestMeter::new());
    let start: DateTime<Utc> = "2026-03-01T00:00:00Z".parse().expect("an instant");
    let minutely = spec("minutely", "* * * * *");
    store
        .create_schedule(minutely.clone(), meta(start))
        .await
        .expect("create");
    let minute = TimeDelta::minutes(1);
    let edit = start + minute * (windows as i32 / 2) + TimeDelta::seconds(30);
    let edited = spec_with(
        "minutely",
        "* * * * *",
        json!({"job": {"type": "noop", "payload": {"edited": true}}}),
    );
    let filled = Instant::now();
    let mut at = start + minute;
    let mut n = 0usize;
    let mut version = 1;
    let end = start + minute * (windows as i32 + 1);
    while at < end {
        if version == 1 && at > edit {
            store
                .update_schedule(edited.clone(), 1, meta(edit))
                .await
                .expect("edit");
            version = 2;
        }
        let mut run = scheduled_run(&minutely, at, at, "bench");
        run.schedule_version = version;
        store.create_run(&run).await.expect("run");
        if n.is_multiple_of(50) {
            let until = at + minute;
            let open = |from, epoch| RunChange::open(Opening::Start, from, epoch, at, "w", until);
            store
                .transition_run(&run.key, &open(RunStatus::Pending, 0))
                .await
                .expect("start");
            let failed = bare(RunEvent::FailRetryable, RunStatus::Running, 1, at);
            store.transition_run(&run.key, &failed).await.expect("fail");
            store
                .transition_run(&run.key, &open(RunStatus::RetryPending, 1))
                .await
                .expect("retry");
            let done = bare(RunEvent::Succeed, RunStatus::Running, 2, at);
            store.transition_run(&run.key, &done).await.expect("end");
        }
        n += 1;
        at += minute;
    }
    let filled = filled.elapsed();
    let range = AuditRange {
        from: start,
        to: end,
        schedule: Some("minutely".into()),
    };
    let (took, ratio, expected) = time(&store, &range).await;
    println!(
        "one schedule: {n} entries written in {:.2}s; audit of {expected} expected windows \
         (edit mid-range, {} retried runs' attempts read): median {:.1} ms, completeness {ratio}",
        filled.as_secs_f64(),
        n.div_ceil(50),
        took.as_secs_f64() * 1000.0
    );
}

async fn fleet(size: usize) {
    let store: Arc<dyn LedgerStore> = Arc::new(MemoryStore::new(4, RequestMeter::new()));
    let start: DateTime<Utc> = "2026-03-01T00:00:00Z".parse().expect("an instant");
    for i in 0..size {
        let hourly = spec(&format!("fleet-{i:05}"), "0 * * * *");
        store
            .create_schedule(hourly.clone(), meta(start))
            .await
            .expect("create");
        for h in 1..=24 {
            // One window in a hundred is left missing.
            if (i * 24 + h).is_multiple_of(100) {
                continue;
            }
            let at = start + TimeDelta::hours(h as i64);
            store
                .create_run(&scheduled_run(&hourly, at, at, "bench"))
                .await
                .expect("run");
        }
    }
    let range = AuditRange {
        from: start,
        to: start + TimeDelta::hours(25),
        schedule: None,
    };
    let (took, ratio, expected) = time(store.as_ref(), &range).await;
    println!(
        "fleet: {size} hourly schedules, {expected} expected windows: median {:.1} ms, completeness {ratio:.4}",
        took.as_secs_f64() * 1000.0
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    one_schedule(bench_arg(0, 10_080)).await;
    fleet(bench_arg(1, 1_000)).await;
}
