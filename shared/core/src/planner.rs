//! The misfire planner: which windows should have fired, and what to do with each that did not.
//!
//! Pure: `(schedule, watermark, what the ledger already holds, now) -> plan`. Every expected
//! window in `(watermark, horizon]` gets exactly one action, where
//! `horizon = now - max(settle, grace)`: a window still inside its grace period is the ticker's
//! to fire late, not the planner's to call missed. Cost is linear in the windows since the
//! watermark, never in the schedule's history.

use std::collections::BTreeSet;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::error::{Code, Issue};
use crate::policy::{Lane, MisfirePolicy};
use crate::run::{Origin, Reason, Run, RunStatus, Trigger};
use crate::schedule::Schedule;
use crate::span::Span;
use crate::window::{utc_text, Window};

/// Windows the ledger already accounts for: single entries and range records.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    /// Every window accounted for.
    all: Windows,
    /// The part of `all` a reconciler's plan wrote (trigger CATCH_UP) after the watermark:
    /// part of a gap still being accounted for, not windows that ran.
    planned: Windows,
}

/// A set of windows: single instants and inclusive `[first, last]` ranges.
#[derive(Debug, Clone, Default)]
struct Windows {
    points: BTreeSet<DateTime<Utc>>,
    /// Sorted by start.
    ranges: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

impl Windows {
    fn add_range(&mut self, first: DateTime<Utc>, last: DateTime<Utc>) {
        let at = self.ranges.partition_point(|(s, _)| *s <= first);
        self.ranges.insert(at, (first, last));
    }

    fn contains(&self, t: DateTime<Utc>) -> bool {
        if self.points.contains(&t) {
            return true;
        }
        // Ranges never overlap each other much; scan back from the last range starting <= t.
        let upto = self.ranges.partition_point(|(s, _)| *s <= t);
        self.ranges[..upto].iter().rev().any(|(_, e)| t <= *e)
    }
}

impl Coverage {
    pub fn new() -> Coverage {
        Coverage::default()
    }

    pub fn add(&mut self, scheduled_for: DateTime<Utc>) {
        self.all.points.insert(scheduled_for);
    }

    pub fn add_range(&mut self, first: DateTime<Utc>, last: DateTime<Utc>) {
        self.all.add_range(first, last);
    }

    /// An entry a reconciler's plan wrote: a racing reconciler, or a pass that stopped
    /// before its watermark moved. The planner counts these windows into the gap (its
    /// oldest window, tier, cap and replay group) without writing them again, so whoever
    /// plans the rest decides it exactly as the first writer did.
    pub fn add_planned(&mut self, first: DateTime<Utc>, last: DateTime<Utc>) {
        for windows in [&mut self.all, &mut self.planned] {
            if first == last {
                windows.points.insert(first);
            } else {
                windows.add_range(first, last);
            }
        }
    }

    fn is_planned(&self, t: DateTime<Utc>) -> bool {
        self.planned.contains(t)
    }

    pub fn covers(&self, t: DateTime<Utc>) -> bool {
        self.all.contains(t)
    }

    /// The last covered instant at or before `t`.
    fn last_covered_by(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let point = self.all.points.range(..=t).next_back().copied();
        let ranges = self
            .all
            .ranges
            .iter()
            .filter(|(first, _)| *first <= t)
            .map(|(_, last)| (*last).min(t));
        point.into_iter().chain(ranges).max()
    }

    pub fn is_empty(&self) -> bool {
        self.all.points.is_empty() && self.all.ranges.is_empty()
    }

    /// `through`, moved to the end of any range record that covers it (repeatedly, for
    /// chained ranges). A watermark must never stop inside a range record: reads start at
    /// the watermark, so the part of the range past it would look missing and be planned
    /// again.
    pub fn extend_through(&self, mut through: DateTime<Utc>) -> DateTime<Utc> {
        let ranges = &self.all.ranges;
        loop {
            let upto = ranges.partition_point(|(s, _)| *s <= through);
            match ranges[..upto].iter().map(|(_, e)| *e).max() {
                Some(end) if end > through => through = end,
                _ => return through,
            }
        }
    }
}

/// A stretch during which the schedule was paused or disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Pause {
    pub from: DateTime<Utc>,
    /// `None` while still paused.
    pub until: Option<DateTime<Utc>>,
    /// PAUSED or DISABLED.
    pub reason: Reason,
}

impl Pause {
    fn contains(&self, t: DateTime<Utc>) -> bool {
        t >= self.from && self.until.is_none_or(|u| t < u)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct PlannerConfig {
    /// How long after a window the planner waits before judging it (lets tickers finish).
    pub settle: Span,
    /// More consecutive windows than this with one non-firing outcome become one range record.
    pub range_threshold: usize,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig {
            settle: Span::minutes(1),
            range_threshold: 10,
        }
    }
}

/// How old the oldest missed window is, in the schedule's catch-up tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GapTier {
    /// Up to `catch_up.immediate` (5 minutes by default).
    Immediate,
    /// Up to `catch_up.serial` (1 hour).
    Serial,
    /// Up to `catch_up.backfill` (24 hours).
    Backfill,
    /// Longer.
    Beyond,
}

/// How released catch-up work should flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Release {
    /// All at once (a few recent windows).
    Immediate,
    /// One at a time, oldest first.
    Serial,
    /// Through the throttled backfill release.
    Throttled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "action", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    /// Create the run PENDING with trigger CATCH_UP and release it on `lane`.
    Fire { lane: Lane, release: Release },
    /// Record it SKIPPED.
    Skip { reason: Reason },
    /// Record it COALESCED into the run at `into`.
    Coalesce { into: DateTime<Utc> },
    /// Record it MANUAL_REQUIRED: waits for an operator.
    Hold { reason: Reason },
}

impl Action {
    pub fn status(&self) -> RunStatus {
        match self {
            Action::Fire { .. } => RunStatus::Pending,
            Action::Skip { .. } => RunStatus::Skipped,
            Action::Coalesce { .. } => RunStatus::Coalesced,
            Action::Hold { .. } => RunStatus::ManualRequired,
        }
    }

    pub fn reason(&self) -> Option<Reason> {
        match self {
            Action::Fire { .. } => None,
            Action::Skip { reason } | Action::Hold { reason } => Some(*reason),
            Action::Coalesce { .. } => Some(Reason::Coalesced),
        }
    }
}

/// One ledger write the plan asks for: a window, or a range of consecutive windows.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PlannedEntry {
    pub scheduled_for: DateTime<Utc>,
    /// The first window's start to the last window's end.
    pub window: Window,
    /// Set for a range record: the last window it covers.
    pub range_end: Option<DateTime<Utc>>,
    pub count: u32,
    pub action: Action,
}

/// Something a person should hear about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Alert {
    pub owner: Option<String>,
    pub message: String,
}

/// A backfill the plan wants created for a long gap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BackfillProposal {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    pub windows: u32,
    /// Started throttled at once (only when every window in it fires automatically), or
    /// created paused to wait for approval.
    pub start_paused: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PlanTotals {
    /// Expected windows in `(from, through]`.
    pub expected: u32,
    /// Of those, already in the ledger.
    pub recorded: u32,
    pub fire: u32,
    pub skipped: u32,
    pub coalesced: u32,
    pub manual: u32,
}

impl PlanTotals {
    /// Counts each action once per window it decides.
    fn add<'a>(&mut self, actions: impl Iterator<Item = (u32, &'a Action)>) {
        for (windows, action) in actions {
            match action {
                Action::Fire { .. } => self.fire += windows,
                Action::Skip { .. } => self.skipped += windows,
                Action::Coalesce { .. } => self.coalesced += windows,
                Action::Hold { .. } => self.manual += windows,
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Plan {
    pub schedule_id: String,
    /// The watermark planned from (exclusive).
    pub from: DateTime<Utc>,
    /// The new watermark once the plan is written (inclusive).
    pub through: DateTime<Utc>,
    pub gap: Option<Span>,
    pub tier: Option<GapTier>,
    pub replay_group_id: Option<String>,
    pub entries: Vec<PlannedEntry>,
    pub alerts: Vec<Alert>,
    pub backfill: Option<BackfillProposal>,
    pub totals: PlanTotals,
}

impl Plan {
    /// A plan of `(from, through]` before any window is decided.
    fn undecided(
        spec: &crate::spec::ScheduleSpec,
        from: DateTime<Utc>,
        through: DateTime<Utc>,
        totals: PlanTotals,
    ) -> Plan {
        Plan {
            schedule_id: spec.id.clone(),
            from,
            through,
            gap: None,
            tier: None,
            replay_group_id: None,
            entries: Vec::new(),
            alerts: Vec::new(),
            backfill: None,
            totals,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The ledger entry each planned write becomes, as the reconciler writes it.
    pub fn to_run(
        &self,
        schedule: &Schedule,
        entry: &PlannedEntry,
        created_at: DateTime<Utc>,
        schedule_version: u64,
    ) -> Run {
        let mut run = schedule.pending_run(
            entry.scheduled_for,
            entry.window,
            Origin::Expected,
            Trigger::CatchUp,
            created_at,
            schedule_version,
        );
        run.status = entry.action.status();
        run.reason = entry.action.reason();
        run.replay_group_id = self.replay_group_id.clone();
        run.range_end = entry.range_end;
        run.count = entry.count;
        run.retention =
            crate::retention::for_entry(schedule.spec.retention, entry.range_end.is_some());
        run.coalesced_into = match entry.action {
            Action::Coalesce { into } => Some(into),
            _ => None,
        };
        run.lane = match entry.action {
            Action::Fire { lane, .. } => Some(lane),
            _ => None,
        };
        run
    }
}

/// Everything the planner needs, passed in: no clock, no store.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    pub schedule: &'a Schedule,
    /// Every window at or before this is already accounted for.
    pub watermark: DateTime<Utc>,
    pub now: DateTime<Utc>,
    pub existing: &'a Coverage,
    pub pauses: &'a [Pause],
    pub config: PlannerConfig,
}

/// A window the planner must decide, with the occurrence index that tells neighbours apart.
#[derive(Debug, Clone, Copy)]
struct Missed {
    index: usize,
    at: DateTime<Utc>,
    window: Window,
    paused: Option<Reason>,
    /// Already written by a reconciler's plan: decided again for the gap's sake, not written.
    planned: bool,
    /// Consecutive windows this stands for: 1, or the middle of a long quiet tail (see
    /// [`QUIET_TAIL`]), whose windows all get one action; `at` is its first, `window` spans all.
    count: u32,
}

impl Missed {
    fn one(index: usize, at: DateTime<Utc>, window: Window) -> Missed {
        Missed {
            index,
            at,
            window,
            paused: None,
            planned: false,
            count: 1,
        }
    }
}

/// A tail of the range with no recorded window and no pause boundary is counted rather than
/// walked when it has more windows than this (a century of a minutely job: 52 million).
/// Its first windows and its last are still planned one by one: they carry the decisions
/// that differ (the cap's fires, the window the rest coalesce into); the rest are one range.
const QUIET_TAIL: u64 = 10_000;

/// Windows in `items`, counting what each stands for.
fn windows_in(items: &[Missed]) -> u32 {
    items.iter().map(|m| m.count).sum()
}

pub fn plan(input: PlanInput<'_>) -> Result<Plan, Issue> {
    plan_bounded(input, None)
}

/// [`plan`] for the windows up to `until` only: the part of the range an expression the
/// schedule had before an edit still judges (the gap's age and tier still count from `now`).
pub fn plan_until(input: PlanInput<'_>, until: DateTime<Utc>) -> Result<Plan, Issue> {
    plan_bounded(input, Some(until))
}

fn plan_bounded(input: PlanInput<'_>, until: Option<DateTime<Utc>>) -> Result<Plan, Issue> {
    let schedule = input.schedule;
    let spec = &schedule.spec;
    if input.now < input.watermark {
        return Err(Issue::new(
            Code::PlanInvalidInput,
            "now",
            format!(
                "now {} is before the watermark {}",
                utc_text(input.now),
                utc_text(input.watermark)
            ),
        ));
    }
    // A jittered schedule is judged from its fire times: on its nominal clock.
    let input = PlanInput {
        now: schedule.nominal_now(input.now),
        ..input
    };
    let hold_back = input.config.settle.max(spec.grace).as_delta();
    let horizon = input.now - hold_back;
    let through = until
        .map_or(horizon, |u| u.min(horizon))
        .max(input.watermark);

    // One walk over the expected windows: keep the ones the ledger lacks.
    // The schedule's windows: its expression within its bounds (`start_at`, `end_at`,
    // `max_runs`); a window's start is the expression's previous occurrence all the same.
    let timing = schedule;
    let mut totals = PlanTotals::default();
    let mut missed: Vec<Missed> = Vec::new();
    let mut previous =
        schedule.grid_prev_before(timing.next_after(input.watermark).unwrap_or(through));
    // Past this instant nothing is recorded and no pause starts or ends: a long stretch there
    // is counted, not walked (see [`QUIET_TAIL`]).
    let quiet_since = quiet_since(&input, through);
    let head = (spec.max_auto_catch_up as u64)
        .saturating_add(input.config.range_threshold as u64)
        .saturating_add(2);
    let mut tail = Tail::NotYet;
    let mut cursor = input.watermark;
    let mut index = 0usize;
    while let Some(at) = timing.next_after(cursor).filter(|t| *t <= through) {
        if tail == Tail::NotYet && cursor >= quiet_since {
            let windows = timing.count_between(cursor, through);
            tail = if windows > QUIET_TAIL.max(head.saturating_mul(2)) {
                Tail::Head(head)
            } else {
                Tail::Walk
            };
        }
        if tail == Tail::Head(0) {
            tail = Tail::Walk;
            // The middle: up to the window before the last, which is walked.
            let last = timing.prev_before(through + TimeDelta::seconds(1));
            let middle_end = last.and_then(|l| timing.prev_before(l));
            if let Some(middle_end) = middle_end.filter(|end| *end >= at) {
                let count = timing.count_between(cursor, middle_end) as u32;
                totals.expected += count;
                missed.push(Missed {
                    index,
                    at,
                    window: Window::new(previous.unwrap_or(at), middle_end),
                    paused: stopped(&input, at),
                    planned: false,
                    count,
                });
                index += count as usize;
                previous = Some(middle_end);
                cursor = middle_end;
                continue;
            }
        }
        if let Tail::Head(left) = &mut tail {
            *left -= 1;
        }
        let this = index;
        index += 1;
        cursor = at;
        totals.expected += 1;
        let window = Window::new(previous.unwrap_or(at), at);
        previous = Some(at);
        let covered = input.existing.covers(at);
        let planned = covered && input.existing.is_planned(at);
        if covered {
            totals.recorded += 1;
            if !planned {
                continue;
            }
        }
        let paused = stopped(&input, at);
        // A paused (or excluded) window is no part of the gap, whoever recorded it.
        if planned && paused.is_some() {
            continue;
        }
        missed.push(Missed {
            index: this,
            at,
            window,
            paused,
            planned,
            count: 1,
        });
    }

    let (live, paused): (Vec<Missed>, Vec<Missed>) =
        missed.into_iter().partition(|m| m.paused.is_none());
    let mut decided: Vec<(Missed, Action)> = paused
        .into_iter()
        .map(|m| {
            let reason = m.paused.unwrap_or(Reason::Paused);
            (m, Action::Skip { reason })
        })
        .collect();

    let mut plan = Plan::undecided(spec, input.watermark, through, totals);

    decided.extend(decide_gap(spec, live, input.now, &mut plan));
    decided.retain(|(m, _)| !m.planned);
    decided.sort_by_key(|(m, _)| m.index);

    plan.totals.add(decided.iter().map(|(m, a)| (m.count, a)));
    plan.entries = compress(&decided, input.config.range_threshold);
    Ok(plan)
}

/// Why a window is not part of a gap: excluded by the schedule's calendars (first: an
/// excluded window was never to run), or paused or disabled when it fell due.
fn stopped(input: &PlanInput<'_>, at: DateTime<Utc>) -> Option<Reason> {
    if input.schedule.excluded(at) {
        return Some(Reason::Excluded);
    }
    input
        .pauses
        .iter()
        .find(|p| p.contains(at))
        .map(|p| p.reason)
}

/// Where the walk is in a range's quiet tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// Not in it yet.
    NotYet,
    /// In a long one: this many windows still to walk before the middle is counted.
    Head(u64),
    /// Walking every window (a short tail, or past the counted middle).
    Walk,
}

/// The last instant in the range at which something is recorded or a pause starts or
/// ends; the watermark when there is none.
fn quiet_since(input: &PlanInput<'_>, through: DateTime<Utc>) -> DateTime<Utc> {
    let pause_edges = input
        .pauses
        .iter()
        .flat_map(|p| [Some(p.from), p.until])
        .flatten()
        .filter(|t| *t <= through);
    // An excluded stretch ends a quiet tail as a pause does: its windows are decided apart.
    let tz = input.schedule.spec.timezone;
    let exclusion_edges = input
        .schedule
        .exclusions()
        .iter()
        .flat_map(|sel| [Some(sel.first), sel.last.succ_opt()])
        .flatten()
        .map(move |day| crate::calendar::local_day_start(day, tz))
        .filter(|t| *t <= through);
    input
        .existing
        .last_covered_by(through)
        .into_iter()
        .chain(pause_edges)
        .chain(exclusion_edges)
        .fold(input.watermark, DateTime::max)
}

/// Decides one gap (its windows oldest first, none paused) by the DESIGN catch-up table, and
/// records on `plan` what the gap is: its age and tier, its replay group, the alert and the
/// backfill proposal it calls for.
fn decide_gap(
    spec: &crate::spec::ScheduleSpec,
    live: Vec<Missed>,
    now: DateTime<Utc>,
    plan: &mut Plan,
) -> Vec<(Missed, Action)> {
    let (Some(oldest), Some(latest)) = (live.first().copied(), live.last().copied()) else {
        return Vec::new();
    };
    let gap = Span::from_delta(now - oldest.at);
    let tier = tier_of(gap, spec);
    plan.gap = Some(gap);
    plan.tier = Some(tier);
    plan.replay_group_id = Some(format!("catchup:{}:{}", spec.id, utc_text(oldest.at)));
    let actions = decide(spec, tier, &live, latest.at);
    if actions.iter().any(|a| matches!(a, Action::Hold { .. })) || tier >= GapTier::Backfill {
        plan.alerts.push(Alert {
            owner: spec.owner.clone(),
            message: alert_text(spec, tier, gap, &live, &actions),
        });
    }
    if spec.misfire == MisfirePolicy::CatchUpAll && tier >= GapTier::Backfill {
        plan.backfill = Some(BackfillProposal {
            first: oldest.at,
            last: latest.at,
            windows: windows_in(&live),
            // Started only when every window may start on its own: a running backfill
            // must not replay windows the cap, the side effects or the gap hold back.
            start_paused: actions.iter().any(|a| !matches!(a, Action::Fire { .. })),
        });
    }
    live.into_iter().zip(actions).collect()
}

/// Plans the live runs a backlog left waiting late ([`planned_with_its_gap`]): windows the
/// ticker fired but no worker started within their grace (a worker outage, a backed-up lane).
/// They are one gap, judged exactly as the same windows found missing would be: the tier
/// from the oldest, the cap counted from it, catch-up lanes and release, the alert and the
/// backfill proposal; so a window's fate does not depend on which outage it met. `waiting`
/// holds each run's instant and window, oldest first; every entry is one run (no range
/// records: the runs exist). The plan's `from` and `through` are the first and last of them.
pub fn plan_backlog(
    schedule: &Schedule,
    waiting: &[(DateTime<Utc>, Window)],
    now: DateTime<Utc>,
) -> Plan {
    let spec = &schedule.spec;
    let now = schedule.nominal_now(now);
    let live: Vec<Missed> = waiting
        .iter()
        .enumerate()
        .map(|(index, &(at, window))| Missed::one(index, at, window))
        .collect();
    let first = live.first().map_or(now, |m| m.at);
    let last = live.last().map_or(now, |m| m.at);
    let totals = PlanTotals {
        expected: live.len() as u32,
        ..PlanTotals::default()
    };
    let mut plan = Plan::undecided(spec, first, last, totals);
    let decided = decide_gap(spec, live, now, &mut plan);
    plan.totals.add(decided.iter().map(|(m, a)| (m.count, a)));
    plan.entries = decided
        .into_iter()
        .map(|(m, action)| PlannedEntry {
            scheduled_for: m.at,
            window: m.window,
            range_end: None,
            count: 1,
            action,
        })
        .collect();
    plan
}

/// What becomes of a live run whose first attempt would start past its grace period: it sat
/// in its lane through an outage, a worker outage or a backlog (or waited on a crashed
/// ticker's recovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "action", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LateStart {
    /// On time, or late but the policy runs such a window on its own.
    Run,
    /// SKIPPED (GRACE_EXPIRED): the policy does not run missed windows.
    Skip { reason: Reason },
    /// MANUAL_REQUIRED: the policy (or the gap's tier, or the side effects) wants approval.
    Hold { reason: Reason },
    /// COALESCED (RUN_ONCE): later windows are past their grace too; the latest runs for all.
    Coalesce { into: DateTime<Utc> },
}

/// Judges a late first start as the planner judges the oldest window of the gap it opens
/// (this window up to the latest one past its grace), so a window's fate does not depend on
/// whether it was fired before the trouble or found missing after it: SKIP skips it, MANUAL
/// holds it, RUN_ONCE coalesces it into the latest window (or runs it, if it is the latest),
/// CATCH_UP_ALL runs it; approval when the tier, the side effects or a zero cap say so.
/// Inside a backlog, CATCH_UP_ALL's late runs are planned together instead (see
/// [`planned_with_its_gap`]).
///
/// Coalescing is only sound into a window that will run: a caller that finds the latest
/// window's run itself waiting late in a lane (a backlog, not a gap) must see that it runs,
/// or a lasting backlog would fold every run into the next (the worker moves it ahead).
pub fn late_start(
    schedule: &Schedule,
    scheduled_for: DateTime<Utc>,
    now: DateTime<Utc>,
) -> LateStart {
    let spec = &schedule.spec;
    let now = schedule.nominal_now(now);
    let late = Span::from_delta(now - scheduled_for);
    if late <= spec.grace {
        return LateStart::Run;
    }
    let through = now - spec.grace.as_delta();
    let window = |at| Missed::one(0, at, Window::new(at, at));
    let mut gap = vec![window(scheduled_for)];
    // The last window at or before `through`, if it is a later one than this.
    let latest = schedule
        .timing()
        .prev_before(through + chrono::TimeDelta::nanoseconds(1))
        .filter(|latest| *latest > scheduled_for);
    // The planner's decision for the oldest window depends only on the gap's size being
    // one or more, and on its latest window.
    if let Some(latest) = latest {
        gap.push(window(latest));
    }
    let latest = latest.unwrap_or(scheduled_for);
    match decide(spec, tier_of(late, spec), &gap, latest).first() {
        Some(Action::Skip { .. }) => LateStart::Skip {
            reason: Reason::GraceExpired,
        },
        Some(Action::Hold { reason }) => LateStart::Hold { reason: *reason },
        Some(Action::Coalesce { into }) => LateStart::Coalesce { into: *into },
        _ => LateStart::Run,
    }
}

/// Whether a late first start, when it is part of a backlog (its neighbours' runs wait late
/// too), is left to the reconciler's plan of the whole gap ([`plan_backlog`]) instead of
/// being judged alone by [`late_start`]: CATCH_UP_ALL past the immediate tier. Its cap,
/// catch-up lanes, approvals and backfill proposal belong to the gap, and one run cannot
/// tell its place in it (the cap counts from the gap's oldest window).
pub fn planned_with_its_gap(
    schedule: &Schedule,
    scheduled_for: DateTime<Utc>,
    now: DateTime<Utc>,
) -> bool {
    let spec = &schedule.spec;
    let late = Span::from_delta(schedule.nominal_now(now) - scheduled_for);
    spec.misfire == MisfirePolicy::CatchUpAll
        && late > spec.grace
        && tier_of(late, spec) != GapTier::Immediate
}

fn tier_of(gap: Span, spec: &crate::spec::ScheduleSpec) -> GapTier {
    let tiers = &spec.catch_up;
    if gap <= tiers.immediate {
        GapTier::Immediate
    } else if gap <= tiers.serial {
        GapTier::Serial
    } else if gap <= tiers.backfill {
        GapTier::Backfill
    } else {
        GapTier::Beyond
    }
}

/// The DESIGN catch-up table, one action per missed window (oldest first).
fn decide(
    spec: &crate::spec::ScheduleSpec,
    tier: GapTier,
    missed: &[Missed],
    latest: DateTime<Utc>,
) -> Vec<Action> {
    let cap = spec.max_auto_catch_up as usize;
    // Side-effecting jobs replay on their own only while the gap is still "just now".
    let needs_approval = match tier {
        _ if crate::admission::every_run_approval(spec) => Some(Reason::ApprovalRequired),
        GapTier::Beyond => Some(Reason::GapTooLong),
        _ if spec.side_effects && tier != GapTier::Immediate => Some(Reason::SideEffects),
        _ => None,
    };
    match spec.misfire {
        MisfirePolicy::Skip => vec![
            Action::Skip {
                reason: Reason::Missed
            };
            missed.len()
        ],
        MisfirePolicy::Manual => vec![
            Action::Hold {
                reason: Reason::PolicyManual
            };
            missed.len()
        ],
        MisfirePolicy::RunOnce => {
            let last = match needs_approval {
                Some(reason) => Action::Hold { reason },
                None if cap == 0 => Action::Hold {
                    reason: Reason::CapExceeded,
                },
                None => Action::Fire {
                    lane: Lane::Correction,
                    release: Release::Immediate,
                },
            };
            let mut actions = vec![Action::Coalesce { into: latest }; missed.len() - 1];
            actions.push(last);
            actions
        }
        MisfirePolicy::CatchUpAll => {
            let (lane, release) = match tier {
                GapTier::Immediate => (Lane::Correction, Release::Immediate),
                GapTier::Serial => (Lane::Correction, Release::Serial),
                GapTier::Backfill | GapTier::Beyond => (Lane::Backfill, Release::Throttled),
            };
            // By each item's position among the windows (a counted tail starts past the cap).
            let mut position = 0usize;
            missed
                .iter()
                .map(|m| {
                    let i = position;
                    position += m.count as usize;
                    match needs_approval {
                        Some(reason) => Action::Hold { reason },
                        None if i < cap => Action::Fire { lane, release },
                        None => Action::Hold {
                            reason: Reason::CapExceeded,
                        },
                    }
                })
                .collect()
        }
    }
}

fn alert_text(
    spec: &crate::spec::ScheduleSpec,
    tier: GapTier,
    gap: Span,
    missed: &[Missed],
    actions: &[Action],
) -> String {
    let held = actions
        .iter()
        .filter(|a| matches!(a, Action::Hold { .. }))
        .count();
    let fired = actions
        .iter()
        .filter(|a| matches!(a, Action::Fire { .. }))
        .count();
    format!(
        "schedule {} missed {} window(s) over {} ({tier:?} tier, policy {}): {fired} released automatically, {held} awaiting approval",
        spec.id,
        windows_in(missed),
        gap.humanized(),
        spec.misfire
    )
}

/// Folds runs of consecutive windows with one non-firing action into range records.
fn compress(decided: &[(Missed, Action)], threshold: usize) -> Vec<PlannedEntry> {
    let single = |m: &Missed, action: Action| PlannedEntry {
        scheduled_for: m.at,
        window: m.window,
        range_end: None,
        count: 1,
        action,
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < decided.len() {
        let (first, action) = decided[i];
        let mut j = i + 1;
        if !matches!(action, Action::Fire { .. }) {
            while j < decided.len()
                && decided[j].1 == action
                && decided[j].0.index == decided[j - 1].0.index + decided[j - 1].0.count as usize
            {
                j += 1;
            }
        }
        let run = &decided[i..j];
        let windows: u32 = run.iter().map(|(m, _)| m.count).sum();
        // A range of one window would only hide a plain entry (and a window that others
        // coalesce into must stay addressable as one), whatever the threshold says.
        if windows as usize > threshold.max(1) {
            let last = run[run.len() - 1].0;
            out.push(PlannedEntry {
                scheduled_for: first.at,
                window: Window::new(first.window.start, last.window.end),
                range_end: Some(if last.count == 1 {
                    last.at
                } else {
                    last.window.end
                }),
                count: windows,
                action,
            });
        } else {
            out.extend(run.iter().map(|(m, a)| single(m, *a)));
        }
        i = j;
    }
    out
}
