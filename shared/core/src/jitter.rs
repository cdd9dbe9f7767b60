//! Spreading the herd: `jitter: 5m` moves every occurrence of a schedule by one fixed
//! offset in `[0, jitter)`, so thousands of `0 * * * *` jobs stop firing on the same second.
//!
//! Like Jenkins' `H`, the offset is a stable hash of the schedule's id alone: it survives
//! every edit but a change of the jitter itself (and then scales with it, so schedules keep
//! their order inside the window). Whole seconds.
//!
//! Time semantics (see [`crate::Schedule::fire_time`]): the run keeps its nominal occurrence
//! (`scheduled_for`, business window, idempotency key); the ticker fires it at
//! `scheduled_for + offset` (the stored `next_run_at` is that instant); lateness, grace and
//! the reconciler's judgement of a missed window count from the jittered instant.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Timelike, Utc};
use sha2::{Digest, Sha256};

use crate::error::{Code, Issue};
use crate::schedule::Schedule;
use crate::span::Span;

/// Longest jitter a schedule may ask for.
pub const MAX_JITTER: Span = Span::hours(1);

/// The schedule's offset inside `[0, jitter)`: SHA-256 of the id read as a fraction of the
/// window (the top 64 bits times the jitter, shifted down), whole seconds.
pub fn offset(id: &str, jitter: Span) -> Span {
    let digest = Sha256::digest(id.as_bytes());
    let mut top = [0u8; 8];
    top.copy_from_slice(&digest[..8]);
    let fraction = u128::from(u64::from_be_bytes(top));
    let seconds = (fraction * u128::from(jitter.as_secs())) >> 64;
    // `seconds < jitter`, which is a u64.
    Span::seconds(seconds as u64)
}

/// The validation rule: a positive duration of at most [`MAX_JITTER`], shorter than the
/// schedule's shortest interval between occurrences (`min_gap`, when it fires twice within
/// the validation horizon), so jittered fires keep their order and never meet.
pub fn check(jitter: Span, min_gap: Option<Span>, field: &str) -> Option<Issue> {
    let problem = if jitter == Span::ZERO {
        "jitter must be longer than 0s".to_string()
    } else if jitter > MAX_JITTER {
        format!("jitter {jitter} is longer than the limit of {MAX_JITTER}")
    } else if let Some(gap) = min_gap.filter(|gap| jitter >= *gap) {
        format!(
            "jitter {jitter} must be shorter than the schedule's shortest interval between occurrences ({gap})"
        )
    } else {
        return None;
    };
    Some(Issue::new(Code::ScheduleInvalidJitter, field, problem))
}

/// When a crowd of schedules fires on one minute, with no jitter to spread it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HerdRule {
    /// Share of the fleet (percent) that must fire on the same minute.
    pub percent: u32,
    /// And at least this many schedules.
    pub min_schedules: usize,
    /// How far ahead fire times are looked at.
    pub horizon: Span,
}

impl Default for HerdRule {
    fn default() -> Self {
        HerdRule {
            percent: 10,
            min_schedules: 50,
            horizon: Span::hours(24),
        }
    }
}

/// The busiest minute of a fleet: how many unjittered schedules fire on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Herd {
    pub minute: DateTime<Utc>,
    pub schedules: usize,
    pub fleet: usize,
}

impl Herd {
    /// The warning `validate` and `apply` print (code `HERD`; a warning, never an error).
    pub fn warning(&self) -> Issue {
        Issue::new(
            Code::Herd,
            "schedules",
            format!(
                "{} of {} schedules fire on the same minute ({}) without jitter; add `jitter` (for example `jitter: 5m`) to the ones that need no exact time",
                self.schedules,
                self.fleet,
                self.minute.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        )
    }
}

/// Finds a herd: a UTC minute within `rule.horizon` after `now` on which more than
/// `rule.percent`% of the fleet, and at least `rule.min_schedules`, enabled schedules
/// without jitter fire. Cron and rate fire on the minute's first second, so one minute is
/// one second. A schedule that fires every minute counts on every minute without a walk.
pub fn find_herd(fleet: &[Schedule], now: DateTime<Utc>, rule: &HerdRule) -> Option<Herd> {
    let until = now + rule.horizon.as_delta();
    let minutes = rule.horizon.as_secs() / 60;
    let mut everywhere = 0usize;
    let mut per_minute: BTreeMap<DateTime<Utc>, usize> = BTreeMap::new();
    for schedule in fleet
        .iter()
        .filter(|s| s.spec.enabled && s.spec.jitter.is_none())
    {
        if schedule.count_between(now, until) >= minutes {
            everywhere += 1;
            continue;
        }
        for at in schedule.between(now, until) {
            *per_minute.entry(minute_of(at)).or_default() += 1;
        }
    }
    let (minute, crowd) = per_minute
        .into_iter()
        .max_by_key(|&(minute, n)| (n, std::cmp::Reverse(minute)))
        .map(|(minute, n)| (minute, n + everywhere))
        .or_else(|| {
            (everywhere > 0).then(|| (minute_of(now) + TimeDelta::minutes(1), everywhere))
        })?;
    let share = crowd * 100 > fleet.len() * rule.percent as usize;
    (share && crowd >= rule.min_schedules).then_some(Herd {
        minute,
        schedules: crowd,
        fleet: fleet.len(),
    })
}

fn minute_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_the_ids_fraction_of_the_window() {
        let five = Span::minutes(5);
        let a = offset("daily-settlement", five);
        assert!(a < five);
        // Doubling the window doubles the offset, give or take the rounding of a second.
        let b = offset("daily-settlement", Span::minutes(10));
        assert!([2 * a.as_secs(), 2 * a.as_secs() + 1].contains(&b.as_secs()));
        assert_eq!(offset("x", Span::seconds(1)), Span::ZERO);
    }

    #[test]
    fn the_rule_refuses_zero_too_long_and_not_shorter_than_the_interval() {
        let code = |j, gap| check(j, gap, "jitter").map(|i| i.code);
        assert_eq!(code(Span::ZERO, None), Some(Code::ScheduleInvalidJitter));
        assert_eq!(
            code(Span::minutes(61), None),
            Some(Code::ScheduleInvalidJitter)
        );
        assert_eq!(
            code(Span::minutes(1), Some(Span::minutes(1))),
            Some(Code::ScheduleInvalidJitter)
        );
        assert_eq!(code(Span::seconds(59), Some(Span::minutes(1))), None);
        assert_eq!(code(Span::hours(1), None), None);
    }
}
