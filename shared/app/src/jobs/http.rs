use std::time::Duration;

use async_trait::async_trait;
use cronledger_core::JobSpec;

use super::{success_from_answer, JobContext, JobFailure, JobHandler, JobOutcome};

/// `type: http`: POSTs the run as JSON with an `Idempotency-Key` header.
/// 2xx succeeds; 408, 429 and 5xx are retryable; any other status is permanent.
#[derive(Clone)]
pub struct HttpJob {
    client: reqwest::Client,
}

impl HttpJob {
    pub fn new() -> Result<HttpJob, JobFailure> {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map(|client| HttpJob { client })
            .map_err(|e| JobFailure::permanent("JOB_HTTP_CLIENT", e.to_string()))
    }
}

#[async_trait]
impl JobHandler for HttpJob {
    async fn run(&self, job: &JobSpec, ctx: &JobContext) -> JobOutcome {
        let JobSpec::Http {
            url,
            timeout,
            payload,
            ..
        } = job
        else {
            return Err(JobFailure::permanent(
                "JOB_TARGET_MISMATCH",
                "not an http job",
            ));
        };
        let body = serde_json::json!({
            "run": ctx.run,
            "window": ctx.window,
            "business_date": ctx.business_date,
            "idempotency_key": ctx.idempotency_key,
            "attempt": ctx.attempt,
            "payload": payload,
        });
        let response = self
            .client
            .post(url)
            .timeout(Duration::from_secs(timeout.as_secs().max(1)))
            .header("Idempotency-Key", ctx.idempotency_key.as_str())
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                let code = if e.is_timeout() {
                    "HTTP_TIMEOUT"
                } else {
                    "HTTP_UNREACHABLE"
                };
                JobFailure::retryable(code, e.to_string())
            })?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let code = format!("HTTP_{}", status.as_u16());
        if status.is_success() {
            let answer = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
            return Ok(success_from_answer(&answer));
        }
        let detail: String = text.chars().take(500).collect();
        if status.as_u16() == 408 || status.as_u16() == 429 || status.is_server_error() {
            Err(JobFailure::retryable(code, detail))
        } else {
            Err(JobFailure::permanent(code, detail))
        }
    }
}
