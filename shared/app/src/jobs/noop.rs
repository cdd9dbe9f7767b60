use async_trait::async_trait;
use cronledger_core::JobSpec;

use super::{
    DryRunReport, JobContext, JobFailure, JobHandler, JobOutcome, JobSuccess, GUARD_UNSUPPORTED,
};

/// `type: noop`: waits `duration` (and `duration_ms`), failing (retryably) its first `fail_times` attempts,
/// and for good every attempt of a window before `fail_before`. Its
/// dry run answers `affected` at once (none: it cannot dry-run). Its success reports `count`
/// (a `count_sequence` resolved by the worker to the run's own value).
pub struct NoopJob;

#[async_trait]
impl JobHandler for NoopJob {
    async fn run(&self, job: &JobSpec, ctx: &JobContext) -> JobOutcome {
        let (
            Some(wait),
            JobSpec::Noop {
                fail_times,
                fail_before,
                children,
                fail_children,
                count,
                count_sequence,
                ..
            },
        ) = (job.noop_wait(), job)
        else {
            return Err(JobFailure::permanent(
                "JOB_TARGET_MISMATCH",
                "not a noop job",
            ));
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        if let Some(before) = fail_before.filter(|b| ctx.window.end < *b) {
            return Err(JobFailure::permanent(
                "NOOP_INJECTED_FAILURE",
                format!("windows scheduled before {before} fail by design"),
            ));
        }
        if let Some(index) = ctx.child {
            // A child: the first `fail_children` fail on every attempt, the rest succeed.
            if index < *fail_children {
                return Err(JobFailure::retryable(
                    "NOOP_INJECTED_FAILURE",
                    format!("child {index} of the first {fail_children} fails by design"),
                ));
            }
            return Ok(JobSuccess {
                result: cronledger_core::run::RunResult {
                    count: Some(1),
                    ..Default::default()
                },
                ..JobSuccess::default()
            });
        }
        if ctx.attempt <= *fail_times {
            return Err(JobFailure::retryable(
                "NOOP_INJECTED_FAILURE",
                format!(
                    "attempt {} of the first {fail_times} fails by design",
                    ctx.attempt
                ),
            ));
        }
        Ok(JobSuccess {
            output: job.payload().get("output").cloned(),
            children: (*children > 0).then(|| serde_json::json!({"count": children, "batch": 1})),
            // The worker resolves a sequence to the run's own `count` (see
            // `JobSpec::noop_count_for`); unresolved, its first value.
            result: cronledger_core::run::RunResult {
                count: count.or_else(|| count_sequence.first().copied()),
                ..Default::default()
            },
            ..JobSuccess::default()
        })
    }

    async fn dry_run(&self, job: &JobSpec, _ctx: &JobContext) -> Result<DryRunReport, JobFailure> {
        match job {
            JobSpec::Noop {
                affected: Some(affected),
                ..
            } => Ok(DryRunReport {
                affected: *affected,
                oldest: None,
                newest: None,
            }),
            JobSpec::Noop { affected: None, .. } => Err(JobFailure::permanent(
                GUARD_UNSUPPORTED,
                "this noop job has no `affected` to answer a dry run with",
            )),
            _ => Err(JobFailure::permanent(
                "JOB_TARGET_MISMATCH",
                "not a noop job",
            )),
        }
    }
}
