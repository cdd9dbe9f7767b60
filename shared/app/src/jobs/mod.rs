//! Job targets: what a run executes, and how its outcome is classified.

mod http;
pub mod http_auth;
mod lambda;
mod noop;
pub mod target_fence;
pub mod webhook_signature;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use cronledger_core::run::RunResult;
use cronledger_core::{IdempotencyKey, JobSpec, RunKey, Window};
use serde::{Deserialize, Serialize};

pub use http::{HttpJob, HttpOptions, MODE_HEADER};
pub use lambda::SdkLambdaInvoker;
pub use noop::NoopJob;

/// What a job is told about the run it executes. Fixed when the run was created
/// (invariant 5): a retry the next day still gets the same window and business date.
#[derive(Debug, Clone, Serialize)]
pub struct JobContext {
    pub run: RunKey,
    pub window: Window,
    pub business_date: NaiveDate,
    pub idempotency_key: IdempotencyKey,
    /// 1 for the first attempt.
    pub attempt: u32,
    pub payload: serde_json::Value,
    /// The attempt must end by then (`max_runtime`).
    pub deadline: DateTime<Utc>,
    /// Whether the target is to do the work or only count what it would touch.
    pub mode: JobMode,
    /// For an execution of a guarded job: the dry run's count that the limit or an operator
    /// let through, so the target can refuse when it finds more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_affected: Option<u64>,
    /// For a step of a `steps` job: its name (the idempotency key ends `#{step}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// For a step after the first: the previous step's `output`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<serde_json::Value>,
    /// For a child of a run: its place (its key ends `#child-{i}`, its payload is its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<u32>,
}

/// Whether a call executes the job or asks it what it would touch (the destructive-job guard).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobMode {
    #[default]
    Execute,
    DryRun,
    /// Asks a schedule's `verify` source what the window's results should be.
    Verify,
}

impl JobMode {
    /// The `X-Cronledger-Mode` header's value.
    pub fn header_value(self) -> &'static str {
        match self {
            JobMode::Execute => "execute",
            JobMode::DryRun => "dry-run",
            JobMode::Verify => "verify",
        }
    }
}

/// What a dry run says the job would touch: `{"affected": N, "oldest": ..., "newest": ...}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DryRunReport {
    pub affected: u64,
    /// Whatever the target says about the oldest and newest items (capped in size).
    pub oldest: Option<serde_json::Value>,
    pub newest: Option<serde_json::Value>,
}

/// The code of a dry run the target cannot answer: a guarded job never runs unguarded.
pub const GUARD_UNSUPPORTED: &str = "GUARD_UNSUPPORTED";

/// Largest `oldest`/`newest`, serialized, kept in a report (they are stored with the run).
pub const DRY_RUN_SAMPLE_MAX_BYTES: usize = 256;

impl DryRunReport {
    /// Reads a target's answer. Anything without a whole-number `affected` is a target that
    /// does not know the dry-run protocol: GUARD_UNSUPPORTED (permanent).
    pub fn from_answer(answer: &serde_json::Value) -> Result<DryRunReport, JobFailure> {
        let Some(affected) = answer.get("affected").and_then(serde_json::Value::as_u64) else {
            let shown: String = answer.to_string().chars().take(200).collect();
            return Err(JobFailure::permanent(
                GUARD_UNSUPPORTED,
                format!("the dry run's answer has no whole-number `affected`: {shown}"),
            ));
        };
        Ok(DryRunReport {
            affected,
            oldest: answer.get("oldest").and_then(capped_sample),
            newest: answer.get("newest").and_then(capped_sample),
        })
    }
}

/// A sample as the target gave it, or the start of its text (as a string) when it is too
/// large: at most [`DRY_RUN_SAMPLE_MAX_BYTES`] serialized either way.
fn capped_sample(value: &serde_json::Value) -> Option<serde_json::Value> {
    if value.is_null() {
        return None;
    }
    if value.to_string().len() <= DRY_RUN_SAMPLE_MAX_BYTES {
        return Some(value.clone());
    }
    let text = match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    // Room for the quotes and the ellipsis; each character counted as it serializes.
    let budget = DRY_RUN_SAMPLE_MAX_BYTES - 5;
    let mut cut = String::with_capacity(DRY_RUN_SAMPLE_MAX_BYTES);
    let mut used = 0;
    for ch in text.chars() {
        let size = serde_json::Value::String(ch.to_string()).to_string().len() - 2;
        if used + size > budget {
            break;
        }
        used += size;
        cut.push(ch);
    }
    cut.push_str("...");
    Some(serde_json::Value::String(cut))
}

/// How a job ended well.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobSuccess {
    /// Part of the work was done; the run ends PARTIAL_SUCCESS.
    pub partial: bool,
    pub result: RunResult,
    /// What a step hands to the next (its answer's `output`).
    pub output: Option<serde_json::Value>,
    /// The children the job answered (`children`: a list of payloads or `{count, batch}`);
    /// the run waits for them (see `cronledger_core::children`).
    pub children: Option<serde_json::Value>,
}

/// How a job ended badly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobFailure {
    /// Worth another attempt (timeouts, throttling, 5xx).
    #[error("JOB_RETRYABLE: {code}: {message}")]
    Retryable { code: String, message: String },
    /// Another attempt cannot help (4xx, bad configuration).
    #[error("JOB_PERMANENT: {code}: {message}")]
    Permanent { code: String, message: String },
}

impl JobFailure {
    pub fn retryable(code: impl Into<String>, message: impl Into<String>) -> JobFailure {
        JobFailure::Retryable {
            code: code.into(),
            message: message.into(),
        }
    }

    pub fn permanent(code: impl Into<String>, message: impl Into<String>) -> JobFailure {
        JobFailure::Permanent {
            code: code.into(),
            message: message.into(),
        }
    }

    pub fn code(&self) -> &str {
        match self {
            JobFailure::Retryable { code, .. } | JobFailure::Permanent { code, .. } => code,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            JobFailure::Retryable { message, .. } | JobFailure::Permanent { message, .. } => {
                message
            }
        }
    }
}

pub type JobOutcome = Result<JobSuccess, JobFailure>;

/// A handler compiled into the worker (job `type: handler`, `name: ...`), and the trait the
/// built-in targets implement too.
#[async_trait]
pub trait JobHandler: Send + Sync {
    async fn run(&self, job: &JobSpec, ctx: &JobContext) -> JobOutcome;

    /// Asks what `run` would touch, touching nothing (`ctx.mode` is `DryRun`). A handler
    /// that cannot answer refuses with GUARD_UNSUPPORTED.
    async fn dry_run(&self, job: &JobSpec, _ctx: &JobContext) -> Result<DryRunReport, JobFailure> {
        Err(JobFailure::permanent(
            GUARD_UNSUPPORTED,
            format!("this {} target cannot dry-run", job.type_name()),
        ))
    }
}

/// Invokes a Lambda function by name or ARN with a JSON payload and returns its JSON answer.
/// Kept behind a trait so the worker does not need the Lambda SDK to be tested.
#[async_trait]
pub trait LambdaInvoker: Send + Sync {
    async fn invoke(
        &self,
        function: &str,
        payload: &serde_json::Value,
    ) -> Result<serde_json::Value, JobFailure>;
}

/// Chooses the target for a job spec.
#[derive(Clone)]
pub struct JobTargets {
    http: Arc<dyn JobHandler>,
    noop: Arc<dyn JobHandler>,
    lambda: Option<Arc<dyn LambdaInvoker>>,
    handlers: BTreeMap<String, Arc<dyn JobHandler>>,
}

impl JobTargets {
    pub fn new(http: HttpJob) -> JobTargets {
        JobTargets {
            http: Arc::new(http),
            noop: Arc::new(NoopJob),
            lambda: None,
            handlers: BTreeMap::new(),
        }
    }

    pub fn with_lambda(mut self, invoker: Arc<dyn LambdaInvoker>) -> JobTargets {
        self.lambda = Some(invoker);
        self
    }

    /// Registers an in-process handler under `name`.
    pub fn with_handler(mut self, name: &str, handler: Arc<dyn JobHandler>) -> JobTargets {
        self.handlers.insert(name.to_string(), handler);
        self
    }

    /// Replaces the `noop` target (the simulator uses one that runs on its virtual clock).
    pub fn with_noop(mut self, noop: Arc<dyn JobHandler>) -> JobTargets {
        self.noop = noop;
        self
    }

    pub async fn run(&self, job: &JobSpec, ctx: &JobContext) -> JobOutcome {
        match job {
            JobSpec::Http { .. } => self.http.run(job, ctx).await,
            JobSpec::Noop { .. } => self.noop.run(job, ctx).await,
            JobSpec::Lambda {
                function, payload, ..
            } => {
                let answer = self.invoke_lambda(function, payload, ctx).await?;
                Ok(success_from_answer(&answer))
            }
            JobSpec::Handler { name, .. } => self.handler(name)?.run(job, ctx).await,
            JobSpec::Steps { .. } => Err(steps_not_a_target()),
        }
    }

    /// Asks the job's target what an execution would touch: the same call as [`Self::run`]
    /// with `mode: dry_run` (whatever `ctx.mode` says). Transport failures classify as for
    /// `run`; a target that does not answer the protocol fails with GUARD_UNSUPPORTED.
    pub async fn dry_run(
        &self,
        job: &JobSpec,
        ctx: &JobContext,
    ) -> Result<DryRunReport, JobFailure> {
        let ctx = JobContext {
            mode: JobMode::DryRun,
            approved_affected: None,
            ..ctx.clone()
        };
        match job {
            JobSpec::Http { .. } => self.http.dry_run(job, &ctx).await,
            JobSpec::Noop { .. } => self.noop.dry_run(job, &ctx).await,
            JobSpec::Lambda {
                function, payload, ..
            } => {
                let answer = self.invoke_lambda(function, payload, &ctx).await?;
                DryRunReport::from_answer(&answer)
            }
            JobSpec::Handler { name, .. } => self.handler(name)?.dry_run(job, &ctx).await,
            JobSpec::Steps { .. } => Err(steps_not_a_target()),
        }
    }

    /// `{"context": ctx, "payload": payload}` to the function; its JSON answer.
    async fn invoke_lambda(
        &self,
        function: &str,
        payload: &serde_json::Value,
        ctx: &JobContext,
    ) -> Result<serde_json::Value, JobFailure> {
        let Some(invoker) = &self.lambda else {
            return Err(JobFailure::permanent(
                "JOB_TARGET_UNAVAILABLE",
                "this worker has no Lambda client configured",
            ));
        };
        let request = serde_json::json!({ "context": ctx, "payload": payload });
        invoker.invoke(function, &request).await
    }

    fn handler(&self, name: &str) -> Result<&Arc<dyn JobHandler>, JobFailure> {
        self.handlers.get(name).ok_or_else(|| {
            JobFailure::permanent(
                "JOB_HANDLER_UNKNOWN",
                format!("no handler named `{name}` is compiled into this worker"),
            )
        })
    }
}

/// A steps job is run step by step by the worker, never handed to a target whole.
fn steps_not_a_target() -> JobFailure {
    JobFailure::permanent(
        "JOB_TARGET_MISMATCH",
        "a steps job runs one step per attempt; its steps are the targets",
    )
}

/// Reads an optional `{count, checksum, partial, output}` report out of a target's JSON answer.
pub fn success_from_answer(answer: &serde_json::Value) -> JobSuccess {
    JobSuccess {
        partial: answer
            .get("partial")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false),
        result: RunResult {
            count: answer.get("count").and_then(serde_json::Value::as_u64),
            checksum: answer
                .get("checksum")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
            ..RunResult::default()
        },
        output: answer.get("output").filter(|v| !v.is_null()).cloned(),
        children: answer.get("children").filter(|v| !v.is_null()).cloned(),
    }
}

#[cfg(test)]
mod tests;
