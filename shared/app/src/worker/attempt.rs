//! One attempt: the job runs under the lease, with heartbeats that renew the lease and the
//! message's visibility, and the runtime limit.

use std::time::Duration;

use cronledger_aws::StoreError;
use cronledger_core::{JobSpec, Lane, Run, RunStatus, Schedule};
use cronledger_ledger::ledger::{LeaseGrant, RunChange, Transition};

use super::steps::Work;
use super::{Delivery, Worker};
use crate::clock::Pace;
use crate::faults::CrashPoint;

/// Longest a `verify` source may take to answer, and never longer than the lease less one
/// heartbeat period: the last heartbeat renewed the lease at most that long before the job
/// ended.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(20);
use crate::jobs::{DryRunReport, JobContext, JobFailure, JobMode, JobOutcome};

/// The code a guard's hold leaves on the run's result, with the dry run's count: what an
/// approved run comes back with.
pub(super) const AFFECTED_OVER_LIMIT: &str = "AFFECTED_OVER_LIMIT";

/// What a guarded job's dry run decided.
pub(super) enum Guarded {
    /// Execute, telling the target the count let through.
    Proceed(u64),
    /// Over the limit: hold the run with the dry run's numbers.
    Hold(DryRunReport),
    /// The target could not dry-run (or the call failed): settle as that failure.
    Fail(JobFailure),
}

/// The count an operator approved: the run was held over the limit (its result says so)
/// and its approval sent it to the manual lane, which this delivery came from.
fn approved_hold(run: &Run, lane: Lane) -> Option<u64> {
    let result = run.result.as_ref()?;
    (lane == Lane::Manual && result.error_code.as_deref() == Some(AFFECTED_OVER_LIMIT))
        .then_some(result.count)
        .flatten()
}

/// How an attempt's job ended, as far as this worker knows. One per attempt, moved once:
/// boxing the outcome would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum AttemptEnd {
    /// The job answered.
    Finished(JobOutcome),
    /// `max_runtime` passed first: the job may still be acting.
    OutranMaxRuntime,
    /// The lease was lost (another worker reclaimed the run): this worker writes nothing.
    LeaseLost,
}

impl Worker {
    /// What the job is told: the run's fixed inputs, the mode, and for a guarded job the
    /// dry run's count that was let through.
    fn job_context(
        &self,
        work: &Work<'_>,
        run: &Run,
        mode: JobMode,
        approved_affected: Option<u64>,
    ) -> JobContext {
        JobContext {
            run: run.key.clone(),
            window: run.window,
            business_date: run.business_date,
            idempotency_key: work.idempotency_key(run),
            attempt: work.attempt(run),
            payload: work.target.payload().clone(),
            deadline: self.clock.now() + work.max_runtime.as_delta(),
            mode,
            approved_affected,
            step: work.step.as_ref().map(|s| s.name.clone()),
            previous: work.step.as_ref().and_then(|s| s.previous.clone()),
            child: None,
        }
    }

    /// A guarded job (`guard.max_affected`) asks its target first: a dry run says how much
    /// the execution would touch. Under the limit it proceeds with that count; over it the
    /// run is held for an operator with the dry run's numbers; once an operator approved
    /// such a hold (the run comes back on the manual lane with them) it proceeds with the
    /// approved count. A target that cannot dry-run fails the run (GUARD_UNSUPPORTED).
    pub(super) async fn guard(
        &self,
        _schedule: &Schedule,
        work: &Work<'_>,
        run: &Run,
        lane: Lane,
        max_affected: u64,
    ) -> Guarded {
        if let Some(approved) = approved_hold(run, lane) {
            return Guarded::Proceed(approved);
        }
        let ctx = self.job_context(work, run, JobMode::DryRun, None);
        match self.jobs.dry_run(work.target, &ctx).await {
            Ok(report) if report.affected <= max_affected => Guarded::Proceed(report.affected),
            Ok(report) => Guarded::Hold(report),
            Err(failure) => Guarded::Fail(failure),
        }
    }

    /// Runs `job` (the run's own version's) with heartbeats and the schedule's runtime limit.
    pub(super) async fn execute(
        &self,
        delivery: &Delivery<'_>,
        _schedule: &Schedule,
        work: &Work<'_>,
        run: &Run,
        approved_affected: Option<u64>,
    ) -> AttemptEnd {
        let ctx = self.job_context(work, run, JobMode::Execute, approved_affected);
        let resolved = self.noop_count(work.target, run).await;
        let job = self
            .jobs
            .run(resolved.as_ref().unwrap_or(work.target), &ctx);
        let limit = tokio::time::sleep(work.max_runtime.as_std());
        // Declared before the select, so dropped after both branches: on the simulator's
        // clock it counts a beat in progress busy, and must not stop before the job's branch.
        let mut pace = self.clock.pace(self.heartbeat_period());
        let heartbeat = self.heartbeat(delivery, run, pace.as_mut());
        // Biased: a job that has ended is seen before a beat due at the same moment.
        tokio::select! {
            biased;
            outcome = job => AttemptEnd::Finished(outcome),
            () = limit => AttemptEnd::OutranMaxRuntime,
            () = heartbeat => AttemptEnd::LeaseLost,
        }
    }

    /// A noop with a `count_sequence` reports the n-th value on the n-th run of its
    /// schedule: n counts the runs before this one that started, from one bounded read of
    /// the schedule's newest runs (only for such a noop; every other job reads nothing).
    async fn noop_count(&self, target: &JobSpec, run: &Run) -> Option<JobSpec> {
        let JobSpec::Noop { count_sequence, .. } = target else {
            return None;
        };
        if count_sequence.is_empty() {
            return None;
        }
        let before = self
            .store
            .run_history(&run.key.schedule_id, crate::outcomes::HISTORY_PAGE, None)
            .await
            .map(|page| {
                page.items
                    .iter()
                    .filter(|r| r.key < run.key && r.started_at.is_some())
                    .count()
            })
            .unwrap_or(0);
        target.noop_count_for(before + 1)
    }

    /// A schedule with `verify`: after a successful execution, asks the source what the
    /// window's results should be and records that beside what the job reported. A source
    /// that does not answer leaves them unset (a verification lists the window
    /// UNVERIFIED); the run's outcome stands either way.
    pub(super) async fn with_expected(
        &self,
        schedule: &Schedule,
        run: &Run,
        outcome: JobOutcome,
    ) -> JobOutcome {
        // A backfill's own source first, else the schedule's.
        let source = run.verify.as_ref().or(schedule.spec.verify.as_ref());
        let (Some(verify), Ok(mut success)) = (source, outcome.clone()) else {
            return outcome;
        };
        let asked = Work {
            target: verify,
            max_runtime: schedule.spec.max_runtime,
            max_attempts: schedule.spec.max_attempts,
            step: None,
        };
        let ctx = self.job_context(&asked, run, JobMode::Verify, None);
        // No heartbeat runs now: the question must end well inside the lease, or another
        // worker could reclaim a run whose job already succeeded.
        let margin = self
            .config
            .lease
            .as_std()
            .saturating_sub(self.config.heartbeat_every.as_std());
        // No margin (heartbeats as far apart as the lease lasts): only the ceiling applies.
        let within = if margin.is_zero() {
            VERIFY_TIMEOUT
        } else {
            margin.min(VERIFY_TIMEOUT)
        };
        match tokio::time::timeout(within, self.jobs.run(verify, &ctx)).await {
            Ok(Ok(answer)) => {
                success.result.expected_count = answer.result.count;
                success.result.expected_checksum = answer.result.checksum;
            }
            Ok(Err(e)) => tracing::warn!(error = %e,
                "the verify source did not answer; the window stays unverified"),
            Err(_) => tracing::warn!(
                timeout_ms = within.as_millis() as u64,
                "the verify source did not answer in time; the window stays unverified"
            ),
        }
        Ok(success)
    }

    /// How often a running job's heartbeat beats (never more often than every 100 ms).
    fn heartbeat_period(&self) -> Duration {
        self.config
            .heartbeat_every
            .as_std()
            .max(Duration::from_millis(100))
    }

    /// Renews the lease and the message's visibility at every beat of `pace` until the lease
    /// is lost (then returns). A failed write is retried at the next beat; with the
    /// `heartbeat` fault injected, every write of the attempt fails from the chosen beat on
    /// (a worker cut off from the ledger), and the run is reclaimed as a lost worker's.
    pub(super) async fn heartbeat(&self, delivery: &Delivery<'_>, run: &Run, pace: &mut dyn Pace) {
        let mut cut_off = false;
        loop {
            pace.next().await;
            cut_off = cut_off || self.crashes(CrashPoint::Heartbeat, run);
            if cut_off {
                tracing::warn!("heartbeat failed (injected fault); retrying");
                continue;
            }
            let now = self.clock.now();
            let lease = LeaseGrant::new(&self.config.owner, now + self.config.lease.as_delta());
            let change = RunChange::new(
                RunStatus::Running,
                run.lease_epoch,
                now,
                Transition::Heartbeat { lease },
            );
            match self.store.transition_run(&run.key, &change).await {
                // Hidden a heartbeat longer than the lease: after a crash the lease has surely
                // expired by the time the message comes back, so the redelivery reclaims it.
                Ok(_) => {
                    let hide = self.config.lease.as_std() + self.config.heartbeat_every.as_std();
                    self.hide(delivery, hide).await
                }
                Err(StoreError::LeaseLost { .. } | StoreError::StatusConflict { .. }) => return,
                Err(e) => tracing::warn!(error = %e, "heartbeat failed; retrying"),
            }
        }
    }

    pub(super) async fn hide(&self, delivery: &Delivery<'_>, delay: Duration) {
        if let Err(e) = self
            .lanes
            .extend_visibility(
                delivery.message.lane,
                &delivery.record.receipt_handle,
                delay,
            )
            .await
        {
            tracing::warn!(error = %e, "could not change message visibility");
        }
    }
}
