//! Recovery priced before it runs: the cost model's prices and measured per-run usage handed
//! to [`cronledger_core::estimate`], and the schedule's recent successes read for it.

use chrono::{DateTime, Utc};
use cronledger_aws::{BackfillLimits, LedgerStore, StoreError};
use cronledger_core::estimate::{
    self, CallUsage, Estimate, JobCost, Measured, Pricing, Spend, Throttle, UnitPrices,
};
use cronledger_core::{quality, JobSpec, Run, ScheduleSpec};

use super::Prices;
use crate::outcomes::HISTORY_PAGE;
use crate::simulate::MEMORY_MB;

/// What one target call costs beyond its job's own time, as BENCHMARKS.md measures a run
/// ("Cost per run", 1,000 minutely schedules): 11.3 write and 6.62 read units end to end.
/// A backfill's runs are released a few at a time, so each is priced unbatched: its own
/// worker invocation (about 70 ms of handler time) and its send, receive and delete.
pub const MEASURED_PER_CALL: CallUsage = CallUsage {
    worker_invocations: 1.0,
    worker_handler_ms: 70.0,
    sqs_requests: 3.0,
    dynamodb_wru: 11.3,
    dynamodb_rru: 6.62,
};

/// How often the reconciler's pass (which releases backfills) runs, as the template
/// schedules it.
pub const RELEASE_PASS_EVERY_MS: i64 = 5 * 60 * 1000;

/// The worker's memory in the template (the memory a Lambda target is priced at too: its
/// own is not in the schedule).
fn worker_memory_mb() -> u32 {
    MEMORY_MB
        .iter()
        .find(|(function, _)| *function == "worker")
        .map_or(256, |(_, mb)| *mb)
}

/// The cost model's prices and the measured usage per call.
pub fn pricing() -> Pricing {
    let p = Prices::us_east_1();
    Pricing {
        prices: UnitPrices {
            lambda_gb_second: p.lambda_gb_second.usd,
            lambda_request: p.lambda_request.usd,
            sqs_request: p.sqs_request.usd,
            dynamodb_write_request_unit: p.dynamodb_write_request_unit.usd,
            dynamodb_read_request_unit: p.dynamodb_read_request_unit.usd,
        },
        per_call: MEASURED_PER_CALL,
        worker_memory_mb: worker_memory_mb(),
    }
}

/// A backfill's limits as the releaser applies them.
pub fn throttle(limits: &BackfillLimits) -> Throttle {
    Throttle {
        concurrency: limits.concurrency,
        batch_size: limits.batch_size,
        rate_per_minute: limits.rate_per_minute,
        pass_every_ms: RELEASE_PASS_EVERY_MS,
    }
}

/// A Lambda target (or a step job with one) is billed beside the worker.
fn calls_lambda(job: &JobSpec) -> bool {
    match job {
        JobSpec::Lambda { .. } => true,
        JobSpec::Steps { steps } => steps.iter().any(|s| calls_lambda(&s.target)),
        _ => false,
    }
}

/// `spec`'s job priced at `recent_successes_ms` (newest first).
pub fn job_cost(spec: &ScheduleSpec, recent_successes_ms: &[u64]) -> JobCost {
    JobCost {
        calls_per_run: match &spec.job {
            JobSpec::Steps { steps } => steps.len().max(1) as u64,
            _ => 1,
        },
        target_memory_mb: calls_lambda(&spec.job).then(worker_memory_mb),
        duration_ms: estimate::expected_duration_ms(
            recent_successes_ms,
            spec.max_runtime.as_secs().saturating_mul(1000),
        ),
    }
}

/// The durations of the schedule's recent successes, newest first (one page of its history).
pub async fn recent_successes_ms(
    store: &dyn LedgerStore,
    schedule_id: &str,
) -> Result<Vec<u64>, StoreError> {
    let page = store.run_history(schedule_id, HISTORY_PAGE, None).await?;
    Ok(quality::success_durations(&page.items))
}

/// What `runs` runs of `spec` would cost released through `limits` from `now`.
pub async fn estimate_runs(
    store: &dyn LedgerStore,
    spec: &ScheduleSpec,
    runs: u64,
    limits: &BackfillLimits,
    now: DateTime<Utc>,
) -> Result<Estimate, StoreError> {
    let recent = recent_successes_ms(store, &spec.id).await?;
    let job = job_cost(spec, &recent);
    Ok(estimate::estimate(
        runs,
        &job,
        &pricing(),
        &throttle(limits),
        now,
    ))
}

/// What `finished` runs of `spec` cost, measured: their start to end, and their attempts.
pub fn spent(spec: &ScheduleSpec, finished: &[&Run]) -> Spend {
    let measured: Vec<Measured> = finished
        .iter()
        .filter_map(|r| {
            Some(Measured {
                duration_ms: quality::duration_ms(r)?,
                attempts: r.attempts,
            })
        })
        .collect();
    estimate::measured_spend(&measured, &job_cost(spec, &[]), &pricing())
}
