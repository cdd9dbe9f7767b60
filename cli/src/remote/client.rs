//! The api's HTTP client: endpoint and credentials from flags or the environment, SigV4 for
//! API Gateway with IAM auth, a bearer token for a JWT authorizer, nothing for the local
//! runner. An answer that is not 2xx becomes a `CliError` with the api's `code: message`.

use std::time::SystemTime;

use aws_credential_types::provider::ProvideCredentials;
use reqwest::Method;
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

/// An answer: status and JSON body.
pub struct Answer {
    pub status: u16,
    pub body: Value,
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

    /// One call; `headers` are extra request headers.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, String)],
    ) -> Result<Answer, CliError> {
        let url = format!("{}{path}", self.base);
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
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
                let signed = signer.sign(method.as_str(), &url, &all, &bytes, SystemTime::now())?;
                all.extend(signed);
            }
        }
        let mut req = self.http.request(method, &url);
        for (n, v) in &all {
            if n != "host" {
                req = req.header(n.as_str(), v.as_str());
            }
        }
        if body.is_some() {
            req = req.body(bytes);
        }
        let resp = req.send().await.map_err(|e| fail("UNREACHABLE", e))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| fail("READ", e))?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok(Answer { status, body })
    }

    /// A call that must succeed (2xx), its body.
    pub async fn ok(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, String)],
    ) -> Result<Value, CliError> {
        let answer = self.call(method, path, body, headers).await?;
        if (200..300).contains(&answer.status) {
            return Ok(answer.body);
        }
        Err(api_error(&answer))
    }
}

pub fn api_error(answer: &Answer) -> CliError {
    let code = answer.body["code"].as_str().unwrap_or("REMOTE_ERROR");
    let message = answer.body["message"]
        .as_str()
        .map(|m| {
            m.strip_prefix(&format!("{code}: "))
                .unwrap_or(m)
                .to_string()
        })
        .unwrap_or_else(|| answer.body.to_string());
    let mut lines = vec![format!("{code}: {message} (HTTP {})", answer.status)];
    if let Some(issues) = answer.body["details"]["issues"].as_array() {
        lines.extend(issues.iter().map(|i| {
            format!(
                "  {}: {} ({})",
                i["code"].as_str().unwrap_or(""),
                i["message"].as_str().unwrap_or(""),
                i["field"].as_str().unwrap_or("")
            )
        }));
    }
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
