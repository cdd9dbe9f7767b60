//! A differential property of the two ledger stores: random sequences of store operations,
//! applied to the DynamoDB store (on the emulator) and to the in-memory store, must give
//!
//! 1. the same outcome per operation: equal `Ok` values, or errors with the same `code()`;
//! 2. the same stored state afterwards, read back through the stores' own reads: every run
//!    touched with its attempts, every schedule touched (its item, audit log, run history,
//!    alerts and outcome counters), the children of every parent touched, every backfill
//!    touched, and the case's entries in the `due` and `active` indexes of its shards;
//! 3. the same consumed capacity over the operations and those reads, compared as
//!    `capacity.rs` in the conformance suite compares it: calls per (scope, operation) for
//!    every request; read and write units only for the scopes whose every request is a
//!    plain one on an item in no index (its `PLAIN` list), and only on DynamoDB Local (moto
//!    reports no capacity at all). DynamoDB Local's units for writes of items in an index,
//!    transactions above all, are known to differ from what DynamoDB charges, so the units
//!    of every other scope (runs, schedules' changes, fires, children, backfills, alerts'
//!    records) are left out; their calls are compared. A plain scope is compared by its
//!    calls only in a case where DynamoDB Local reported no capacity for one of them: it
//!    reports none for a conditional write whose condition failed and 0 for a Query that
//!    found nothing, where DynamoDB charges both (see `faithful`).
//!
//! The operations work on a small key space (two schedules, three windows, two origins, two
//! backfills, two idempotency keys, two alert subjects), so collisions, version and status
//! conflicts, stale lease epochs and failed conditions are the common case: schedules
//! created, updated, paused, resumed and archived; the failure streak moved; runs created
//! and fired (alone and in batches); runs moved by any event from the right or a wrong
//! status, at the current or a stale epoch, with or without a lease, lane and catch-up
//! conditions; children stored and changed; outcome counters; backfills created and put;
//! idempotency claims, some past their expiry; alerts recorded and published.
//!
//! All cases share one table: each works under its own schedule ids (`d{case}-a`,
//! `d{case}-b`, and the backfill and claim ids built from them), against a fresh memory
//! store. The index reads (`due_schedules`, `active_runs`) see every case's items on the
//! table: they are filtered to the case's schedules and their requests are not compared
//! (they read other cases' entries), and each case ends by archiving its schedules and
//! ending its active runs on the table, so those indexes stay small.
//!
//! Every generated request is sent to both stores: none is excused. (The first run found
//! one: a child's start into PENDING or an end, which DynamoDB refused as an expression
//! that sets and removes the lease while the memory store applied it; both now refuse it
//! before any request.) A failure shows the case's operations as sent, with both stores'
//! answers, and what differed; proptest shrinks the sequence first.
//!
//! `CRONLEDGER_DIFFERENTIAL_CASES` sets the number of cases (default 200; a nightly run
//! asks for thousands).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Debug, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Duration, NaiveDate, Utc};
use cronledger_aws::keys::shard_of;
use cronledger_aws::ledger::{ChildChange, Ending, LeaseGrant, Opening, Transition};
use cronledger_aws::{
    AlertStore, Backfill, BackfillState, ChangeMeta, Created, Fire, FireOutcome, HealthStore,
    IdempotencyClaim, LedgerStore, MemoryStore, MeterSnapshot, OpsStore, Outcome, RequestMeter,
    RunChange, ScheduleState, StoreError, StoredSchedule, StreakChange, Usage,
};
use cronledger_core::alerts::{Alert, AlertKind, Severity};
use cronledger_core::children::{Child, ChildCounts, ChildStatus};
use cronledger_core::run::{transition, Origin, RunResult};
use cronledger_core::{Lane, Reason, Run, RunEvent, RunKey, RunStatus, ScheduleSpec, Window};
use cronledger_tests::{
    manual_run, running_backfill, scheduled_run, spec, spec_with, t, TestLedger, PLAIN_SCOPES,
    SHARDS,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Cases per run unless `CRONLEDGER_DIFFERENTIAL_CASES` says otherwise.
const DEFAULT_CASES: u32 = 200;
const CASES_VAR: &str = "CRONLEDGER_DIFFERENTIAL_CASES";

const SCHEDULES: usize = 2;
const WINDOWS: usize = 3;
const CRON: &str = "*/5 * * * *";

/// The scopes whose units are compared on DynamoDB Local (the conformance suite's too).
const PLAIN: &[&str] = PLAIN_SCOPES;

/// The reasons a transition may carry: plain ones, and ones that keep a run longer.
const REASONS: &[Reason] = &[
    Reason::Overlap,
    Reason::Missed,
    Reason::HeartbeatLost,
    Reason::WorkerLost,
    Reason::CancelledByOperator,
];

fn t0() -> DateTime<Utc> {
    t("2026-03-01T00:00:00Z")
}

/// The `w`-th window the schedules fire at (every 5 minutes from t0).
fn window(w: usize) -> DateTime<Utc> {
    t0() + Duration::minutes(5 * (w as i64 + 1))
}

/// When the `i`-th operation of a case happens.
fn op_at(i: usize) -> DateTime<Utc> {
    t0() + Duration::seconds(30 * (i as i64 + 1))
}

fn day(d: usize) -> NaiveDate {
    t0().date_naive() + Duration::days(d as i64)
}

fn meta(actor: &str, at: DateTime<Utc>) -> ChangeMeta {
    ChangeMeta {
        actor: actor.into(),
        reason: format!("{actor} did it"),
        at,
        details: None,
    }
}

mod apply;
mod meters;
mod model;
mod ops;
mod state;

use apply::*;
use meters::*;
use model::*;
use ops::*;
use state::*;

// ---------------------------------------------------------------------------------------
// One case.

/// A store under test and the meter it charges.
struct Side<'a> {
    store: &'a dyn Store,
    meter: &'a RequestMeter,
}

async fn check_case(case: u64, ops: &[Op], dynamodb: Side<'_>) -> Result<(), TestCaseError> {
    let names = Names { case };
    let memory_meter = RequestMeter::new();
    let memory_store = MemoryStore::new(SHARDS, memory_meter.clone());
    let memory = Side {
        store: &memory_store,
        meter: &memory_meter,
    };
    let mut model = Model::default();
    let mut touched = Touched::default();
    let mut trace = String::new();
    let mut failure = None;

    let d0 = dynamodb.meter.snapshot();
    let m0 = memory.meter.snapshot();
    for (i, op) in ops.iter().enumerate() {
        let request = model.request(&names, i, op);
        touched.note(&request);
        let (on_dynamodb, _) = apply(dynamodb.store, &request).await;
        let (on_memory, learned) = apply(memory.store, &request).await;
        let _ = writeln!(
            trace,
            "  #{i} {op:?}\n      sent: {}\n      dynamodb: {}\n      memory:   {}",
            request.describe(),
            on_dynamodb.brief(),
            on_memory.brief()
        );
        let code = match &on_memory {
            Answer::Ok { .. } => "Ok",
            Answer::Err { code, .. } => code,
        };
        *lock(&ANSWERS)
            .entry((request.operation(), code))
            .or_default() += 1;
        if on_dynamodb != on_memory {
            failure = Some(format!(
                "operation #{i} answered differently\n  dynamodb: {on_dynamodb}\n  memory:   {on_memory}"
            ));
            break;
        }
        model.learn(&request, learned);
    }

    let mut on_dynamodb = read_own(dynamodb.store, &touched).await;
    let mut on_memory = read_own(memory.store, &touched).await;
    let d1 = dynamodb.meter.snapshot();
    let m1 = memory.meter.snapshot();
    read_indexes(dynamodb.store, &names, &mut on_dynamodb).await;
    read_indexes(memory.store, &names, &mut on_memory).await;
    clean_up(dynamodb.store, &on_dynamodb).await;

    let report = |what: String| {
        TestCaseError::fail(format!(
            "case {case}: {what}\noperations (names d{case}-*):\n{trace}"
        ))
    };
    if let Some(failure) = failure {
        return Err(report(failure));
    }

    let mut differences = String::new();
    let labels: BTreeSet<&String> = on_dynamodb
        .reads
        .keys()
        .chain(on_memory.reads.keys())
        .collect();
    for label in labels {
        let (d, m) = (on_dynamodb.reads.get(label), on_memory.reads.get(label));
        if d != m {
            let _ = writeln!(
                differences,
                "  {label}\n    dynamodb: {}\n    memory:   {}",
                d.map_or("-", String::as_str),
                m.map_or("-", String::as_str)
            );
        }
    }
    if !differences.is_empty() {
        return Err(report(format!(
            "the stores hold different state\n{differences}"
        )));
    }

    let (d_spent, m_spent) = (spent(&d0, &d1), spent(&m0, &m1));
    let (d_calls, m_calls) = (calls(&d_spent), calls(&m_spent));
    if d_calls != m_calls {
        return Err(report(format!(
            "calls per (scope, operation) differ\n  dynamodb: {d_calls:?}\n  memory:   {m_calls:?}"
        )));
    }
    if units_reported() {
        let scopes = faithful(&d_spent);
        let (d_units, m_units) = (units(&d_spent, &scopes), units(&m_spent, &scopes));
        let same = d_units.len() == m_units.len()
            && d_units.iter().zip(&m_units).all(|((ds, d), (ms, m))| {
                ds == ms && (d.0 - m.0).abs() < 1e-9 && (d.1 - m.1).abs() < 1e-9
            });
        if !same {
            return Err(report(format!(
                "units (read, write) of plain requests differ\n  dynamodb: {d_units:?}\n  memory:   {m_units:?}"
            )));
        }
    }
    Ok(())
}

fn cases() -> u32 {
    match std::env::var(CASES_VAR) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{CASES_VAR}={text:?} is not a number of cases")),
        Err(_) => DEFAULT_CASES,
    }
}

#[test]
fn both_stores_answer_hold_and_charge_the_same() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let table = rt.block_on(TestLedger::new());
    let counter = AtomicU64::new(0);
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        // Each shrinking step is a case against the emulator: bounded, so a failure is
        // reported within minutes.
        max_shrink_iters: 1024,
        ..Config::default()
    });
    let result = runner.run(&ops(), |ops| {
        let case = counter.fetch_add(1, Ordering::Relaxed);
        let dynamodb = Side {
            store: &table.ledger,
            meter: &table.clients.meter,
        };
        rt.block_on(check_case(case, &ops, dynamodb))
    });
    println!(
        "{} cases run (shrinking included)",
        counter.load(Ordering::Relaxed)
    );
    println!("answers by operation and code: {:?}", *lock(&ANSWERS));
    if let Err(e) = result {
        panic!("{e}");
    }
}
