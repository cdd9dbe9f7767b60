//! The ledger as the simulator reports it: each entry as the ledger prints it, plus the
//! execution facts only the simulation knows (how many times the job was called for it) or
//! that take another read (when its first attempt started).

use std::collections::BTreeMap;
use std::ops::Deref;

use chrono::{DateTime, Utc};
use cronledger_aws::{LedgerStore, StoreError};
use cronledger_core::quality::{Quality, QualityReason};
use cronledger_core::run::LedgerEntry;
use cronledger_core::steps::StepStatus;
use cronledger_core::window::utc_text;
use cronledger_core::{Run, RunKey};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde::Serialize;

use super::job::Execution;

/// A ledger entry of the simulation's report: every field of the ledger's JSON, and what only
/// the simulation knows or takes another read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimulatedEntry {
    #[serde(flatten)]
    pub entry: LedgerEntry,
    /// How many times the job target was called for this entry's run (every attempt that
    /// reached the job, failed ones included; dry runs are not calls of the job).
    pub executions: u32,
    /// When the entry's first attempt started (RFC3339), `None` if it never started.
    pub first_started_at: Option<String>,
    /// When the entry ended (RFC3339), `None` while it has not.
    pub completed_at: Option<String>,
    /// The last heartbeat its attempts wrote (RFC3339): a job that ran longer than a heartbeat
    /// period renewed its lease then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_at: Option<String>,
    /// A steps job's steps: each one's checkpoint and how many times its target was called.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<SimulatedStep>,
    /// The children the run's job answered, as the run counted them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<SimulatedChildren>,
    /// SUSPECT: it succeeded with a `count` outside its schedule's `expect` band.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quality_reason: Option<QualityReason>,
}

/// A simulated entry's children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SimulatedChildren {
    pub total: u32,
    pub succeeded: u32,
    pub failed: u32,
}

/// One step of a simulated entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimulatedStep {
    pub name: String,
    pub status: StepStatus,
    /// Attempts the ledger counted for the step.
    pub attempts: u32,
    /// Calls of the step's target (a crash after the call is a call the ledger may not count).
    pub executions: u32,
}

impl Deref for SimulatedEntry {
    type Target = LedgerEntry;

    fn deref(&self) -> &LedgerEntry {
        &self.entry
    }
}

/// Attempts' reads in flight at once while the report is built.
const READS_AT_ONCE: usize = 8;

/// The entries of `runs`, sorted by schedule and window, with their execution facts.
pub(super) async fn simulated_entries(
    store: &dyn LedgerStore,
    runs: &[Vec<Run>],
    executions: &BTreeMap<String, Vec<Execution>>,
) -> Result<Vec<SimulatedEntry>, StoreError> {
    let mut calls: BTreeMap<&RunKey, u32> = BTreeMap::new();
    let mut step_calls: BTreeMap<(&RunKey, &str), u32> = BTreeMap::new();
    for execution in executions.values().flatten() {
        *calls.entry(&execution.run).or_default() += 1;
        if let Some(step) = &execution.step {
            *step_calls
                .entry((&execution.run, step.as_str()))
                .or_default() += 1;
        }
    }
    let mut entries: Vec<SimulatedEntry> = stream::iter(runs.iter().flatten())
        .map(|run| async {
            Ok::<_, StoreError>(SimulatedEntry {
                entry: run.ledger_entry(),
                executions: calls.get(&run.key).copied().unwrap_or(0),
                first_started_at: first_start(store, run).await?.map(utc_text),
                completed_at: run.completed_at.map(utc_text),
                last_heartbeat_at: run.last_heartbeat_at.map(utc_text),
                steps: run
                    .steps
                    .iter()
                    .map(|c| SimulatedStep {
                        name: c.name.clone(),
                        status: c.status,
                        attempts: c.attempts,
                        executions: step_calls
                            .get(&(&run.key, c.name.as_str()))
                            .copied()
                            .unwrap_or(0),
                    })
                    .collect(),
                children: run.children.map(|c| SimulatedChildren {
                    total: c.total,
                    succeeded: c.succeeded,
                    failed: c.failed,
                }),
                quality: run.result.as_ref().and_then(|r| r.quality),
                quality_reason: run.result.as_ref().and_then(|r| r.quality_reason),
            })
        })
        .buffered(READS_AT_ONCE)
        .try_collect()
        .await?;
    entries.sort_by(|a, b| (&a.schedule, &a.scheduled_for).cmp(&(&b.schedule, &b.scheduled_for)));
    Ok(entries)
}

/// The start of the run's earliest attempt; no read for a run that never had one.
async fn first_start(
    store: &dyn LedgerStore,
    run: &Run,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    if run.attempts == 0 {
        return Ok(None);
    }
    let (_, attempts) = store.get_run_with_attempts(&run.key).await?;
    Ok(attempts
        .iter()
        .filter_map(|a| a.start.as_ref().map(|s| s.started_at))
        .min())
}
