//! Helpers for the reconciler tests: a reconciler on an [`AppEnv`], fake pause signals, and
//! the ledger check every test ends with (each expected window accounted for exactly once,
//! range records expanded).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cronledger_app::reconciler::{
    ReconcileError, ReconcileEvent, ReconcileReport, Reconciler, ReconcilerConfig, Signals,
};
use cronledger_aws::{LedgerStore, ReleaseStateStore};
use cronledger_core::run::Origin;
use cronledger_core::{Lane, Run, Schedule, Span};

use crate::app::AppEnv;
use crate::SHARDS;

/// Pause signals the test sets: realtime backlog, DLQ depth, alarms in ALARM.
#[derive(Default)]
pub struct FakeSignals {
    pub backlog: AtomicU64,
    pub dlq: AtomicU64,
    pub alarms: std::sync::Mutex<Vec<String>>,
}

#[async_trait]
impl Signals for FakeSignals {
    async fn visible_backlog(&self, lane: Lane) -> Result<u64, ReconcileError> {
        Ok(if lane == Lane::Realtime {
            self.backlog.load(Ordering::SeqCst)
        } else {
            0
        })
    }

    async fn dlq_depth(&self, _lane: Lane) -> Result<u64, ReconcileError> {
        Ok(self.dlq.load(Ordering::SeqCst))
    }

    async fn alarms_firing(&self, names: &[String]) -> Result<Vec<String>, ReconcileError> {
        let firing = self.alarms.lock().map(|a| a.clone()).unwrap_or_default();
        Ok(firing.into_iter().filter(|a| names.contains(a)).collect())
    }
}

/// The tests' reconciler settings: every shard, a one-minute settle.
pub fn reconciler_config() -> ReconcilerConfig {
    let mut config = ReconcilerConfig {
        shards: SHARDS,
        ..ReconcilerConfig::default()
    };
    config.planner.settle = Span::minutes(1);
    config
}

/// A reconciler on the env's store and recording lanes, with the given signals.
pub fn reconciler(env: &AppEnv, signals: Arc<dyn Signals>, config: ReconcilerConfig) -> Reconciler {
    let control: Arc<dyn ReleaseStateStore> = Arc::new(env.ledger.ledger.clone());
    Reconciler::new(
        env.store.clone(),
        control,
        env.queue.clone(),
        signals,
        config,
    )
}

/// One pass at `at`, failing the test on any error.
pub async fn reconcile(r: &Reconciler, at: DateTime<Utc>) -> ReconcileReport {
    let report = r.reconcile(&ReconcileEvent::at(at)).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    report
}

/// Every expected-occurrence entry of a schedule in `[from, to]`, oldest first.
pub async fn ledger(
    store: &dyn LedgerStore,
    id: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<Run> {
    store
        .runs_between(id, from, to)
        .await
        .expect("runs between")
        .into_iter()
        .filter(|r| r.key.origin == Origin::Expected)
        .collect()
}

/// Asserts that every expected window of `schedule` in `(from, to]` is accounted for by
/// exactly one ledger entry (range records expanded into their windows), and that no entry
/// covers a window the schedule does not have. Returns the entries.
pub async fn assert_every_window_once(
    store: &dyn LedgerStore,
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<Run> {
    let id = schedule.id();
    let entries = ledger(store, id, from, to).await;
    let mut seen: BTreeMap<DateTime<Utc>, Vec<String>> = BTreeMap::new();
    for run in &entries {
        let first = run.key.scheduled_for;
        let windows: Vec<DateTime<Utc>> = match run.range_end {
            Some(last) => {
                let mut w = vec![first];
                w.extend(schedule.timing().between(first, last));
                assert_eq!(
                    w.len() as u32,
                    run.count,
                    "{id}: range record at {first} says {} windows, its span has {}",
                    run.count,
                    w.len()
                );
                w
            }
            None => vec![first],
        };
        for w in windows {
            seen.entry(w).or_default().push(format!(
                "{} {} {:?} trigger {} range_end {:?} created {} lane {:?} version {}",
                run.key,
                run.status,
                run.reason,
                run.trigger,
                run.range_end,
                run.created_at,
                run.lane,
                run.schedule_version
            ));
        }
    }
    let expected: Vec<DateTime<Utc>> = schedule.timing().between(from, to).collect();
    for w in &expected {
        match seen.get(w).map(Vec::len) {
            Some(1) => {}
            None => panic!("{id}: window {w} has no ledger entry"),
            Some(_) => panic!(
                "{id}: window {w} is accounted for more than once: {:?}",
                seen[w]
            ),
        }
    }
    for w in seen.keys() {
        if *w > from && *w <= to {
            assert!(
                expected.contains(w),
                "{id}: entry at {w}, which is not a window"
            );
        }
    }
    entries
}
