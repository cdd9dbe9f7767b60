use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_config::SdkConfig;
use cronledger_core::JobSpec;

use super::http_auth::HttpAuthorizer;
use super::target_fence::{
    refusal_in, AllowlistInvalid, FencedResolver, TargetFence, TARGET_FORBIDDEN,
};
use super::{
    success_from_answer, DryRunReport, JobContext, JobFailure, JobHandler, JobMode, JobOutcome,
    GUARD_UNSUPPORTED,
};

/// `type: http`: POSTs the run as JSON with an `Idempotency-Key` header.
/// 2xx succeeds; 408, 429 and 5xx are retryable; any other status is permanent.
///
/// A dry run (the destructive-job guard) is the same POST with `"mode": "dry_run"` in the
/// body and `X-Cronledger-Mode: dry-run`; the target answers `{"affected": N, ...}`.
///
/// Calls go only where the [`TargetFence`] allows (checked on the address connected to), and
/// carry the job's `auth`. Redirects are not followed: a 3xx is the answer.
#[derive(Clone)]
pub struct HttpJob {
    client: reqwest::Client,
    fence: Arc<TargetFence>,
    authorizer: HttpAuthorizer,
}

/// Where http jobs may call and what they authenticate with.
#[derive(Clone, Default)]
pub struct HttpOptions {
    pub fence: TargetFence,
    pub authorizer: HttpAuthorizer,
}

impl HttpOptions {
    /// The local runner's (and tests'): loopback targets allowed, no credentials.
    pub fn local() -> HttpOptions {
        HttpOptions {
            fence: TargetFence::default().allowing_loopback(),
            ..HttpOptions::default()
        }
    }

    /// The worker's: the fence the deployment configured, Secrets Manager and the SDK's
    /// credentials.
    pub fn from_env(sdk: &SdkConfig) -> Result<HttpOptions, AllowlistInvalid> {
        Ok(HttpOptions {
            fence: TargetFence::from_env()?,
            authorizer: HttpAuthorizer::from_sdk(sdk),
        })
    }
}

/// The header that tells a guarded target whether the call is a dry run.
pub const MODE_HEADER: &str = "X-Cronledger-Mode";

/// A target's answer to a POST that reached it.
struct Answered {
    status: reqwest::StatusCode,
    text: String,
}

impl HttpJob {
    /// The default fence (no loopback, no link-local) and no credentials.
    pub fn new() -> Result<HttpJob, JobFailure> {
        HttpJob::with_options(HttpOptions::default())
    }

    pub fn with_options(options: HttpOptions) -> Result<HttpJob, JobFailure> {
        let fence = Arc::new(options.fence);
        // No proxy: the fence must see the target's address, not a proxy's.
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(FencedResolver::new(fence.clone())))
            .build()
            .map(|client| HttpJob {
                client,
                fence,
                authorizer: options.authorizer,
            })
            .map_err(|e| JobFailure::permanent("JOB_HTTP_CLIENT", e.to_string()))
    }

    async fn post(&self, job: &JobSpec, ctx: &JobContext) -> Result<Answered, JobFailure> {
        let JobSpec::Http {
            url,
            timeout,
            payload,
            guard,
            auth,
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
        // An unguarded job's calls stay as they were; a guarded job's always say which they
        // are, and so do dry runs and a `verify` source's questions.
        if guard.is_some() || ctx.mode != JobMode::Execute {
            request = request.header(MODE_HEADER, ctx.mode.header_value());
        }
        let mut request = request
            .json(&body)
            .build()
            .map_err(|e| JobFailure::permanent("HTTP_BAD_REQUEST", e.without_url().to_string()))?;
        self.fence
            .check_url(request.url())
            .map_err(|refused| JobFailure::permanent(TARGET_FORBIDDEN, refused.0))?;
        self.authorizer.apply(auth.as_ref(), &mut request).await?;
        let response = self.client.execute(request).await.map_err(|e| {
            if let Some(refused) = refusal_in(&e) {
                return JobFailure::permanent(TARGET_FORBIDDEN, refused.0.clone());
            }
            let code = if e.is_timeout() {
                "HTTP_TIMEOUT"
            } else {
                "HTTP_UNREACHABLE"
            };
            // Without the url: one stored before credentials in urls were refused has them.
            JobFailure::retryable(code, e.without_url().to_string())
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
