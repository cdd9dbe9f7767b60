//! Child batches (see `cronledger_core::children`): a job or step answered children; they
//! are stored under the run, the run waits RUNNING for them, and each runs from its own
//! message with its own attempts. Each child's end and the run's counter move in one
//! transaction; whoever ends the last child ends the run (or its step) by the counts.

use chrono::{DateTime, Utc};
use cronledger_aws::lanes::{ChildRef, HandlerFailure};
use cronledger_aws::StoreError;
use cronledger_core::children::{self, Child, ChildCounts, ChildStatus, ChildrenOutcome};
use cronledger_core::run::RunResult;
use cronledger_core::{Lane, Run, RunStatus};
use cronledger_ledger::ledger::{ChildChange, LeaseGrant, RunChange, StoredSchedule, Transition};

use super::steps::Work;
use super::{Delivery, Worker};
use crate::jobs::{JobContext, JobFailure, JobMode, JobOutcome, JobSuccess};
use crate::metrics::Metric;
use crate::pinned::job_of_run;
use crate::runs::{children_of_run, send_children};

/// Who holds a run's lease while its children run: nobody runs its job meanwhile.
pub const CHILDREN_OWNER: &str = "children";

/// The code a run ends FAILED with when more children failed than `max_failed_children`.
pub const CHILDREN_FAILED: &str = "CHILDREN_FAILED";

/// Whether `run` waits for its children (its job answered them, and not all have ended).
pub fn waits_for_children(run: &Run) -> bool {
    run.status == RunStatus::Running
        && run
            .lease
            .as_ref()
            .is_some_and(|l| l.owner == CHILDREN_OWNER)
        && run.children.is_some()
}

/// The lane a run's children go to: the schedule's `batch_lane`, else the run's own.
pub fn children_lane(stored: &StoredSchedule, run: &Run, delivered_on: Lane) -> Lane {
    stored.spec.batch_lane.or(run.lane).unwrap_or(delivered_on)
}

impl Worker {
    /// The job (or step) answered `spec` children: stores them, moves the run to wait for
    /// them (its attempt ends, the run stays RUNNING) and sends each its message. `Err`
    /// gives back the outcome to record instead: no children (a success), or an answer that
    /// cannot become children (a permanent failure, as any other bad answer).
    pub(super) async fn spawn_children(
        &self,
        delivery: &Delivery<'_>,
        stored: &StoredSchedule,
        run: &Run,
        work: &Work<'_>,
        spec: &serde_json::Value,
    ) -> Result<Result<(), HandlerFailure>, JobOutcome> {
        let payloads = match children::payloads(spec) {
            Ok(list) if list.is_empty() => return Err(Ok(JobSuccess::default())),
            Ok(list) => list,
            Err(e) => return Err(Err(JobFailure::permanent(e.code(), e.to_string()))),
        };
        Ok(self.spawn(delivery, stored, run, work, payloads).await)
    }

    async fn spawn(
        &self,
        delivery: &Delivery<'_>,
        stored: &StoredSchedule,
        run: &Run,
        work: &Work<'_>,
        payloads: Vec<serde_json::Value>,
    ) -> Result<(), HandlerFailure> {
        let now = self.clock.now();
        let step = work.step.as_ref().map_or(0, |s| s.index as u32);
        let list: Vec<Child> = payloads
            .into_iter()
            .enumerate()
            .map(|(i, payload)| Child::new(step, i as u32, payload, now))
            .collect();
        self.store
            .put_children(&run.key, &list)
            .await
            .map_err(|e| HandlerFailure::Retry(e.to_string()))?;
        let awaiting = Transition::AwaitChildren {
            lease: LeaseGrant::new(CHILDREN_OWNER, now + self.config.lease.as_delta()),
            children: Some(ChildCounts {
                total: list.len() as u32,
                succeeded: 0,
                failed: 0,
                step,
            }),
        };
        let change = RunChange::new(RunStatus::Running, run.lease_epoch, now, awaiting);
        let waiting = match self.store.transition_run(&run.key, &change).await {
            Ok(waiting) => waiting,
            Err(StoreError::LeaseLost { .. } | StoreError::StatusConflict { .. }) => {
                tracing::warn!("lease lost before the children were recorded; discarded");
                return Ok(());
            }
            Err(e) => return Err(HandlerFailure::Retry(e.to_string())),
        };
        tracing::info!(
            children = list.len(),
            lane = %delivery.message.lane,
            "job answered children; the run waits for them"
        );
        self.metrics.count_for(
            &run.key.schedule_id,
            Metric::ChildrenSpawned,
            list.len() as u64,
        );
        let lane = children_lane(stored, &waiting, delivery.message.lane);
        let indexes: Vec<u32> = list.iter().map(|c| c.index).collect();
        send_children(self.lanes.as_ref(), &waiting, lane, step, &indexes).await;
        Ok(())
    }

    /// An operator retried a run whose children failed: the failed ones reopen (each with
    /// its counter taken back in the same transaction) and run again; the succeeded ones
    /// stay. The run waits for them as before.
    pub(super) async fn reopen_failed_children(
        &self,
        delivery: &Delivery<'_>,
        stored: &StoredSchedule,
        run: &Run,
    ) -> Result<(), HandlerFailure> {
        let Some(counts) = run.children else {
            return Ok(());
        };
        let now = self.clock.now();
        let mut reopened = Vec::new();
        let children = children_of_run(self.store.as_ref(), &run.key, counts.step)
            .await
            .map_err(|e| HandlerFailure::Retry(e.to_string()))?;
        for child in children.iter().filter(|c| c.status == ChildStatus::Failed) {
            let change = ChildChange::new(child, ChildStatus::Pending, now);
            match self.store.change_child(&run.key, &change).await {
                Ok(_) => reopened.push(child.index),
                Err(StoreError::ChildConflict(_)) => {}
                Err(e) => return Err(HandlerFailure::Retry(e.to_string())),
            }
        }
        let awaiting = Transition::AwaitChildren {
            lease: LeaseGrant::new(CHILDREN_OWNER, now + self.config.lease.as_delta()),
            children: None,
        };
        let change = RunChange::new(RunStatus::Running, run.lease_epoch, now, awaiting);
        let waiting = match self.store.transition_run(&run.key, &change).await {
            Ok(waiting) => waiting,
            Err(StoreError::LeaseLost { .. } | StoreError::StatusConflict { .. }) => return Ok(()),
            Err(e) => return Err(HandlerFailure::Retry(e.to_string())),
        };
        tracing::info!(reopened = reopened.len(), "failed children run again");
        let lane = children_lane(stored, &waiting, delivery.message.lane);
        send_children(self.lanes.as_ref(), &waiting, lane, counts.step, &reopened).await;
        if reopened.is_empty() {
            // Nothing was left to reopen (another retry took them): end by the counts.
            return self.finish_parent(delivery, stored, &waiting).await;
        }
        Ok(())
    }

    /// One child's delivery: start it (conditioned on what was read), run the target that
    /// answered it with the child's payload, and end it with the run's counter in one
    /// transaction. Whoever ends the last child ends the run.
    pub(super) async fn handle_child(
        &self,
        delivery: &Delivery<'_>,
        child: ChildRef,
    ) -> Result<(), HandlerFailure> {
        let key = &delivery.message.run;
        let retry = |e: StoreError| HandlerFailure::Retry(e.to_string());
        let (seen, stored) = self.look_with_schedule(key, false).await?;
        let parent = seen.run;
        if !waits_for_children(&parent) {
            return Ok(());
        }
        let found = match self.store.get_child(key, child.step, child.index).await {
            Ok(found) => found,
            Err(StoreError::ChildNotFound(_)) => return Ok(()),
            Err(e) => return Err(retry(e)),
        };
        let now = self.clock.now();
        if found.status.is_terminal() {
            // The reconciler sends an ended child's message when the run's end was lost.
            if parent.children.is_some_and(|c| c.all_ended()) {
                return self.finish_parent(delivery, &stored, &parent).await;
            }
            return Ok(());
        }
        let live = found.lease_until.is_some_and(|until| until > now);
        if found.status == ChildStatus::Running && live {
            return Ok(());
        }
        if found.status == ChildStatus::Running && !stored.spec.idempotent {
            // Its worker vanished mid-attempt: the child may have acted, so it is not run
            // again on its own. It ends FAILED; an operator's retry of the run reruns it.
            let lost = self
                .end_child(
                    key,
                    &found,
                    ChildStatus::Failed,
                    None,
                    Some("WORKER_LOST"),
                    now,
                )
                .await?;
            return self.after_child(delivery, &stored, key, lost).await;
        }
        if stored.stopped().is_some() {
            // Acknowledged, not bounced: a long pause would dead-letter a bouncing message.
            // The child waits PENDING; after the resume the reconciler sends it again.
            tracing::info!(
                child = child.index,
                "schedule stopped: the child waits for the resume"
            );
            return Ok(());
        }
        let job = job_of_run(self.store.as_ref(), &stored, &parent, &self.pinned)
            .await
            .map_err(retry)?;
        let work = Work::of(&job, &stored.spec, &parent);
        let limit = work.max_runtime;
        let start = ChildChange {
            start_until: Some(now + limit.as_delta() + self.config.lease.as_delta()),
            ..ChildChange::new(&found, ChildStatus::Running, now)
        };
        let started = match self.store.change_child(key, &start).await {
            Ok(started) => started,
            Err(StoreError::ChildConflict(_)) => return Ok(()),
            Err(e) => return Err(retry(e)),
        };
        // No heartbeat runs for a child: its message stays hidden past its runtime limit.
        self.hide(delivery, limit.as_std() + self.config.lease.as_std())
            .await;
        let ctx = JobContext {
            run: parent.key.clone(),
            window: parent.window,
            business_date: parent.business_date,
            idempotency_key: children::idempotency_key(&parent.idempotency_key, child.index),
            attempt: started.attempts,
            payload: started.payload.clone(),
            deadline: now + limit.as_delta(),
            mode: JobMode::Execute,
            approved_affected: None,
            step: work.step.as_ref().map(|s| s.name.clone()),
            previous: None,
            child: Some(child.index),
        };
        let outcome =
            match tokio::time::timeout(limit.as_std(), self.jobs.run(work.target, &ctx)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(JobFailure::retryable(
                    "MAX_RUNTIME_EXCEEDED",
                    format!("the child ran past max_runtime {limit}"),
                )),
            };
        let now = self.clock.now();
        let ended = match &outcome {
            Ok(success) => {
                let result = &success.result;
                self.end_child(key, &started, ChildStatus::Success, result.count, None, now)
                    .await?
            }
            Err(failure @ JobFailure::Retryable { .. }) if started.attempts < work.max_attempts => {
                let change = ChildChange {
                    error_code: Some(failure.code().to_string()),
                    ..ChildChange::new(&started, ChildStatus::RetryPending, now)
                };
                match self.store.change_child(key, &change).await {
                    Ok(_) | Err(StoreError::ChildConflict(_)) => {}
                    Err(e) => return Err(retry(e)),
                }
                let delay = self.config.backoff.delay(key, started.attempts);
                self.hide(delivery, delay).await;
                return Err(HandlerFailure::Retry(format!(
                    "child {} attempt {} failed ({}); retry in {}s",
                    child.index,
                    started.attempts,
                    failure.code(),
                    delay.as_secs()
                )));
            }
            Err(failure) => {
                let code = failure.code().to_string();
                self.end_child(key, &started, ChildStatus::Failed, None, Some(&code), now)
                    .await?
            }
        };
        self.after_child(delivery, &stored, key, ended).await
    }

    /// Ends a child with its counter in one transaction; `None` when another delivery ended
    /// or took it first.
    async fn end_child(
        &self,
        key: &cronledger_core::RunKey,
        child: &Child,
        to: ChildStatus,
        count: Option<u64>,
        error_code: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Option<Child>, HandlerFailure> {
        let change = ChildChange {
            count,
            error_code: error_code.map(str::to_string),
            ..ChildChange::new(child, to, at)
        };
        match self.store.change_child(key, &change).await {
            Ok(ended) => {
                let metric = if to == ChildStatus::Success {
                    Metric::ChildrenSucceeded
                } else {
                    Metric::ChildrenFailed
                };
                self.metrics.count_for(&key.schedule_id, metric, 1);
                Ok(Some(ended))
            }
            Err(StoreError::ChildConflict(_)) => Ok(None),
            Err(e) => Err(HandlerFailure::Retry(e.to_string())),
        }
    }

    /// After a child ended: if it was the last, the run ends by the counts.
    async fn after_child(
        &self,
        delivery: &Delivery<'_>,
        stored: &StoredSchedule,
        key: &cronledger_core::RunKey,
        ended: Option<Child>,
    ) -> Result<(), HandlerFailure> {
        if ended.is_none() {
            return Ok(());
        }
        let parent = self
            .store
            .get_run(key)
            .await
            .map_err(|e| HandlerFailure::Retry(e.to_string()))?;
        if waits_for_children(&parent) && parent.children.is_some_and(|c| c.all_ended()) {
            return self.finish_parent(delivery, stored, &parent).await;
        }
        Ok(())
    }

    /// Every child ended: the run (or its step) ends SUCCESS when all succeeded,
    /// PARTIAL_SUCCESS within `max_failed_children`, FAILED otherwise. Conditioned on the
    /// run's epoch: of the workers that end the last children at once, one writes it.
    pub(super) async fn finish_parent(
        &self,
        delivery: &Delivery<'_>,
        stored: &StoredSchedule,
        parent: &Run,
    ) -> Result<(), HandlerFailure> {
        let Some(counts) = parent.children else {
            return Ok(());
        };
        let job = job_of_run(self.store.as_ref(), stored, parent, &self.pinned)
            .await
            .map_err(|e| HandlerFailure::Retry(e.to_string()))?;
        let work = Work::of(&job, &stored.spec, parent);
        let result = RunResult {
            count: parent.result.as_ref().and_then(|r| r.count),
            message: Some(format!(
                "children: {} succeeded, {} failed of {}",
                counts.succeeded, counts.failed, counts.total
            )),
            ..RunResult::default()
        };
        let outcome: JobOutcome =
            match children::outcome(&counts, stored.spec.max_failed_children.as_ref()) {
                ChildrenOutcome::Success => Ok(JobSuccess {
                    result,
                    ..JobSuccess::default()
                }),
                ChildrenOutcome::PartialSuccess => Ok(JobSuccess {
                    partial: true,
                    result,
                    ..JobSuccess::default()
                }),
                ChildrenOutcome::Failed => Err(JobFailure::permanent(
                    CHILDREN_FAILED,
                    format!(
                        "{} of {} children failed (max_failed_children: {})",
                        counts.failed,
                        counts.total,
                        stored
                            .spec
                            .max_failed_children
                            .map_or("none".to_string(), |b| serde_json::to_string(&b)
                                .unwrap_or_default())
                    ),
                )),
            };
        // The run's end belongs to its children's messages: never dead-letter one for it.
        match self.record(delivery, stored, parent, &work, outcome).await {
            Err(HandlerFailure::Permanent { .. }) => Ok(()),
            other => other,
        }
    }
}
