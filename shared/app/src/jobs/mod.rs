//! Job targets: what a run executes, and how its outcome is classified.

mod http;
mod lambda;
mod noop;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use cronledger_core::run::RunResult;
use cronledger_core::{IdempotencyKey, JobSpec, RunKey, Window};
use serde::Serialize;

pub use http::HttpJob;
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
}

/// How a job ended well.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobSuccess {
    /// Part of the work was done; the run ends PARTIAL_SUCCESS.
    pub partial: bool,
    pub result: RunResult,
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
                let Some(invoker) = &self.lambda else {
                    return Err(JobFailure::permanent(
                        "JOB_TARGET_UNAVAILABLE",
                        "this worker has no Lambda client configured",
                    ));
                };
                let request = serde_json::json!({ "context": ctx, "payload": payload });
                let answer = invoker.invoke(function, &request).await?;
                Ok(success_from_answer(&answer))
            }
            JobSpec::Handler { name, .. } => match self.handlers.get(name) {
                Some(handler) => handler.run(job, ctx).await,
                None => Err(JobFailure::permanent(
                    "JOB_HANDLER_UNKNOWN",
                    format!("no handler named `{name}` is compiled into this worker"),
                )),
            },
        }
    }
}

/// Reads an optional `{count, checksum, partial}` report out of a target's JSON answer.
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
            error_code: None,
            message: None,
        },
    }
}
