//! Change risk: what a schedule edit does to how often and when it fires.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::Issue;
use crate::spec::ScheduleSpec;
use crate::timing::{CalendarStats, Timing};
use crate::window::Window;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RiskLevel {
    Low,
    Medium,
    High,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FireTime {
    pub at: DateTime<Utc>,
    pub local: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
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
    let old_timing = Timing::parse(&old.cron, old.timezone)?;
    let new_timing = Timing::parse(&new.cron, new.timezone)?;
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

    let last_fired = last_fired.or_else(|| old_timing.prev_before(now));
    let search_from = last_fired.map_or(now, |t| t.max(now));
    let first_new_fire = new_timing.next_after(search_from);
    let first_new_window =
        first_new_fire.map(|at| Window::new(new_timing.prev_before(at).unwrap_or(at), at));
    let overlaps_recorded = match (first_new_window, last_fired) {
        (Some(w), Some(last)) => w.start < last,
        _ => false,
    };
    if overlaps_recorded {
        raise(
            RiskLevel::Medium,
            "the first new window starts before the last recorded fire: that run may reprocess data"
                .to_string(),
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
        first_new_fire,
        first_new_window,
        overlaps_recorded,
        refires_past_window: first_new_fire.is_some_and(|t| t <= search_from),
    })
}
