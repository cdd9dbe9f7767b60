//! Each window's run as the rule book answers at its fire (a live run, a skip of a paused or
//! overlapping window, a wait behind QUEUE_NEW, or an approval hold), and what follows its
//! creation.

use chrono::{DateTime, Utc};
use cronledger_aws::StoreError;
use cronledger_core::admission::{decide, Ask, Candidate, Moment};
use cronledger_core::calendar::CalendarSet;
use cronledger_core::{OverlapPolicy, Reason, Run, RunStatus, Trigger};
use cronledger_ledger::ledger::StoredSchedule;

use super::{TickReport, Ticker};
use crate::alerting::Held;
use crate::metrics::Metric;
use crate::runs::new_run;

impl Ticker {
    /// The run the window fired at `fire_at` gets (recorded under its occurrence), as the
    /// rule book answers at creation: PENDING for its lane, SKIPPED while paused or (a window
    /// already due) behind a running run under SKIP_NEW, waiting behind QUEUE_NEW, or held
    /// for approval. The flag says whether it is sent.
    pub(super) async fn window_run(
        &self,
        stored: &StoredSchedule,
        schedule: &cronledger_core::Schedule,
        calendars: &CalendarSet,
        fire_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(Run, bool), StoreError> {
        let scheduled_for = schedule.occurrence_at(fire_at);
        let excluded = schedule.excluded_by(calendars, scheduled_for);
        let mut run = new_run(
            schedule,
            stored.version,
            scheduled_for,
            Trigger::Scheduled,
            now,
        );
        // Only a window already due can meet a running run; one inside the lookahead is
        // judged by the worker when it starts, when the earlier run may be done. An excluded
        // window meets nothing: it is recorded SKIPPED.
        let others = if schedule.spec.overlap != OverlapPolicy::Allow && fire_at <= now && !excluded
        {
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
            excluded,
            late: None,
            now,
        });
        let send = admission.shape(&mut run);
        Ok((run, send))
    }

    /// After the ticker created `run`: counted in the tick's report and metrics, its hold
    /// announced, its end (a window recorded SKIPPED) counted on health.
    pub(super) async fn after_created(
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

    pub(super) fn count_created(&self, schedule_id: &str, run: &Run, report: &mut TickReport) {
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
