use std::time::Duration;

use async_trait::async_trait;
use cronledger_core::JobSpec;

use super::{
    success_from_answer, DryRunReport, JobContext, JobFailure, JobHandler, JobMode, JobOutcome,
    GUARD_UNSUPPORTED,
};

/// `type: http`: POSTs the run as JSON with an `Idempotency-Key` header.
/// 2xx succeeds; 408, 429 and 5xx are retryable; any other status is permanent.
///
/// A dry run (the destructive-job guard) is the same POST with `"mode": "dry_run"` in the
/// body and `X-Cronledger-Mode: dry-run`; the target answers `{"affected": N, ...}`.
#[derive(Clone)]
pub struct HttpJob {
    client: reqwest::Client,
}

/// The header that tells a guarded target whether the call is a dry run.
pub const MODE_HEADER: &str = "X-Cronledger-Mode";

/// A target's answer to a POST that reached it.
struct Answered {
    status: reqwest::StatusCode,
    text: String,
}

impl HttpJob {
    pub fn new() -> Result<HttpJob, JobFailure> {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map(|client| HttpJob { client })
            .map_err(|e| JobFailure::permanent("JOB_HTTP_CLIENT", e.to_string()))
    }

    async fn post(&self, job: &JobSpec, ctx: &JobContext) -> Result<Answered, JobFailure> {
        let JobSpec::Http {
            url,
            timeout,
            payload,
            guard,
        } = job
        else {
            return Err(JobFailure::permanent(
                "JOB_TARGET_MISMATCH",
                "not an http job",
            ));
        };
        let mut body = serde_json::json!({
            "run": ctx.run,
            "window": ctx.window,
            "business_date": ctx.business_date,
            "idempotency_key": ctx.idempotency_key,
            "attempt": ctx.attempt,
            "payload": payload,
            "mode": ctx.mode,
        });
        if let (Some(approved), Some(obj)) = (ctx.approved_affected, body.as_object_mut()) {
            obj.insert("approved_affected".into(), approved.into());
        }
        let mut request = self
            .client
            .post(url)
            .timeout(Duration::from_secs(timeout.as_secs().max(1)))
            .header("Idempotency-Key", ctx.idempotency_key.as_str());
        // An unguarded job's calls stay as they were; a guarded job's always say which they are.
        if guard.is_some() || ctx.mode == JobMode::DryRun {
            request = request.header(MODE_HEADER, ctx.mode.header_value());
        }
        let response = request.json(&body).send().await.map_err(|e| {
            let code = if e.is_timeout() {
                "HTTP_TIMEOUT"
            } else {
                "HTTP_UNREACHABLE"
            };
            JobFailure::retryable(code, e.to_string())
        })?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        Ok(Answered { status, text })
    }
}

/// A non-2xx answer: 408, 429 and 5xx are retryable, any other status is permanent.
fn failure_of(answered: &Answered) -> JobFailure {
    let status = answered.status;
    let code = format!("HTTP_{}", status.as_u16());
    let detail: String = answered.text.chars().take(500).collect();
    if status.as_u16() == 408 || status.as_u16() == 429 || status.is_server_error() {
        JobFailure::retryable(code, detail)
    } else {
        JobFailure::permanent(code, detail)
    }
}

#[async_trait]
impl JobHandler for HttpJob {
    async fn run(&self, job: &JobSpec, ctx: &JobContext) -> JobOutcome {
        let answered = self.post(job, ctx).await?;
        if answered.status.is_success() {
            let answer = serde_json::from_str(&answered.text).unwrap_or(serde_json::Value::Null);
            return Ok(success_from_answer(&answer));
        }
        Err(failure_of(&answered))
    }

    async fn dry_run(&self, job: &JobSpec, ctx: &JobContext) -> Result<DryRunReport, JobFailure> {
        let answered = self.post(job, ctx).await?;
        let status = answered.status.as_u16();
        // No such route, method or feature: the target does not know dry runs.
        if matches!(status, 404 | 405 | 501) {
            return Err(JobFailure::permanent(
                GUARD_UNSUPPORTED,
                format!("the target answered a dry run with HTTP {status}"),
            ));
        }
        if !answered.status.is_success() {
            return Err(failure_of(&answered));
        }
        let answer = serde_json::from_str(&answered.text).unwrap_or(serde_json::Value::Null);
        DryRunReport::from_answer(&answer)
    }
}
