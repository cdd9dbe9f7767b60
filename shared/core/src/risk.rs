//! Change risk: what a schedule edit does to how often and when it fires.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::Issue;
use crate::span::Span;
use crate::spec::ScheduleSpec;
use crate::timing::{CalendarStats, Timing};
use crate::window::{utc_text, Window};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RiskLevel {
    Low,
    Medium,
    High,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FireTime {
    pub at: DateTime<Utc>,
    pub local: String,
}

/// A stretch of business time at the switch between the old and the new rule, `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SwitchSpan {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub duration: Span,
}

impl SwitchSpan {
    fn between(start: DateTime<Utc>, end: DateTime<Utc>) -> Option<SwitchSpan> {
        (start < end).then(|| SwitchSpan {
            start,
            end,
            duration: Span::from_delta(end - start),
        })
    }
}

/// A gap of data this long or longer makes a change HIGH risk (confirmation needed).
pub const LONG_GAP: Span = Span::hours(1);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RiskReport {
    pub level: RiskLevel,
    /// Why the level is what it is, one line per finding.
    pub findings: Vec<String>,
    pub before: CalendarStats,
    pub after: CalendarStats,
    /// Runs per day after divided by before (average over the real calendar).
    pub frequency_ratio: f64,
    pub next_before: Vec<FireTime>,
    pub next_after: Vec<FireTime>,
    /// The first run the new rule would create and the window it would cover.
    pub first_new_fire: Option<DateTime<Utc>>,
    pub first_new_window: Option<Window>,
    /// True if that window reaches back before the last window the old rule already fired:
    /// the change would make a job process data a recorded run already covered.
    pub overlaps_recorded: bool,
    /// The last run under the old rule (its last occurrence at or before the switch) and
    /// the window it covers.
    pub last_old_window: Option<Window>,
    /// Business time no run covers: after the last old run's window and before the first
    /// new run's (an hourly job made `*/5` at 00:26 leaves `[00:00, 00:25)`).
    pub window_gap: Option<SwitchSpan>,
    /// Business time two runs cover: the first new run's window reaches back into what the
    /// old rule's runs covered (the same as `overlaps_recorded`, with its extent).
    pub window_overlap: Option<SwitchSpan>,
    /// Always false: a change never re-fires a past window (invariant 6); the next fire is
    /// searched strictly after both `now` and the last recorded fire.
    pub refires_past_window: bool,
}

/// Compares two versions of a schedule as of `now`. `last_fired` is the latest window the
/// old rule recorded (defaults to the old rule's last occurrence before `now`).
pub fn assess_change(
    old: &ScheduleSpec,
    new: &ScheduleSpec,
    now: DateTime<Utc>,
    last_fired: Option<DateTime<Utc>>,
    preview: usize,
) -> Result<RiskReport, Issue> {
    let old_timing = Timing::parse(&old.cron, old.timezone)?.with_dst(old.dst);
    let new_timing = Timing::parse(&new.cron, new.timezone)?.with_dst(new.dst);
    let before = old_timing.calendar_stats(now, 366);
    let after = new_timing.calendar_stats(now, 366);
    let frequency_ratio = if before.total == 0 {
        f64::INFINITY
    } else {
        after.total as f64 / before.total as f64
    };

    let mut level = RiskLevel::Low;
    let mut findings = Vec::new();
    let mut raise = |to: RiskLevel, why: String| {
        level = level.max(to);
        findings.push(why);
    };
    if frequency_ratio >= 10.0 {
        raise(
            RiskLevel::High,
            format!(
                "fires {frequency_ratio:.1}x as often ({:.2} -> {:.2} runs/day)",
                before.avg_per_day, after.avg_per_day
            ),
        );
    } else if frequency_ratio >= 2.0 || frequency_ratio <= 0.5 {
        raise(
            RiskLevel::Medium,
            format!(
                "frequency changes {frequency_ratio:.2}x ({:.2} -> {:.2} runs/day)",
                before.avg_per_day, after.avg_per_day
            ),
        );
    }
    if old.timezone != new.timezone {
        raise(
            RiskLevel::Medium,
            format!(
                "time zone changes {} -> {}: business dates move",
                old.timezone.name(),
                new.timezone.name()
            ),
        );
    }
    if old.misfire != new.misfire || old.max_auto_catch_up < new.max_auto_catch_up {
        raise(
            RiskLevel::Medium,
            format!(
                "catch-up changes: misfire {} -> {}, max_auto_catch_up {} -> {}",
                old.misfire, new.misfire, old.max_auto_catch_up, new.max_auto_catch_up
            ),
        );
    }
    if !old.side_effects && new.side_effects || old.job.type_name() != new.job.type_name() {
        raise(
            RiskLevel::Medium,
            "the job's target or side effects change".to_string(),
        );
    }
    if old.priority != new.priority {
        raise(
            RiskLevel::Low,
            format!("priority {} -> {}", old.priority, new.priority),
        );
    }
    if old.jitter != new.jitter {
        // The offset comes from the id, so only the jitter itself moves it.
        let offset = |spec: &ScheduleSpec| {
            spec.jitter
                .map_or(crate::Span::ZERO, |j| crate::jitter::offset(&spec.id, j))
        };
        let name = |j: Option<crate::Span>| j.map_or("none".to_string(), |j| j.to_string());
        raise(
            RiskLevel::Low,
            format!(
                "jitter {} -> {}: fires {} after each occurrence instead of {} (windows and keys do not move)",
                name(old.jitter),
                name(new.jitter),
                offset(new),
                offset(old)
            ),
        );
    }
    if old.retention != new.retention {
        raise(
            RiskLevel::Low,
            format!(
                "retention {} -> {}: runs that end from now on stay that long (runs already ended keep theirs)",
                old.retention, new.retention
            ),
        );
    }

    let switch = switch_windows(&old_timing, &new_timing, now, last_fired);
    if let Some(gap) = switch.gap {
        let level = if gap.duration >= LONG_GAP {
            RiskLevel::High
        } else {
            RiskLevel::Medium
        };
        raise(
            level,
            format!(
                "no run covers [{}, {}) ({}): the data between the last old run's window and the first new run's is never processed",
                utc_text(gap.start),
                utc_text(gap.end),
                gap.duration
            ),
        );
    }
    if let Some(overlap) = switch.overlap {
        raise(
            RiskLevel::Medium,
            format!(
                "two runs cover [{}, {}) ({}): the first new window reaches back over data an old run already processed",
                utc_text(overlap.start),
                utc_text(overlap.end),
                overlap.duration
            ),
        );
    }

    let fire_times = |t: &Timing| {
        t.next_n(now, preview)
            .into_iter()
            .map(|at| FireTime {
                at,
                local: at.with_timezone(&t.tz()).to_rfc3339(),
            })
            .collect()
    };
    Ok(RiskReport {
        level,
        findings,
        frequency_ratio,
        next_before: fire_times(&old_timing),
        next_after: fire_times(&new_timing),
        before,
        after,
        first_new_fire: switch.first_new_fire,
        first_new_window: switch.first_new_window,
        overlaps_recorded: switch.overlap.is_some(),
        last_old_window: switch.last_old_window,
        window_gap: switch.gap,
        window_overlap: switch.overlap,
        refires_past_window: switch
            .first_new_fire
            .is_some_and(|t| t <= switch.search_from),
    })
}

/// The business windows on either side of a switch from `old` to `new` at `now`.
pub struct Switch {
    pub last_old_window: Option<Window>,
    pub first_new_fire: Option<DateTime<Utc>>,
    pub first_new_window: Option<Window>,
    pub gap: Option<SwitchSpan>,
    pub overlap: Option<SwitchSpan>,
    /// The new rule's first fire is searched strictly after this.
    search_from: DateTime<Utc>,
}

/// What the system does at an edit: the old expression keeps the windows up to the edit
/// (the reconciler judges them by it, occurrences at the edit's instant included), and the
/// schedule's `next_run_at` becomes the new expression's first occurrence strictly after
/// the edit (or after `last_fired`, the latest window the old rule recorded, when that is
/// later). Each run's window reaches back to its rule's previous occurrence, so what lies
/// between the old rule's last occurrence and the new rule's window start is covered twice
/// or not at all.
pub fn switch_windows(
    old: &Timing,
    new: &Timing,
    now: DateTime<Utc>,
    last_fired: Option<DateTime<Utc>>,
) -> Switch {
    let last_old = last_fired.or_else(|| {
        old.next_at_or_after(now)
            .filter(|at| *at == now)
            .or_else(|| old.prev_before(now))
    });
    let last_old_window = last_old.map(|at| Window::new(old.prev_before(at).unwrap_or(at), at));
    let search_from = last_old.map_or(now, |t| t.max(now));
    let first_new_fire = new.next_after(search_from);
    let first_new_window =
        first_new_fire.map(|at| Window::new(new.prev_before(at).unwrap_or(at), at));
    let (gap, overlap) = match (last_old, first_new_window) {
        (Some(old_end), Some(first)) => (
            SwitchSpan::between(old_end, first.start),
            SwitchSpan::between(first.start, old_end),
        ),
        _ => (None, None),
    };
    Switch {
        last_old_window,
        first_new_fire,
        first_new_window,
        gap,
        overlap,
        search_from,
    }
}
