//! A schedule ready to evaluate: its spec plus the parsed expression (parsed once).

use chrono::{DateTime, NaiveDate, Utc};

use crate::error::Issue;
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
}
