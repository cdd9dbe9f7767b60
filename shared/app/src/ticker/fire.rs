//! Firing the due schedules' windows: many schedules to a transaction where they all fire
//! inside the lookahead, one by one otherwise, and each window's run (a live run, a skip of
//! a paused or overlapping window, or an approval hold) with its overlap check.

use chrono::{DateTime, Utc};
use cronledger_aws::StoreError;
use cronledger_core::admission::{decide, Ask, Candidate, Moment};
use cronledger_core::{OverlapPolicy, Reason, Run, RunStatus, Trigger};
use cronledger_ledger::ledger::{Fire, FireOutcome, StoredSchedule, MAX_FIRES_PER_TRANSACTION};
use futures_util::stream::{self, StreamExt};
use tracing::Instrument;

use super::{TickReport, Ticker};
use crate::alerting::Held;
use crate::metrics::Metric;
use crate::runs::new_run;

impl Ticker {
    pub(super) async fn fire_found(
        &self,
        schedules: Vec<StoredSchedule>,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> TickReport {
        let mut report = TickReport {
            due_schedules: schedules.len() as u32,
            ..TickReport::default()
        };
        let concurrency = self.config.concurrency.max(1);
        // A window inside the lookahead is not due yet, so nothing about it needs a read
        // (overlap is judged by the worker when it starts): those fires go in batches, their
        // runs sent 10 to a request. Windows already due go one by one.
        let (ahead, mut one_by_one): (Vec<_>, Vec<_>) = schedules
            .into_iter()
            .partition(|s| s.next_run_at.is_some_and(|t| t > now && t <= until));
        let mut batches: Vec<Vec<StoredSchedule>> = Vec::new();
        let mut ahead = ahead.into_iter().peekable();
        while ahead.peek().is_some() {
            batches.push(ahead.by_ref().take(MAX_FIRES_PER_TRANSACTION).collect());
        }
        let batched: Vec<(TickReport, Vec<StoredSchedule>)> = stream::iter(batches)
            .map(|batch| self.fire_batch(batch, now, until))
            .buffer_unordered(concurrency)
            .collect()
            .await;
        for (r, rest) in batched {
            report.merge(r);
            one_by_one.extend(rest);
        }
        let reports: Vec<TickReport> = stream::iter(one_by_one)
            .map(|schedule| {
                let span = tracing::info_span!("schedule", schedule = %schedule.id());
                self.fire_schedule(schedule, now, until).instrument(span)
            })
            .buffer_unordered(concurrency)
            .collect()
            .await;
        for r in reports {
            report.merge(r);
        }
        report
    }

    /// Fires the first window of each schedule (all inside the lookahead, distinct schedules)
    /// side by side, then sends the runs 10 to a request. Returns the schedules left for the
    /// one-by-one path: those with a further window inside the lookahead, and those whose
    /// fire could not be written (a store error: singly, each tries again).
    pub(super) async fn fire_batch(
        &self,
        batch: Vec<StoredSchedule>,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> (TickReport, Vec<StoredSchedule>) {
        let mut report = TickReport::default();
        let mut prepared: Vec<(StoredSchedule, Fire, bool)> = Vec::with_capacity(batch.len());
        for stored in batch {
            let schedule = match self.schedules.get(&stored) {
                Ok(s) => s,
                Err(e) => {
                    report.error(stored.id(), e);
                    continue;
                }
            };
            let Some(expected) = stored.next_run_at else {
                continue;
            };
            let (run, send) = match self.window_run(&stored, &schedule, expected, now).await {
                Ok(planned) => planned,
                Err(e) => {
                    report.error(stored.id(), e);
                    continue;
                }
            };
            let fire = Fire {
                run,
                expected_next_run_at: expected,
                next_run_at: next_fire(&schedule, expected),
            };
            prepared.push((stored, fire, send));
        }
        let fires: Vec<Fire> = prepared.iter().map(|(_, fire, _)| fire.clone()).collect();
        let outcomes = match self.store.fire_all(&fires).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                tracing::warn!(error = %e, fires = fires.len(), "batched fire failed; firing one by one");
                let rest = prepared.into_iter().map(|(stored, ..)| stored).collect();
                return (report, rest);
            }
        };
        let mut rest = Vec::new();
        let mut to_send = Vec::new();
        for ((mut stored, fire, send), outcome) in prepared.into_iter().zip(outcomes) {
            let created = match outcome {
                FireOutcome::Created => true,
                FireOutcome::Lost {
                    schedule_moved: true,
                    ..
                } => {
                    report.lost_race += 1;
                    continue;
                }
                FireOutcome::Lost { .. } => {
                    // Recorded first by the reconciler (or another ticker): move on alone.
                    report.lost_race += 1;
                    let expected = fire.expected_next_run_at;
                    match self
                        .store
                        .advance_next_run(stored.id(), expected, fire.next_run_at)
                        .await
                    {
                        Ok(true) => false,
                        Ok(false) => continue,
                        Err(e) => {
                            report.error(stored.id(), e);
                            continue;
                        }
                    }
                }
            };
            if created {
                self.after_created(&stored, &fire.run, &mut report, now)
                    .await;
            }
            if fire.next_run_at.is_some_and(|next| next <= until) {
                stored.next_run_at = fire.next_run_at;
                rest.push(stored);
            }
            if created && send {
                to_send.push((fire.run, fire.expected_next_run_at));
            }
        }
        for ok in self.enqueue_all(&to_send, now).await {
            report.count_send(ok);
        }
        (report, rest)
    }

    /// Fires the due windows of one schedule, oldest first.
    pub(super) async fn fire_schedule(
        &self,
        stored: StoredSchedule,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> TickReport {
        let mut report = TickReport::default();
        let schedule = match self.schedules.get(&stored) {
            Ok(s) => s,
            Err(e) => {
                report.error(stored.id(), e);
                return report;
            }
        };
        let grace = schedule.spec.grace.as_delta();
        let mut expected = match stored.next_run_at {
            Some(t) => t,
            None => return report,
        };
        for _ in 0..self.config.max_windows_per_schedule {
            if expected > until {
                break;
            }
            let next = next_fire(&schedule, expected);
            if now - expected > grace {
                // Too late to fire on time: the reconciler applies the misfire policy.
                match self
                    .store
                    .advance_next_run(stored.id(), expected, next)
                    .await
                {
                    Ok(true) => {
                        report.left_for_reconciler += 1;
                        self.metrics
                            .count_for(stored.id(), Metric::WindowsLeftForReconciler, 1);
                    }
                    Ok(false) => break,
                    Err(e) => {
                        report.error(stored.id(), e);
                        break;
                    }
                }
            } else {
                let outcome = self
                    .fire_window(&stored, &schedule, expected, next, now, &mut report)
                    .await;
                match outcome {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        report.error(stored.id(), e);
                        break;
                    }
                }
            }
            match next {
                Some(n) => expected = n,
                None => break,
            }
        }
        report
    }

    /// The run the window fired at `fire_at` gets (recorded under its occurrence), as the
    /// rule book answers at creation: PENDING for its lane, SKIPPED while paused or (a window
    /// already due) behind a running run under SKIP_NEW, waiting behind QUEUE_NEW, or held
    /// for approval. The flag says whether it is sent.
    pub(super) async fn window_run(
        &self,
        stored: &StoredSchedule,
        schedule: &cronledger_core::Schedule,
        fire_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(Run, bool), StoreError> {
        let scheduled_for = schedule.occurrence_at(fire_at);
        let mut run = new_run(
            schedule,
            stored.version,
            scheduled_for,
            Trigger::Scheduled,
            now,
        );
        // Only a window already due can meet a running run; one inside the lookahead is
        // judged by the worker when it starts, when the earlier run may be done.
        let others = if schedule.spec.overlap != OverlapPolicy::Allow && fire_at <= now {
            self.active_runs_of(stored.id()).await?
        } else {
            Vec::new()
        };
        let stopped = stored.paused_at(scheduled_for).then_some(Reason::Paused);
        let admission = decide(&Ask {
            moment: Moment::Create,
            spec: &schedule.spec,
            run: Candidate::of(&run),
            stopped,
            others: &others,
            late: None,
            now,
        });
        let send = admission.shape(&mut run);
        Ok((run, send))
    }

    /// After the ticker created `run`: counted in the tick's report and metrics, its hold
    /// announced, its end (a window recorded SKIPPED) counted on health.
    async fn after_created(
        &self,
        stored: &StoredSchedule,
        run: &Run,
        report: &mut TickReport,
        now: DateTime<Utc>,
    ) {
        self.count_created(stored.id(), run, report);
        self.announce_hold(stored, run).await;
        crate::outcomes::ended(self.health.as_deref(), run, None, now).await;
    }

    fn count_created(&self, schedule_id: &str, run: &Run, report: &mut TickReport) {
        report.created += 1;
        self.metrics.count_for(schedule_id, Metric::RunsCreated, 1);
        if run.status == RunStatus::Skipped {
            self.metrics.count_for(schedule_id, Metric::RunsSkipped, 1);
        }
        match run.reason {
            Some(Reason::Overlap) => report.skipped_overlap += 1,
            Some(Reason::QueuedBehind) => report.queued_behind += 1,
            _ => {}
        }
        tracing::debug!(run = %run.key, status = %run.status, "run created");
    }

    /// Records the window fired at `fire_at` and hands it to its lane. `Ok(false)` when
    /// another ticker moved the schedule first (it owns the rest of this schedule's tick).
    pub(super) async fn fire_window(
        &self,
        stored: &StoredSchedule,
        schedule: &cronledger_core::Schedule,
        fire_at: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        report: &mut TickReport,
    ) -> Result<bool, StoreError> {
        let (run, send) = self.window_run(stored, schedule, fire_at, now).await?;
        let fire = Fire {
            run,
            expected_next_run_at: fire_at,
            next_run_at: next,
        };
        match self.store.fire(&fire).await? {
            FireOutcome::Created => {
                self.after_created(stored, &fire.run, report, now).await;
            }
            FireOutcome::Lost {
                schedule_moved: true,
                ..
            } => {
                tracing::debug!("another ticker fired this window");
                report.lost_race += 1;
                return Ok(false);
            }
            FireOutcome::Lost { .. } => {
                // The reconciler (or an operator) recorded this window first: move on.
                report.lost_race += 1;
                return self
                    .store
                    .advance_next_run(stored.id(), fire_at, next)
                    .await;
            }
        }
        if send {
            report.count_send(self.enqueue(&fire.run, fire_at, now).await);
        }
        Ok(true)
    }

    /// A window created MANUAL_REQUIRED (it awaits an operator's approval): its alert and
    /// reminders.
    async fn announce_hold(&self, stored: &StoredSchedule, run: &Run) {
        if run.status != RunStatus::ManualRequired {
            return;
        }
        if let Some(alerter) = &self.alerts {
            alerter
                .record_hold(&Held::run(&stored.spec, run, run.created_at))
                .await;
        }
    }
}

/// The fire time after the one at `fire_at`: the next occurrence plus the offset.
pub(super) fn next_fire(
    schedule: &cronledger_core::Schedule,
    fire_at: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    schedule.next_fire_after(schedule.occurrence_at(fire_at))
}
