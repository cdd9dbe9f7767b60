//! How an http job's call authenticates: a header whose value is read from Secrets Manager
//! at execution (cached briefly in a warm worker), or a SigV4 signature with the worker's
//! own credentials. A secret's value goes into the request and nowhere else: not the ledger,
//! not a log line, not an error (errors name the secret, never its value).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_secretsmanager::error::ProvideErrorMetadata;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use cronledger_core::http_target::{signing_target_of, AwsIamAuth, HttpAuth, SecretAuth};
use reqwest::header::{HeaderName, HeaderValue};

use super::JobFailure;

/// The secret does not exist (permanent).
pub const SECRET_NOT_FOUND: &str = "HTTP_AUTH_SECRET_NOT_FOUND";
/// The worker may not read or decrypt the secret (permanent until someone fixes access).
pub const SECRET_DENIED: &str = "HTTP_AUTH_SECRET_DENIED";
/// Secrets Manager did not answer (throttling, network, 5xx): retryable.
pub const SECRET_UNAVAILABLE: &str = "HTTP_AUTH_SECRET_UNAVAILABLE";
/// The secret is binary, or its text cannot be a header value (permanent).
pub const SECRET_NOT_TEXT: &str = "HTTP_AUTH_SECRET_NOT_TEXT";
/// This worker has no secrets client or no credentials to sign with (permanent).
pub const AUTH_UNAVAILABLE: &str = "HTTP_AUTH_UNAVAILABLE";
/// The request could not be signed (retryable: credentials may refresh).
pub const SIGNING_FAILED: &str = "HTTP_AUTH_SIGNING_FAILED";

/// How long a warm worker keeps a secret it read, unless configured.
pub const DEFAULT_SECRET_TTL: Duration = Duration::from_secs(300);
/// The name prefix of the secrets the worker may read (the api refuses others at create time).
pub const SECRET_PREFIX_ENV: &str = "CRONLEDGER_SECRET_PREFIX";

/// Seconds a warm worker keeps a secret it read.
pub const SECRET_TTL_ENV: &str = "CRONLEDGER_SECRET_CACHE_SECONDS";

/// Reads a secret's string by name or ARN. Behind a trait so caching is testable.
#[async_trait]
pub trait SecretSource: Send + Sync {
    async fn secret_string(&self, id: &str) -> Result<String, JobFailure>;
}

/// Secrets Manager, at the environment's endpoint (`AWS_ENDPOINT_URL*`).
pub struct SecretsManagerSource {
    client: aws_sdk_secretsmanager::Client,
}

impl SecretsManagerSource {
    pub fn new(sdk: &SdkConfig) -> SecretsManagerSource {
        SecretsManagerSource {
            client: aws_sdk_secretsmanager::Client::new(sdk),
        }
    }

    /// On a client built elsewhere (the IAM test's, which records its calls).
    pub fn from_client(client: aws_sdk_secretsmanager::Client) -> SecretsManagerSource {
        SecretsManagerSource { client }
    }
}

#[async_trait]
impl SecretSource for SecretsManagerSource {
    async fn secret_string(&self, id: &str) -> Result<String, JobFailure> {
        let answer = self
            .client
            .get_secret_value()
            .secret_id(id)
            .send()
            .await
            .map_err(|e| {
                let code = e.code().unwrap_or_default();
                let message = format!("could not read secret `{id}`: {}", code_or(code, &e));
                match code {
                    "ResourceNotFoundException" => JobFailure::permanent(SECRET_NOT_FOUND, message),
                    "AccessDeniedException" | "DecryptionFailure" | "InvalidRequestException" => {
                        JobFailure::permanent(SECRET_DENIED, message)
                    }
                    _ => JobFailure::retryable(SECRET_UNAVAILABLE, message),
                }
            })?;
        answer.secret_string().map(str::to_string).ok_or_else(|| {
            JobFailure::permanent(
                SECRET_NOT_TEXT,
                format!("secret `{id}` has no string value (binary secrets are not headers)"),
            )
        })
    }
}

/// The service's error code, else the transport's own words (neither carries the value).
fn code_or(code: &str, error: &dyn std::fmt::Display) -> String {
    if code.is_empty() {
        error.to_string()
    } else {
        code.to_string()
    }
}

/// Secrets read recently, by id: a warm worker does not call Secrets Manager on every run,
/// and a rotated secret is picked up within the TTL.
pub struct SecretCache {
    source: Arc<dyn SecretSource>,
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Arc<str>)>>,
}

impl SecretCache {
    pub fn new(source: Arc<dyn SecretSource>, ttl: Duration) -> SecretCache {
        SecretCache {
            source,
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The TTL from [`SECRET_TTL_ENV`], else [`DEFAULT_SECRET_TTL`].
    pub fn ttl_from_env() -> Duration {
        std::env::var(SECRET_TTL_ENV)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_SECRET_TTL)
    }

    pub async fn get(&self, id: &str) -> Result<Arc<str>, JobFailure> {
        if let Some(value) = self.fresh(id) {
            return Ok(value);
        }
        let value: Arc<str> = self.source.secret_string(id).await?.into();
        self.lock()
            .insert(id.to_string(), (Instant::now(), value.clone()));
        Ok(value)
    }

    fn fresh(&self, id: &str) -> Option<Arc<str>> {
        let entries = self.lock();
        let (read_at, value) = entries.get(id)?;
        (read_at.elapsed() < self.ttl).then(|| value.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Arc<str>)>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Signs with the worker's credentials (the SDK's default provider chain).
pub struct AwsSigner {
    credentials: SharedCredentialsProvider,
    /// The worker's region: the signing region when neither the job nor its host names one.
    region: Option<String>,
}

impl AwsSigner {
    pub fn new(credentials: SharedCredentialsProvider, region: Option<String>) -> AwsSigner {
        AwsSigner {
            credentials,
            region,
        }
    }

    /// `None` when the configuration has no credentials provider.
    pub fn from_sdk(sdk: &SdkConfig) -> Option<AwsSigner> {
        let region = sdk.region().map(|r| r.to_string());
        sdk.credentials_provider()
            .map(|credentials| AwsSigner::new(credentials, region))
    }

    /// Adds `authorization`, `x-amz-date` (and `x-amz-security-token` for temporary
    /// credentials) covering the method, url, every header and the body.
    async fn sign(
        &self,
        auth: &AwsIamAuth,
        request: &mut reqwest::Request,
    ) -> Result<(), JobFailure> {
        let host = request.url().host_str().unwrap_or_default().to_string();
        let inferred = signing_target_of(&host);
        let service = auth
            .service
            .clone()
            .or_else(|| inferred.as_ref().map(|(s, _)| s.to_string()));
        let region = auth
            .region
            .clone()
            .or_else(|| inferred.map(|(_, r)| r))
            .or_else(|| self.region.clone());
        let (Some(service), Some(region)) = (service, region) else {
            return Err(JobFailure::permanent(
                AUTH_UNAVAILABLE,
                format!("no signing service or region for `{host}`: name them in auth"),
            ));
        };
        let credentials =
            self.credentials.provide_credentials().await.map_err(|e| {
                JobFailure::retryable(SIGNING_FAILED, format!("no credentials: {e}"))
            })?;
        let identity = credentials.into();
        let failed =
            |e: &dyn std::fmt::Display| JobFailure::retryable(SIGNING_FAILED, e.to_string());
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&region)
            .name(&service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| failed(&e))?
            .into();
        let host_header = match request.url().port() {
            Some(port) => format!("{host}:{port}"),
            None => host.clone(),
        };
        let mut headers: Vec<(String, String)> = vec![("host".into(), host_header)];
        for (name, value) in request.headers() {
            let value = value.to_str().map_err(|e| failed(&e))?;
            headers.push((name.as_str().to_string(), value.to_string()));
        }
        let body = request
            .body()
            .and_then(|b| b.as_bytes())
            .unwrap_or_default();
        let url = request.url().to_string();
        let signable = SignableRequest::new(
            request.method().as_str(),
            &url,
            headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
            SignableBody::Bytes(body),
        )
        .map_err(|e| failed(&e))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| failed(&e))?
            .into_parts();
        for (name, value) in instructions.headers() {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| failed(&e))?;
            let mut value = HeaderValue::from_str(value).map_err(|e| failed(&e))?;
            value.set_sensitive(true);
            request.headers_mut().insert(name, value);
        }
        Ok(())
    }
}

/// What the worker authenticates with; either part may be missing (then a job that needs it
/// fails with [`AUTH_UNAVAILABLE`]).
#[derive(Clone, Default)]
pub struct HttpAuthorizer {
    secrets: Option<Arc<SecretCache>>,
    signer: Option<Arc<AwsSigner>>,
}

impl HttpAuthorizer {
    pub fn with_secrets(mut self, secrets: Arc<SecretCache>) -> HttpAuthorizer {
        self.secrets = Some(secrets);
        self
    }

    pub fn with_signer(mut self, signer: Arc<AwsSigner>) -> HttpAuthorizer {
        self.signer = Some(signer);
        self
    }

    /// Secrets Manager with the TTL from the environment, and the SDK's credentials.
    pub fn from_sdk(sdk: &SdkConfig) -> HttpAuthorizer {
        let source = Arc::new(SecretsManagerSource::new(sdk));
        let mut authorizer = HttpAuthorizer::default().with_secrets(Arc::new(SecretCache::new(
            source,
            SecretCache::ttl_from_env(),
        )));
        authorizer.signer = AwsSigner::from_sdk(sdk).map(Arc::new);
        authorizer
    }

    /// Makes `request` (complete: headers and body set) carry the job's credentials.
    pub async fn apply(
        &self,
        auth: Option<&HttpAuth>,
        request: &mut reqwest::Request,
    ) -> Result<(), JobFailure> {
        match auth {
            None => Ok(()),
            Some(HttpAuth::Secret(secret)) => self.add_secret_header(secret, request).await,
            Some(HttpAuth::AwsIam(iam)) => match &self.signer {
                Some(signer) => signer.sign(iam, request).await,
                None => Err(JobFailure::permanent(
                    AUTH_UNAVAILABLE,
                    "this worker has no AWS credentials to sign with",
                )),
            },
        }
    }

    async fn add_secret_header(
        &self,
        auth: &SecretAuth,
        request: &mut reqwest::Request,
    ) -> Result<(), JobFailure> {
        let Some(secrets) = &self.secrets else {
            return Err(JobFailure::permanent(
                AUTH_UNAVAILABLE,
                format!(
                    "this worker cannot read secrets (job names `{}`)",
                    auth.secret
                ),
            ));
        };
        let value = secrets.get(&auth.secret).await?;
        let not_a_header = || {
            JobFailure::permanent(
                SECRET_NOT_TEXT,
                format!(
                    "secret `{}` (or the auth header `{}`) cannot be sent as a header",
                    auth.secret, auth.header
                ),
            )
        };
        let name = HeaderName::from_bytes(auth.header.as_bytes()).map_err(|_| not_a_header())?;
        let text = format!("{}{}", auth.prefix.as_deref().unwrap_or_default(), value);
        let mut value = HeaderValue::from_str(&text).map_err(|_| not_a_header())?;
        value.set_sensitive(true);
        request.headers_mut().insert(name, value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    struct Counting(AtomicU32);

    #[async_trait]
    impl SecretSource for Counting {
        async fn secret_string(&self, id: &str) -> Result<String, JobFailure> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(format!("{id}-v{n}"))
        }
    }

    #[tokio::test]
    async fn a_secret_is_read_once_per_ttl_and_again_after_it() {
        let source = Arc::new(Counting(AtomicU32::new(0)));
        let cached = SecretCache::new(source.clone(), Duration::from_secs(3600));
        assert_eq!(&*cached.get("a").await.expect("read"), "a-v1");
        assert_eq!(&*cached.get("a").await.expect("cached"), "a-v1");
        assert_eq!(&*cached.get("b").await.expect("read"), "b-v2");
        assert_eq!(source.0.load(Ordering::SeqCst), 2);
        // A zero TTL keeps nothing: every read goes to the source.
        let uncached = SecretCache::new(source.clone(), Duration::ZERO);
        assert_eq!(&*uncached.get("a").await.expect("read"), "a-v3");
        assert_eq!(&*uncached.get("a").await.expect("read"), "a-v4");
    }
}
