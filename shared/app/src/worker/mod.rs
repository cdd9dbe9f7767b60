//! The worker: takes a run from its lane, runs the job once per attempt, records the outcome.
//!
//! At-least-once delivery becomes effectively-once execution through the ledger: a conditional
//! PENDING/QUEUED -> RUNNING opens a new attempt under a new lease epoch, every later write is
//! conditioned on that epoch, and a window whose idempotency key already succeeded is not run
//! again. Duplicate deliveries of a run that is running under a live lease, or finished, are
//! acknowledged without touching the job.
//!
//! One delivery goes through four rooms: [`read`] finds the run and its schedule,
//! [`admission`] decides whether it starts (or ends unrun, parks, waits), [`attempt`] runs the
//! job under a lease with heartbeats, and [`settle`] writes what happened and hands the
//! message back to SQS.

mod admission;
mod attempt;
mod children;
mod outcome;
mod read;
mod settle;
mod steps;

pub use children::{waits_for_children, CHILDREN_OWNER};
pub use steps::HANDOVER_OWNER;

use std::sync::Arc;

use cronledger_aws::lanes::{
    process_batch, BatchReport, HandlerFailure, MessageOutcome, SqsRecord,
};
use cronledger_aws::{HealthStore, LaneMessage, LaneQueue, LedgerStore, StoreError};
use cronledger_core::{Lane, Reason, Run, Span, StartWait};
use cronledger_ledger::ledger::{LeaseGrant, Opening, RunChange, Transition};

use crate::alerting::Alerter;
use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::faults::{CrashPoint, Faults};
use crate::jobs::{JobFailure, JobTargets};
use crate::kill_switch::KillSwitchCheck;
use crate::metrics::{Metric, Metrics};
use crate::pinned::{job_of_run, PinnedJobs};
use crate::runs::ScheduleCache;

use admission::{already_done, Admission};
use attempt::{AttemptEnd, Guarded};
use settle::Unrun;
use steps::Work;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Who holds leases taken by this worker (e.g. the Lambda request id).
    pub owner: String,
    /// How long a lease lasts without a heartbeat.
    pub lease: Span,
    /// How often a running job renews its lease and its message's visibility.
    pub heartbeat_every: Span,
    pub backoff: Backoff,
    /// How long a message met by the kill switch stays hidden before it may come back (in
    /// AWS the event source is disabled too, so it stays in its lane until the release).
    pub kill_switch_hide: Span,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            owner: "worker".to_string(),
            lease: Span::seconds(60),
            heartbeat_every: Span::seconds(20),
            backoff: Backoff::default(),
            kill_switch_hide: Span::seconds(60),
        }
    }
}

/// Reads of the run before an attempt starts, when the run keeps moving under the worker.
const START_TRIES: u32 = 3;

/// One delivery of a message, as the SQS event source hands it over.
#[derive(Debug, Clone)]
pub struct Delivery<'a> {
    pub message: LaneMessage,
    pub record: &'a SqsRecord,
}

pub struct Worker {
    store: Arc<dyn LedgerStore>,
    lanes: Arc<dyn LaneQueue>,
    jobs: JobTargets,
    clock: Arc<dyn Clock>,
    config: WorkerConfig,
    schedules: ScheduleCache,
    faults: Option<Arc<dyn Faults>>,
    kill_switch: Option<Arc<KillSwitchCheck>>,
    /// Jobs of past schedule versions, for runs created under them.
    pinned: PinnedJobs,
    metrics: Metrics,
    /// Where the alerts a run's end raises go; `None`: they are not raised (tests).
    alerts: Option<Arc<Alerter>>,
    /// Where each run's outcome is counted for its schedule's health; `None`: not counted.
    health: Option<Arc<dyn HealthStore>>,
}

impl Worker {
    pub fn new(
        store: Arc<dyn LedgerStore>,
        lanes: Arc<dyn LaneQueue>,
        jobs: JobTargets,
        clock: Arc<dyn Clock>,
        config: WorkerConfig,
    ) -> Worker {
        Worker {
            store,
            lanes,
            jobs,
            clock,
            config,
            schedules: ScheduleCache::default(),
            faults: None,
            kill_switch: None,
            pinned: PinnedJobs::default(),
            metrics: Metrics::new(),
            alerts: None,
            health: None,
        }
    }

    /// Counts each ended run's outcome on its schedule's day counters (one UpdateItem a
    /// run: what its health's success rate and freshness are computed from).
    pub fn with_health(mut self, health: Arc<dyn HealthStore>) -> Worker {
        self.health = Some(health);
        self
    }

    /// Raises the alerts runs' ends call for (failures in a row, recovery, pause on
    /// failure, missed deadlines) through `alerter`.
    pub fn with_alerts(mut self, alerter: Arc<Alerter>) -> Worker {
        self.alerts = Some(alerter);
        self
    }

    /// Checks the kill switch before every start: while it is on, no attempt starts and
    /// every message goes back to its lane untouched.
    pub fn with_kill_switch(mut self, check: Arc<KillSwitchCheck>) -> Worker {
        self.kill_switch = Some(check);
        self
    }

    pub fn with_faults(mut self, faults: Arc<dyn Faults>) -> Worker {
        self.faults = Some(faults);
        self
    }

    /// [`Self::with_kill_switch`] when there is a check.
    pub fn with_kill_switch_opt(self, check: Option<Arc<KillSwitchCheck>>) -> Worker {
        match check {
            Some(check) => self.with_kill_switch(check),
            None => self,
        }
    }

    /// Whether the kill switch is on now (see [`Self::with_kill_switch`]): what an event
    /// source asks before it takes messages for this worker.
    pub async fn kill_switch_engaged(&self) -> bool {
        match &self.kill_switch {
            Some(check) => check.engaged(self.clock.now()).await,
            None => false,
        }
    }

    /// The metrics collected so far (the function flushes them after each batch).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// What it is wired with (see [`crate::wiring`]).
    pub fn features(&self) -> std::collections::BTreeSet<crate::wiring::Feature> {
        let health = (crate::wiring::Feature::Health, self.health.is_some());
        let kill_switch = self.kill_switch.is_some();
        crate::wiring::features_of(&self.metrics, kill_switch, self.alerts.as_ref(), &[health])
    }

    /// Handles one SQS batch of one lane, its messages concurrently; the report becomes the
    /// partial batch response.
    pub async fn handle_batch(&self, lane: Lane, records: &[SqsRecord]) -> BatchReport {
        self.handle_invocation(lane, records, None, &|_, _| {})
            .await
    }

    /// [`Self::handle_batch`] for one invocation: its request id goes on every log line about
    /// the batch's messages, and `done` hears of each message as soon as it is finished (the
    /// simulator keeps its virtual time per message).
    pub async fn handle_invocation(
        &self,
        lane: Lane,
        records: &[SqsRecord],
        request_id: Option<&str>,
        done: &(dyn Fn(&SqsRecord, &MessageOutcome) + Sync),
    ) -> BatchReport {
        process_batch(
            lane,
            records,
            self.lanes.as_ref(),
            request_id,
            |message, record| async move {
                self.handle_delivery(&Delivery { message, record }).await
            },
            done,
        )
        .await
    }

    async fn handle_delivery(&self, delivery: &Delivery<'_>) -> Result<(), HandlerFailure> {
        let key = &delivery.message.run;
        if self.kill_switch_engaged().await {
            // Nothing is written: the run waits as it is, and is judged as a late start
            // (grace, misfire policy) when the switch is released.
            self.hide(delivery, self.config.kill_switch_hide.as_std())
                .await;
            self.metrics
                .count_for(&key.schedule_id, Metric::DeliveriesHeldByKillSwitch, 1);
            return Err(HandlerFailure::Retry(
                "KILL_SWITCH_ENGAGED: no attempt starts; the message waits in its lane".into(),
            ));
        }
        if let Some(child) = delivery.message.child {
            return self.handle_child(delivery, child).await;
        }
        let with_recent = self.overlap_likely(key, delivery.message.lane);
        let (mut seen, stored) = self.look_with_schedule(key, with_recent).await?;
        let schedule = self
            .schedules
            .get(&stored)
            .map_err(|e| HandlerFailure::Permanent {
                code: e.code.to_string(),
                detail: e.message,
            })?;
        // The start is conditioned on the status read; when the run moved in between (the
        // ticker marked it QUEUED just after sending, or another worker started it), look
        // again rather than give up: acknowledging would drop the only message of the run.
        let mut tries = 0;
        let (started, now, job) = loop {
            tries += 1;
            let now = self.clock.now();
            let run = &seen.run;
            let lane = delivery.message.lane;
            let event = match self.admit(&seen, &stored, &schedule, lane, now).await {
                Ok(Admission::Start(event)) => event,
                Ok(Admission::Ack(why)) => {
                    tracing::debug!(status = %run.status, why, "acknowledged without running");
                    return Ok(());
                }
                Ok(Admission::Skip(reason)) => {
                    return self.end_unrun(run, &stored, Unrun::Skip(reason), now).await
                }
                Ok(Admission::GiveUp(reason)) => {
                    return self.end_unrun(run, &stored, Unrun::Fail(reason), now).await
                }
                Ok(Admission::Hold(reason)) => {
                    return self.end_unrun(run, &stored, Unrun::Hold(reason), now).await
                }
                Ok(Admission::Coalesce { into, promote }) => {
                    self.end_unrun(run, &stored, Unrun::Coalesce(into), now)
                        .await?;
                    if let Some(latest) = promote {
                        self.promote(&latest, now).await;
                    }
                    return Ok(());
                }
                Ok(Admission::WaitBehind) => return self.wait_behind(run, &stored, now).await,
                Ok(Admission::AwaitPlan) => return self.await_plan(run, now).await,
                Ok(Admission::WaitResume(reason)) => {
                    return self.wait_resume(run, reason, now).await
                }
                Ok(Admission::OutcomeUnknown(reason)) => {
                    return self.hold_unknown_outcome(run, &stored, reason, now).await
                }
                Err(e) => return Err(HandlerFailure::Retry(e.to_string())),
            };
            // A run between steps is its window's run going on, not another run of it.
            let going_on = event == Opening::StartStep;
            if let Some(reason) = already_done(&seen).filter(|_| !going_on) {
                return self.end_unrun(run, &stored, Unrun::Skip(reason), now).await;
            }
            // The job of the run's own version (a retry after an edit does what the first
            // attempt did), known before the attempt opens; read only for a run that starts
            // and whose version is not the stored one (then cached).
            let job = match job_of_run(self.store.as_ref(), &stored, run, &self.pinned).await {
                Ok(job) => job,
                Err(e @ StoreError::VersionNotFound { .. }) => {
                    return Err(HandlerFailure::Permanent {
                        code: e.code().into(),
                        detail: e.to_string(),
                    })
                }
                Err(e) => return Err(HandlerFailure::Retry(e.to_string())),
            };
            let opening = Transition::Open {
                event,
                lease: LeaseGrant::new(&self.config.owner, now + self.config.lease.as_delta()),
                steps: steps::opening(&job, run, now),
            };
            let change = RunChange::new(run.status, run.lease_epoch, now, opening);
            match self.store.transition_run(key, &change).await {
                Ok(started) => break (started, now, job),
                Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. })
                    if tries < START_TRIES =>
                {
                    seen = self.look(key).await?;
                }
                Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => {
                    return Err(HandlerFailure::Retry(format!(
                        "run {key} kept changing while starting"
                    )));
                }
                Err(e) => return Err(HandlerFailure::Retry(e.to_string())),
            }
        };
        tracing::Span::current().record("attempt", started.attempts);
        let wait = StartWait::of(&started, now);
        match wait {
            StartWait::Scheduled { ms } => {
                tracing::debug!(
                    epoch = started.lease_epoch,
                    start_delay_ms = ms,
                    "run started"
                )
            }
            StartWait::Released { ms } => tracing::debug!(
                epoch = started.lease_epoch,
                release_delay_ms = ms,
                trigger = %started.trigger,
                "run started"
            ),
        }
        self.metrics
            .count_for(&key.schedule_id, Metric::RunsStarted, 1);
        // The first attempt only: a retry's backoff is not start latency.
        match wait {
            StartWait::Scheduled { ms } if started.attempts == 1 => {
                self.metrics
                    .put_for(&key.schedule_id, Metric::StartDelay, ms as f64)
            }
            // Catch-up, backfill and operators' runs: one figure per function, no schedule
            // property (they come in bursts, by design).
            StartWait::Released { ms } if started.attempts == 1 => {
                self.metrics.put(Metric::ReleaseDelay, ms as f64)
            }
            _ => {}
        }
        if self.crashes(CrashPoint::MidJob, &started) {
            // The process "dies": no outcome, the lease runs out, the message comes back.
            return Err(HandlerFailure::Retry("injected crash mid-job".into()));
        }
        let work = Work::of(&job, &stored.spec, &started);
        if let Some(step) = &work.step {
            tracing::Span::current().record("step", step.name.as_str());
        }
        let step_index = work.step.as_ref().map_or(0, |s| s.index as u32);
        if started
            .children
            .is_some_and(|c| c.failed > 0 && c.step == step_index)
        {
            // An operator's retry of a run whose children failed: only those run again.
            return self
                .reopen_failed_children(delivery, &stored, &started)
                .await;
        }
        let approved_affected = match work.target.guard() {
            None => None,
            Some(guard) => match self
                .guard(
                    &schedule,
                    &work,
                    &started,
                    delivery.message.lane,
                    guard.max_affected,
                )
                .await
            {
                Guarded::Proceed(affected) => Some(affected),
                Guarded::Hold(report) => {
                    return self
                        .hold_over_limit(&started, &stored, &report, guard.max_affected)
                        .await
                }
                Guarded::Fail(failure) => {
                    return self
                        .record(delivery, &stored, &started, &work, Err(failure))
                        .await
                }
            },
        };
        let ended = self
            .execute(delivery, &schedule, &work, &started, approved_affected)
            .await;
        if self.crashes(CrashPoint::BeforeCompletionWrite, &started) {
            return Err(HandlerFailure::Retry(
                "injected crash before the completion write".into(),
            ));
        }
        let outcome = match ended {
            AttemptEnd::Finished(outcome) => outcome,
            AttemptEnd::LeaseLost => {
                tracing::warn!("lease lost while running; this worker writes nothing");
                return Ok(());
            }
            // The job may still be acting: only an idempotent one is tried again on its own.
            AttemptEnd::OutranMaxRuntime if !schedule.spec.idempotent => {
                let now = self.clock.now();
                return self
                    .hold_unknown_outcome(&started, &stored, Reason::MaxRuntimeExceeded, now)
                    .await;
            }
            AttemptEnd::OutranMaxRuntime => Err(JobFailure::retryable(
                "MAX_RUNTIME_EXCEEDED",
                format!("the attempt ran past max_runtime {}", work.max_runtime),
            )),
        };
        let outcome = if work.ends_the_run() {
            self.with_expected(&schedule, &started, outcome).await
        } else {
            outcome
        };
        self.record(delivery, &stored, &started, &work, outcome)
            .await
    }

    pub(super) fn crashes(&self, point: CrashPoint, run: &Run) -> bool {
        self.faults
            .as_ref()
            .is_some_and(|f| f.crash_at(point, &run.key, run.attempts))
    }
}
