//! http jobs that authenticate, and the fence around what they may reach: a secret's value
//! from Secrets Manager (the emulator's) reaches the target in its header and nothing else
//! (ledger, logs); SigV4-signed calls; loopback and link-local targets refused, literal or
//! resolved at call time, and redirects not followed.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::Router;
use chrono::{DateTime, Utc};
use cronledger_app::jobs::http_auth::{
    AwsSigner, HttpAuthorizer, SecretCache, SecretsManagerSource, SECRET_NOT_FOUND,
};
use cronledger_app::jobs::target_fence::{TargetFence, TARGET_FORBIDDEN};
use cronledger_app::jobs::{HttpJob, HttpOptions, JobContext, JobFailure, JobMode, JobTargets};
use cronledger_aws::config::load_sdk_config;
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::AwsSettings;
use cronledger_core::http_target::{AwsIamAuth, AwsIamKind, HttpAuth, SecretAuth};
use cronledger_core::{IdempotencyKey, JobSpec, RunKey, RunStatus, Span, Window};
use cronledger_tests::app::AppEnv;
use cronledger_tests::{require_emulator, spec_with, t, unique_name};
use serde_json::json;

/// One request as the receiver saw it: its path and headers (names lowercase).
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: BTreeMap<String, String>,
}

/// A receiver on 127.0.0.1 that records every request; `/redirect` answers a redirect to
/// the metadata endpoint, anything else `{"count": 1}`.
struct Receiver {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Receiver {
    async fn start() -> Receiver {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
            let recorded = recorded.clone();
            async move {
                let headers = headers
                    .iter()
                    .map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
                    .collect();
                let path = uri.path().to_string();
                lock(&recorded).push(Seen {
                    path: path.clone(),
                    headers,
                });
                if path == "/redirect" {
                    let to = [("location", "http://169.254.169.254/latest/meta-data/")];
                    return (StatusCode::FOUND, to).into_response();
                }
                axum::Json(json!({"count": 1})).into_response()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("an address").port();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            base: format!("http://127.0.0.1:{port}"),
            seen,
        }
    }

    fn port(&self) -> &str {
        self.base.rsplit(':').next().unwrap_or_default()
    }

    fn seen(&self) -> Vec<Seen> {
        lock(&self.seen).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn http_job(url: String, auth: Option<HttpAuth>) -> JobSpec {
    JobSpec::Http {
        url,
        timeout: Span::seconds(5),
        payload: serde_json::Value::Null,
        guard: None,
        auth,
    }
}

fn at() -> DateTime<Utc> {
    t("2026-03-01T10:00:00Z")
}

fn ctx() -> JobContext {
    let window = Window::new(at(), at());
    JobContext {
        run: RunKey::expected("s", at()),
        window,
        business_date: at().date_naive(),
        idempotency_key: IdempotencyKey::for_window("s", &window, None),
        attempt: 1,
        payload: serde_json::Value::Null,
        deadline: at(),
        mode: JobMode::Execute,
        approved_affected: None,
        step: None,
        previous: None,
        child: None,
    }
}

fn refused(outcome: Result<cronledger_app::jobs::JobSuccess, JobFailure>) -> JobFailure {
    match outcome {
        Err(failure @ JobFailure::Permanent { .. }) => failure,
        other => panic!("expected a permanent failure, got {other:?}"),
    }
}

#[tokio::test]
async fn loopback_and_link_local_targets_are_refused_by_default_literal_or_resolved() {
    let receiver = Receiver::start().await;
    let targets = JobTargets::new(HttpJob::new().expect("a client"));
    for url in [
        format!("{}/hook", receiver.base),
        format!("http://localhost:{}/hook", receiver.port()),
        format!("http://[::ffff:127.0.0.1]:{}/hook", receiver.port()),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://169.254.170.2/v2/credentials".to_string(),
    ] {
        let failure = refused(targets.run(&http_job(url.clone(), None), &ctx()).await);
        assert_eq!(failure.code(), TARGET_FORBIDDEN, "{url}: {failure}");
    }
    // `localhost` got through validation's literal check only to be refused on the address
    // it resolved to: nothing reached the receiver.
    assert!(receiver.seen().is_empty(), "{:?}", receiver.seen());

    // Allowed loopback (the local runner) still honours an allowlist.
    let narrowed = TargetFence::default()
        .allowing_loopback()
        .with_allowlist("10.0.0.0/8, api.example.com")
        .expect("a valid allowlist");
    let narrowed = JobTargets::new(
        HttpJob::with_options(HttpOptions {
            fence: narrowed,
            ..HttpOptions::default()
        })
        .expect("a client"),
    );
    let url = format!("http://localhost:{}/hook", receiver.port());
    let failure = refused(narrowed.run(&http_job(url, None), &ctx()).await);
    assert_eq!(failure.code(), TARGET_FORBIDDEN);
    assert!(failure.message().contains("allowlist"), "{failure}");
    assert!(receiver.seen().is_empty());

    let local = JobTargets::new(HttpJob::with_options(HttpOptions::local()).expect("a client"));
    let url = format!("http://localhost:{}/hook", receiver.port());
    local
        .run(&http_job(url, None), &ctx())
        .await
        .expect("loopback allowed locally");
    assert_eq!(receiver.seen().len(), 1);
}

#[tokio::test]
async fn a_redirect_is_the_answer_not_followed_to_the_metadata_endpoint() {
    let receiver = Receiver::start().await;
    let local = JobTargets::new(HttpJob::with_options(HttpOptions::local()).expect("a client"));
    let job = http_job(format!("{}/redirect", receiver.base), None);
    let failure = refused(local.run(&job, &ctx()).await);
    assert_eq!(failure.code(), "HTTP_302");
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1, "one call, no second hop");
    assert_eq!(seen[0].path, "/redirect");
}

#[tokio::test]
async fn an_aws_iam_job_is_signed_with_sigv4_for_its_service_and_region() {
    let receiver = Receiver::start().await;
    let credentials = Credentials::new(
        "AKIDTESTSIGNER",
        "not-a-real-key",
        Some("the-session-token".into()),
        None,
        "tests",
    );
    let signer = AwsSigner::new(
        SharedCredentialsProvider::new(credentials),
        Some("eu-central-1".into()),
    );
    let http = HttpJob::with_options(HttpOptions {
        authorizer: HttpAuthorizer::default().with_signer(Arc::new(signer)),
        ..HttpOptions::local()
    })
    .expect("a client");
    let targets = JobTargets::new(http);
    let iam = |service: &str, region: Option<&str>| {
        Some(HttpAuth::AwsIam(AwsIamAuth {
            kind: AwsIamKind::AwsIam,
            service: Some(service.into()),
            region: region.map(str::to_string),
        }))
    };
    let url = format!("{}/signed", receiver.base);
    targets
        .run(&http_job(url.clone(), iam("execute-api", None)), &ctx())
        .await
        .expect("delivered");
    targets
        .run(&http_job(url, iam("lambda", Some("us-west-2"))), &ctx())
        .await
        .expect("delivered");
    let seen = receiver.seen();
    assert_eq!(seen.len(), 2);
    let date = |s: &Seen| s.headers.get("x-amz-date").cloned().unwrap_or_default();
    for (call, scope) in [
        (&seen[0], "eu-central-1/execute-api/aws4_request"),
        (&seen[1], "us-west-2/lambda/aws4_request"),
    ] {
        let authorization = call
            .headers
            .get("authorization")
            .cloned()
            .unwrap_or_default();
        assert!(
            authorization.starts_with(&format!(
                "AWS4-HMAC-SHA256 Credential=AKIDTESTSIGNER/{}/{scope}",
                &date(call)[..8]
            )),
            "{authorization}"
        );
        // Every header the worker sends is covered, the host and idempotency key included.
        assert!(authorization.contains("SignedHeaders="), "{authorization}");
        assert!(
            authorization.contains("host;idempotency-key"),
            "{authorization}"
        );
        assert_eq!(date(call).len(), 16, "x-amz-date: {:?}", call.headers);
        assert_eq!(
            call.headers.get("x-amz-security-token").map(String::as_str),
            Some("the-session-token")
        );
    }
}

/// A writer that keeps everything logged, to search it afterwards.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        lock(&self.0).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&lock(&self.0)).into_owned()
    }
}

#[tokio::test]
async fn a_secret_header_reaches_the_target_and_never_the_ledger_or_the_logs() {
    require_emulator();
    let logs = Captured::default();
    let writer = logs.clone();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || writer.clone())
            .finish(),
    );
    let sdk = load_sdk_config(&AwsSettings::default()).await;
    let secrets = aws_sdk_secretsmanager::Client::new(&sdk);
    let name = format!("cronledger/{}", unique_name("token"));
    let value = format!("s3cr3t-{}", unique_name("v"));
    secrets
        .create_secret()
        .name(&name)
        .secret_string(&value)
        .send()
        .await
        .expect("secret created in the emulator");

    let receiver = Receiver::start().await;
    let env = AppEnv::new(LaneSettings::default(), at()).await;
    let fields = json!({"job": {
        "type": "http", "url": format!("{}/report", receiver.base), "timeout": "10s",
        "auth": {"secret": name, "prefix": "Bearer "},
    }});
    env.create(
        spec_with("secret-auth", "0 * * * *", fields),
        t("2026-03-01T09:59:30Z"),
    )
    .await;
    let run = env
        .fire_authenticated("secret-auth", at(), HttpAuthorizer::from_sdk(&sdk))
        .await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");

    let seen = receiver.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].headers.get("authorization"),
        Some(&format!("Bearer {value}"))
    );
    // Everything the ledger holds about the schedule and the run, as stored.
    let items = env
        .ledger
        .clients
        .dynamodb
        .scan()
        .table_name(&env.ledger.table)
        .send()
        .await
        .expect("scan the ledger");
    let stored = format!("{:?}", items.items());
    assert!(stored.contains(&name), "the ledger keeps the secret's name");
    assert!(
        !stored.contains(&value),
        "the secret's value reached the ledger"
    );
    let logged = logs.text();
    assert!(!logged.is_empty(), "the worker logged nothing to search");
    assert!(!logged.contains(&value), "the secret's value was logged");

    // A secret that does not exist fails the attempt for good, naming it (no value).
    let missing = format!("cronledger/{}", unique_name("missing"));
    let targets = JobTargets::new(
        HttpJob::with_options(HttpOptions {
            authorizer: HttpAuthorizer::default().with_secrets(Arc::new(SecretCache::new(
                Arc::new(SecretsManagerSource::new(&sdk)),
                std::time::Duration::from_secs(60),
            ))),
            ..HttpOptions::local()
        })
        .expect("a client"),
    );
    let auth = Some(HttpAuth::Secret(SecretAuth {
        secret: missing.clone(),
        header: "X-Api-Key".into(),
        prefix: None,
    }));
    let job = http_job(format!("{}/report", receiver.base), auth);
    let failure = refused(targets.run(&job, &ctx()).await);
    assert_eq!(failure.code(), SECRET_NOT_FOUND, "{failure}");
    assert!(failure.message().contains(&missing), "{failure}");
    assert_eq!(receiver.seen().len(), 1, "no call without its credentials");
}
