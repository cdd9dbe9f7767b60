//! What one attempt executes: the whole job, or one step of a `steps` job; and the hand-over
//! from a succeeded step to the next step's own message.
//!
//! A step's success writes its checkpoint (with its output) and leaves the run RUNNING under
//! a hand-over lease, then sends the next step's message. Whoever takes that message starts
//! the next step under a new epoch (one wins: the start is conditioned on the hand-over's
//! epoch). If the worker dies between the checkpoint and the send, the reconciler finds the
//! hand-over lease expired and sends the message again (see `reconciler::stuck`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use cronledger_aws::lanes::HandlerFailure;
use cronledger_aws::{LaneMessage, StoreError};
use cronledger_core::steps::{self, AttemptBudget, StepCheckpoint};
use cronledger_core::{IdempotencyKey, JobSpec, Run, RunStatus, ScheduleSpec, Span};
use cronledger_ledger::ledger::{LeaseGrant, RunChange, StoredSchedule, Transition};

use super::{Delivery, Worker};
use crate::faults::CrashPoint;
use crate::jobs::{JobFailure, JobOutcome};
use crate::metrics::Metric;

/// Who holds a run's lease between two steps: nobody runs anything under it.
pub const HANDOVER_OWNER: &str = "handover";

/// One step of a steps job, as this attempt runs it.
#[derive(Debug, Clone)]
pub(super) struct StepAt {
    pub index: usize,
    pub name: String,
    /// The previous step's output.
    pub previous: Option<serde_json::Value>,
    /// This step's attempt number (1 for its first).
    pub attempt: u32,
    /// The job's last step: its success ends the run.
    pub last: bool,
}

/// What an attempt executes, with the limits that apply to it.
#[derive(Debug, Clone)]
pub(super) struct Work<'a> {
    pub target: &'a JobSpec,
    pub max_runtime: Span,
    pub max_attempts: u32,
    pub step: Option<StepAt>,
}

impl<'a> Work<'a> {
    /// The work of `run`'s attempt just opened: the current step of a steps job (its
    /// checkpoint RUNNING), or the whole job.
    pub(super) fn of(job: &'a JobSpec, spec: &ScheduleSpec, run: &Run) -> Work<'a> {
        let budget = AttemptBudget::of(job, spec.max_attempts, run);
        let (Some(list), Some(index)) = (job.steps(), budget.step) else {
            return Work {
                target: job,
                max_runtime: spec.max_runtime,
                max_attempts: budget.limit,
                step: None,
            };
        };
        let step = &list[index];
        let done = steps::checkpoints(list, &run.steps);
        Work {
            target: &step.target,
            max_runtime: step.max_runtime.unwrap_or(spec.max_runtime),
            max_attempts: budget.limit,
            step: Some(StepAt {
                index,
                name: step.name.clone(),
                previous: index
                    .checked_sub(1)
                    .and_then(|i| done.get(i))
                    .and_then(|c| c.output.clone()),
                attempt: done[index].attempts.max(1),
                last: index + 1 == list.len(),
            }),
        }
    }

    /// The attempt number the target is told and the retry limit is counted in.
    pub(super) fn attempt(&self, run: &Run) -> u32 {
        self.step.as_ref().map_or(run.attempts, |s| s.attempt)
    }

    /// The key the target sees: the run's, or `{run key}#{step}`.
    pub(super) fn idempotency_key(&self, run: &Run) -> IdempotencyKey {
        match &self.step {
            Some(step) => steps::idempotency_key(&run.idempotency_key, &step.name),
            None => run.idempotency_key.clone(),
        }
    }

    /// Whether the run's outcome is this attempt's (a one-call job, or the last step).
    pub(super) fn ends_the_run(&self) -> bool {
        self.step.as_ref().is_none_or(|s| s.last)
    }

    /// The checkpoints this attempt's outcome leaves; `None` for a one-call job. An output
    /// too large to keep fails the step for good.
    pub(super) fn ended(
        &self,
        run: &Run,
        outcome: &mut JobOutcome,
        at: DateTime<Utc>,
    ) -> Option<Vec<StepCheckpoint>> {
        let step = self.step.as_ref()?;
        if let Ok(success) = outcome {
            if success
                .output
                .as_ref()
                .is_some_and(|o| !steps::output_fits(o))
            {
                *outcome = Err(JobFailure::permanent(
                    steps::STEP_OUTPUT_TOO_LARGE,
                    format!(
                        "step `{}` answered an output over {} bytes; hand over a reference instead",
                        step.name,
                        steps::MAX_STEP_OUTPUT_BYTES
                    ),
                ));
            }
        }
        let result = match outcome {
            Ok(success) => Ok(success.output.clone()),
            Err(failure) => Err(failure.code()),
        };
        Some(steps::end(&run.steps, step.index, at, result))
    }
}

/// The checkpoints a start of `run` opens with, for a steps job: its current step RUNNING
/// with one more attempt. `None` for a one-call job (or nothing left to run).
pub(super) fn opening(job: &JobSpec, run: &Run, at: DateTime<Utc>) -> Option<Vec<StepCheckpoint>> {
    let list = job.steps()?;
    let index = steps::current(list, &run.steps)?;
    Some(steps::start(list, &run.steps, index, at))
}

impl Worker {
    /// A step succeeded and another follows: writes its checkpoint under the attempt's epoch
    /// (the run stays RUNNING, under a hand-over lease), then sends the next step's message.
    /// The delivery is acknowledged: the next step has its own message.
    pub(super) async fn hand_over(
        &self,
        delivery: &Delivery<'_>,
        stored: &StoredSchedule,
        run: &Run,
        checkpoints: Vec<StepCheckpoint>,
    ) -> Result<(), HandlerFailure> {
        let now = self.clock.now();
        let hand_over = Transition::HandOver {
            lease: LeaseGrant::new(HANDOVER_OWNER, now + self.config.lease.as_delta()),
            steps: checkpoints,
        };
        let change = RunChange::new(RunStatus::Running, run.lease_epoch, now, hand_over);
        let handed = match self.store.transition_run(&run.key, &change).await {
            Ok(handed) => handed,
            Err(StoreError::LeaseLost { .. } | StoreError::StatusConflict { .. }) => {
                tracing::warn!("lease lost before the step's checkpoint was written; discarded");
                return Ok(());
            }
            Err(e) => return Err(HandlerFailure::Retry(e.to_string())),
        };
        let step = handed
            .steps
            .iter()
            .rfind(|c| c.status == steps::StepStatus::Success)
            .map(|c| c.name.clone())
            .unwrap_or_default();
        tracing::info!(
            step = %step,
            lane = %delivery.message.lane,
            schedule = %stored.id(),
            "step succeeded; the next step goes to its own message"
        );
        self.metrics
            .count_for(&run.key.schedule_id, Metric::StepsSucceeded, 1);
        if self.crashes(CrashPoint::BetweenSteps, run) {
            return Err(HandlerFailure::Retry(
                "injected crash between a step's checkpoint and the next step's send".into(),
            ));
        }
        // The run's own lane (a child's delivery may come from the batch lane).
        let lane = handed.lane.unwrap_or(delivery.message.lane);
        let message = LaneMessage::next_attempt(&handed, lane);
        if let Err(e) = self.lanes.send(&message, Duration::ZERO).await {
            // The checkpoint holds; the reconciler re-sends once the hand-over lease ends.
            tracing::warn!(error = %e, "the next step's send failed; the reconciler will send it");
        }
        Ok(())
    }
}
