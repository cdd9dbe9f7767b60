//! Runs that succeed but are wrong: a success whose reported `count` is outside the band the
//! schedule expects (`expect:`) is SUSPECT, and a run that took far longer than the
//! schedule's recent successes is SLOW.
//!
//! Pure: the app hands in the counts and durations of the schedule's last successful runs
//! (newest first); nothing here reads a clock or a store.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Code, Issue};
use crate::{named_enum, Run, RunStatus};

/// How many of the schedule's last successful runs a learned band and the slow-run
/// threshold look at.
pub const HISTORY_RUNS: usize = 30;

/// How many successful runs a learned band and the slow-run threshold need before they
/// judge anything.
pub const MIN_HISTORY: usize = 10;

/// A learned band is the median plus or minus this many median absolute deviations.
pub const MAD_FACTOR: f64 = 4.0;

/// A run is slow past this many times the p95 of the recent successes' durations.
pub const SLOW_FACTOR: u64 = 2;

named_enum!(
    /// What a success's result looks like against its schedule's `expect`.
    Quality {
        /// The run succeeded, but its `count` is outside the band: its dependents wait.
        Suspect => "SUSPECT",
    }
);

named_enum!(
    /// Why a success is SUSPECT.
    QualityReason {
        /// `count` under `expect.min_count`.
        BelowMin => "BELOW_MIN",
        /// `count` over `expect.max_count`.
        AboveMax => "ABOVE_MAX",
        /// `count` outside the band learned from the schedule's recent successes.
        OutsideLearnedBand => "OUTSIDE_LEARNED_BAND",
    }
);

/// `expect:` on a schedule: the band a success's `count` must fall in.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// A success reporting fewer is SUSPECT (BELOW_MIN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u64>,
    /// A success reporting more is SUSPECT (ABOVE_MAX).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_count: Option<u64>,
    /// The band is learned from the last 30 successes' counts (median ± 4 × MAD), once 10
    /// of them exist (OUTSIDE_LEARNED_BAND).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub learned: bool,
}

/// A band of counts, both ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    pub low: f64,
    pub high: f64,
}

impl Band {
    pub fn contains(&self, count: u64) -> bool {
        let c = count as f64;
        self.low <= c && c <= self.high
    }
}

/// The median of `values` (the mean of the two middle ones for an even count); `None` when
/// empty.
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 0 {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

/// The band learned from `recent` (the counts of the schedule's last successes, newest
/// first): the newest [`HISTORY_RUNS`], median ± [`MAD_FACTOR`] × MAD. `None` with fewer
/// than [`MIN_HISTORY`] counts.
pub fn learned_band(recent: &[u64]) -> Option<Band> {
    let used = &recent[..recent.len().min(HISTORY_RUNS)];
    if used.len() < MIN_HISTORY {
        return None;
    }
    let mut values: Vec<f64> = used.iter().map(|&c| c as f64).collect();
    let mid = median(&mut values)?;
    let mut deviations: Vec<f64> = values.iter().map(|v| (v - mid).abs()).collect();
    let mad = median(&mut deviations)?;
    Some(Band {
        low: mid - MAD_FACTOR * mad,
        high: mid + MAD_FACTOR * mad,
    })
}

/// Judges a success's `count` against `expect`, with `recent` the counts of the schedule's
/// last successes before it (newest first). The fixed bounds come first, then the learned
/// band. `None`: not suspect (or nothing to judge: no `count` reported).
pub fn judge(expect: &Expect, count: Option<u64>, recent: &[u64]) -> Option<QualityReason> {
    let count = count?;
    if expect.min_count.is_some_and(|min| count < min) {
        return Some(QualityReason::BelowMin);
    }
    if expect.max_count.is_some_and(|max| count > max) {
        return Some(QualityReason::AboveMax);
    }
    if expect.learned && learned_band(recent).is_some_and(|band| !band.contains(count)) {
        return Some(QualityReason::OutsideLearnedBand);
    }
    None
}

/// The `p`-th percentile (nearest rank) of `values`; `None` when empty.
pub fn percentile(values: &[u64], p: u32) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = (u64::from(p.min(100)) * sorted.len() as u64).div_ceil(100);
    let index = (rank.max(1) - 1) as usize;
    sorted.get(index).copied()
}

/// How long a run took from its start to its end, in milliseconds; `None` for a run that
/// has not ended or never started.
pub fn duration_ms(run: &Run) -> Option<u64> {
    let ms = (run.completed_at? - run.started_at?)
        .num_milliseconds()
        .max(0);
    u64::try_from(ms).ok()
}

/// The durations (milliseconds) of the SUCCESS runs among `runs`, in their order.
pub fn success_durations(runs: &[Run]) -> Vec<u64> {
    runs.iter()
        .filter(|r| r.status == RunStatus::Success)
        .filter_map(duration_ms)
        .collect()
}

/// The p50 and p95 (milliseconds) of the newest [`HISTORY_RUNS`] of `recent` (the durations
/// of the schedule's last successes, newest first); `None` when there are none.
pub fn duration_percentiles(recent: &[u64]) -> Option<(u64, u64)> {
    let used = &recent[..recent.len().min(HISTORY_RUNS)];
    Some((percentile(used, 50)?, percentile(used, 95)?))
}

/// The duration (milliseconds) past which a run is slow: [`SLOW_FACTOR`] × the p95 of the
/// newest [`HISTORY_RUNS`] of `recent`; `None` with fewer than [`MIN_HISTORY`] of them.
pub fn slow_threshold(recent: &[u64]) -> Option<u64> {
    let used = &recent[..recent.len().min(HISTORY_RUNS)];
    if used.len() < MIN_HISTORY {
        return None;
    }
    percentile(used, 95).map(|p95| p95.saturating_mul(SLOW_FACTOR))
}

/// Runs shorter than this are never judged slow, so their end reads no history: the read
/// (a page of the schedule's newest runs) would cost more than the run's own writes, on
/// every run of every schedule (invariant 21: a fire writes only the run; its end reads
/// nothing it does not need). A run of a minute or more pays it once.
pub const SLOW_RUN_FLOOR_MS: u64 = 60_000;

/// Whether a run's end needs the schedule's history: it judges a result (`expect`), or it
/// ran long enough to be judged slow.
pub fn needs_history(has_expect: bool, duration_ms: u64) -> bool {
    has_expect || duration_ms >= SLOW_RUN_FLOOR_MS
}

/// Whether a run of `duration_ms` is slow against `recent`; the threshold it passed.
pub fn slow(duration_ms: u64, recent: &[u64]) -> Option<u64> {
    if duration_ms < SLOW_RUN_FLOOR_MS {
        return None;
    }
    slow_threshold(recent).filter(|&threshold| duration_ms > threshold)
}

/// Reads `expect:` (SCHEDULE_INVALID_EXPECT on `field`): a mapping of `min_count`,
/// `max_count` (whole numbers, min not above max) and `learned` (a boolean), at least one.
pub fn read_expect(value: Option<&Value>, field: &str, issues: &mut Vec<Issue>) -> Option<Expect> {
    let value = match value {
        None | Some(Value::Null) => return None,
        Some(v) => v,
    };
    let problem = |issues: &mut Vec<Issue>, message: String| {
        issues.push(Issue::new(Code::ScheduleInvalidExpect, field, message));
    };
    let Some(obj) = value.as_object() else {
        problem(
            issues,
            "`expect` must be a mapping of min_count, max_count and learned".into(),
        );
        return None;
    };
    let before = issues.len();
    let mut expect = Expect::default();
    for (key, v) in obj {
        match key.as_str() {
            "min_count" | "max_count" => match v.as_u64() {
                Some(n) if key == "min_count" => expect.min_count = Some(n),
                Some(n) => expect.max_count = Some(n),
                None => problem(issues, format!("`{key}` must be a whole number, found {v}")),
            },
            "learned" => match v.as_bool() {
                Some(b) => expect.learned = b,
                None => problem(
                    issues,
                    format!("`learned` must be true or false, found {v}"),
                ),
            },
            other => problem(
                issues,
                format!("unknown field `{other}`; expected min_count, max_count or learned"),
            ),
        }
    }
    if let (Some(min), Some(max)) = (expect.min_count, expect.max_count) {
        if min > max {
            problem(issues, format!("min_count {min} is above max_count {max}"));
        }
    }
    if issues.len() == before && expect == Expect::default() {
        problem(
            issues,
            "`expect` needs min_count, max_count or learned: true".into(),
        );
    }
    (issues.len() == before).then_some(expect)
}

#[cfg(test)]
mod tests;
