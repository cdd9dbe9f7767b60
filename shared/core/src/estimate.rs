//! Recovery priced before it runs: what a number of runs of one schedule would cost and when
//! they would be done, released through a throttle (a backfill's limits), and what runs that
//! already finished cost.
//!
//! Pure: the caller hands in the schedule's recent durations, the unit prices and per-run
//! usage of the project's cost model, the throttle and `now`; nothing here reads a clock or a
//! store.
//!
//! What a run is priced for (per target call, a step job making one call per step): the
//! worker's Lambda GB-seconds (the worker waits for the job, so the job's duration plus its
//! own handler time, at the worker's memory) and its invocation; a Lambda target's own
//! GB-seconds and invocation; the lane's SQS requests; and the DynamoDB write and read units
//! a run costs end to end. Logs, metrics and storage are left out (they are small beside the
//! rest and not what a budget is about).

use std::collections::VecDeque;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::named_enum;
use crate::quality::{duration_percentiles, MIN_HISTORY};

/// What runs would cost and when they would be done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Estimate {
    /// Runs priced.
    pub runs: u64,
    /// Calls to the schedule's target (one per run, one per step of a step job).
    pub target_calls: u64,
    /// Lambda compute: the worker's, and a Lambda target's.
    pub lambda_gb_seconds: f64,
    /// Lambda (compute and invocations), SQS and DynamoDB, in USD at the cost model's prices.
    pub cost_usd: f64,
    /// When the last run would end, released through the throttle from `now`.
    pub finishes_at: DateTime<Utc>,
}

/// `6 runs, 6 target calls, 3.9 Lambda GB-s, $0.0001, done by 2026-03-10T12:10:32Z`.
impl std::fmt::Display for Estimate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} runs, {} target calls, {:.1} Lambda GB-s, ${:.4}, done by {}",
            self.runs,
            self.target_calls,
            self.lambda_gb_seconds,
            self.cost_usd,
            crate::window::utc_text(self.finishes_at)
        )
    }
}

/// `$0.0004 over 2 runs, 4 target calls`.
impl std::fmt::Display for Spend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "${:.4} over {} runs, {} target calls",
            self.cost_usd, self.runs, self.target_calls
        )
    }
}

/// The unit prices an estimate uses (the cost model's, handed in).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitPrices {
    pub lambda_gb_second: f64,
    pub lambda_request: f64,
    pub sqs_request: f64,
    pub dynamodb_write_request_unit: f64,
    pub dynamodb_read_request_unit: f64,
}

/// What one target call costs beyond the job's own time, as measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallUsage {
    pub worker_invocations: f64,
    /// The worker's handler time around the job, milliseconds.
    pub worker_handler_ms: f64,
    pub sqs_requests: f64,
    pub dynamodb_wru: f64,
    pub dynamodb_rru: f64,
}

/// How runs are priced: the prices, the measured usage per call, the worker's memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pricing {
    pub prices: UnitPrices,
    pub per_call: CallUsage,
    pub worker_memory_mb: u32,
}

/// The job being priced.
#[derive(Debug, Clone, PartialEq)]
pub struct JobCost {
    /// Calls to the target per run (1, or the number of steps).
    pub calls_per_run: u64,
    /// A Lambda target's memory (`None`: the job runs in the worker or calls out over http).
    pub target_memory_mb: Option<u32>,
    /// How long a run is expected to take, milliseconds ([`expected_duration_ms`]).
    pub duration_ms: u64,
}

/// How runs are released: a backfill's limits and the cadence of the pass that releases them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttle {
    /// Runs in flight at most.
    pub concurrency: u32,
    /// Runs released per pass at most.
    pub batch_size: u32,
    /// Runs released per minute at most, averaged over passes.
    pub rate_per_minute: f64,
    /// How often the releasing pass runs, milliseconds.
    pub pass_every_ms: i64,
}

/// The duration a run is priced at: the p95 of the schedule's recent successes (newest
/// first) once it has [`MIN_HISTORY`] of them, else its `max_runtime` (an upper bound
/// either way, so a budget check errs toward refusing).
pub fn expected_duration_ms(recent_successes_ms: &[u64], max_runtime_ms: u64) -> u64 {
    if recent_successes_ms.len() < MIN_HISTORY {
        return max_runtime_ms;
    }
    duration_percentiles(recent_successes_ms).map_or(max_runtime_ms, |(_, p95)| p95)
}

/// Lambda GB-seconds and USD of one run that took `duration_ms`.
pub fn run_cost(duration_ms: u64, job: &JobCost, pricing: &Pricing) -> (f64, f64) {
    let calls = job.calls_per_run as f64;
    let usage = &pricing.per_call;
    let prices = &pricing.prices;
    let job_seconds = duration_ms as f64 / 1000.0;
    let worker_seconds = job_seconds + calls * usage.worker_handler_ms / 1000.0;
    let worker_gb_seconds = worker_seconds * f64::from(pricing.worker_memory_mb) / 1024.0;
    let target_gb_seconds = job
        .target_memory_mb
        .map_or(0.0, |mb| job_seconds * f64::from(mb) / 1024.0);
    let target_invocations = if job.target_memory_mb.is_some() {
        calls
    } else {
        0.0
    };
    let gb_seconds = worker_gb_seconds + target_gb_seconds;
    let usd = gb_seconds * prices.lambda_gb_second
        + (calls * usage.worker_invocations + target_invocations) * prices.lambda_request
        + calls * usage.sqs_requests * prices.sqs_request
        + calls * usage.dynamodb_wru * prices.dynamodb_write_request_unit
        + calls * usage.dynamodb_rru * prices.dynamodb_read_request_unit;
    (gb_seconds, usd)
}

/// What `runs` runs of `job` would cost, and when the last would end if released through
/// `throttle` by passes from `now` on.
pub fn estimate(
    runs: u64,
    job: &JobCost,
    pricing: &Pricing,
    throttle: &Throttle,
    now: DateTime<Utc>,
) -> Estimate {
    let (gb_seconds, usd) = run_cost(job.duration_ms, job, pricing);
    let n = runs as f64;
    Estimate {
        runs,
        target_calls: runs.saturating_mul(job.calls_per_run),
        lambda_gb_seconds: gb_seconds * n,
        cost_usd: usd * n,
        finishes_at: now
            + TimeDelta::milliseconds(release_span_ms(runs, job.duration_ms, throttle)),
    }
}

/// Measured spend: an [`Estimate`] without a finish.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Spend {
    pub runs: u64,
    pub target_calls: u64,
    pub lambda_gb_seconds: f64,
    pub cost_usd: f64,
}

/// What runs that finished cost: `durations_ms` are their measured durations (one attempt
/// each).
pub fn spent(durations_ms: &[u64], job: &JobCost, pricing: &Pricing) -> Spend {
    let once: Vec<Measured> = durations_ms
        .iter()
        .map(|&duration_ms| Measured {
            duration_ms,
            attempts: 1,
        })
        .collect();
    measured_spend(&once, job, pricing)
}

/// A finished run as measured: start to end, and its attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    pub duration_ms: u64,
    pub attempts: u32,
}

/// What finished runs cost: each attempt makes the run's target calls (a retried run costs
/// more than its estimate), and the Lambda time is its start to its end (backoff included:
/// an upper bound).
pub fn measured_spend(runs: &[Measured], job: &JobCost, pricing: &Pricing) -> Spend {
    let mut out = Spend::default();
    for run in runs {
        let calls = job
            .calls_per_run
            .saturating_mul(u64::from(run.attempts.max(1)));
        let per_attempt = JobCost {
            calls_per_run: calls,
            ..job.clone()
        };
        let (gb_seconds, usd) = run_cost(run.duration_ms, &per_attempt, pricing);
        out.runs += 1;
        out.target_calls += calls;
        out.lambda_gb_seconds += gb_seconds;
        out.cost_usd += usd;
    }
    out
}

/// Above this many runs the release is simulated for the first ones and extrapolated.
const SIMULATED_RUNS: u64 = 100_000;

/// Milliseconds from the first pass until the last of `runs` runs of `duration_ms` ends,
/// released the way the backfill releaser does: at each pass (the first at once) at most
/// `batch_size`, no more than `rate_per_minute` allows since the last release (the first
/// pass a whole batch), and never more than `concurrency` in flight.
pub fn release_span_ms(runs: u64, duration_ms: u64, throttle: &Throttle) -> i64 {
    if runs == 0 {
        return 0;
    }
    let simulated = runs.min(SIMULATED_RUNS);
    let span = simulate_release(simulated, duration_ms as i64, throttle);
    if simulated == runs {
        return span;
    }
    // The rest at the simulated pace.
    let scaled = span as f64 * runs as f64 / simulated as f64;
    scaled.min(i64::MAX as f64 / 2.0) as i64
}

fn simulate_release(runs: u64, duration_ms: i64, t: &Throttle) -> i64 {
    let pass = t.pass_every_ms.max(1);
    let align_up = |at: i64| at.div_euclid(pass) * pass + if at % pass == 0 { 0 } else { pass };
    let concurrency = u64::from(t.concurrency.max(1));
    let batch = u64::from(t.batch_size.max(1));
    let rate = if t.rate_per_minute.is_finite() && t.rate_per_minute > 0.0 {
        t.rate_per_minute
    } else {
        f64::MIN_POSITIVE
    };
    let mut in_flight: VecDeque<i64> = VecDeque::new();
    let mut released = 0u64;
    let mut last_release: Option<i64> = None;
    let mut last_end = 0i64;
    let mut clock = 0i64;
    while released < runs {
        while in_flight.front().is_some_and(|&end| end <= clock) {
            in_flight.pop_front();
        }
        let by_rate = match last_release {
            None => batch,
            Some(last) => (rate * (clock - last) as f64 / 60_000.0).floor() as u64,
        };
        let free = concurrency.saturating_sub(in_flight.len() as u64);
        let allowance = batch.min(by_rate).min(free).min(runs - released);
        if allowance > 0 {
            for _ in 0..allowance {
                in_flight.push_back(clock + duration_ms);
            }
            released += allowance;
            last_release = Some(clock);
            last_end = clock + duration_ms;
        }
        // The next pass that can release something: the rate allows one more and a slot is
        // free (a release fills neither, so the next pass is at least one later).
        let mut next = clock + pass;
        if let Some(last) = last_release {
            let one_more = last + (60_000.0 / rate).ceil().min(i64::MAX as f64 / 4.0) as i64;
            next = next.max(align_up(one_more));
        }
        if in_flight.len() as u64 >= concurrency {
            if let Some(&first_end) = in_flight.front() {
                next = next.max(align_up(first_end));
            }
        }
        clock = next;
    }
    last_end
}

named_enum!(
    /// A cap of a backfill's budget.
    BudgetCap {
        MaxCostUsd => "max_cost_usd",
        MaxTargetCalls => "max_target_calls",
    }
);

/// What a backfill may spend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// USD its runs may cost at most (estimated before, measured while it runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Calls to the target its runs may make at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_target_calls: Option<u64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.max_cost_usd.is_none() && self.max_target_calls.is_none()
    }

    /// The caps `cost_usd` and `target_calls` go over (an estimate refused before it runs).
    pub fn exceeded_by(&self, cost_usd: f64, target_calls: u64) -> Vec<BudgetCap> {
        let mut over = Vec::new();
        if self.max_cost_usd.is_some_and(|cap| cost_usd > cap) {
            over.push(BudgetCap::MaxCostUsd);
        }
        if self.max_target_calls.is_some_and(|cap| target_calls > cap) {
            over.push(BudgetCap::MaxTargetCalls);
        }
        over
    }

    /// The caps a measured spend has reached (a running backfill pauses).
    pub fn reached_by(&self, cost_usd: f64, target_calls: u64) -> Vec<BudgetCap> {
        let mut reached = Vec::new();
        if self.max_cost_usd.is_some_and(|cap| cost_usd >= cap) {
            reached.push(BudgetCap::MaxCostUsd);
        }
        if self.max_target_calls.is_some_and(|cap| target_calls >= cap) {
            reached.push(BudgetCap::MaxTargetCalls);
        }
        reached
    }
}

#[cfg(test)]
mod tests;
