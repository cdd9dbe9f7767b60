use async_trait::async_trait;
use cronledger_core::JobSpec;

use super::{JobContext, JobFailure, JobHandler, JobOutcome, JobSuccess};

/// `type: noop`: waits `duration`, failing (retryably) its first `fail_times` attempts.
pub struct NoopJob;

#[async_trait]
impl JobHandler for NoopJob {
    async fn run(&self, job: &JobSpec, ctx: &JobContext) -> JobOutcome {
        let JobSpec::Noop {
            duration,
            fail_times,
            ..
        } = job
        else {
            return Err(JobFailure::permanent(
                "JOB_TARGET_MISMATCH",
                "not a noop job",
            ));
        };
        if !duration.as_std().is_zero() {
            tokio::time::sleep(duration.as_std()).await;
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
        Ok(JobSuccess::default())
    }
}
