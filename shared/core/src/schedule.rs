//! A schedule ready to evaluate: its spec plus the parsed expression (parsed once).

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};

use crate::calendar::{CalendarSet, DateSel};
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
    /// The first instant a window may be scheduled for (`start_at`), if bounded.
    start: Option<DateTime<Utc>>,
    /// The last instant a window may be scheduled for: `end_at`, or the last of the
    /// `max_runs` windows once the count has its anchor, whichever is earlier.
    end: Option<DateTime<Utc>>,
    /// Local dates it does not run on: its own `exclude`, and its calendars' once resolved
    /// ([`Schedule::with_calendars`]).
    exclusions: Vec<DateSel>,
}

impl Schedule {
    /// Compiles a validated spec. Fails only if the spec was built by hand with a bad cron.
    ///
    /// `max_runs` counts from `start_at`; a schedule without `start_at` counts from its
    /// creation, which the spec does not carry: [`Schedule::anchored`] gives it.
    pub fn new(spec: ScheduleSpec) -> Result<Schedule, Issue> {
        let timing = Timing::parse(&spec.cron, spec.timezone)?.with_dst(spec.dst);
        let tz = spec.timezone;
        let start = spec.start_at.map(|b| b.resolve(tz));
        let end = spec.end_at.map(|b| b.resolve(tz));
        let exclusions = spec.exclude.clone();
        let mut schedule = Schedule {
            spec,
            timing,
            start,
            end,
            exclusions,
        };
        if let Some(start) = start {
            schedule.end_after_max_runs(start);
        }
        Ok(schedule)
    }

    /// The schedule as stored since `created_at`: its `max_runs` counts from there when it
    /// has no `start_at`.
    pub fn anchored(mut self, created_at: DateTime<Utc>) -> Schedule {
        if self.spec.start_at.is_none() {
            self.end_after_max_runs(created_at);
        }
        self
    }

    /// Ends the schedule at its `max_runs`-th window at or after `anchor`. Deterministic from
    /// the spec, so a fire writes only the run (no counter on the schedule) and the auditor
    /// recomputes the same end.
    fn end_after_max_runs(&mut self, anchor: DateTime<Utc>) {
        let Some(n) = self.spec.max_runs.filter(|n| *n > 0) else {
            return;
        };
        let mut last = self.next_at_or_after(anchor);
        for _ in 1..n {
            match last.and_then(|t| self.next_after(t)) {
                Some(t) => last = Some(t),
                None => break,
            }
        }
        if let Some(last) = last {
            self.end = Some(self.end.map_or(last, |e| e.min(last)));
        }
    }

    /// The first instant a window may be scheduled for.
    pub fn starts_at(&self) -> Option<DateTime<Utc>> {
        self.start
    }

    /// The last instant a window may be scheduled for (`end_at`, or the last of `max_runs`).
    pub fn ends_at(&self) -> Option<DateTime<Utc>> {
        self.end
    }

    /// Whether the schedule has no window after `now` because of its bounds (ENDED).
    pub fn has_ended(&self, now: DateTime<Utc>) -> bool {
        self.end.is_some_and(|end| end <= now) && self.next_after(now).is_none()
    }

    fn in_bounds(&self, t: DateTime<Utc>) -> bool {
        self.start.is_none_or(|s| t >= s) && self.end.is_none_or(|e| t <= e)
    }

    /// The first window strictly after `after`, within the bounds.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let from = match self.start {
            Some(start) if after < start => start - TimeDelta::nanoseconds(1),
            _ => after,
        };
        self.timing
            .next_after(from)
            .filter(|t| self.end.is_none_or(|e| *t <= e))
    }

    /// The first window at or after `at`, within the bounds.
    pub fn next_at_or_after(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_after(at - TimeDelta::nanoseconds(1))
    }

    /// Whether `t` is a window of the schedule: an occurrence of its expression within its
    /// bounds.
    pub fn is_occurrence(&self, t: DateTime<Utc>) -> bool {
        self.in_bounds(t) && self.timing.is_occurrence(t)
    }

    /// The last window strictly before `before`, within the bounds.
    pub fn prev_before(&self, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let until = match self.end {
            Some(end) if before > end => end + TimeDelta::nanoseconds(1),
            _ => before,
        };
        self.timing
            .prev_before(until)
            .filter(|t| self.start.is_none_or(|s| *t >= s))
    }

    /// The expression's last occurrence strictly before `before`, bounds aside: where the
    /// business window of the occurrence after it starts.
    pub fn grid_prev_before(&self, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.timing.prev_before(before)
    }

    /// The windows in `(after, until]`, in order, within the bounds.
    pub fn between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        let (after, until) = self.clamp(after, until);
        self.timing.between(after, until)
    }

    /// How many windows fall in `(after, until]`, within the bounds.
    pub fn count_between(&self, after: DateTime<Utc>, until: DateTime<Utc>) -> u64 {
        let (after, until) = self.clamp(after, until);
        if until <= after {
            return 0;
        }
        self.timing.count_between(after, until)
    }

    fn clamp(&self, after: DateTime<Utc>, until: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        let after = match self.start {
            Some(start) if after < start => start - TimeDelta::nanoseconds(1),
            _ => after,
        };
        let until = self.end.map_or(until, |e| until.min(e));
        (after, until)
    }

    /// The schedule with the calendars it names resolved: their excluded dates join its own
    /// `exclude` list. A name not in `calendars` excludes nothing (validation refuses such a
    /// name; a calendar cannot be deleted while named).
    pub fn with_calendars(mut self, calendars: &CalendarSet) -> Schedule {
        self.exclusions = self.spec.exclude.clone();
        for calendar in self.spec.calendars.iter().filter_map(|n| calendars.get(n)) {
            self.exclusions.extend(calendar.exclude.iter().copied());
        }
        self
    }

    /// Whether the window at `scheduled_for` falls on a local date (in the schedule's zone)
    /// the schedule does not run on: recorded SKIPPED (EXCLUDED), not run and not missing.
    pub fn excluded(&self, scheduled_for: DateTime<Utc>) -> bool {
        if self.exclusions.is_empty() {
            return false;
        }
        let date = scheduled_for
            .with_timezone(&self.spec.timezone)
            .date_naive();
        self.exclusions.iter().any(|sel| sel.contains(date))
    }

    /// [`Schedule::excluded`] with the calendars it names read from `calendars` (a path
    /// holding a compiled schedule across calendar edits asks this way).
    pub fn excluded_by(&self, calendars: &CalendarSet, scheduled_for: DateTime<Utc>) -> bool {
        if self.excluded(scheduled_for) {
            return true;
        }
        let date = scheduled_for
            .with_timezone(&self.spec.timezone)
            .date_naive();
        self.spec
            .calendars
            .iter()
            .filter_map(|name| calendars.get(name))
            .any(|c| c.excludes(date))
    }

    /// The excluded dates in force (its own and its calendars'), for the planner's walk.
    pub fn exclusions(&self) -> &[DateSel] {
        &self.exclusions
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
        self.next_after(at).map(|t| self.fire_time(t))
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
        let timing_changed = self.spec.cron != before.spec.cron
            || self.spec.timezone != before.spec.timezone
            || self.spec.dst != before.spec.dst
            || self.start != before.start
            || self.end != before.end;
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
