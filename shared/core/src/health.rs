//! A schedule's health: how its recent windows ended, how fresh its work is against its
//! `slo`, and what needs a person now.
//!
//! Pure: it reads the schedule's outcome counters by day (kept by the worker and the
//! reconciler as runs end, so no history scan) and one bounded page of its newest runs, and
//! takes `now` as a value.

use std::cmp::Ordering;

use chrono::{DateTime, Days, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::alerts::FreshnessSlo;
use crate::{quality, Priority, Run, RunStatus, Span};

/// One UTC day (of the windows' `scheduled_for`) of a schedule's outcomes.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct DayTally {
    pub day: Option<NaiveDate>,
    pub succeeded: u64,
    pub failed: u64,
    pub skipped: u64,
    /// Succeeded within `slo.within`.
    pub fresh: u64,
}

/// The short period health reports, in days (today included).
pub const SHORT_PERIOD_DAYS: u64 = 7;
/// The long period (success rate and freshness attainment), in days (today included).
pub const LONG_PERIOD_DAYS: u64 = 30;

/// The UTC days whose counters health reads at `now`: the long period, today included.
pub fn tally_days(now: DateTime<Utc>) -> (NaiveDate, NaiveDate) {
    let today = now.date_naive();
    let first = today
        .checked_sub_days(Days::new(LONG_PERIOD_DAYS - 1))
        .unwrap_or(today);
    (first, today)
}

/// What health is computed from.
#[derive(Debug, Clone, Copy)]
pub struct HealthInput<'a> {
    pub priority: Priority,
    pub slo: Option<FreshnessSlo>,
    /// The counters of the days [`tally_days`] names (others are ignored).
    pub tallies: &'a [DayTally],
    /// The schedule's newest runs, newest first, as a bounded read returns them (its size
    /// bounds how far back the approvals are counted).
    pub newest_runs: &'a [Run],
    /// Failures in a row as the schedule's state counts them (the count the alerts use:
    /// moved by each run's end, so no history is read for it).
    pub failure_streak: u32,
    pub next_run_at: Option<DateTime<Utc>>,
    pub now: DateTime<Utc>,
}

/// The newest run that ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LastRun {
    pub status: RunStatus,
    pub scheduled_for: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    /// From its start to its end; `None` for a window that never started (SKIPPED).
    pub duration_ms: Option<i64>,
}

/// A period's ended windows.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Counts {
    pub succeeded: u64,
    pub failed: u64,
    pub skipped: u64,
}

impl Counts {
    /// succeeded / (succeeded + failed); `None` when no window ran to an end. Skipped
    /// windows are reported beside it, not in it: nothing ran, so nothing succeeded or failed.
    pub fn success_rate(&self) -> Option<f64> {
        share(self.succeeded, self.succeeded.saturating_add(self.failed))
    }

    fn add(&mut self, tally: &DayTally) {
        self.succeeded = self.succeeded.saturating_add(tally.succeeded);
        self.failed = self.failed.saturating_add(tally.failed);
        self.skipped = self.skipped.saturating_add(tally.skipped);
    }

    fn windows(&self) -> u64 {
        self.succeeded
            .saturating_add(self.failed)
            .saturating_add(self.skipped)
    }
}

/// The schedule's `slo` and how it does against it over the long period.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Freshness {
    pub within: Span,
    /// The objective as a fraction (the manifest's `95%` is 0.95).
    pub target: f64,
    /// fresh / (succeeded + failed + skipped) over 30 days; `None` without windows.
    ///
    /// Skipped windows count against it: the data a skipped window should have produced is
    /// exactly as stale for its readers as a failed one's, and a schedule kept from running
    /// (paused, overlapping, missed) must not look fresh.
    pub attainment_30d: Option<f64>,
    /// attainment >= target; `None` without windows.
    pub met: Option<bool>,
}

/// A schedule's health, as the api answers it and `cronledger status` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Health {
    pub priority: Priority,
    pub last_run: Option<LastRun>,
    pub next_run_at: Option<DateTime<Utc>>,
    pub success_rate_7d: Option<f64>,
    pub success_rate_30d: Option<f64>,
    pub counts_7d: Counts,
    pub counts_30d: Counts,
    /// Present when the schedule has an `slo`.
    pub freshness: Option<Freshness>,
    /// Runs ended FAILED in a row since the last success (the schedule's failure streak).
    pub consecutive_failures: u32,
    /// MANUAL_REQUIRED runs among the runs read.
    pub awaiting_approval: u32,
    /// The median duration (start to end, milliseconds) of the SUCCESS runs among the runs
    /// read; `None` without one.
    #[serde(default)]
    pub duration_p50_ms: Option<u64>,
    /// Their 95th percentile (nearest rank): a run past twice it is SLOW_RUN once the
    /// schedule has 10 successes.
    #[serde(default)]
    pub duration_p95_ms: Option<u64>,
}

fn share(part: u64, whole: u64) -> Option<f64> {
    // `part <= whole` for every caller; the clamp keeps a torn read inside [0, 1].
    (whole > 0).then(|| (part as f64 / whole as f64).clamp(0.0, 1.0))
}

/// The health of one schedule at `input.now`.
pub fn health(input: &HealthInput<'_>) -> Health {
    let (first, today) = tally_days(input.now);
    let short_first = today
        .checked_sub_days(Days::new(SHORT_PERIOD_DAYS - 1))
        .unwrap_or(today);
    let (mut counts_7d, mut counts_30d, mut fresh_30d) =
        (Counts::default(), Counts::default(), 0u64);
    for tally in input.tallies {
        let Some(day) = tally.day.filter(|d| (first..=today).contains(d)) else {
            continue;
        };
        counts_30d.add(tally);
        fresh_30d = fresh_30d.saturating_add(tally.fresh.min(tally.succeeded));
        if day >= short_first {
            counts_7d.add(tally);
        }
    }
    let freshness = input.slo.map(|slo| {
        let attainment_30d = share(fresh_30d, counts_30d.windows());
        let target = slo.target / 100.0;
        Freshness {
            within: slo.within,
            target,
            attainment_30d,
            met: attainment_30d.map(|a| a >= target),
        }
    });
    let durations = quality::duration_percentiles(&quality::success_durations(input.newest_runs));
    Health {
        priority: input.priority,
        last_run: input.newest_runs.iter().find_map(last_run),
        next_run_at: input.next_run_at,
        success_rate_7d: counts_7d.success_rate(),
        success_rate_30d: counts_30d.success_rate(),
        counts_7d,
        counts_30d,
        freshness,
        consecutive_failures: input.failure_streak,
        awaiting_approval: input
            .newest_runs
            .iter()
            .filter(|r| r.status == RunStatus::ManualRequired)
            .count() as u32,
        duration_p50_ms: durations.map(|(p50, _)| p50),
        duration_p95_ms: durations.map(|(_, p95)| p95),
    }
}

fn last_run(run: &Run) -> Option<LastRun> {
    if !run.status.is_terminal() {
        return None;
    }
    let ended_at = run.completed_at.unwrap_or(run.updated_at);
    Some(LastRun {
        status: run.status,
        scheduled_for: run.key.scheduled_for,
        ended_at,
        duration_ms: run
            .started_at
            .map(|started| (ended_at - started).num_milliseconds().max(0)),
    })
}

impl Health {
    /// The freshness objective is set, measured and missed.
    pub fn freshness_missed(&self) -> bool {
        self.freshness.and_then(|f| f.met) == Some(false)
    }
}

/// Worst first: more failures in a row, then more runs awaiting approval, then a missed
/// freshness objective, then a lower 7-day success rate (none yet sorts as healthy), then
/// the more critical priority, then the id. A total order.
pub fn worst_first(a_id: &str, a: &Health, b_id: &str, b: &Health) -> Ordering {
    b.consecutive_failures
        .cmp(&a.consecutive_failures)
        .then(b.awaiting_approval.cmp(&a.awaiting_approval))
        .then(b.freshness_missed().cmp(&a.freshness_missed()))
        .then(rate_order(a.success_rate_7d, b.success_rate_7d))
        .then(a.priority.cmp(&b.priority))
        .then(a_id.cmp(b_id))
}

/// Lower rates first; no rate after every rate.
fn rate_order(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests;
