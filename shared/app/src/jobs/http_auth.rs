//! How an http job's call authenticates: a header whose value is read from Secrets Manager
//! at execution (cached briefly in a warm worker), an HMAC signature of the body keyed by
//! such a secret (`Cronledger-Signature`), or a SigV4 signature with the worker's own
//! credentials. A secret's value goes into the request and nowhere else: not the ledger,
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
use cronledger_core::http_target::{signing_target_of, AwsIamAuth, HmacAuth, HttpAuth, SecretAuth};
use reqwest::header::{HeaderName, HeaderValue};

use super::webhook_signature::{signature_header, SIGNATURE_HEADER};
use super::JobFailure;
use crate::clock::{Clock, SystemClock};

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

/// The staging label Secrets Manager gives a version while a rotation is under way.
pub const PENDING_STAGE: &str = "AWSPENDING";

/// Reads a secret's string by name or ARN. Behind a trait so caching is testable.
#[async_trait]
pub trait SecretSource: Send + Sync {
    /// The current value (`AWSCURRENT`).
    async fn secret_string(&self, id: &str) -> Result<String, JobFailure>;

    /// The value staged [`PENDING_STAGE`], `None` when no rotation is under way.
    async fn pending_secret_string(&self, _id: &str) -> Result<Option<String>, JobFailure> {
        Ok(None)
    }
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

impl SecretsManagerSource {
    /// The string of the version of `id` staged `stage` (AWSCURRENT when `None`); `None`
    /// when no version has that stage.
    async fn read(&self, id: &str, stage: Option<&str>) -> Result<Option<String>, JobFailure> {
        let answer = match self
            .client
            .get_secret_value()
            .secret_id(id)
            .set_version_stage(stage.map(str::to_string))
            .send()
            .await
        {
            Ok(answer) => answer,
            Err(e) if stage.is_some() && e.code() == Some("ResourceNotFoundException") => {
                return Ok(None)
            }
            Err(e) => {
                let code = e.code().unwrap_or_default();
                let message = format!("could not read secret `{id}`: {}", code_or(code, &e));
                return Err(match code {
                    "ResourceNotFoundException" => JobFailure::permanent(SECRET_NOT_FOUND, message),
                    "AccessDeniedException" | "DecryptionFailure" | "InvalidRequestException" => {
                        JobFailure::permanent(SECRET_DENIED, message)
                    }
                    _ => JobFailure::retryable(SECRET_UNAVAILABLE, message),
                });
            }
        };
        match answer.secret_string() {
            Some(text) => Ok(Some(text.to_string())),
            None => Err(JobFailure::permanent(
                SECRET_NOT_TEXT,
                format!(
                    "secret `{id}` has no string value (binary secrets are not headers or keys)"
                ),
            )),
        }
    }
}

#[async_trait]
impl SecretSource for SecretsManagerSource {
    async fn secret_string(&self, id: &str) -> Result<String, JobFailure> {
        self.read(id, None).await?.ok_or_else(|| {
            JobFailure::permanent(SECRET_NOT_FOUND, format!("secret `{id}` has no value"))
        })
    }

    async fn pending_secret_string(&self, id: &str) -> Result<Option<String>, JobFailure> {
        self.read(id, Some(PENDING_STAGE)).await
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

/// Which version of a secret a cache entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Stage {
    Current,
    Pending,
}

/// A cached read: when, and the value (`None`: no version has the stage).
type Entries = HashMap<(String, Stage), (Instant, Option<Arc<str>>)>;

/// Secrets read recently, by id: a warm worker does not call Secrets Manager on every run,
/// and a rotated secret is picked up within the TTL.
pub struct SecretCache {
    source: Arc<dyn SecretSource>,
    ttl: Duration,
    entries: Mutex<Entries>,
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

    /// The secret's current value.
    pub async fn get(&self, id: &str) -> Result<Arc<str>, JobFailure> {
        if let Some(Some(value)) = self.fresh(id, Stage::Current) {
            return Ok(value);
        }
        let value: Arc<str> = self.source.secret_string(id).await?.into();
        self.keep(id, Stage::Current, Some(value.clone()));
        Ok(value)
    }

    /// The keys an hmac job signs with: the current value, then the pending one while a
    /// rotation is under way (so a receiver holding either key accepts the call).
    pub async fn signing_keys(&self, id: &str) -> Result<Vec<Arc<str>>, JobFailure> {
        let current = self.get(id).await?;
        let pending = match self.fresh(id, Stage::Pending) {
            Some(pending) => pending,
            None => {
                let pending: Option<Arc<str>> =
                    self.source.pending_secret_string(id).await?.map(Into::into);
                self.keep(id, Stage::Pending, pending.clone());
                pending
            }
        };
        let mut keys = vec![current];
        keys.extend(pending.filter(|p| *p != keys[0]));
        Ok(keys)
    }

    fn fresh(&self, id: &str, stage: Stage) -> Option<Option<Arc<str>>> {
        let entries = self.lock();
        let (read_at, value) = entries.get(&(id.to_string(), stage))?;
        (read_at.elapsed() < self.ttl).then(|| value.clone())
    }

    fn keep(&self, id: &str, stage: Stage, value: Option<Arc<str>>) {
        self.lock()
            .insert((id.to_string(), stage), (Instant::now(), value));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
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
    /// Dates `Cronledger-Signature`; the machine's clock unless set.
    clock: Option<Arc<dyn Clock>>,
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

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> HttpAuthorizer {
        self.clock = Some(clock);
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
            Some(HttpAuth::Hmac(hmac)) => self.add_signature(hmac, request).await,
            Some(HttpAuth::AwsIam(iam)) => match &self.signer {
                Some(signer) => signer.sign(iam, request).await,
                None => Err(JobFailure::permanent(
                    AUTH_UNAVAILABLE,
                    "this worker has no AWS credentials to sign with",
                )),
            },
        }
    }

    fn secrets(&self, secret: &str) -> Result<&SecretCache, JobFailure> {
        self.secrets.as_deref().ok_or_else(|| {
            JobFailure::permanent(
                AUTH_UNAVAILABLE,
                format!("this worker cannot read secrets (job names `{secret}`)"),
            )
        })
    }

    /// Adds `Cronledger-Signature` over the body as it will be sent, dated now.
    async fn add_signature(
        &self,
        auth: &HmacAuth,
        request: &mut reqwest::Request,
    ) -> Result<(), JobFailure> {
        let keys = self
            .secrets(&auth.secret)?
            .signing_keys(&auth.secret)
            .await?;
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        let now = match &self.clock {
            Some(clock) => clock.now(),
            None => SystemClock.now(),
        };
        let body = request
            .body()
            .and_then(|b| b.as_bytes())
            .unwrap_or_default();
        let header = signature_header(&keys, now.timestamp(), body);
        // Hex and digits only: always a valid header.
        let name = HeaderName::from_bytes(SIGNATURE_HEADER.as_bytes())
            .map_err(|e| JobFailure::permanent(SIGNING_FAILED, e.to_string()))?;
        let value = HeaderValue::from_str(&header)
            .map_err(|e| JobFailure::permanent(SIGNING_FAILED, e.to_string()))?;
        request.headers_mut().insert(name, value);
        Ok(())
    }

    async fn add_secret_header(
        &self,
        auth: &SecretAuth,
        request: &mut reqwest::Request,
    ) -> Result<(), JobFailure> {
        let value = self.secrets(&auth.secret)?.get(&auth.secret).await?;
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

    /// A secret whose pending version is `pending` (none when `None`).
    struct Rotating {
        current: &'static str,
        pending: Option<&'static str>,
        reads: AtomicU32,
    }

    #[async_trait]
    impl SecretSource for Rotating {
        async fn secret_string(&self, _id: &str) -> Result<String, JobFailure> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(self.current.to_string())
        }

        async fn pending_secret_string(&self, _id: &str) -> Result<Option<String>, JobFailure> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(self.pending.map(str::to_string))
        }
    }

    #[tokio::test]
    async fn signing_keys_are_the_current_then_a_distinct_pending_value_cached_even_when_absent() {
        let keys = |current, pending| async move {
            let source = Arc::new(Rotating {
                current,
                pending,
                reads: AtomicU32::new(0),
            });
            let cache = SecretCache::new(source.clone(), Duration::from_secs(3600));
            let first = cache.signing_keys("k").await.expect("read");
            let again = cache.signing_keys("k").await.expect("cached");
            assert_eq!(first, again);
            assert_eq!(source.reads.load(Ordering::SeqCst), 2, "one read per stage");
            first.iter().map(|k| k.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(keys("old", Some("new")).await, ["old", "new"]);
        assert_eq!(keys("old", None).await, ["old"]);
        // Promoted but still labelled pending: one key, not the same one twice.
        assert_eq!(keys("new", Some("new")).await, ["new"]);
    }
}
