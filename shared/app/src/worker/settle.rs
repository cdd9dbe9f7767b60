//! Settling a delivery: the attempt's outcome written under its epoch, runs that end without
//! executing (skipped, held, coalesced), runs parked to wait, and what each tells SQS.

use std::time::Duration;

use chrono::{DateTime, Utc};
use cronledger_aws::lanes::HandlerFailure;
use cronledger_aws::{LaneMessage, StoreError};
use cronledger_core::admission::lane_of;
use cronledger_core::run::RunResult;
use cronledger_core::{Lane, OverlapPolicy, Reason, Run, RunEvent, RunStatus};
use cronledger_ledger::ledger::{Ending, RunChange, StoredSchedule, Transition};

use super::attempt::AFFECTED_OVER_LIMIT;
use super::steps::Work;
use super::{Delivery, Worker};
use crate::jobs::{DryRunReport, JobFailure, JobOutcome, JobSuccess};
use crate::metrics::Metric;
use crate::overlap::{active_runs_of, RECENT_RUNS};
use crate::runs::send_run;

/// How a run that will not execute ends.
#[derive(Debug, Clone, Copy)]
pub(super) enum Unrun {
    Skip(Reason),
    Fail(Reason),
    Hold(Reason),
    Coalesce(DateTime<Utc>),
}

impl Worker {
    /// Moves a late live run to the correction lane (see [`Self::waiting_in_backlog`]): first
    /// claims the move (conditional on the lane it was read in, so of the late runs that all
    /// find it waiting, handled at once by several workers, one moves it), then sends its
    /// message there. Its message in the live lane stays: whichever arrives first starts the
    /// run, the other finds it started or ended. Best effort: if the send fails the run still
    /// has that one.
    pub(super) async fn promote(&self, latest: &Run, now: DateTime<Utc>) {
        let moving = Transition::Enqueue {
            lane: Some(Lane::Correction),
            lane_was: latest.lane,
            job_id: None,
            reason: None,
        };
        let claim = RunChange::new(latest.status, latest.lease_epoch, now, moving);
        match self.store.transition_run(&latest.key, &claim).await {
            Ok(_) => {}
            // Moved by another late run's worker, or started meanwhile.
            Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => return,
            Err(e) => {
                tracing::warn!(run = %latest.key, error = %e, "could not move the late run");
                return;
            }
        }
        let message = LaneMessage::next_attempt(latest, Lane::Correction);
        match self.lanes.send(&message, Duration::ZERO).await {
            Ok(_) => {
                tracing::debug!(run = %latest.key, "late run moved ahead to the correction lane");
                self.metrics
                    .count_for(&latest.key.schedule_id, Metric::RunsMovedToCorrection, 1);
            }
            Err(e) => tracing::warn!(run = %latest.key, error = %e, "could not move the late run"),
        }
    }

    /// Ends a run that will not execute (skipped, held for approval or coalesced).
    pub(super) async fn end_unrun(
        &self,
        run: &Run,
        stored: &StoredSchedule,
        unrun: Unrun,
        now: DateTime<Utc>,
    ) -> Result<(), HandlerFailure> {
        let decide = |event, reason| Transition::Decide {
            event,
            reason: Some(reason),
        };
        let (transition, reason, metric) = match unrun {
            Unrun::Skip(reason) => (decide(RunEvent::Skip, reason), reason, Metric::RunsSkipped),
            Unrun::Fail(reason) => (decide(RunEvent::Fail, reason), reason, Metric::RunsFailed),
            Unrun::Hold(reason) => (
                Transition::Hold {
                    reason,
                    result: None,
                },
                reason,
                Metric::RunsHeldForApproval,
            ),
            Unrun::Coalesce(into) => (
                Transition::Coalesce {
                    reason: Some(Reason::Coalesced),
                    into: Some(into),
                },
                Reason::Coalesced,
                Metric::RunsCoalesced,
            ),
        };
        let change = RunChange::new(run.status, run.lease_epoch, now, transition);
        match self.store.transition_run(&run.key, &change).await {
            Ok(ended) => {
                let late_ms = (now - run.key.scheduled_for).num_milliseconds();
                tracing::info!(%reason, status = %ended.status, late_ms, "run not executed");
                self.metrics.count_for(&run.key.schedule_id, metric, 1);
                if ended.status.is_terminal() {
                    self.after_end(stored, &ended, None, now).await;
                } else if ended.status == RunStatus::ManualRequired {
                    self.after_hold(stored, &ended, now).await;
                }
                // A run that will not execute ends like a finished one: the next QUEUE_NEW
                // run may go.
                self.release_next_queued(stored, now).await;
                Ok(())
            }
            Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => Ok(()),
            Err(StoreError::InvalidTransition(_)) => Ok(()),
            Err(e) => Err(HandlerFailure::Retry(e.to_string())),
        }
    }

    /// Parks a QUEUE_NEW run behind the active one and acknowledges its message.
    pub(super) async fn wait_behind(
        &self,
        run: &Run,
        stored: &StoredSchedule,
        now: DateTime<Utc>,
    ) -> Result<(), HandlerFailure> {
        self.park(run, RunEvent::WaitBehind, Reason::QueuedBehind, now)
            .await?;
        tracing::info!("waiting for its turn behind another run of the schedule");
        // The blocker may have finished between our check and our write, and released
        // nothing: look once more, so the run cannot be left waiting on nobody.
        let blocked = active_runs_of(self.store.as_ref(), &run.key.schedule_id)
            .await
            .map(|others| {
                others.iter().any(|r| {
                    r.key != run.key && (r.status == RunStatus::Running || r.key < run.key)
                })
            })
            .unwrap_or(true);
        if !blocked {
            self.release_next_queued(stored, now).await;
        }
        Ok(())
    }

    /// Parks a released catch-up or backfill run of a stopped schedule for the release to
    /// send again after the resume, and acknowledges its message.
    pub(super) async fn wait_resume(
        &self,
        run: &Run,
        reason: Reason,
        now: DateTime<Utc>,
    ) -> Result<(), HandlerFailure> {
        self.park(run, RunEvent::WaitResume, reason, now).await?;
        tracing::info!(%reason, "schedule stopped: waits for the resume");
        self.metrics
            .count_for(&run.key.schedule_id, Metric::RunsWaitingForResume, 1);
        Ok(())
    }

    /// Ends an attempt whose outcome nobody knows (its worker vanished, or it outran
    /// `max_runtime`) for a job not declared idempotent: the attempt STALLED, the run held
    /// for an operator (MANUAL_REQUIRED) with `reason`, its message acknowledged. If the
    /// hold's write fails after the stall, the reconciler finds the STALLED run and holds it.
    pub(super) async fn hold_unknown_outcome(
        &self,
        run: &Run,
        stored: &StoredSchedule,
        reason: Reason,
        now: DateTime<Utc>,
    ) -> Result<(), HandlerFailure> {
        let stall = RunChange::decide(
            RunEvent::Stall,
            RunStatus::Running,
            run.lease_epoch,
            now,
            Some(reason),
        );
        let stalled = match self.store.transition_run(&run.key, &stall).await {
            Ok(stalled) => stalled,
            // Settled meanwhile (its worker came back, another delivery, the reconciler).
            Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => return Ok(()),
            Err(e) => return Err(HandlerFailure::Retry(e.to_string())),
        };
        let holding = Transition::Hold {
            reason,
            result: None,
        };
        let hold = RunChange::new(RunStatus::Stalled, stalled.lease_epoch, now, holding);
        match self.store.transition_run(&run.key, &hold).await {
            Ok(held) => {
                tracing::warn!(%reason, status = %held.status, attempt = run.attempts, "outcome unknown and the job is not idempotent: held for an operator");
                self.after_hold(stored, &held, now).await;
                self.metrics
                    .count_for(&run.key.schedule_id, Metric::RunsHeldOutcomeUnknown, 1);
                self.release_next_queued(stored, now).await;
                Ok(())
            }
            Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => Ok(()),
            Err(e) => Err(HandlerFailure::Retry(e.to_string())),
        }
    }

    /// Holds a guarded run whose dry run found more than `max_affected` for an operator
    /// (MANUAL_REQUIRED, AFFECTED_OVER_LIMIT), the dry run's numbers on its result, and
    /// acknowledges its message. Approving it sends it to the manual lane, where it executes
    /// with the approved count.
    pub(super) async fn hold_over_limit(
        &self,
        run: &Run,
        stored: &StoredSchedule,
        report: &DryRunReport,
        max_affected: u64,
    ) -> Result<(), HandlerFailure> {
        let now = self.clock.now();
        let sample =
            |v: &Option<serde_json::Value>| v.as_ref().map_or("-".into(), |v| v.to_string());
        let dry_run = RunResult {
            count: Some(report.affected),
            checksum: None,
            error_code: Some(AFFECTED_OVER_LIMIT.into()),
            message: Some(format!(
                "dry run: {} affected > max_affected {max_affected} (oldest {}, newest {})",
                report.affected,
                sample(&report.oldest),
                sample(&report.newest)
            )),
            ..RunResult::default()
        };
        let holding = Transition::Hold {
            reason: Reason::AffectedOverLimit,
            result: Some(dry_run),
        };
        let change = RunChange::new(RunStatus::Running, run.lease_epoch, now, holding);
        match self.store.transition_run(&run.key, &change).await {
            Ok(held) => {
                self.after_hold(stored, &held, now).await;
                tracing::warn!(
                    affected = report.affected,
                    max_affected,
                    "guard: held for approval"
                );
                self.metrics
                    .count_for(&run.key.schedule_id, Metric::RunsHeldByGuard, 1);
                self.release_next_queued(stored, now).await;
                Ok(())
            }
            Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => Ok(()),
            Err(e) => Err(HandlerFailure::Retry(e.to_string())),
        }
    }

    /// Parks a late run for the reconciler's plan of its gap and acknowledges its message.
    pub(super) async fn await_plan(
        &self,
        run: &Run,
        now: DateTime<Utc>,
    ) -> Result<(), HandlerFailure> {
        self.park(run, RunEvent::AwaitPlan, Reason::LateAwaitingPlan, now)
            .await?;
        let late_ms = (now - run.key.scheduled_for).num_milliseconds();
        tracing::info!(late_ms, "late: waits for the reconciler to plan its gap");
        self.metrics
            .count_for(&run.key.schedule_id, Metric::RunsAwaitingPlan, 1);
        Ok(())
    }

    /// Leaves a run PENDING with `reason` (waiting on something other than its message).
    /// When the run changed since it was read, the message comes back to look again.
    pub(super) async fn park(
        &self,
        run: &Run,
        event: RunEvent,
        reason: Reason,
        now: DateTime<Utc>,
    ) -> Result<(), HandlerFailure> {
        let change = RunChange::decide(event, run.status, run.lease_epoch, now, Some(reason));
        match self.store.transition_run(&run.key, &change).await {
            Ok(_) => Ok(()),
            Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => Err(
                HandlerFailure::Retry("the run changed while parking it; look again".into()),
            ),
            Err(e) => Err(HandlerFailure::Retry(e.to_string())),
        }
    }

    /// Writes the attempt's outcome under its epoch and tells SQS what to do with the message.
    pub(super) async fn record(
        &self,
        delivery: &Delivery<'_>,
        stored: &StoredSchedule,
        run: &Run,
        work: &Work<'_>,
        mut outcome: JobOutcome,
    ) -> Result<(), HandlerFailure> {
        if let Ok(JobSuccess {
            children: Some(spec),
            ..
        }) = &outcome
        {
            match self.spawn_children(delivery, stored, run, work, spec).await {
                Ok(spawned) => return spawned,
                Err(instead) => outcome = instead,
            }
        }
        let now = self.clock.now();
        let checkpoints = work.ended(run, &mut outcome, now);
        if outcome.is_ok() && !work.ends_the_run() {
            if let Some(checkpoints) = checkpoints {
                return self.hand_over(delivery, stored, run, checkpoints).await;
            }
        }
        let attempt = work.attempt(run);
        let last_attempt = attempt >= work.max_attempts;
        let (event, reason, mut result) = match &outcome {
            Ok(s) if s.partial => (Ending::SucceedPartially, None, s.result.clone()),
            Ok(s) => (Ending::Succeed, None, s.result.clone()),
            Err(f @ JobFailure::Retryable { .. }) if !last_attempt => {
                (Ending::FailRetryable, None, failure_result(f))
            }
            Err(f @ JobFailure::Retryable { .. }) => (
                Ending::Fail,
                Some(Reason::RetriesExhausted),
                failure_result(f),
            ),
            Err(f @ JobFailure::Permanent { .. }) => (
                Ending::Fail,
                Some(Reason::PermanentError),
                failure_result(f),
            ),
        };
        // A run that ends is judged against its schedule's recent successes: its result
        // now (SUSPECT goes in the same write), its duration after (SLOW_RUN).
        let ran_ms = run.started_at.map_or(0, |s| {
            u64::try_from((now - s).num_milliseconds()).unwrap_or(0)
        });
        let wanted = cronledger_core::quality::needs_history(stored.spec.expect.is_some(), ran_ms);
        let history = match event {
            Ending::FailRetryable => None,
            _ if !wanted => None,
            _ => match crate::outcomes::history(self.store.as_ref(), run).await {
                Ok(history) => Some(history),
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the schedule's recent runs; the run is not judged");
                    None
                }
            },
        };
        if let (Ending::Succeed | Ending::SucceedPartially, Some(history)) = (event, &history) {
            crate::outcomes::judge_result(&stored.spec, &mut result, history);
        }
        let end = Transition::End {
            event,
            reason,
            result,
            steps: checkpoints,
        };
        let change = RunChange::new(RunStatus::Running, run.lease_epoch, now, end);
        let event = change.event();
        match self.store.transition_run(&run.key, &change).await {
            Ok(done) => {
                let duration_ms = run.started_at.map(|s| (now - s).num_milliseconds());
                // The run's one INFO line: everything about the attempt, so the other lines
                // can stay at DEBUG. Its `message` span already names the schedule, the run,
                // the attempt and the request.
                tracing::info!(
                    window_start = %run.window.start,
                    window_end = %run.window.end,
                    lane = %delivery.message.lane,
                    status = %done.status,
                    outcome = ?event,
                    error_code = outcome.as_ref().err().map(JobFailure::code),
                    duration_ms,
                    "run attempt finished"
                );
                self.count_outcome(&run.key.schedule_id, event, duration_ms);
                if done.status.is_terminal() {
                    self.after_end(stored, &done, history.as_ref(), now).await;
                }
            }
            Err(StoreError::LeaseLost { .. } | StoreError::StatusConflict { .. }) => {
                tracing::warn!("lease lost before the outcome was written; discarded");
                return Ok(());
            }
            Err(e) => return Err(HandlerFailure::Retry(e.to_string())),
        }
        if event != RunEvent::FailRetryable {
            self.release_next_queued(stored, now).await;
        }
        match (event, outcome) {
            (RunEvent::FailRetryable, Err(f)) => {
                let delay = self.config.backoff.delay(&run.key, attempt);
                self.hide(delivery, delay).await;
                Err(HandlerFailure::Retry(format!(
                    "attempt {} failed ({}); retry in {}s",
                    attempt,
                    f.code(),
                    delay.as_secs()
                )))
            }
            (RunEvent::Fail, Err(f)) => Err(HandlerFailure::Permanent {
                code: if last_attempt && matches!(f, JobFailure::Retryable { .. }) {
                    "RUN_RETRIES_EXHAUSTED".to_string()
                } else {
                    f.code().to_string()
                },
                detail: f.message().to_string(),
            }),
            _ => Ok(()),
        }
    }

    pub(super) fn count_outcome(&self, schedule: &str, event: RunEvent, duration_ms: Option<i64>) {
        let name = match event {
            RunEvent::Succeed | RunEvent::SucceedPartially => Metric::RunsSucceeded,
            RunEvent::FailRetryable => Metric::AttemptsRetried,
            _ => Metric::RunsFailed,
        };
        self.metrics.count_for(schedule, name, 1);
        if let Some(ms) = duration_ms {
            self.metrics
                .put_for(schedule, Metric::RunDuration, ms.max(0) as f64);
        }
    }

    /// Once a run ends, the oldest run waiting for its turn (QUEUED_BEHIND: a QUEUE_NEW
    /// window, or any run that met a running one under SKIP_NEW or QUEUE_NEW) goes to its lane.
    pub(super) async fn release_next_queued(&self, stored: &StoredSchedule, now: DateTime<Utc>) {
        if stored.spec.overlap == OverlapPolicy::Allow {
            return;
        }
        let Ok(recent) = self.store.recent_runs(stored.id(), RECENT_RUNS, None).await else {
            return;
        };
        let Some(next) = recent
            .runs
            .into_iter()
            .filter(|r| r.status == RunStatus::Pending && r.reason == Some(Reason::QueuedBehind))
            .min_by_key(|r| r.key.clone())
        else {
            return;
        };
        let lane = lane_of(next.trigger, next.lane, stored.spec.priority.live_lane());
        // The shared send keeps QUEUED_BEHIND on the run until it starts (see `send_run`).
        let sent = send_run(
            self.store.as_ref(),
            self.lanes.as_ref(),
            &next,
            RunStatus::Pending,
            lane,
            now,
        );
        match sent.await {
            Ok(()) => tracing::debug!(run = %next.key, "queued run released"),
            Err(e) => {
                tracing::warn!(run = %next.key, error = %e, "release failed; the reconciler will send it")
            }
        }
    }
}

pub(super) fn failure_result(f: &JobFailure) -> RunResult {
    RunResult {
        error_code: Some(f.code().to_string()),
        message: Some(f.message().chars().take(1000).collect()),
        ..RunResult::default()
    }
}
