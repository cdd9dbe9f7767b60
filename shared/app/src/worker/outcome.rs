//! What a run's end tells people: the schedule's failure streak, pause on failure, and the
//! alerts they raise (failures in a row, recovery, a missed deadline). A healthy run of a
//! healthy schedule reads and writes nothing here: the streak is written on a failure and
//! on the first success after failures, which the schedule the worker already read shows.

use chrono::{DateTime, Utc};
use cronledger_aws::{ChangeMeta, StoreError, StreakChange};
use cronledger_core::alerts::{self, About, Alert, RunRef};
use cronledger_core::run::Origin;
use cronledger_core::{Run, RunStatus};
use cronledger_ledger::ledger::StoredSchedule;

use super::Worker;
use crate::alerting::Held;
use crate::metrics::Metric;

/// Who the audit names when the scheduler pauses a schedule itself.
pub const SCHEDULER_ACTOR: &str = "cronledger";

impl Worker {
    /// After `ended` was written terminal: moves the failure streak and raises what it calls
    /// for; a run that executed, judged against its schedule's `history`, raises
    /// SUSPECT_RESULT and SLOW_RUN. Best effort: the run's end is already recorded.
    pub(super) async fn after_end(
        &self,
        stored: &StoredSchedule,
        ended: &Run,
        history: Option<&crate::outcomes::History>,
        now: DateTime<Utc>,
    ) {
        let slo = stored.spec.slo.map(|s| s.within);
        crate::outcomes::ended(self.health.as_deref(), ended, slo, now).await;
        if let Some(history) = history {
            crate::outcomes::judged(self.alerts.as_deref(), &stored.spec, ended, history, now)
                .await;
        }
        self.start_dependents(stored, ended, now).await;
        let spec = &stored.spec;
        let about = About::of(spec);
        let key = ended.key.to_string();
        let run = RunRef {
            key: &key,
            window: ended.window,
        };
        let mut raised: Vec<Alert> = Vec::new();
        match ended.status {
            RunStatus::Failed => {
                match self
                    .store
                    .count_failure_streak(stored.id(), StreakChange::Failed)
                    .await
                {
                    Ok(streak) => {
                        raised.extend(alerts::failures_in_a_row(
                            &about,
                            &spec.alerts,
                            streak,
                            &run,
                            now,
                        ));
                        if alerts::pauses_on_failure(&spec.alerts, streak)
                            && self.pause_on_failure(stored, streak, now).await
                        {
                            raised.push(alerts::paused_on_failure(&about, streak, &run, now));
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "could not count the failure streak"),
                }
            }
            RunStatus::Success | RunStatus::PartialSuccess if stored.failure_streak > 0 => {
                match self
                    .store
                    .count_failure_streak(stored.id(), StreakChange::Succeeded)
                    .await
                {
                    Ok(_) => raised.extend(alerts::recovered(
                        &about,
                        &spec.alerts,
                        stored.failure_streak,
                        &run,
                        now,
                    )),
                    Err(e) => tracing::warn!(error = %e, "could not end the failure streak"),
                }
            }
            _ => {}
        }
        // A window skipped or coalesced by its policy was decided, not late.
        if matches!(
            ended.status,
            RunStatus::Success | RunStatus::PartialSuccess | RunStatus::Failed
        ) {
            raised.extend(alerts::deadline_missed(
                &about,
                spec.deadline,
                &run,
                ended.completed_at.or(Some(now)),
                now,
            ));
        }
        if let Some(alerter) = &self.alerts {
            for alert in &raised {
                alerter.raise(alert, spec.alerts.topic.as_deref()).await;
            }
        }
    }

    /// The schedules that run after this one get their window decided now, not at the
    /// reconciler's next pass (which decides whatever this misses).
    async fn start_dependents(&self, stored: &StoredSchedule, ended: &Run, now: DateTime<Utc>) {
        if stored.downstream.is_empty() {
            return;
        }
        if ended.cascade && matches!(ended.key.origin, Origin::Backfill(_)) {
            let cascaded = crate::cascade::after_backfill_run(
                self.store.as_ref(),
                self.lanes.as_ref(),
                &stored.downstream,
                ended,
                now,
            );
            if let Err(e) = cascaded.await {
                tracing::warn!(error = %e, "could not cascade the backfill's window downstream");
            }
            return;
        }
        match crate::dependents::after_upstream_end(
            self.store.as_ref(),
            self.lanes.as_ref(),
            &stored.downstream,
            ended,
            now,
        )
        .await
        {
            Ok(created) => {
                for run in created.iter().filter(|r| r.status == RunStatus::Skipped) {
                    crate::outcomes::ended(self.health.as_deref(), run, None, now).await;
                }
            }
            Err(e) => tracing::warn!(error = %e,
                "could not decide the dependents' window; the reconciler will"),
        }
        // A retried upstream that succeeded re-opens the windows skipped for it.
        let repaired = crate::repair::repair_dependents(
            self.store.as_ref(),
            self.lanes.as_ref(),
            &stored.downstream,
            ended,
            ended.cascade,
            now,
        );
        if let Err(e) = repaired.await {
            tracing::warn!(error = %e, "could not re-open the dependents' skipped windows");
        }
    }

    /// After `held` was written MANUAL_REQUIRED: its AWAITING_APPROVAL and reminders.
    pub(super) async fn after_hold(&self, stored: &StoredSchedule, held: &Run, now: DateTime<Utc>) {
        if let Some(alerter) = &self.alerts {
            alerter.hold(&Held::run(&stored.spec, held, now)).await;
        }
    }

    /// `alerts.pause_after_failures`: pauses the schedule, audited with the reason. `false`
    /// when it was not ACTIVE any more (paused or archived meanwhile).
    async fn pause_on_failure(
        &self,
        stored: &StoredSchedule,
        streak: u32,
        now: DateTime<Utc>,
    ) -> bool {
        let meta = ChangeMeta {
            actor: SCHEDULER_ACTOR.to_string(),
            reason: format!("PAUSED_ON_FAILURE: {streak} failures in a row"),
            at: now,
            details: None,
        };
        match self.store.pause_schedule(stored.id(), None, meta).await {
            Ok(_) => {
                tracing::warn!(streak, "schedule paused itself after failures in a row");
                self.metrics.count(Metric::SchedulesPausedOnFailure, 1);
                true
            }
            Err(StoreError::InvalidRequest(_)) => false,
            Err(e) => {
                tracing::warn!(error = %e, "could not pause the schedule after its failures");
                false
            }
        }
    }
}
