//! The api's HTTP client: endpoint and credentials from flags or the environment, SigV4 for
//! API Gateway with IAM auth, a bearer token for a JWT authorizer, nothing for the local
//! runner. A 2xx answer is read as its contract type: a field it does not know, one it lacks
//! or one of another type is an error that names the route and the field. An answer that is
//! not 2xx becomes a `CliError` with the api's `code: message`.

use std::time::SystemTime;

use aws_credential_types::provider::ProvideCredentials;
use cronledger_contract::ErrorBody;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::args::{RemoteArgs, RemoteAuth};
use super::sigv4::{host_of, Signer, EXECUTE_API};
use crate::CliError;

pub struct Client {
    base: String,
    auth: Auth,
    http: reqwest::Client,
}

enum Auth {
    None,
    Bearer(String),
    SigV4(Signer),
}

/// An answer: status and body as sent.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

fn fail(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::msg(format!("REMOTE_{what}: {e}"))
}

impl Client {
    pub async fn connect(args: &RemoteArgs) -> Result<Client, CliError> {
        let base = args
            .api_url
            .clone()
            .ok_or_else(|| {
                CliError::msg("REMOTE_NO_ENDPOINT: give --api-url or set CRONLEDGER_API_URL")
            })?
            .trim_end_matches('/')
            .to_string();
        let auth = match (args.auth, &args.token) {
            (RemoteAuth::Bearer, None) => {
                return Err(CliError::msg(
                    "REMOTE_NO_TOKEN: --auth bearer needs --token or CRONLEDGER_API_TOKEN",
                ))
            }
            (RemoteAuth::Bearer | RemoteAuth::Auto, Some(token)) => Auth::Bearer(token.clone()),
            (RemoteAuth::None, _) => Auth::None,
            (RemoteAuth::Auto, None) if !base.contains(".amazonaws.com") => Auth::None,
            (RemoteAuth::Sigv4 | RemoteAuth::Auto, _) => {
                let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
                let region = args
                    .region
                    .clone()
                    .or_else(|| sdk.region().map(|r| r.to_string()))
                    .ok_or_else(|| {
                        CliError::msg("REMOTE_NO_REGION: give --region or set AWS_REGION")
                    })?;
                let provider = sdk.credentials_provider().ok_or_else(|| {
                    CliError::msg("REMOTE_NO_CREDENTIALS: no AWS credentials found")
                })?;
                let credentials = provider
                    .provide_credentials()
                    .await
                    .map_err(|e| fail("NO_CREDENTIALS", e))?;
                Auth::SigV4(Signer {
                    region,
                    service: EXECUTE_API.to_string(),
                    credentials,
                })
            }
        };
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| fail("CLIENT", e))?;
        Ok(Client { base, auth, http })
    }

    /// A GET that must succeed (2xx), its answer as `T`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, CliError> {
        self.answer(Method::GET, path, None, &[]).await
    }

    /// A DELETE that must succeed (2xx), its answer as `T`; `headers` are extra request
    /// headers.
    pub async fn delete<T: DeserializeOwned>(
        &self,
        path: &str,
        headers: &[(&str, String)],
    ) -> Result<T, CliError> {
        self.answer(Method::DELETE, path, None, headers).await
    }

    /// A call with a JSON body that must succeed (2xx), its answer as `T`; `headers` are
    /// extra request headers.
    pub async fn send<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &impl Serialize,
        headers: &[(&str, String)],
    ) -> Result<T, CliError> {
        let bytes = serde_json::to_vec(body).map_err(|e| fail("REQUEST", e))?;
        self.answer(method, path, Some(bytes), headers).await
    }

    async fn answer<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, String)],
    ) -> Result<T, CliError> {
        let route = format!("{method} {path}");
        let answer = self.call(method, path, body, headers).await?;
        if !(200..300).contains(&answer.status) {
            return Err(api_error(&answer));
        }
        read_answer(&route, answer.status, &answer.body)
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, String)],
    ) -> Result<Answer, CliError> {
        let url = format!("{}{path}", self.base);
        let mut all: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
            .collect();
        if body.is_some() {
            all.push(("content-type".into(), "application/json".into()));
        }
        match &self.auth {
            Auth::None => {}
            Auth::Bearer(token) => all.push(("authorization".into(), format!("Bearer {token}"))),
            Auth::SigV4(signer) => {
                all.push(("host".into(), host_of(&url)?));
                let bytes = body.as_deref().unwrap_or_default();
                let signed = signer.sign(method.as_str(), &url, &all, bytes, SystemTime::now())?;
                all.extend(signed);
            }
        }
        let mut req = self.http.request(method, &url);
        for (n, v) in &all {
            if n != "host" {
                req = req.header(n.as_str(), v.as_str());
            }
        }
        if let Some(bytes) = body {
            req = req.body(bytes);
        }
        let resp = req.send().await.map_err(|e| fail("UNREACHABLE", e))?;
        let status = resp.status().as_u16();
        let body = resp.bytes().await.map_err(|e| fail("READ", e))?.to_vec();
        Ok(Answer { status, body })
    }
}

/// A 2xx answer as its contract type `T`, or an error naming the route, the status, the type
/// and (serde's words) the field that is unknown, missing or of another type.
fn read_answer<T: DeserializeOwned>(route: &str, status: u16, body: &[u8]) -> Result<T, CliError> {
    serde_json::from_slice(body).map_err(|e| {
        CliError::msg(format!(
            "REMOTE_ANSWER_UNREADABLE: {route} answered {status} with a body that is not a {}: {e}",
            type_label::<T>()
        ))
    })
}

/// A type's name without its module paths: `Page<ScheduleView>`.
fn type_label<T>() -> String {
    let mut out = String::new();
    let mut word = String::new();
    let mut chars = std::any::type_name::<T>().chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            word.clear();
        } else if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            out.push_str(&word);
            word.clear();
            out.push(c);
        }
    }
    out + &word
}

/// What the CLI prints of an error answer's `details`: a validation's issues.
#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    issues: Vec<IssueLine>,
}

#[derive(Deserialize)]
struct IssueLine {
    code: Option<String>,
    message: Option<String>,
    field: Option<String>,
}

/// An error answer that is not an [`ErrorBody`]: API Gateway's own (`{"message": ...}`), or
/// one with fields the CLI does not know. Its message is still worth showing.
#[derive(Deserialize)]
struct OtherError {
    code: Option<String>,
    message: String,
}

fn api_error(answer: &Answer) -> CliError {
    let (code, message, details) = match serde_json::from_slice::<ErrorBody>(&answer.body) {
        Ok(e) => (e.code, e.message, e.details),
        Err(_) => match serde_json::from_slice::<OtherError>(&answer.body) {
            Ok(e) => (
                e.code.unwrap_or_else(|| "REMOTE_ERROR".into()),
                e.message,
                None,
            ),
            Err(_) => {
                let text = String::from_utf8_lossy(&answer.body).into_owned();
                let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
                ("REMOTE_ERROR".into(), body.to_string(), None)
            }
        },
    };
    let message = message
        .strip_prefix(&format!("{code}: "))
        .unwrap_or(&message);
    let mut lines = vec![format!("{code}: {message} (HTTP {})", answer.status)];
    let issues = details
        .and_then(|d| serde_json::from_value::<Details>(d).ok())
        .map(|d| d.issues)
        .unwrap_or_default();
    lines.extend(issues.into_iter().map(|i| {
        format!(
            "  {}: {} ({})",
            i.code.unwrap_or_default(),
            i.message.unwrap_or_default(),
            i.field.unwrap_or_default()
        )
    }));
    CliError(lines)
}

/// Percent-encodes one path segment (run ids carry `:` and `~`; both are fine, but `/`, `?`,
/// `#`, `%` and spaces are not).
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
