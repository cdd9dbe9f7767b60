//! A schedule ready to evaluate: its spec plus the parsed expression (parsed once).

use chrono::{DateTime, NaiveDate, Utc};

use crate::error::Issue;
use crate::run::{Origin, Run, RunKey, RunStatus, Trigger};
use crate::spec::ScheduleSpec;
use crate::timing::Timing;
use crate::window::{IdempotencyKey, Window};

#[derive(Debug, Clone)]
pub struct Schedule {
    pub spec: ScheduleSpec,
    timing: Timing,
}

impl Schedule {
    /// Compiles a validated spec. Fails only if the spec was built by hand with a bad cron.
    pub fn new(spec: ScheduleSpec) -> Result<Schedule, Issue> {
        let timing = Timing::parse(&spec.cron, spec.timezone)?;
        Ok(Schedule { spec, timing })
    }

    pub fn id(&self) -> &str {
        &self.spec.id
    }

    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// The business window an occurrence covers: `[previous occurrence, scheduled_for)`.
    /// The first occurrence an expression ever has gets an empty window at itself.
    pub fn window_for(&self, scheduled_for: DateTime<Utc>) -> Window {
        let start = self
            .timing
            .prev_before(scheduled_for)
            .unwrap_or(scheduled_for);
        Window::new(start, scheduled_for)
    }

    /// Local date of the window start in the schedule's zone.
    pub fn business_date(&self, window: &Window) -> NaiveDate {
        window.start.with_timezone(&self.spec.timezone).date_naive()
    }

    pub fn idempotency_key(&self, window: &Window) -> IdempotencyKey {
        IdempotencyKey::for_window(&self.spec.id, window, self.spec.job.tenant())
    }

    /// A fresh PENDING run of the occurrence at `scheduled_for` covering `window` (its own,
    /// or a range record's), on the schedule's live lane, with its business inputs (business
    /// date, idempotency key, expression) fixed now (invariant 5). Writers that record
    /// something else (a catch-up plan, a skip) change what differs.
    pub fn pending_run(
        &self,
        scheduled_for: DateTime<Utc>,
        window: Window,
        origin: Origin,
        trigger: Trigger,
        created_at: DateTime<Utc>,
        schedule_version: u64,
    ) -> Run {
        Run {
            key: RunKey {
                schedule_id: self.id().to_string(),
                scheduled_for,
                origin,
            },
            trigger,
            status: RunStatus::Pending,
            reason: None,
            window,
            business_date: self.business_date(&window),
            idempotency_key: self.idempotency_key(&window),
            replay_group_id: None,
            range_end: None,
            count: 1,
            coalesced_into: None,
            lane: Some(self.spec.priority.live_lane()),
            attempts: 0,
            lease: None,
            lease_epoch: 0,
            created_at,
            updated_at: created_at,
            queued_at: None,
            started_at: None,
            completed_at: None,
            last_heartbeat_at: None,
            schedule_version,
            cron: self.spec.cron.clone(),
            timezone: self.spec.timezone.name().to_string(),
            job_id: None,
            result: None,
            forced: false,
        }
    }
}
