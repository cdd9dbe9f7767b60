//! An http job's target: how it authenticates (`auth`) and which addresses it may reach.
//! Pure checks shared by validation (create time) and the worker (call time).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Code, Issue};

/// The header an `auth: { secret: ... }` fills when it names none.
pub const DEFAULT_AUTH_HEADER: &str = "Authorization";

/// Headers the worker sets itself (or that would break the request): no secret replaces them.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-type",
    "content-length",
    "transfer-encoding",
    "connection",
    "idempotency-key",
    "x-cronledger-mode",
];

/// How an http job authenticates to its target. Only references are stored: the secret's
/// value is read at execution and never written to the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum HttpAuth {
    /// `{ type: aws_iam }`: the request is signed (SigV4) with the worker's credentials.
    AwsIam(AwsIamAuth),
    /// `{ type: hmac, secret: <name or ARN> }`: the body is signed with the secret's value
    /// (header `Cronledger-Signature`), so the target can tell cronledger's calls from
    /// forged or replayed ones.
    Hmac(HmacAuth),
    /// `{ secret: <name or ARN>, header: Authorization, prefix: "Bearer " }`.
    Secret(SecretAuth),
}

/// A header whose value is a Secrets Manager secret's string, as stored, after `prefix`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretAuth {
    /// The secret's name or ARN.
    pub secret: String,
    #[serde(default = "default_auth_header")]
    pub header: String,
    /// Put before the secret's value, e.g. `"Bearer "`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// SigV4 signing for IAM-protected targets (API Gateway, Lambda function URLs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwsIamAuth {
    #[serde(rename = "type")]
    pub kind: AwsIamKind,
    /// The signing name; inferred from the host when left out (see [`signing_target_of`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// The signing region; from the host, else the worker's region, when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// An HMAC-SHA256 signature of each call, keyed by a Secrets Manager secret's string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HmacAuth {
    #[serde(rename = "type")]
    pub kind: HmacKind,
    /// The secret's name or ARN; its value is the signing key.
    pub secret: String,
}

/// The one value of `type` an [`HmacAuth`] has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum HmacKind {
    #[serde(rename = "hmac")]
    Hmac,
}

/// The one value of `type` an [`AwsIamAuth`] has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum AwsIamKind {
    #[serde(rename = "aws_iam")]
    AwsIam,
}

fn default_auth_header() -> String {
    DEFAULT_AUTH_HEADER.to_string()
}

/// Why an address is no job's target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForbiddenAddress {
    /// 127.0.0.0/8, ::1: in Lambda, the Runtime API of the worker's own invocation.
    Loopback,
    /// 0.0.0.0/8, ::: connecting to it reaches the local host.
    Unspecified,
    /// 169.254.0.0/16, fe80::/10: the credentials and metadata endpoints.
    LinkLocal,
}

impl ForbiddenAddress {
    pub fn describe(self) -> &'static str {
        match self {
            ForbiddenAddress::Loopback => "a loopback address",
            ForbiddenAddress::Unspecified => "an unspecified address (the local host)",
            ForbiddenAddress::LinkLocal => "a link-local address (metadata and credentials)",
        }
    }

    /// Whether a deployment that allows loopback (the local runner) allows this one too.
    pub fn is_local_host(self) -> bool {
        matches!(
            self,
            ForbiddenAddress::Loopback | ForbiddenAddress::Unspecified
        )
    }
}

/// Whether `ip` is an address no job may call by default; IPv4-mapped and IPv4-compatible
/// IPv6 forms count as the IPv4 address they carry.
pub fn forbidden_address(ip: IpAddr) -> Option<ForbiddenAddress> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<ForbiddenAddress> {
    if ip.is_loopback() {
        Some(ForbiddenAddress::Loopback)
    } else if ip.octets()[0] == 0 {
        Some(ForbiddenAddress::Unspecified)
    } else if ip.is_link_local() {
        Some(ForbiddenAddress::LinkLocal)
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<ForbiddenAddress> {
    if ip.is_loopback() {
        Some(ForbiddenAddress::Loopback)
    } else if ip.is_unspecified() {
        Some(ForbiddenAddress::Unspecified)
    } else if ip.segments()[0] & 0xffc0 == 0xfe80 {
        Some(ForbiddenAddress::LinkLocal)
    } else {
        // `::ffff:a.b.c.d` and the deprecated `::a.b.c.d` reach the IPv4 address.
        ip.to_ipv4().and_then(forbidden_v4)
    }
}

/// The SigV4 signing name and region a host implies: `execute-api` for API Gateway
/// (`{id}.execute-api.{region}.amazonaws.com`), `lambda` for function URLs
/// (`{id}.lambda-url.{region}.on.aws`).
pub fn signing_target_of(host: &str) -> Option<(&'static str, String)> {
    let host = host.to_ascii_lowercase();
    let labels: Vec<&str> = host.trim_end_matches('.').split('.').collect();
    let region_after = |marker: &str| {
        let at = labels.iter().position(|l| *l == marker)?;
        (at > 0).then(|| labels.get(at + 1).map(|r| r.to_string()))?
    };
    if host.ends_with(".amazonaws.com") || host.ends_with(".amazonaws.com.") {
        if let Some(region) = region_after("execute-api") {
            return Some(("execute-api", region));
        }
    }
    if host.ends_with(".on.aws") || host.ends_with(".on.aws.") {
        if let Some(region) = region_after("lambda-url") {
            return Some(("lambda", region));
        }
    }
    None
}

/// A secret's name from its name or ARN (`arn:...:secret:{name}`; the ARN's name ends with
/// the random suffix Secrets Manager adds, which a name prefix still matches).
pub fn secret_name_of(id: &str) -> &str {
    match id.split_once(":secret:") {
        Some((_, name)) if id.starts_with("arn:") => name,
        _ => id,
    }
}

/// `url` with any `user:password@` replaced, for showing a stored spec.
pub fn redact_url_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://REDACTED@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// Redacts the url credentials of a spec as JSON (`job.url`, or `spec.job.url` in an audit
/// entry's view of a schedule).
pub fn redact_spec_json(value: &mut Value) {
    let spec = match value.get_mut("spec") {
        Some(spec) => spec,
        None => value,
    };
    if let Some(Value::String(url)) = spec.get_mut("job").and_then(|j| j.get_mut("url")) {
        *url = redact_url_credentials(url);
    }
}

/// Checks an http job's URL: no credentials in it, and no literal address (or `localhost`)
/// a job may not reach.
pub(crate) fn check_http_url(url: &str, path: &str, allow_loopback: bool, issues: &mut Vec<Issue>) {
    let field = format!("{path}.url");
    let parsed = match url::Url::parse(url) {
        Ok(parsed) => parsed,
        Err(e) => {
            issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                field,
                format!("url is not a valid URL: {e}"),
            ));
            return;
        }
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        issues.push(Issue::new(
            Code::HttpUrlHasCredentials,
            field.clone(),
            "the url carries credentials (user:password@); anyone who can read the schedule \
             sees them: keep them in Secrets Manager and name the secret in `auth`",
        ));
    }
    let refused = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => forbidden_address(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => forbidden_address(IpAddr::V6(ip)),
        Some(url::Host::Domain(name)) if is_localhost_name(name) => {
            Some(ForbiddenAddress::Loopback)
        }
        _ => None,
    };
    if let Some(kind) = refused.filter(|k| !(allow_loopback && k.is_local_host())) {
        issues.push(Issue::new(
            Code::HttpTargetForbidden,
            field,
            format!(
                "the url's host is {}; http jobs may not call it",
                kind.describe()
            ),
        ));
    }
}

/// `localhost` and its subdomains always name the local host (RFC 6761).
fn is_localhost_name(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// Checks `job.auth` as plain data, each problem with its own path and code; false when it
/// is not usable (the problem is recorded).
pub(crate) fn check_auth(
    auth: &Value,
    url: &str,
    path: &str,
    secret_prefix: Option<&str>,
    issues: &mut Vec<Issue>,
) -> bool {
    let auth_path = format!("{path}.auth");
    let before = issues.len();
    let Some(obj) = auth.as_object() else {
        issues.push(Issue::new(
            Code::HttpAuthInvalid,
            auth_path,
            "`auth` must be a mapping: { secret: <name or ARN>, header: Authorization }, { type: hmac, secret: <name or ARN> } or { type: aws_iam }",
        ));
        return false;
    };
    match obj.get("type") {
        None => {
            unknown_keys(obj, &["secret", "header", "prefix"], &auth_path, issues);
            check_secret_name(obj, &auth_path, secret_prefix, issues);
            check_secret_header(obj, &auth_path, issues);
        }
        Some(Value::String(kind)) if kind == "hmac" => {
            unknown_keys(obj, &["type", "secret"], &auth_path, issues);
            check_secret_name(obj, &auth_path, secret_prefix, issues);
        }
        Some(Value::String(kind)) if kind == "aws_iam" => {
            check_aws_iam_auth(obj, url, &auth_path, issues)
        }
        Some(other) => issues.push(Issue::new(
            Code::HttpAuthUnknownType,
            format!("{auth_path}.type"),
            format!(
                "unknown auth type {other}; use `type: hmac` or `type: aws_iam`, or leave `type` out and name a `secret`"
            ),
        )),
    }
    issues.len() == before
}

/// `secret` names a secret the worker may read (under the deployment's prefix, if any).
fn check_secret_name(
    obj: &Map<String, Value>,
    auth_path: &str,
    secret_prefix: Option<&str>,
    issues: &mut Vec<Issue>,
) {
    match obj.get("secret").and_then(Value::as_str).map(str::trim) {
        Some(id) if !id.is_empty() => {
            if let Some(prefix) = secret_prefix.filter(|p| !p.is_empty()) {
                if !secret_name_of(id).starts_with(prefix) {
                    issues.push(Issue::new(
                        Code::HttpAuthSecretOutsidePrefix,
                        format!("{auth_path}.secret"),
                        format!(
                            "the worker may read only secrets named `{prefix}...`; `{id}` is outside it"
                        ),
                    ));
                }
            }
        }
        _ => issues.push(Issue::new(
            Code::HttpAuthInvalid,
            format!("{auth_path}.secret"),
            "`secret` must name a Secrets Manager secret (its name or ARN)",
        )),
    }
}

/// A header secret's `header` and `prefix`, when given.
fn check_secret_header(obj: &Map<String, Value>, auth_path: &str, issues: &mut Vec<Issue>) {
    if let Some(header) = obj.get("header") {
        let name = header.as_str().unwrap_or_default();
        let token = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c));
        if !token || RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            issues.push(Issue::new(
                Code::HttpAuthInvalid,
                format!("{auth_path}.header"),
                format!(
                    "`header` must be a header name the worker does not set itself, found {header}"
                ),
            ));
        }
    }
    if let Some(prefix) = obj.get("prefix") {
        let printable = prefix
            .as_str()
            .is_some_and(|p| p.chars().all(|c| c == ' ' || c.is_ascii_graphic()));
        if !printable {
            issues.push(Issue::new(
                Code::HttpAuthInvalid,
                format!("{auth_path}.prefix"),
                "`prefix` must be printable text such as \"Bearer \"",
            ));
        }
    }
}

fn check_aws_iam_auth(
    obj: &Map<String, Value>,
    url: &str,
    auth_path: &str,
    issues: &mut Vec<Issue>,
) {
    unknown_keys(obj, &["type", "service", "region"], auth_path, issues);
    for key in ["service", "region"] {
        let Some(value) = obj.get(key) else { continue };
        if value.as_str().is_none_or(|v| v.trim().is_empty()) {
            issues.push(Issue::new(
                Code::HttpAuthInvalid,
                format!("{auth_path}.{key}"),
                format!("`{key}` must be a non-empty string, found {value}"),
            ));
        }
    }
    let host = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string));
    let inferred = host.as_deref().and_then(signing_target_of);
    if !obj.contains_key("service") && inferred.is_none() {
        issues.push(Issue::new(
            Code::HttpAuthInvalid,
            format!("{auth_path}.service"),
            "the url is neither an API Gateway nor a Lambda function URL host: name the signing `service`",
        ));
    }
}

fn unknown_keys(obj: &Map<String, Value>, known: &[&str], path: &str, issues: &mut Vec<Issue>) {
    for key in obj.keys().filter(|k| !known.contains(&k.as_str())) {
        issues.push(Issue::new(
            Code::ScheduleUnknownField,
            format!("{path}.{key}"),
            format!("unknown field `{key}`; auth has {}", known.join(", ")),
        ));
    }
}
