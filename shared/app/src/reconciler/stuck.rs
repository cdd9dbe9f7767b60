//! Stuck runs, from one read of the `active` index. Nothing is re-run blindly: every change
//! is a conditional transition on the status and lease epoch that were read, so a worker
//! that moved the run meanwhile wins and the reconciler leaves it alone.
//!
//! | found | after | becomes |
//! |---|---|---|
//! | PENDING live run, no message (`job_id` absent) | `pending_after` from creation | sent (QUEUED) |
//! | PENDING QUEUE_NEW run with nothing active ahead of it | `pending_after` | sent (QUEUED) |
//! | QUEUED | `queued_after` from queueing (or from its window, if later) | sent again, same message identity, unless a later run of the schedule waits untaken in the same lane and the lane has messages waiting |
//! | RETRY_PENDING | `retry_pending_after` from its last activity | sent again, same message identity, unless a later run of the schedule waits untaken in the same lane and the lane has messages waiting |
//! | RUNNING, lease expired | `stall_grace` past the lease | STALLED (HEARTBEAT_LOST), then resolved |
//! | RUNNING past `max_runtime` | `stall_grace` past it | STALLED (MAX_RUNTIME_EXCEEDED), then resolved |
//! | STALLED (a crash between marking and resolving) | at once | resolved |
//!
//! Resolving a STALLED run: RETRY_PENDING and sent as a new attempt only when the schedule
//! says `idempotent: true` and attempts remain; otherwise MANUAL_REQUIRED with reason
//! WORKER_LOST or MAX_RUNTIME_EXCEEDED (not idempotent: the job may have acted, an operator
//! decides) or RETRIES_EXHAUSTED.
//!
//! PENDING catch-up runs are not stuck: they wait for the throttled release. Nor are late
//! runs parked for the plan of their gap (LATE_AWAITING_PLAN): see [`super::backlog`].
//!
//! A re-send is for a lost message. While the run's lane shows messages waiting and a later
//! run of the same schedule on that lane has not been taken either (a worker outage, a
//! backlog), its message is most likely among them, and a copy every pass would multiply
//! what the workers come back to: the re-send waits. Once a later run of the schedule has
//! been taken (or the lane is empty), the lane has moved past the message: it was lost.
//! The depth alone would not do: a busy lane is never empty, and its lost messages would
//! never be sent again.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use cronledger_aws::StoreError;
use cronledger_core::{Lane, Reason, Run, RunEvent, RunStatus, Trigger};
use cronledger_ledger::ledger::{LeaseGrant, RunChange, StoredSchedule, Transition};

use crate::alerting::Held;
use crate::metrics::Metric;
use crate::runs::{children_of_run, send_children};
use crate::worker::{waits_for_children, HANDOVER_OWNER};
use cronledger_aws::LaneMessage;
use cronledger_core::admission::{decide, Admission, Ask, Candidate, Moment};
use cronledger_core::children::ChildStatus;
use cronledger_core::steps::{handed_over, AttemptBudget};

use super::{lane_of, ReconcileError, ReconcileReport, Reconciler, StuckReport};

/// What to do about one active run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Fine,
    SendPending,
    ReleaseQueuedBehind,
    Resend,
    /// A steps run between two steps whose next step's message never came (lost, or its
    /// worker died before sending it): send it again.
    ResendStep,
    /// A run waiting for its children that has not moved for a while: send the messages
    /// of children that look lost, or, when all ended, one that ends the run.
    WatchChildren,
    Stall(Reason),
    Resolve,
}

/// A run the worker parked because its schedule was stopped (see `RunEvent::WaitResume`).
fn waits_for_resume(run: &Run) -> bool {
    // A steps run stopped between two steps is parked too, whatever its trigger.
    let part_done = run.steps.iter().any(|c| c.attempts > 0);
    (run.trigger != Trigger::Scheduled || part_done)
        && matches!(run.reason, Some(Reason::Paused | Reason::Disabled))
}

/// How long a successor's message must have been visible, untaken, to show its lane backed
/// up: longer than a worker takes to pick up a message from a lane that keeps up.
const SUCCESSOR_WAITING: chrono::TimeDelta = chrono::TimeDelta::minutes(1);

/// Whether a later run of the same schedule waits, never taken, in the same lane, its
/// message visible for a while (`waiting_since` or before): the lane has not reached this
/// run's message either. A successor whose message is not due yet, or only just, proves
/// nothing: the ticker writes runs QUEUED ahead of their fire time, so a minutely schedule
/// nearly always has one.
fn waits_behind_its_successor(run: &Run, active: &[Run], waiting_since: DateTime<Utc>) -> bool {
    active.iter().any(|o| {
        o.key.schedule_id == run.key.schedule_id
            && o.key.scheduled_for > run.key.scheduled_for
            && o.status == RunStatus::Queued
            && o.attempts == 0
            && queued_since(o) <= waiting_since
            && lane_of(o) == lane_of(run)
    })
}

/// Since when a QUEUED run has waited for a worker: its send, or its fire time when sent
/// ahead of it.
fn queued_since(run: &Run) -> DateTime<Utc> {
    run.queued_at
        .unwrap_or(run.created_at)
        .max(run.key.scheduled_for)
}

impl Reconciler {
    pub(super) async fn resolve_stuck(
        &self,
        now: DateTime<Utc>,
        active: &[Run],
        report: &mut ReconcileReport,
    ) {
        let mut schedules: HashMap<String, Option<StoredSchedule>> = HashMap::new();
        let mut backed_up: HashMap<Lane, bool> = HashMap::new();
        for run in active {
            let verdict = self.verdict(run, now, active, &mut schedules).await;
            if verdict == Verdict::Fine {
                continue;
            }
            let mut stuck = StuckReport::default();
            let outcome = if verdict == Verdict::Resend
                && waits_behind_its_successor(run, active, now - SUCCESSOR_WAITING)
                && self.backed_up(lane_of(run), &mut backed_up).await
            {
                // Still a stuck run (the metric and its alarm are how a worker outage shows).
                stuck.resend_deferred += 1;
                Ok(())
            } else {
                self.unstick(run, verdict, now, &mut schedules, &mut stuck)
                    .await
            };
            match outcome {
                Ok(()) => {
                    if stuck != StuckReport::default() {
                        self.metrics
                            .count_for(&run.key.schedule_id, Metric::StuckRuns, 1);
                        let what = if stuck.resend_deferred > 0 {
                            "stuck run left waiting in its backed-up lane"
                        } else {
                            "stuck run resolved"
                        };
                        tracing::warn!(
                            run = %run.key,
                            status = %run.status,
                            verdict = ?verdict,
                            "{what}"
                        );
                    }
                }
                Err(e) => report.error(&format!("stuck run {}", run.key), &e),
            }
            report.stuck.merge(&stuck);
        }
    }

    /// Whether `lane` has messages waiting, asked once per pass and lane. Unknown counts as
    /// not backed up: a duplicate is harmless, a lost message is not.
    async fn backed_up(&self, lane: Lane, seen: &mut HashMap<Lane, bool>) -> bool {
        if let Some(known) = seen.get(&lane) {
            return *known;
        }
        let waiting = match self.signals.visible_backlog(lane).await {
            Ok(n) => n > 0,
            Err(e) => {
                tracing::warn!(%lane, error = %e, "lane backlog unknown; re-sending stuck runs");
                false
            }
        };
        if waiting {
            tracing::info!(%lane, "lane has messages waiting; stuck runs' re-sends wait for it to drain");
        }
        seen.insert(lane, waiting);
        waiting
    }

    async fn verdict(
        &self,
        run: &Run,
        now: DateTime<Utc>,
        active: &[Run],
        schedules: &mut HashMap<String, Option<StoredSchedule>>,
    ) -> Verdict {
        let cfg = &self.config.stuck;
        let older_than = |t: DateTime<Utc>, span: cronledger_core::Span| now - t >= span.as_delta();
        match run.status {
            RunStatus::Pending if run.reason == Some(Reason::QueuedBehind) => {
                // Whatever created it (catch-up and backfill runs included): a run that waits
                // behind another is released here when its blocker ended without releasing it
                // (a crash, a stall resolved, a send that failed), once the rule book would
                // start it now: nothing of the schedule RUNNING and nothing earlier waiting
                // its turn (a later live run already in its lane does not hold it back).
                if !older_than(run.created_at, cfg.pending_after) {
                    return Verdict::Fine;
                }
                let Some(stored) = self.schedule_of(&run.key.schedule_id, schedules).await else {
                    return Verdict::Fine;
                };
                let others = crate::overlap::active_among(
                    active
                        .iter()
                        .filter(|o| o.key.schedule_id == run.key.schedule_id),
                );
                let admission = decide(&Ask {
                    moment: Moment::Start,
                    spec: &stored.spec,
                    run: Candidate::of(run),
                    stopped: stored.stopped(),
                    others: &others,
                    excluded: false,
                    late: None,
                    now,
                });
                if matches!(admission, Admission::Go { .. }) {
                    Verdict::ReleaseQueuedBehind
                } else {
                    Verdict::Fine
                }
            }
            RunStatus::Pending if run.trigger == Trigger::CatchUp => Verdict::Fine,
            // Parked late behind a backlog: planned with its gap (see [`super::backlog`]).
            RunStatus::Pending if super::backlog::awaits_plan(run) => Verdict::Fine,
            // Sent by a backfill before its schedule stopped, parked by the worker: sent
            // again once the schedule runs again (catch-up runs wait in the release instead).
            RunStatus::Pending if waits_for_resume(run) => {
                match self.schedule_of(&run.key.schedule_id, schedules).await {
                    Some(stored) if stored.stopped().is_none() => Verdict::SendPending,
                    _ => Verdict::Fine,
                }
            }
            RunStatus::Pending
                if run.job_id.is_none() && older_than(run.created_at, cfg.pending_after) =>
            {
                Verdict::SendPending
            }
            RunStatus::Queued => {
                if older_than(queued_since(run), cfg.queued_after) {
                    Verdict::Resend
                } else {
                    Verdict::Fine
                }
            }
            RunStatus::RetryPending => {
                let since = [run.queued_at, run.started_at, run.last_heartbeat_at]
                    .into_iter()
                    .flatten()
                    .fold(run.created_at, DateTime::max);
                if older_than(since, cfg.retry_pending_after) {
                    Verdict::Resend
                } else {
                    Verdict::Fine
                }
            }
            RunStatus::Running if waits_for_children(run) => {
                if older_than(run.updated_at, cfg.pending_after) {
                    Verdict::WatchChildren
                } else {
                    Verdict::Fine
                }
            }
            RunStatus::Running => {
                let grace = cfg.stall_grace.as_delta();
                let lease_until = run
                    .lease
                    .as_ref()
                    .map(|l| l.until)
                    .or(run.last_heartbeat_at)
                    .unwrap_or(run.created_at);
                if handed_over(&run.steps) {
                    // Nothing runs between steps: no stall, and no runtime limit applies.
                    return if lease_until <= now {
                        Verdict::ResendStep
                    } else {
                        Verdict::Fine
                    };
                }
                if lease_until + grace <= now {
                    return Verdict::Stall(Reason::HeartbeatLost);
                }
                let Some(started) = run.started_at else {
                    return Verdict::Fine;
                };
                let Some(stored) = self.schedule_of(&run.key.schedule_id, schedules).await else {
                    return Verdict::Fine;
                };
                if started + stored.spec.max_runtime.as_delta() + grace <= now {
                    Verdict::Stall(Reason::MaxRuntimeExceeded)
                } else {
                    Verdict::Fine
                }
            }
            RunStatus::Stalled => Verdict::Resolve,
            _ => Verdict::Fine,
        }
    }

    async fn unstick(
        &self,
        run: &Run,
        verdict: Verdict,
        now: DateTime<Utc>,
        schedules: &mut HashMap<String, Option<StoredSchedule>>,
        stuck: &mut StuckReport,
    ) -> Result<(), ReconcileError> {
        let lane = lane_of(run);
        match verdict {
            Verdict::Fine => {}
            Verdict::SendPending => {
                if self.dispatch(run, lane, now).await? {
                    stuck.pending_sent += 1;
                }
            }
            Verdict::ReleaseQueuedBehind => {
                if self.dispatch(run, lane, now).await? {
                    stuck.queued_behind_released += 1;
                }
            }
            Verdict::Resend => {
                self.send(run, run.status, lane, now).await?;
                match run.status {
                    RunStatus::Queued => stuck.queued_resent += 1,
                    _ => stuck.retry_resent += 1,
                }
            }
            Verdict::ResendStep => {
                // Claimed by a renewed hand-over lease under the epoch read, so of racing
                // reconcilers one sends; a duplicate would be harmless (one start wins).
                let until = now + self.config.stuck.stall_grace.as_delta();
                let lease = LeaseGrant::new(HANDOVER_OWNER, until);
                let claim = RunChange::new(
                    RunStatus::Running,
                    run.lease_epoch,
                    now,
                    Transition::Heartbeat { lease },
                );
                match self.store.transition_run(&run.key, &claim).await {
                    Ok(_) => {}
                    Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => {
                        return Ok(())
                    }
                    Err(e) => return Err(e.into()),
                }
                let message = LaneMessage::next_attempt(run, lane);
                self.lanes.send(&message, std::time::Duration::ZERO).await?;
                stuck.steps_resent += 1;
            }
            Verdict::WatchChildren => {
                let resent = self.watch_children(run, now, schedules).await?;
                stuck.children_resent += resent;
            }
            Verdict::Stall(reason) => {
                let change = RunChange::decide(
                    RunEvent::Stall,
                    RunStatus::Running,
                    run.lease_epoch,
                    now,
                    Some(reason),
                );
                let stalled = match self.store.transition_run(&run.key, &change).await {
                    Ok(r) => r,
                    // The worker heartbeated, finished or was replaced meanwhile: not stuck.
                    Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => {
                        return Ok(())
                    }
                    Err(e) => return Err(e.into()),
                };
                stuck.stalled += 1;
                tracing::warn!(run = %run.key, %reason, epoch = run.lease_epoch, "run stalled");
                self.resolve_stalled(&stalled, now, schedules, stuck)
                    .await?;
            }
            Verdict::Resolve => self.resolve_stalled(run, now, schedules, stuck).await?,
        }
        Ok(())
    }

    async fn resolve_stalled(
        &self,
        run: &Run,
        now: DateTime<Utc>,
        schedules: &mut HashMap<String, Option<StoredSchedule>>,
        stuck: &mut StuckReport,
    ) -> Result<(), ReconcileError> {
        let Some(stored) = self.schedule_of(&run.key.schedule_id, schedules).await else {
            return Err(ReconcileError::Store(StoreError::ScheduleNotFound(
                run.key.schedule_id.clone(),
            )));
        };
        let retry = stored.spec.idempotent
            && AttemptBudget::of(&stored.spec.job, stored.spec.max_attempts, run).left();
        let (event, reason) = if retry {
            (RunEvent::RetryAfterStall, None)
        } else if stored.spec.idempotent {
            (RunEvent::HoldForApproval, Some(Reason::RetriesExhausted))
        } else {
            // The job may have acted: say why nobody knows (the stall's reason).
            let unknown = match run.reason {
                Some(Reason::MaxRuntimeExceeded) => Reason::MaxRuntimeExceeded,
                _ => Reason::WorkerLost,
            };
            (RunEvent::HoldForApproval, Some(unknown))
        };
        let change = RunChange::decide(event, RunStatus::Stalled, run.lease_epoch, now, reason);
        let moved = match self.store.transition_run(&run.key, &change).await {
            Ok(r) => r,
            Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if retry {
            stuck.retried += 1;
            tracing::warn!(run = %moved.key, attempt = moved.attempts + 1, "stalled run retried (idempotent job)");
            self.send(&moved, RunStatus::RetryPending, lane_of(&moved), now)
                .await?;
        } else {
            stuck.held += 1;
            tracing::warn!(run = %moved.key, reason = ?reason, "stalled run held for an operator");
            if let Some(alerter) = &self.alerter {
                alerter.hold(&Held::run(&stored.spec, &moved, now)).await;
            }
        }
        Ok(())
    }

    /// The children of a run that has not moved for `pending_after` whose messages look
    /// lost: never started at all (the sends after the run's write were lost), waiting
    /// longer than `queued_after`, or running past their lease and `stall_grace`. When all
    /// ended but the run did not (its last worker died), one ended child's message goes
    /// again: its worker ends the run. Re-sends are harmless: every start is conditional.
    async fn watch_children(
        &self,
        run: &Run,
        now: DateTime<Utc>,
        schedules: &mut HashMap<String, Option<StoredSchedule>>,
    ) -> Result<u32, ReconcileError> {
        let Some(counts) = run.children else {
            return Ok(0);
        };
        let stored = self.schedule_of(&run.key.schedule_id, schedules).await;
        if stored.as_ref().is_some_and(|s| s.stopped().is_some()) {
            // Paused or disabled: its children wait; they are sent again after the resume.
            return Ok(0);
        }
        let cfg = &self.config.stuck;
        let all = children_of_run(self.store.as_ref(), &run.key, counts.step).await?;
        let never_started = all.iter().all(|c| c.attempts == 0);
        let lost: Vec<u32> = if counts.all_ended() || all.iter().all(|c| c.status.is_terminal()) {
            all.first().map(|c| c.index).into_iter().collect()
        } else {
            all.iter()
                .filter(|c| match c.status {
                    ChildStatus::Pending | ChildStatus::RetryPending => {
                        never_started || now - c.updated_at >= cfg.queued_after.as_delta()
                    }
                    ChildStatus::Running => c
                        .lease_until
                        .is_none_or(|until| until + cfg.stall_grace.as_delta() <= now),
                    _ => false,
                })
                .map(|c| c.index)
                .collect()
        };
        if lost.is_empty() {
            return Ok(0);
        }
        let lane = stored
            .and_then(|s| s.spec.batch_lane)
            .unwrap_or(lane_of(run));
        let sent = send_children(self.lanes.as_ref(), run, lane, counts.step, &lost).await as u32;
        tracing::warn!(run = %run.key, resent = sent, "children's messages sent again");
        Ok(sent)
    }

    async fn schedule_of(
        &self,
        id: &str,
        cache: &mut HashMap<String, Option<StoredSchedule>>,
    ) -> Option<StoredSchedule> {
        if let Some(s) = cache.get(id) {
            return s.clone();
        }
        let found = self.store.get_schedule(id).await.ok();
        cache.insert(id.to_string(), found.clone());
        found
    }
}
