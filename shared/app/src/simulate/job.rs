//! The `noop` job on the virtual clock, and the record of what every window's job did, from
//! which the simulator counts executions per window.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use cronledger_core::{JobSpec, RunKey, Span};

use super::time::VirtualTime;
use crate::jobs::{DryRunReport, JobContext, JobFailure, JobHandler, JobOutcome, NoopJob};

/// One attempt's execution of a window's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    pub run: RunKey,
    pub attempt: u32,
    pub succeeded: bool,
    /// The step of a steps job this execution was (`None`: the whole job).
    pub step: Option<String>,
}

/// Executions by idempotency key.
#[derive(Debug, Clone, Default)]
pub struct ExecutionLog(Arc<Mutex<BTreeMap<String, Vec<Execution>>>>);

impl ExecutionLog {
    fn push(&self, key: &str, execution: Execution) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.to_string())
            .or_default()
            .push(execution);
    }

    pub fn snapshot(&self) -> BTreeMap<String, Vec<Execution>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// `type: noop` as the simulator runs it: `duration` passes on the virtual clock (other work
/// goes on meanwhile), the first `fail_times` attempts fail retryably, and every attempt is
/// recorded under the run's idempotency key. Dry runs answer `affected` and are not recorded.
pub struct VirtualNoop {
    pub time: VirtualTime,
    pub log: ExecutionLog,
}

#[async_trait]
impl JobHandler for VirtualNoop {
    async fn run(&self, job: &JobSpec, ctx: &JobContext) -> JobOutcome {
        // The built-in noop decides the outcome; only its wait moves to the virtual clock.
        let instant = match job {
            JobSpec::Noop { .. } => {
                let wait = job.noop_wait().unwrap_or_default();
                if !wait.is_zero() {
                    let started = std::time::Instant::now();
                    self.time
                        .sleep(chrono::TimeDelta::from_std(wait).unwrap_or(chrono::TimeDelta::MAX))
                        .await;
                    super::bill::note_virtual_wait(started.elapsed());
                }
                let mut instant = job.clone();
                if let JobSpec::Noop {
                    duration,
                    duration_ms,
                    ..
                } = &mut instant
                {
                    *duration = Span::ZERO;
                    *duration_ms = 0;
                }
                instant
            }
            other => other.clone(),
        };
        let outcome = NoopJob.run(&instant, ctx).await;
        self.log.push(
            ctx.idempotency_key.as_str(),
            Execution {
                run: ctx.run.clone(),
                attempt: ctx.attempt,
                succeeded: outcome.is_ok(),
                step: ctx.step.clone(),
            },
        );
        outcome
    }

    /// Answers at once from `affected`, and is not an execution: the log counts only calls
    /// that could have done the work.
    async fn dry_run(&self, job: &JobSpec, ctx: &JobContext) -> Result<DryRunReport, JobFailure> {
        NoopJob.dry_run(job, ctx).await
    }
}
