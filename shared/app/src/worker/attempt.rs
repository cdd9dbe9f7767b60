//! One attempt: the job runs under the lease, with heartbeats that renew the lease and the
//! message's visibility, and the runtime limit.

use std::time::Duration;

use cronledger_aws::ledger::RunChange;
use cronledger_aws::StoreError;
use cronledger_core::{JobSpec, Run, RunEvent, RunStatus, Schedule};

use super::{Delivery, Worker};
use crate::jobs::{JobContext, JobMode, JobOutcome};

/// How an attempt's job ended, as far as this worker knows.
pub(super) enum AttemptEnd {
    /// The job answered.
    Finished(JobOutcome),
    /// `max_runtime` passed first: the job may still be acting.
    OutranMaxRuntime,
    /// The lease was lost (another worker reclaimed the run): this worker writes nothing.
    LeaseLost,
}

impl Worker {
    /// Runs `job` (the run's own version's) with heartbeats and the schedule's runtime limit.
    pub(super) async fn execute(
        &self,
        delivery: &Delivery<'_>,
        schedule: &Schedule,
        job: &JobSpec,
        run: &Run,
    ) -> AttemptEnd {
        let now = self.clock.now();
        let ctx = JobContext {
            run: run.key.clone(),
            window: run.window,
            business_date: run.business_date,
            idempotency_key: run.idempotency_key.clone(),
            attempt: run.attempts,
            payload: job.payload().clone(),
            deadline: now + schedule.spec.max_runtime.as_delta(),
            mode: JobMode::Execute,
            approved_affected: None,
        };
        let job = self.jobs.run(job, &ctx);
        let limit = tokio::time::sleep(schedule.spec.max_runtime.as_std());
        let heartbeat = self.heartbeat(delivery, run);
        tokio::select! {
            outcome = job => AttemptEnd::Finished(outcome),
            () = limit => AttemptEnd::OutranMaxRuntime,
            () = heartbeat => AttemptEnd::LeaseLost,
        }
    }

    /// Renews the lease and the message's visibility until the lease is lost (then returns).
    pub(super) async fn heartbeat(&self, delivery: &Delivery<'_>, run: &Run) {
        let every = self
            .config
            .heartbeat_every
            .as_std()
            .max(Duration::from_millis(100));
        loop {
            tokio::time::sleep(every).await;
            let now = self.clock.now();
            let change = RunChange::new(
                RunEvent::Heartbeat,
                RunStatus::Running,
                run.lease_epoch,
                now,
            )
            .with_lease(&self.config.owner, now + self.config.lease.as_delta());
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
