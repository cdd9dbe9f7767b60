//! A schedule ready to evaluate: its spec plus the parsed expression (parsed once).

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};

use crate::error::Issue;
use crate::jitter;
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

    /// How long after each occurrence the ticker fires it: the schedule's fixed offset inside
    /// `[0, jitter)` (zero without jitter). See [`crate::jitter`].
    pub fn fire_offset(&self) -> TimeDelta {
        self.spec.jitter.map_or(TimeDelta::zero(), |j| {
            jitter::offset(&self.spec.id, j).as_delta()
        })
    }

    /// When the ticker fires the occurrence at `scheduled_for` (what `next_run_at` holds).
    /// The run keeps `scheduled_for`, its window and its key; lateness counts from here.
    pub fn fire_time(&self, scheduled_for: DateTime<Utc>) -> DateTime<Utc> {
        scheduled_for + self.fire_offset()
    }

    /// The occurrence a fire time (a stored `next_run_at`) stands for.
    pub fn occurrence_at(&self, fire_time: DateTime<Utc>) -> DateTime<Utc> {
        fire_time - self.fire_offset()
    }

    /// The fire time of the first occurrence strictly after `at`: where the ticker starts
    /// when a schedule is created, resumed or its timing changes at `at`.
    pub fn next_fire_after(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.timing.next_after(at).map(|t| self.fire_time(t))
    }

    /// Where the ticker stands (`next_run_at`) after the spec changed at `at` from
    /// `before`, whose stored position was `current`. Same timing, jitter and enabled: where
    /// it was. Only the jitter changed: the same occurrence at its new fire time, so the edit
    /// loses no window. New timing, re-enabled or no position: the first occurrence after
    /// `at` (older windows are the reconciler's; a recorded one is never recorded twice).
    pub fn next_fire_after_edit(
        &self,
        before: &Schedule,
        current: Option<DateTime<Utc>>,
        at: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let timing_changed =
            self.spec.cron != before.spec.cron || self.spec.timezone != before.spec.timezone;
        match current {
            Some(next) if !timing_changed && before.spec.enabled => {
                Some(self.fire_time(before.occurrence_at(next)))
            }
            _ => self.next_fire_after(at),
        }
    }

    /// `now` on the schedule's nominal clock: a jittered schedule is judged exactly as an
    /// unjittered one would be `fire_offset` earlier (a window is late, missed or in its
    /// grace counting from its fire time, never from its nominal instant).
    pub fn nominal_now(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - self.fire_offset()
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
            steps: Vec::new(),
            children: None,
            cascade: false,
            verify: None,
            retention: self.spec.retention,
        }
    }
}
