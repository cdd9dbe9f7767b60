//! The operator console: a static shell (HTML, CSS, plain ES modules from `shared/app/console/`,
//! embedded at build time) served by the same router as the api, so the api function and
//! the local runner both serve it. The shell holds no data: every page reads and acts through
//! the `/v1` routes with the caller's own identity, so its routes need no role.
//!
//! `GET /console/config.json` tells the page how to sign in: `jwt` (OIDC authorization code
//! with PKCE against the JWT authorizer's issuer), `iam` (a browser cannot sign SigV4: the page
//! says the console needs the JWT authorizer) or `local` (the local runner's fixed identity).

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use cronledger_contract::WhoAmI;
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::extract::{Actor, ApiPath};
use super::{Api, InvalidApiSetting};

/// How the console signs in, from the api's environment (see [`ConsoleAuth::from_lookup`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "auth", rename_all = "lowercase")]
pub enum ConsoleAuth {
    /// The local runner: every request is its configured identity; no sign-in.
    Local,
    /// API Gateway's IAM authorization: a browser has no SigV4 credentials.
    Iam,
    /// API Gateway's JWT authorizer: sign in at `issuer` as the OIDC client `client_id`.
    Jwt {
        issuer: String,
        client_id: String,
        scopes: String,
    },
}

/// `jwt`, `iam` or `local` (the template sets it from whether `JwtIssuer` is set).
pub const CONSOLE_AUTH_VARIABLE: &str = "CRONLEDGER_CONSOLE_AUTH";
pub const CONSOLE_ISSUER_VARIABLE: &str = "CRONLEDGER_CONSOLE_ISSUER";
pub const CONSOLE_CLIENT_ID_VARIABLE: &str = "CRONLEDGER_CONSOLE_CLIENT_ID";
/// Optional: the scopes the console asks for (default `openid`).
pub const CONSOLE_SCOPES_VARIABLE: &str = "CRONLEDGER_CONSOLE_SCOPES";

impl ConsoleAuth {
    /// Reads the console's sign-in from `get`. Unset means `iam`: a deployment that says
    /// nothing is not the local runner, and IAM is the template's default authorizer.
    pub fn from_lookup(
        get: &impl Fn(&str) -> Option<String>,
    ) -> Result<ConsoleAuth, InvalidApiSetting> {
        let set = |name: &str| {
            get(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let mode = set(CONSOLE_AUTH_VARIABLE).unwrap_or_else(|| "iam".into());
        match mode.as_str() {
            "iam" => Ok(ConsoleAuth::Iam),
            "local" => Ok(ConsoleAuth::Local),
            "jwt" => {
                let required = |name: &'static str| {
                    set(name).ok_or(InvalidApiSetting {
                        name,
                        expected: "set when CRONLEDGER_CONSOLE_AUTH is jwt",
                        value: String::new(),
                    })
                };
                let issuer = required(CONSOLE_ISSUER_VARIABLE)?;
                if !issuer.starts_with("https://") {
                    return Err(InvalidApiSetting {
                        name: CONSOLE_ISSUER_VARIABLE,
                        expected: "an https:// issuer URL",
                        value: issuer,
                    });
                }
                Ok(ConsoleAuth::Jwt {
                    issuer: issuer.trim_end_matches('/').to_string(),
                    client_id: required(CONSOLE_CLIENT_ID_VARIABLE)?,
                    scopes: set(CONSOLE_SCOPES_VARIABLE).unwrap_or_else(|| "openid".into()),
                })
            }
            _ => Err(InvalidApiSetting {
                name: CONSOLE_AUTH_VARIABLE,
                expected: "jwt, iam or local",
                value: mode,
            }),
        }
    }
}

/// One embedded file: its name under `/console/assets/`, its type and its text.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_str!(concat!("../../console/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Everything the console is made of. A file not listed here is not served.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("auth.js", JS),
    asset!("ui.js", JS),
    asset!("words.js", JS),
    asset!("pages/schedules.js", JS),
    asset!("pages/schedule.js", JS),
    asset!("pages/attention.js", JS),
    asset!("pages/run.js", JS),
    asset!("pages/backfills.js", JS),
    asset!("pages/system.js", JS),
];

const SHELL: &str = "index.html";

/// Scripts and styles from this origin only, nothing inline, no frames. `connect-src` admits
/// the issuer's endpoints over https when the console signs in with OIDC (discovery names
/// them, on hosts not known in advance).
fn content_security_policy(auth: &ConsoleAuth) -> &'static str {
    match auth {
        ConsoleAuth::Jwt { .. } => "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' https:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        _ => "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    }
}

/// Each asset's ETag: a hash of its embedded text, computed once.
fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let digest = Sha256::digest(a.body.as_bytes());
                let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
                format!("\"{hex}\"")
            })
            .collect()
    })
}

fn headers_for(api: &Api, content_type: &'static str) -> [(header::HeaderName, HeaderValue); 5] {
    [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(content_security_policy(&api.deps().config.console)),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        // The sign-in's authorization code is in the shell's URL for a moment.
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        // Revalidated every load (a 304 when unchanged): a new deployment shows at once.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ]
}

fn serve_asset(api: &Api, index: usize, request: &HeaderMap) -> Response {
    let asset = &ASSETS[index];
    let etag = &etags()[index];
    let mut resp = if request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag))
    {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.body.into_response()
    };
    let headers = resp.headers_mut();
    for (name, value) in headers_for(api, asset.content_type) {
        headers.insert(name, value);
    }
    if let Ok(value) = HeaderValue::from_str(etag) {
        headers.insert(header::ETAG, value);
    }
    resp
}

fn shell_index() -> usize {
    ASSETS.iter().position(|a| a.name == SHELL).unwrap_or(0)
}

/// `GET /console`: the shell.
pub async fn shell(State(api): State<Api>, headers: HeaderMap) -> Response {
    serve_asset(&api, shell_index(), &headers)
}

/// `GET /console/{*path}`: an asset under `assets/`, the sign-in config, or the shell for
/// any page's path (the page routes itself: `/console/schedules/ID` is a deep link).
pub async fn path(
    State(api): State<Api>,
    ApiPath(path): ApiPath<String>,
    headers: HeaderMap,
) -> Response {
    if path == "config.json" {
        return config(&api);
    }
    match path.strip_prefix("assets/") {
        Some(name) => match ASSETS
            .iter()
            .position(|a| a.name == name && a.name != SHELL)
        {
            Some(index) => serve_asset(&api, index, &headers),
            None => ApiError::not_found("CONSOLE_ASSET_NOT_FOUND", "no such console file")
                .into_response(),
        },
        None => serve_asset(&api, shell_index(), &headers),
    }
}

fn config(api: &Api) -> Response {
    let auth = &api.deps().config.console;
    let mut resp = Json(json!(auth)).into_response();
    let headers = resp.headers_mut();
    for (name, value) in headers_for(api, "application/json") {
        headers.insert(name, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// `GET /v1/whoami`: the caller and its role, so the console shows only the buttons the
/// role may use (the routes still enforce it).
pub async fn whoami(actor: Actor) -> Json<WhoAmI> {
    Json(WhoAmI {
        principal: actor.caller.principal,
        role: actor.role.as_str().to_string(),
        groups: actor.caller.groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            owned
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn the_sign_in_mode_comes_from_the_environment() {
        assert_eq!(
            ConsoleAuth::from_lookup(&lookup(&[])).ok(),
            Some(ConsoleAuth::Iam)
        );
        let jwt = ConsoleAuth::from_lookup(&lookup(&[
            (CONSOLE_AUTH_VARIABLE, "jwt"),
            (CONSOLE_ISSUER_VARIABLE, "https://id.example/pool/"),
            (CONSOLE_CLIENT_ID_VARIABLE, "client-1"),
        ]));
        assert_eq!(
            jwt.ok(),
            Some(ConsoleAuth::Jwt {
                issuer: "https://id.example/pool".into(),
                client_id: "client-1".into(),
                scopes: "openid".into(),
            })
        );
        let no_client = ConsoleAuth::from_lookup(&lookup(&[
            (CONSOLE_AUTH_VARIABLE, "jwt"),
            (CONSOLE_ISSUER_VARIABLE, "https://id.example"),
        ]));
        assert_eq!(
            no_client.err().map(|e| e.name),
            Some(CONSOLE_CLIENT_ID_VARIABLE)
        );
        let plain_http = ConsoleAuth::from_lookup(&lookup(&[
            (CONSOLE_AUTH_VARIABLE, "jwt"),
            (CONSOLE_ISSUER_VARIABLE, "http://id.example"),
            (CONSOLE_CLIENT_ID_VARIABLE, "c"),
        ]));
        assert!(plain_http.is_err());
        assert!(ConsoleAuth::from_lookup(&lookup(&[(CONSOLE_AUTH_VARIABLE, "basic")])).is_err());
        let shown = serde_json::to_value(ConsoleAuth::Local).unwrap_or_default();
        assert_eq!(shown, json!({"auth": "local"}));
    }

    #[test]
    fn every_asset_is_embedded_and_the_shell_loads_only_listed_ones() {
        let shell = ASSETS[shell_index()].body;
        assert!(shell.contains("/console/assets/app.js"), "{shell}");
        for asset in ASSETS {
            assert!(!asset.body.is_empty(), "{} is empty", asset.name);
            // No CDN: nothing is loaded from another origin.
            assert!(!asset.body.contains("//cdn"), "{} names a CDN", asset.name);
        }
        // Every module another module imports is served.
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            for line in asset.body.lines().filter(|l| l.starts_with("import ")) {
                let Some(target) = line.split(['"', '\'']).nth(1) else {
                    continue;
                };
                let base = asset.name.rsplit_once('/').map_or("", |(dir, _)| dir);
                let resolved = resolve(base, target);
                assert!(
                    ASSETS.iter().any(|a| a.name == resolved),
                    "{} imports {target} ({resolved}), which is not served",
                    asset.name
                );
            }
        }
    }

    /// `./x.js` or `../x.js` relative to a folder of the assets.
    fn resolve(base: &str, target: &str) -> String {
        let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
        for seg in target.split('/') {
            match seg {
                "." => {}
                ".." => {
                    parts.pop();
                }
                other => parts.push(other),
            }
        }
        parts.join("/")
    }
}
