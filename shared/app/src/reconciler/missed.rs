//! Missed windows of one schedule: fence, read once, plan, write, advance the watermark.
//!
//! Safe beside tickers and other reconcilers:
//! - **Tickers.** Before the pass judges anything, each of its shards' fire mark is moved to
//!   at least `now - max(settle, the shard's largest grace)` (only forward; see
//!   [`Reconciler::fence_fire_marks`]). A ticker writes a range's runs only after reading the
//!   mark again right before them, and moves the mark only from where it read it: once the
//!   fence holds, no ticker fires a window at or before it, and the read that follows sees
//!   every run a ticker wrote before. (What is left is a ticker whose writes were already on
//!   the wire when the fence landed, as with any read-then-write: such a window has the
//!   ticker's run and the plan's record, never neither.) A window of a schedule whose grace is
//!   shorter than the shard's largest is judged at its own horizon, past its grace, where no
//!   ticker on time fires it.
//! - **Reconcilers.** Every entry is a conditional put keyed by its first window. Entries are
//!   written oldest first; an entry found to exist already is left as it is, and the windows
//!   it covers are not written again. When it covers fewer windows than the plan's entry
//!   (the other reconciler planned with an earlier "now"), the runs are read again and the
//!   rest planned again. The watermark moves last, conditional on its old value.
//!
//! A cron or timezone edit splits the range at the edit: the windows up to it are judged by
//! the expression in force then (kept on the schedule as a `PastTiming` until the watermark
//! passes it), the windows after it by the new one. Otherwise a window the new expression
//! would have had before the edit looks missed, and a missed window of the old one is lost.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cronledger_core::calendar::CalendarSet;
use cronledger_core::planner::{Action, Pause, PlannedEntry, Release};
use cronledger_core::run::{Origin, Trigger};
use cronledger_core::{
    plan, plan_until, Coverage, Lane, Plan, PlanInput, Reason, Run, Schedule, ScheduleSpec,
};
use cronledger_ledger::ledger::{ScheduleState, StoredSchedule};

use tracing::Instrument;

use super::{ReconcileError, ReconcileReport, Reconciler};
use crate::metrics::Metric;

/// Read-plan-write rounds per schedule per pass when other writers keep interleaving.
const PLAN_ROUNDS: usize = 3;
/// A pass with nothing to write leaves the watermark until it trails by this much or this
/// many runs: the update rewrites the whole schedule item (about 4.75 write units, every
/// schedule every pass), while leaving it only makes the next range read a few runs longer.
const WATERMARK_LAG: chrono::TimeDelta = chrono::TimeDelta::hours(1);
const WATERMARK_RUNS: usize = 12;
/// A schedule whose next window is at least this far off (more than a pass interval) gets
/// its watermark moved at once, so the passes before that window skip it (see
/// `nothing_fell_due`).
const SPARSE_GAP: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// One stretch of the range judged by one expression: up to `until` (an edit) by an
/// expression the schedule had before, or (no `until`) by its current one.
struct Segment<'a> {
    schedule: &'a Schedule,
    watermark: DateTime<Utc>,
    horizon: DateTime<Utc>,
    until: Option<DateTime<Utc>>,
    pauses: &'a [Pause],
}

/// A compiled expression and the edit its windows end at (`None`: the current one).
type Expression = (Arc<Schedule>, Option<DateTime<Utc>>);

/// The expressions that judge the windows after the watermark, oldest first: each past one
/// (compiled from the current spec with its cron and timezone) up to its edit, then the
/// current one.
fn segments(
    stored: &StoredSchedule,
    current: &Arc<Schedule>,
    calendars: &CalendarSet,
) -> Result<Vec<Expression>, ReconcileError> {
    let mut out = Vec::new();
    for past in stored.past_timings_ahead() {
        let invalid = |why: String| {
            ReconcileError::Plan(format!(
                "schedule {}: the expression before the edit at {} ({} {}) {why}",
                stored.id(),
                past.until,
                past.cron,
                past.timezone
            ))
        };
        let spec = ScheduleSpec {
            cron: past.cron.clone(),
            timezone: past
                .timezone
                .parse()
                .map_err(|_| invalid("has an unknown zone".into()))?,
            ..current.spec.clone()
        };
        let schedule = Schedule::new(spec)
            .map_err(|e| invalid(e.to_string()))?
            .anchored(stored.created_at)
            .with_calendars(calendars);
        out.push((Arc::new(schedule), Some(past.until)));
    }
    let current = if stored.spec.calendars.is_empty() {
        current.clone()
    } else {
        Arc::new(Schedule::clone(current).with_calendars(calendars))
    };
    out.push((current, None));
    Ok(out)
}

/// Whether a pass that wrote nothing moves the watermark anyway: it trails by
/// [`WATERMARK_LAG`], or the range read held [`WATERMARK_RUNS`] runs. Leaving it is safe: the
/// next pass judges the same windows again and finds them recorded.
fn watermark_due(watermark: DateTime<Utc>, through: DateTime<Utc>, runs_read: usize) -> bool {
    through - watermark >= WATERMARK_LAG || runs_read >= WATERMARK_RUNS
}

/// Whether a pass has nothing to judge for the schedule: no window of its current expression
/// fell in (watermark, `horizon`] and no earlier expression has windows left to judge. Then
/// the pass reads none of its runs and writes nothing;
/// the watermark stays where it is until a window falls due (a sparse fleet's passes then
/// cost what is due, not the fleet's size).
fn nothing_fell_due(stored: &StoredSchedule, schedule: &Schedule, horizon: DateTime<Utc>) -> bool {
    let window_due = schedule
        .next_after(stored.reconciled_through)
        .is_some_and(|window| window <= horizon);
    !window_due && stored.past_timings_ahead().next().is_none()
}

/// What writing one plan learned.
#[derive(Default)]
struct Written {
    /// Some planned entry was only partly covered by what another writer stored first.
    partial: bool,
    /// The last window covered by an entry another writer stored first.
    covered_until: Option<DateTime<Utc>>,
    /// New FIRE runs not sent yet (left for the throttled release).
    pending: Vec<Run>,
}

impl Reconciler {
    /// Accounts for the schedule's windows up to `now` minus its settle/grace hold-back.
    /// Returns the report and the new catch-up runs still PENDING. `fresh`: `stored` was read
    /// in this pass (else it is a kept copy, read again when it shows something due).
    pub(super) async fn reconcile_schedule(
        &self,
        stored: StoredSchedule,
        fresh: bool,
        now: DateTime<Utc>,
        correction_open: bool,
    ) -> (ReconcileReport, Vec<Run>) {
        let mut report = ReconcileReport::default();
        if stored.state == ScheduleState::Archived {
            return (report, Vec::new());
        }
        report.schedules = 1;
        let id = stored.id().to_string();
        let stored = if fresh {
            stored
        } else if self.shows_nothing_due(&stored, now) {
            report.schedules_idle += 1;
            return (report, Vec::new());
        } else {
            match self.store.get_schedule(&id).await {
                Ok(current) => {
                    let copy = current.clone();
                    self.listing.update(&id, |kept| *kept = copy);
                    current
                }
                Err(e) => {
                    report.error(&format!("schedule {id}"), &e.into());
                    return (report, Vec::new());
                }
            }
        };
        let span = tracing::info_span!("schedule", schedule = %id);
        if !stored.spec.after.is_empty() {
            // Never fired by the ticker: nothing to miss; its windows follow its upstreams.
            if let Err(e) = self
                .follow_upstreams(&stored, now, &mut report)
                .instrument(span)
                .await
            {
                report.error(&format!("schedule {id}"), &e);
            }
            return (report, Vec::new());
        }
        let pending = match self
            .plan_and_write(stored, now, correction_open, &mut report)
            .instrument(span)
            .await
        {
            Ok(p) => p,
            Err(e) => {
                report.error(&format!("schedule {id}"), &e);
                Vec::new()
            }
        };
        (report, pending)
    }

    /// Whether a copy of the schedule, its watermark possibly behind, shows no window to
    /// judge: then none is (watermarks only move forward).
    fn shows_nothing_due(&self, stored: &StoredSchedule, now: DateTime<Utc>) -> bool {
        let Ok(schedule) = self.schedules.get(stored) else {
            return false;
        };
        if !stored.spec.after.is_empty() {
            return schedule
                .between(stored.reconciled_through, now)
                .next()
                .is_none();
        }
        let hold_back = self.config.planner.settle.max(schedule.spec.grace);
        let horizon = schedule.nominal_now(now) - hold_back.as_delta();
        horizon <= stored.reconciled_through || nothing_fell_due(stored, &schedule, horizon)
    }

    async fn plan_and_write(
        &self,
        stored: StoredSchedule,
        now: DateTime<Utc>,
        correction_open: bool,
        report: &mut ReconcileReport,
    ) -> Result<Vec<Run>, ReconcileError> {
        let schedule = self
            .schedules
            .get(&stored)
            .map_err(|e| ReconcileError::Plan(e.to_string()))?;
        let hold_back = self.config.planner.settle.max(schedule.spec.grace);
        // A jittered window is judged from its fire time (the planner does the same).
        let horizon = schedule.nominal_now(now) - hold_back.as_delta();
        if horizon <= stored.reconciled_through {
            return Ok(Vec::new());
        }
        if nothing_fell_due(&stored, &schedule, horizon) {
            report.schedules_idle += 1;
            return Ok(Vec::new());
        }
        let pauses = pauses_of(&stored);
        let mut pending = Vec::new();
        let mut watermark = stored.reconciled_through;
        // The calendars it names as they are now (an edit changes what is planned after it).
        let calendars = if stored.spec.calendars.is_empty() {
            CalendarSet::default()
        } else {
            self.store.calendars().await?
        };
        // Windows up to an edit of the expression are judged by the expression in force then.
        for (segment, until) in segments(&stored, &schedule, &calendars)? {
            if watermark >= horizon {
                break;
            }
            let part = Segment {
                schedule: &segment,
                watermark,
                horizon: until.map_or(horizon, |u| u.min(horizon)),
                until,
                pauses: &pauses,
            };
            match self
                .plan_segment(&stored, &part, now, correction_open, report, &mut pending)
                .await?
            {
                Some(through) => watermark = through,
                // Another reconciler moved the watermark: it carries on from there.
                None => break,
            }
        }
        Ok(pending)
    }

    /// Plans and writes one segment's windows, then advances the watermark to its end.
    /// `None` when another reconciler moved the watermark first.
    async fn plan_segment(
        &self,
        stored: &StoredSchedule,
        part: &Segment<'_>,
        now: DateTime<Utc>,
        correction_open: bool,
        report: &mut ReconcileReport,
        pending: &mut Vec<Run>,
    ) -> Result<Option<DateTime<Utc>>, ReconcileError> {
        let (schedule, watermark) = (part.schedule, part.watermark);
        let mut covered_until: Option<DateTime<Utc>> = None;
        let mut proposed = false;
        for round in 0..PLAN_ROUNDS {
            let runs = self
                .store
                .runs_between(stored.id(), watermark, part.horizon)
                .await?;
            let coverage = coverage_of(&runs);
            let input = PlanInput {
                schedule,
                watermark,
                now,
                existing: &coverage,
                pauses: part.pauses,
                config: self.config.planner,
            };
            let plan = match part.until {
                Some(until) => plan_until(input, until),
                None => plan(input),
            }
            .map_err(|e| ReconcileError::Plan(e.to_string()))?;
            if round == 0 {
                self.report_missed(schedule, &plan, &runs, now, report);
            }
            if !proposed && plan.backfill.is_some() {
                // Before the entries: see [`super::proposals`].
                self.propose_backfill(stored, schedule, &plan, &runs, now, report)
                    .await?;
                proposed = true;
            }
            let written = self
                .write_plan(stored, schedule, &plan, now, correction_open, report)
                .await?;
            pending.extend(written.pending);
            covered_until = covered_until.max(written.covered_until);
            if !written.partial {
                // A range another reconciler (with a later horizon) recorded may reach past
                // this plan's end; the watermark goes to its end, never inside it.
                let through = coverage
                    .extend_through(plan.through.max(covered_until.unwrap_or(plan.through)));
                let wrote = !plan.entries.is_empty() || covered_until.is_some();
                // Past expressions always close, so the schedule can forget them.
                // A sparse schedule's watermark moves with each window: left behind, every
                // pass until the next window would read its runs again.
                let sparse = schedule
                    .next_after(through)
                    .is_none_or(|next| next - through >= SPARSE_GAP);
                if !wrote
                    && part.until.is_none()
                    && !sparse
                    && !watermark_due(watermark, through, runs.len())
                {
                    report.watermarks_deferred += 1;
                    return Ok(Some(watermark));
                }
                return if self
                    .store
                    .advance_watermark(stored.id(), watermark, through)
                    .await?
                {
                    report.watermarks_advanced += 1;
                    self.listing
                        .update(stored.id(), |kept| kept.reconciled_through = through);
                    Ok(Some(through))
                } else {
                    report.watermark_races += 1;
                    Ok(None)
                };
            }
        }
        Err(ReconcileError::Contended(format!(
            "schedule {}: other writers kept recording overlapping entries; the watermark stays at {watermark}",
            stored.id()
        )))
    }

    /// Moves each shard's fire mark to at least `now - max(settle, the largest grace of
    /// its schedules)` (see the module docs).
    pub(super) async fn fence_fire_marks(
        &self,
        shards: &[u32],
        listed: &[StoredSchedule],
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) {
        // One walk of the listing, not one per shard.
        let mut largest_grace: std::collections::HashMap<u32, cronledger_core::Span> =
            std::collections::HashMap::new();
        for s in listed {
            let grace = largest_grace.entry(s.shard).or_default();
            *grace = (*grace).max(s.spec.grace);
        }
        for &shard in shards {
            let grace = largest_grace.get(&shard).copied().unwrap_or_default();
            let at = now - self.config.planner.settle.max(grace).as_delta();
            match self.store.fence_fire_mark(shard, at).await {
                Ok(true) => report.fenced += 1,
                Ok(false) => {}
                Err(e) => report.error(&format!("fire mark of shard {shard}"), &e.into()),
            }
        }
    }

    /// After a terminal write of the reconciler's (a window it records SKIPPED or
    /// COALESCED, an approval that timed out): see [`crate::outcomes`]. None of these is a
    /// success, so no `slo` decides anything.
    pub(super) async fn ended(&self, run: &Run, now: DateTime<Utc>) {
        crate::outcomes::ended(self.health.as_deref(), run, None, now).await;
    }

    /// The silent-failure signal: a metric and a log line per missed window (per range
    /// record for long gaps), whether or not anything else looks wrong.
    fn report_missed(
        &self,
        schedule: &Schedule,
        plan: &Plan,
        read: &[Run],
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) {
        let id = schedule.id();
        let mut missed = 0u32;
        for entry in &plan.entries {
            if matches!(
                entry.action,
                Action::Skip {
                    reason: Reason::Paused | Reason::Disabled
                }
            ) {
                continue;
            }
            missed += entry.count;
            tracing::warn!(
                schedule = id,
                scheduled_for = %entry.scheduled_for,
                window_start = %entry.window.start,
                window_end = %entry.window.end,
                range_end = ?entry.range_end,
                count = entry.count,
                action = ?entry.action,
                tier = ?plan.tier,
                "missed window: no run recorded after its grace period"
            );
        }
        if missed > 0 {
            self.metrics
                .count_for(id, Metric::MissedWindows, u64::from(missed));
        }
        report.missed_windows += missed;
        self.announce_gap(schedule, plan, missed, read, now, report);
    }

    /// The gap's owner alerts and, for a long one, where its catch-up goes. `read`: the
    /// runs the pass read around the gap, at `now`.
    pub(super) fn announce_gap(
        &self,
        schedule: &Schedule,
        plan: &Plan,
        missed: u32,
        read: &[Run],
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) {
        let id = schedule.id();
        self.gap_alerts(schedule, plan, missed, read, now, report);
        for alert in &plan.alerts {
            tracing::warn!(schedule = id, owner = ?alert.owner, alert = %alert.message, "owner alert");
            report.alerts.push(alert.message.clone());
        }
        if let Some(b) = &plan.backfill {
            tracing::warn!(
                schedule = id,
                first = %b.first,
                last = %b.last,
                windows = b.windows,
                start_paused = b.start_paused,
                stored = self.backfills.is_some(),
                "long gap: catch-up goes through the throttled backfill lane"
            );
        }
    }

    async fn write_plan(
        &self,
        stored: &StoredSchedule,
        schedule: &Schedule,
        plan: &Plan,
        now: DateTime<Utc>,
        correction_open: bool,
        report: &mut ReconcileReport,
    ) -> Result<Written, ReconcileError> {
        let mut written = Written::default();
        // Entries other writers stored first: `[first, last]` windows they cover.
        let mut theirs: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
        let mut immediate: Vec<Run> = Vec::new();
        for entry in &plan.entries {
            let last = entry.range_end.unwrap_or(entry.scheduled_for);
            if let Some(&(_, end)) = theirs
                .iter()
                .find(|(s, e)| *s <= entry.scheduled_for && entry.scheduled_for <= *e)
            {
                if end < last {
                    // See below: the rest of this plan no longer holds.
                    written.partial = true;
                    break;
                }
                continue;
            }
            let run = plan.to_run(schedule, entry, now, stored.version);
            match self.store.create_run(&run).await? {
                cronledger_aws::Created::New(run) => {
                    report.entries_written += 1;
                    count(entry, report);
                    self.ended(&run, now).await;
                    self.metrics.count_for(
                        schedule.id(),
                        metric_of(&entry.action),
                        u64::from(entry.count),
                    );
                    if let Action::Fire { release, .. } = entry.action {
                        if release == Release::Immediate && correction_open {
                            immediate.push(run);
                        } else {
                            written.pending.push(run);
                        }
                    }
                }
                cronledger_aws::Created::Existing(existing) => {
                    report.already_recorded += 1;
                    let end = existing.range_end.unwrap_or(existing.key.scheduled_for);
                    theirs.push((existing.key.scheduled_for, end));
                    written.covered_until = written.covered_until.max(Some(end));
                    if end < last {
                        // Another writer recorded this entry's first windows and not the rest,
                        // so it saw a ledger this plan did not: its later entries no longer
                        // hold. Writing them anyway once let an 11:00 pass fire RUN_ONCE's
                        // latest window while an 11:03 pass, whose range began one window
                        // later, coalesced that same window. The next round re-plans from a
                        // fresh read.
                        written.partial = true;
                        break;
                    }
                }
            }
        }
        // Immediate release: the few windows of a gap still "just now" go at once.
        for run in immediate {
            let lane = super::lane_of(&run);
            match self.dispatch(&run, lane, now).await {
                Ok(true) => {
                    report.released += 1;
                    tracing::info!(run = %run.key, %lane, "catch-up released (immediate)");
                }
                Ok(false) => {}
                Err(e) => {
                    report.error(&format!("release {}", run.key), &e);
                }
            }
        }
        Ok(written)
    }
}

/// The per-schedule metric a written entry counts towards (in windows).
fn metric_of(action: &Action) -> Metric {
    match action {
        Action::Fire { .. } => Metric::CatchUpRunsCreated,
        Action::Skip { .. } => Metric::WindowsSkipped,
        Action::Coalesce { .. } => Metric::WindowsCoalesced,
        Action::Hold { .. } => Metric::WindowsAwaitingApproval,
    }
}

fn count(entry: &PlannedEntry, report: &mut ReconcileReport) {
    let n = entry.count;
    match entry.action {
        Action::Fire { .. } => report.windows_fired += n,
        Action::Skip { .. } => report.windows_skipped += n,
        Action::Coalesce { .. } => report.windows_coalesced += n,
        Action::Hold { .. } => report.windows_held += n,
    }
}

/// The windows the ledger accounts for: expected occurrences only (an operator's run at the
/// same instant is its own request, not the occurrence), range records as ranges. Entries a
/// reconciler's plan wrote (trigger CATCH_UP; after the watermark they belong to a gap still
/// being written) are marked so the rest of that gap is planned exactly as they were.
fn coverage_of(runs: &[Run]) -> Coverage {
    let mut coverage = Coverage::new();
    for run in runs.iter().filter(|r| r.key.origin == Origin::Expected) {
        let (first, last) = (
            run.key.scheduled_for,
            run.range_end.unwrap_or(run.key.scheduled_for),
        );
        match (run.trigger, run.range_end) {
            (Trigger::CatchUp, _) => coverage.add_planned(first, last),
            (_, Some(_)) => coverage.add_range(first, last),
            (_, None) => coverage.add(first),
        }
    }
    coverage
}

/// The stored pauses, plus a disabled schedule's open DISABLED stretch (from its last change).
fn pauses_of(stored: &StoredSchedule) -> Vec<Pause> {
    let mut pauses: Vec<Pause> = stored
        .pauses
        .iter()
        .map(|p| Pause {
            from: p.from,
            until: p.until,
            reason: Reason::Paused,
        })
        .collect();
    if !stored.spec.enabled {
        pauses.push(Pause {
            from: stored.updated_at,
            until: None,
            reason: Reason::Disabled,
        });
    }
    pauses
}

/// Catch-up lanes, in release order.
pub(super) const CATCH_UP_LANES: [Lane; 2] = [Lane::Correction, Lane::Backfill];
