//! The worker: takes a run from its lane, runs the job once per attempt, records the outcome.
//!
//! At-least-once delivery becomes effectively-once execution through the ledger: a conditional
//! PENDING/QUEUED -> RUNNING opens a new attempt under a new lease epoch, every later write is
//! conditioned on that epoch, and a window whose idempotency key already succeeded is not run
//! again. Duplicate deliveries of a run that is running under a live lease, or finished, are
//! acknowledged without touching the job.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use chrono::{DateTime, SubsecRound, Utc};
use cronledger_aws::lanes::{process_batch, BatchReport, HandlerFailure, SqsRecord};
use cronledger_aws::ledger::{RecentRuns, RunChange, StoredSchedule};
use cronledger_aws::{LaneMessage, LaneQueue, LedgerStore, StoreError};
use cronledger_core::run::RunResult;
use cronledger_core::{
    late_start, planned_with_its_gap, Lane, LateStart, OverlapPolicy, Reason, Run, RunEvent,
    RunKey, RunStatus, Schedule, Span, Trigger,
};

use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::faults::{CrashPoint, Faults};
use crate::jobs::{JobContext, JobFailure, JobOutcome, JobTargets};
use crate::metrics::{Metrics, Unit};
use crate::runs::{send_run, ScheduleCache};
use crate::ticker::{active_runs_of, is_live, live_active_before, RECENT_RUNS};

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Who holds leases taken by this worker (e.g. the Lambda request id).
    pub owner: String,
    /// How long a lease lasts without a heartbeat.
    pub lease: Span,
    /// How often a running job renews its lease and its message's visibility.
    pub heartbeat_every: Span,
    pub backoff: Backoff,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            owner: "worker".to_string(),
            lease: Span::seconds(60),
            heartbeat_every: Span::seconds(20),
            backoff: Backoff::default(),
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
    metrics: Metrics,
}

/// How a run that will not execute ends.
#[derive(Debug, Clone, Copy)]
enum Unrun {
    Skip(Reason),
    Hold(Reason),
    Coalesce(DateTime<Utc>),
}

/// What a worker decided about a delivery before running anything.
enum Admission {
    /// Acknowledge without running: duplicate, finished, or owned by someone else.
    Ack(&'static str),
    /// QUEUE_NEW behind an earlier active run: park the run PENDING (QUEUED_BEHIND) and let
    /// the finishing run release it, rather than bounce the message until SQS dead-letters it.
    WaitBehind,
    /// A late CATCH_UP_ALL run past the immediate tier, inside a backlog: park it PENDING
    /// (LATE_AWAITING_PLAN) for the reconciler to plan with the rest of its gap (cap,
    /// catch-up lanes, pacing, approvals, backfill proposal).
    AwaitPlan,
    /// End the run without executing it.
    Skip(Reason),
    /// Hold the run for an operator's approval (MANUAL_REQUIRED) without executing it.
    Hold(Reason),
    /// Fold the run into a later window's (COALESCED), without executing it; and move that
    /// window's run, when it is waiting late in the same backlog, to the correction lane.
    Coalesce {
        into: DateTime<Utc>,
        promote: Option<Box<Run>>,
    },
    Start(RunEvent),
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
            metrics: Metrics::new(),
        }
    }

    pub fn with_faults(mut self, faults: Arc<dyn Faults>) -> Worker {
        self.faults = Some(faults);
        self
    }

    /// The metrics collected so far (the function flushes them after each batch).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Handles one SQS batch of one lane; the report becomes the partial batch response.
    pub async fn handle_batch(&self, lane: Lane, records: &[SqsRecord]) -> BatchReport {
        process_batch(lane, records, self.lanes.as_ref(), |message, record| {
            self.handle(Delivery { message, record })
        })
        .await
    }

    /// Handles one delivery inside a span that gets the attempt once it is known; the batch's
    /// span around it already names the schedule and the run, so every log line about the run
    /// carries all three.
    async fn handle(&self, delivery: Delivery<'_>) -> Result<(), HandlerFailure> {
        let span = tracing::info_span!("attempt", attempt = tracing::field::Empty);
        self.handle_delivery(&delivery).instrument(span).await
    }

    async fn handle_delivery(&self, delivery: &Delivery<'_>) -> Result<(), HandlerFailure> {
        let key = &delivery.message.run;
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
        let (started, now) = loop {
            tries += 1;
            let now = self.clock.now();
            let run = &seen.run;
            let lane = delivery.message.lane;
            let event = match self.admit(&seen, &schedule, lane, now).await {
                Ok(Admission::Start(event)) => event,
                Ok(Admission::Ack(why)) => {
                    tracing::info!(status = %run.status, why, "acknowledged without running");
                    return Ok(());
                }
                Ok(Admission::Skip(reason)) => {
                    return self.end_unrun(run, &stored, Unrun::Skip(reason), now).await
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
                Err(e) => return Err(HandlerFailure::Retry(e.to_string())),
            };
            if let Some(reason) = already_done(&seen) {
                return self.end_unrun(run, &stored, Unrun::Skip(reason), now).await;
            }
            let change = RunChange::new(event, run.status, run.lease_epoch, now)
                .with_lease(&self.config.owner, now + self.config.lease.as_delta());
            match self.store.transition_run(key, &change).await {
                Ok(started) => break (started, now),
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
        let start_delay_ms = (now - key.scheduled_for).num_milliseconds();
        tracing::info!(epoch = started.lease_epoch, start_delay_ms, "run started");
        self.metrics.count_for(&key.schedule_id, "RunsStarted", 1);
        if started.attempts == 1 {
            // The delay of the first attempt only: a retry's backoff is not start latency.
            self.metrics.put_for(
                &key.schedule_id,
                "StartDelay",
                Unit::Milliseconds,
                start_delay_ms.max(0) as f64,
            );
        }
        if self.crashes(CrashPoint::MidJob, &started) {
            // The process "dies": no outcome, the lease runs out, the message comes back.
            return Err(HandlerFailure::Retry("injected crash mid-job".into()));
        }
        let outcome = self.execute(delivery, &stored, &schedule, &started).await;
        if self.crashes(CrashPoint::BeforeCompletionWrite, &started) {
            return Err(HandlerFailure::Retry(
                "injected crash before the completion write".into(),
            ));
        }
        let Some(outcome) = outcome else {
            tracing::warn!("lease lost while running; this worker writes nothing");
            return Ok(());
        };
        self.record(delivery, &stored, &started, outcome).await
    }

    /// Whether the admission will want the schedule's newest runs (the overlap check): a
    /// live lane (catch-up lanes carry no live work) and a policy other than ALLOW as this
    /// process last saw the schedule (unknown: the default, SKIP_NEW). Only a hint: when it
    /// is wrong, the admission reads what it needs itself.
    fn overlap_likely(&self, key: &RunKey, lane: Lane) -> bool {
        if matches!(lane, Lane::Correction | Lane::Backfill) {
            return false;
        }
        self.schedules
            .last_seen(&key.schedule_id)
            .is_none_or(|s| s.spec.overlap != OverlapPolicy::Allow)
    }

    /// The schedule and the run with what the admission checks need to know about its
    /// neighbours. `with_recent`: one query reads the schedule with its newest runs, which
    /// for a live run also hold its instant, and serves the run, ALREADY_DONE and the overlap
    /// check. Otherwise (or when that page does not reach the run, or holds an item that
    /// does not decode) the schedule and the run's instant are read side by side.
    async fn look_with_schedule(
        &self,
        key: &RunKey,
        with_recent: bool,
    ) -> Result<(Sighting, StoredSchedule), HandlerFailure> {
        let unknown = |id: String| HandlerFailure::Permanent {
            code: "SCHEDULE_NOT_FOUND".into(),
            detail: format!("run {key} belongs to unknown schedule {id}"),
        };
        let retry = |e: StoreError| HandlerFailure::Retry(e.to_string());
        if with_recent {
            match self
                .store
                .schedule_with_recent_runs(&key.schedule_id, RECENT_RUNS, Some(key.scheduled_for))
                .await
            {
                Ok((stored, recent)) => {
                    let seen =
                        if holds_instant(recent.complete, recent.oldest_read, key.scheduled_for) {
                            let same_instant = recent
                                .runs
                                .iter()
                                .filter(|r| r.key.scheduled_for == key.scheduled_for)
                                .cloned()
                                .collect();
                            Sighting::of(key, same_instant, Some(recent))?
                        } else {
                            self.look(key).await?
                        };
                    return Ok((seen, stored));
                }
                Err(StoreError::ScheduleNotFound(id)) => return Err(unknown(id)),
                Err(e) if e.code() == "STORE_MALFORMED_ITEM" => {}
                Err(e) => return Err(retry(e)),
            }
        }
        let (seen, stored) =
            tokio::join!(self.look(key), self.store.get_schedule(&key.schedule_id));
        match stored {
            Ok(stored) => Ok((seen?, stored)),
            Err(StoreError::ScheduleNotFound(id)) => Err(unknown(id)),
            Err(e) => Err(retry(e)),
        }
    }

    /// Reads the run with the other runs at its instant (ALREADY_DONE looks at them) in one
    /// query.
    async fn look(&self, key: &RunKey) -> Result<Sighting, HandlerFailure> {
        let retry = |e: StoreError| HandlerFailure::Retry(e.to_string());
        let at = key.scheduled_for;
        match self.store.runs_between(&key.schedule_id, at, at).await {
            Ok(same_instant) => Sighting::of(key, same_instant, None),
            // A neighbour that does not decode must not stop this run: read it alone.
            Err(e) if e.code() == "STORE_MALFORMED_ITEM" => Ok(Sighting {
                run: self.load_run(key).await?,
                same_instant: Vec::new(),
                recent: None,
            }),
            Err(e) => Err(retry(e)),
        }
    }

    async fn load_run(&self, key: &RunKey) -> Result<Run, HandlerFailure> {
        match self.store.get_run(key).await {
            Ok(run) => Ok(run),
            Err(StoreError::RunNotFound(_)) => Err(run_not_found(key)),
            Err(e) if e.code() == "STORE_MALFORMED_ITEM" => Err(HandlerFailure::Permanent {
                code: e.code().into(),
                detail: e.to_string(),
            }),
            Err(e) => Err(HandlerFailure::Retry(e.to_string())),
        }
    }

    /// Decides whether a delivery starts an attempt.
    async fn admit(
        &self,
        seen: &Sighting,
        schedule: &Schedule,
        lane: Lane,
        now: DateTime<Utc>,
    ) -> Result<Admission, StoreError> {
        let run = &seen.run;
        let lease_live = run.lease.as_ref().is_some_and(|l| l.until > now);
        let event = match run.status {
            RunStatus::Pending | RunStatus::Queued | RunStatus::RetryPending => RunEvent::Start,
            RunStatus::Running if lease_live => {
                return Ok(Admission::Ack("running under a live lease"))
            }
            RunStatus::Running => RunEvent::Reclaim,
            _ => return Ok(Admission::Ack("not runnable")),
        };
        if run.trigger == Trigger::CatchUp
            && run.status == RunStatus::Pending
            && matches!(lane, Lane::Realtime | Lane::Normal)
        {
            // A live run the reconciler planned into a catch-up lane, met by a stray copy of
            // its live message: the throttled release sends it, not this lane.
            return Ok(Admission::Ack("a catch-up run waiting for its release"));
        }
        if judged_on_lateness(run, lane) {
            let at = run.key.scheduled_for;
            if planned_with_its_gap(schedule, at, now) && self.in_backlog(schedule, run).await? {
                return Ok(Admission::AwaitPlan);
            }
            match late_start(schedule, at, now) {
                LateStart::Run => {}
                LateStart::Skip { reason } => return Ok(Admission::Skip(reason)),
                LateStart::Hold { reason } => return Ok(Admission::Hold(reason)),
                LateStart::Coalesce { into } => {
                    let promote = self.waiting_in_backlog(schedule, into).await?;
                    return Ok(Admission::Coalesce { into, promote });
                }
            }
        }
        // Catch-up and backfill runs are paced by their release budgets, not the overlap policy.
        if schedule.spec.overlap == OverlapPolicy::Allow
            || event == RunEvent::Reclaim
            || !is_live(run.trigger)
        {
            return Ok(Admission::Start(event));
        }
        // The ticker decided overlap when it wrote the run; check again, things moved since.
        let active = match &seen.recent {
            Some(recent) => live_active_before(self.store.as_ref(), schedule.id(), recent).await?,
            None => active_runs_of(self.store.as_ref(), schedule.id()).await?,
        };
        let others: Vec<_> = active.into_iter().filter(|r| r.key != run.key).collect();
        let running_other = others.iter().any(|r| r.status == RunStatus::Running);
        let earlier_waiting = others
            .iter()
            .any(|r| r.key.scheduled_for < run.key.scheduled_for);
        Ok(match schedule.spec.overlap {
            OverlapPolicy::SkipNew if running_other => Admission::Skip(Reason::Overlap),
            OverlapPolicy::QueueNew if running_other || earlier_waiting => Admission::WaitBehind,
            _ => Admission::Start(event),
        })
    }

    /// The run of `into` (the latest window past its grace that a late run folds into under
    /// RUN_ONCE) when it is still waiting for its first start in a live lane: the lane is
    /// backed up (a worker outage, a backlog), so that run would arrive late too and fold
    /// into the next, and in a lasting backlog nothing would ever run. Moving it to the
    /// correction lane (its own queue and workers) makes the window that the coalesced runs
    /// point to run now, once. `None` when that window will run anyway: it has no run yet
    /// (the reconciler fires it as its gap's latest), or its run started, was moved already,
    /// waits behind an earlier one by policy (QUEUE_NEW) or is a catch-up run.
    async fn waiting_in_backlog(
        &self,
        schedule: &Schedule,
        into: DateTime<Utc>,
    ) -> Result<Option<Box<Run>>, StoreError> {
        let latest = self.waiting_run_at(schedule, into).await?;
        Ok(latest
            .filter(|r| r.lane != Some(Lane::Correction))
            .map(Box::new))
    }

    /// The live run of `schedule`'s window at `at`, when it still waits for its first start
    /// (see [`waiting_first_start`]).
    async fn waiting_run_at(
        &self,
        schedule: &Schedule,
        at: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        match self
            .store
            .get_run(&RunKey::expected(schedule.id(), at))
            .await
        {
            Ok(run) if waiting_first_start(&run) => Ok(Some(run)),
            Ok(_) | Err(StoreError::RunNotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether a late run is part of a backlog: the run of the window before or after it is
    /// a live run waiting for its first start too (or parked already). A lone late run (fired
    /// just before a scheduler outage, its neighbours missing) opens a gap the reconciler
    /// plans from the missing windows; it is judged alone, as the oldest window of that gap.
    async fn in_backlog(&self, schedule: &Schedule, run: &Run) -> Result<bool, StoreError> {
        let at = run.key.scheduled_for;
        let timing = schedule.timing();
        for neighbour in [timing.prev_before(at), timing.next_after(at)]
            .into_iter()
            .flatten()
        {
            if self.waiting_run_at(schedule, neighbour).await?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Moves a late live run to the correction lane (see [`Self::waiting_in_backlog`]): first
    /// claims the move (conditional on the lane it was read in, so of the late runs that all
    /// find it waiting, handled at once by several workers, one moves it), then sends its
    /// message there. Its message in the live lane stays: whichever arrives first starts the
    /// run, the other finds it started or ended. Best effort: if the send fails the run still
    /// has that one.
    async fn promote(&self, latest: &Run, now: DateTime<Utc>) {
        let mut claim = RunChange::new(RunEvent::Enqueue, latest.status, latest.lease_epoch, now);
        claim.lane = Some(Lane::Correction);
        claim.lane_was = latest.lane;
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
                tracing::info!(run = %latest.key, "late run moved ahead to the correction lane");
                self.metrics
                    .count_for(&latest.key.schedule_id, "RunsMovedToCorrection", 1);
            }
            Err(e) => tracing::warn!(run = %latest.key, error = %e, "could not move the late run"),
        }
    }

    /// Ends a run that will not execute (skipped, held for approval or coalesced).
    async fn end_unrun(
        &self,
        run: &Run,
        stored: &StoredSchedule,
        unrun: Unrun,
        now: DateTime<Utc>,
    ) -> Result<(), HandlerFailure> {
        let (event, reason, metric) = match unrun {
            Unrun::Skip(reason) => (RunEvent::Skip, reason, "RunsSkipped"),
            Unrun::Hold(reason) => (RunEvent::HoldForApproval, reason, "RunsHeldForApproval"),
            Unrun::Coalesce(_) => (RunEvent::Coalesce, Reason::Coalesced, "RunsCoalesced"),
        };
        let mut change = RunChange::new(event, run.status, run.lease_epoch, now);
        change.reason = Some(reason);
        if let Unrun::Coalesce(into) = unrun {
            change.coalesced_into = Some(into);
        }
        match self.store.transition_run(&run.key, &change).await {
            Ok(ended) => {
                let late_ms = (now - run.key.scheduled_for).num_milliseconds();
                tracing::info!(%reason, status = %ended.status, late_ms, "run not executed");
                self.metrics.count_for(&run.key.schedule_id, metric, 1);
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
    async fn wait_behind(
        &self,
        run: &Run,
        stored: &StoredSchedule,
        now: DateTime<Utc>,
    ) -> Result<(), HandlerFailure> {
        self.park(run, RunEvent::WaitBehind, Reason::QueuedBehind, now)
            .await?;
        tracing::info!("waiting behind an earlier run (QUEUE_NEW)");
        // The blocker may have finished between our check and our write, and released
        // nothing: look once more, so the run cannot be left waiting on nobody.
        let blocked = active_runs_of(self.store.as_ref(), &run.key.schedule_id)
            .await
            .map(|others| {
                others
                    .iter()
                    .any(|r| r.key != run.key && r.key.scheduled_for < run.key.scheduled_for)
            })
            .unwrap_or(true);
        if !blocked {
            self.release_next_queued(stored, now).await;
        }
        Ok(())
    }

    /// Parks a late run for the reconciler's plan of its gap and acknowledges its message.
    async fn await_plan(&self, run: &Run, now: DateTime<Utc>) -> Result<(), HandlerFailure> {
        self.park(run, RunEvent::AwaitPlan, Reason::LateAwaitingPlan, now)
            .await?;
        let late_ms = (now - run.key.scheduled_for).num_milliseconds();
        tracing::info!(late_ms, "late: waits for the reconciler to plan its gap");
        self.metrics
            .count_for(&run.key.schedule_id, "RunsAwaitingPlan", 1);
        Ok(())
    }

    /// Leaves a run PENDING with `reason` (waiting on something other than its message).
    /// When the run changed since it was read, the message comes back to look again.
    async fn park(
        &self,
        run: &Run,
        event: RunEvent,
        reason: Reason,
        now: DateTime<Utc>,
    ) -> Result<(), HandlerFailure> {
        let mut change = RunChange::new(event, run.status, run.lease_epoch, now);
        change.reason = Some(reason);
        match self.store.transition_run(&run.key, &change).await {
            Ok(_) => Ok(()),
            Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => Err(
                HandlerFailure::Retry("the run changed while parking it; look again".into()),
            ),
            Err(e) => Err(HandlerFailure::Retry(e.to_string())),
        }
    }

    /// Runs the job with heartbeats and the runtime limit. `None` if the lease was lost.
    async fn execute(
        &self,
        delivery: &Delivery<'_>,
        stored: &StoredSchedule,
        schedule: &Schedule,
        run: &Run,
    ) -> Option<JobOutcome> {
        let now = self.clock.now();
        let ctx = JobContext {
            run: run.key.clone(),
            window: run.window,
            business_date: run.business_date,
            idempotency_key: run.idempotency_key.clone(),
            attempt: run.attempts,
            payload: schedule.spec.job.payload().clone(),
            deadline: now + schedule.spec.max_runtime.as_delta(),
        };
        let job = self.jobs.run(&schedule.spec.job, &ctx);
        let limit = tokio::time::sleep(schedule.spec.max_runtime.as_std());
        let heartbeat = self.heartbeat(delivery, run);
        tokio::select! {
            outcome = job => Some(outcome),
            () = limit => Some(Err(JobFailure::retryable(
                "MAX_RUNTIME_EXCEEDED",
                format!("the attempt ran past max_runtime {}", stored.spec.max_runtime),
            ))),
            () = heartbeat => None,
        }
    }

    /// Renews the lease and the message's visibility until the lease is lost (then returns).
    async fn heartbeat(&self, delivery: &Delivery<'_>, run: &Run) {
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

    /// Writes the attempt's outcome under its epoch and tells SQS what to do with the message.
    async fn record(
        &self,
        delivery: &Delivery<'_>,
        stored: &StoredSchedule,
        run: &Run,
        outcome: JobOutcome,
    ) -> Result<(), HandlerFailure> {
        let now = self.clock.now();
        let last_attempt = run.attempts >= stored.spec.max_attempts;
        let (event, reason, result) = match &outcome {
            Ok(s) if s.partial => (RunEvent::SucceedPartially, None, s.result.clone()),
            Ok(s) => (RunEvent::Succeed, None, s.result.clone()),
            Err(f @ JobFailure::Retryable { .. }) if !last_attempt => {
                (RunEvent::FailRetryable, None, failure_result(f))
            }
            Err(f @ JobFailure::Retryable { .. }) => (
                RunEvent::Fail,
                Some(Reason::RetriesExhausted),
                failure_result(f),
            ),
            Err(f @ JobFailure::Permanent { .. }) => (
                RunEvent::Fail,
                Some(Reason::PermanentError),
                failure_result(f),
            ),
        };
        let mut change = RunChange::new(event, RunStatus::Running, run.lease_epoch, now);
        change.reason = reason;
        change.result = Some(result);
        match self.store.transition_run(&run.key, &change).await {
            Ok(done) => {
                let duration_ms = run.started_at.map(|s| (now - s).num_milliseconds());
                tracing::info!(status = %done.status, duration_ms, "attempt recorded");
                self.count_outcome(&run.key.schedule_id, event, duration_ms);
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
                let delay = self.config.backoff.delay(&run.key, run.attempts);
                self.hide(delivery, delay).await;
                Err(HandlerFailure::Retry(format!(
                    "attempt {} failed ({}); retry in {}s",
                    run.attempts,
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

    fn count_outcome(&self, schedule: &str, event: RunEvent, duration_ms: Option<i64>) {
        let name = match event {
            RunEvent::Succeed | RunEvent::SucceedPartially => "RunsSucceeded",
            RunEvent::FailRetryable => "AttemptsRetried",
            _ => "RunsFailed",
        };
        self.metrics.count_for(schedule, name, 1);
        if let Some(ms) = duration_ms {
            self.metrics.put_for(
                schedule,
                "RunDuration",
                Unit::Milliseconds,
                ms.max(0) as f64,
            );
        }
    }

    /// QUEUE_NEW: once a run ends, the oldest run waiting behind it goes to its lane.
    async fn release_next_queued(&self, stored: &StoredSchedule, now: DateTime<Utc>) {
        if stored.spec.overlap != OverlapPolicy::QueueNew {
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
        let lane = next.lane.unwrap_or(stored.spec.priority.live_lane());
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
            Ok(()) => tracing::info!(run = %next.key, "queued run released"),
            Err(e) => {
                tracing::warn!(run = %next.key, error = %e, "release failed; the reconciler will send it")
            }
        }
    }

    async fn hide(&self, delivery: &Delivery<'_>, delay: Duration) {
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

    fn crashes(&self, point: CrashPoint, run: &Run) -> bool {
        self.faults
            .as_ref()
            .is_some_and(|f| f.crash_at(point, &run.key, run.attempts))
    }
}

fn failure_result(f: &JobFailure) -> RunResult {
    RunResult {
        error_code: Some(f.code().to_string()),
        message: Some(f.message().chars().take(1000).collect()),
        ..RunResult::default()
    }
}

/// What the worker read about a delivery's run before deciding whether it starts.
struct Sighting {
    run: Run,
    /// Every run at the run's instant, itself included: runs that can share its idempotency
    /// key share its `scheduled_for`.
    same_instant: Vec<Run>,
    /// The schedule's newest runs still in flight (and those at the run's instant), when the
    /// read that found the run was that one.
    recent: Option<RecentRuns>,
}

impl Sighting {
    fn of(
        key: &RunKey,
        same_instant: Vec<Run>,
        recent: Option<RecentRuns>,
    ) -> Result<Sighting, HandlerFailure> {
        let run = same_instant
            .iter()
            .find(|r| r.key == *key)
            .cloned()
            .ok_or_else(|| run_not_found(key))?;
        Ok(Sighting {
            run,
            same_instant,
            recent,
        })
    }
}

/// A live run still waiting for its first start in a lane (or parked for a plan), not by
/// policy behind an earlier one, not an operator's.
fn waiting_first_start(run: &Run) -> bool {
    run.trigger == Trigger::Scheduled
        && run.attempts == 0
        && matches!(run.status, RunStatus::Pending | RunStatus::Queued)
        && run.reason != Some(Reason::QueuedBehind)
        && run.lane != Some(Lane::Manual)
}

/// Whether a start is held to the schedule's grace period (see [`late_start`]): the first
/// attempt of a live run the ticker fired. Not catch-up or operators' runs (already decided by
/// the planner or a person), not retries, not a run approved onto the manual lane, and not a
/// QUEUE_NEW run that waited behind an earlier one (it waited by policy).
fn judged_on_lateness(run: &Run, lane: Lane) -> bool {
    waiting_first_start(run) && lane != Lane::Manual
}

fn run_not_found(key: &RunKey) -> HandlerFailure {
    HandlerFailure::Permanent {
        code: "RUN_NOT_FOUND".into(),
        detail: format!("no run {key} for this message"),
    }
}

/// A newest-first read that is `complete`, or whose `oldest` run is in an earlier second than
/// `at`, holds every run at `at`. Sort keys are instants as text, and within one second text
/// order is not time order (`…:05.5Z` sorts before `…:05Z`), hence the whole second.
fn holds_instant(complete: bool, oldest: Option<DateTime<Utc>>, at: DateTime<Utc>) -> bool {
    complete || oldest.is_some_and(|oldest| oldest < at.trunc_subsecs(0))
}

/// ALREADY_DONE when another run of the same window (an operator's, say) already succeeded
/// with the same idempotency key.
fn already_done(seen: &Sighting) -> Option<Reason> {
    let run = &seen.run;
    if run.forced {
        // An operator forced this run (`mode=new`): it runs whatever already succeeded.
        return None;
    }
    seen.same_instant
        .iter()
        .any(|r| {
            r.key != run.key && r.idempotency_key == run.idempotency_key && r.status.is_success()
        })
        .then_some(Reason::AlreadyDone)
}

#[cfg(test)]
mod tests {
    use super::holds_instant;
    use chrono::{DateTime, Utc};

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("instant")
    }

    #[test]
    fn a_page_holds_an_instant_only_when_it_reaches_an_earlier_second() {
        let at = t("2026-03-01T10:05:00Z");
        assert!(holds_instant(true, None, at));
        assert!(holds_instant(false, Some(t("2026-03-01T10:04:59Z")), at));
        // More runs at this very instant may be on the next page.
        assert!(!holds_instant(false, Some(at), at));
        assert!(!holds_instant(false, None, at));
        // Same second, earlier in time: `…:00.5Z` sorts before `…:00Z` as text.
        let fractional = t("2026-03-01T10:05:00.700Z");
        assert!(!holds_instant(
            false,
            Some(t("2026-03-01T10:05:00.500Z")),
            fractional
        ));
        assert!(holds_instant(
            false,
            Some(t("2026-03-01T10:04:59.900Z")),
            fractional
        ));
    }
}
