//! Authorization. API Gateway authenticates (IAM SigV4, or a JWT authorizer); the function
//! decides what the caller may do from the [`Identity`] in the request context:
//!
//! - IAM: `requestContext.authorizer.iam.userArn` (HTTP API) or
//!   `requestContext.identity.userArn` (REST API) is the principal (for an assumed role,
//!   `arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION`);
//! - JWT: the `sub` claim of `requestContext.authorizer.jwt.claims` (HTTP API) or
//!   `requestContext.authorizer.claims` (REST API, Cognito user pool authorizer) is the
//!   principal and the `groups`, `cognito:groups` or `roles` claims are its groups.
//!
//! Roles, weakest first: `viewer` (reads), `operator` (runs, retries, approvals, backfills,
//! one-off runs), `admin` (schedules and the kill switch; everything an operator may do).
//! The mapping comes from `CRONLEDGER_API_AUTH`, JSON:
//!
//! ```json
//! {"roles": {"arn:aws:sts::123456789012:assumed-role/Ops/*": "operator",
//!            "group:platform-admins": "admin"},
//!  "job_types": {"lambda": ["group:platform-admins"]}}
//! ```
//!
//! A key ending in `*` matches by prefix; `group:NAME` matches a JWT group. The strongest
//! matching role wins. `job_types` lists, per job type, who may create or change schedules of
//! that type (same matching); a type without an entry is open to every admin. No identity
//! is 401; an identity without a role, or without the role a route needs, is 403.

use std::collections::{BTreeMap, HashMap};

use aws_lambda_events::apigw::{ApiGatewayProxyRequestContext, ApiGatewayV2httpRequestContext};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        match text.trim().to_ascii_lowercase().as_str() {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// Who is calling, as the front door established it. Put into the request's extensions by
/// the Lambda adapter (from the request context) or by the local runner (configured).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub principal: String,
    pub groups: Vec<String>,
    /// A role fixed by the host (the local runner's configured identity), not by the mapping.
    pub fixed_role: Option<Role>,
}

impl Caller {
    pub fn new(principal: impl Into<String>) -> Caller {
        Caller {
            principal: principal.into(),
            groups: Vec::new(),
            fixed_role: None,
        }
    }

    pub fn with_groups(mut self, groups: &[&str]) -> Caller {
        self.groups = groups.iter().map(|g| g.to_string()).collect();
        self
    }

    /// The local runner's identity: `CRONLEDGER_LOCAL_IDENTITY=admin` (or `operator`,
    /// `viewer`, or `NAME:ROLE`).
    pub fn local(setting: &str) -> Option<Caller> {
        let (name, role) = match setting.split_once(':') {
            Some((name, role)) => (name.trim().to_string(), Role::parse(role)?),
            None => {
                let role = Role::parse(setting)?;
                (format!("local-{}", role.as_str()), role)
            }
        };
        (!name.is_empty()).then_some(Caller {
            principal: name,
            groups: Vec::new(),
            fixed_role: Some(role),
        })
    }
}

/// Who API Gateway authenticated, as the request context of its proxy event states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// Signed with SigV4 (IAM authorization): the signer's ARN.
    Iam { principal: String },
    /// A JWT (an HTTP API JWT authorizer, a REST Cognito user pool authorizer): the token's
    /// `sub` and its groups.
    Jwt {
        subject: String,
        groups: Vec<String>,
    },
}

/// The claims whose values are a JWT's groups.
const GROUP_CLAIMS: [&str; 3] = ["groups", "cognito:groups", "roles"];

/// A claim's value. API Gateway passes every claim as text (a list flattened to `[a b]`, or
/// `a,b`); a REST authorizer's context is free-form, so a list may also come as one.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Claim {
    Text(String),
    List(Vec<String>),
    Other(IgnoredAny),
}

impl Claim {
    fn into_items(self) -> Vec<String> {
        match self {
            Claim::Text(text) => text
                .trim()
                .trim_matches(|c| c == '[' || c == ']')
                .split([' ', ','])
                .filter(|item| !item.is_empty())
                .map(str::to_string)
                .collect(),
            Claim::List(items) => items,
            Claim::Other(_) => Vec::new(),
        }
    }
}

/// Text with something in it, trimmed.
fn present(text: Option<&str>) -> Option<String> {
    text.map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
}

impl Identity {
    /// An HTTP API (payload 2.0) request's: `authorizer.iam.userArn`, else the `sub` and the
    /// groups of `authorizer.jwt.claims`.
    pub fn from_http_api(context: &ApiGatewayV2httpRequestContext) -> Option<Identity> {
        let authorizer = context.authorizer.as_ref()?;
        let iam = authorizer.iam.as_ref();
        if let Some(principal) = present(iam.and_then(|iam| iam.user_arn.as_deref())) {
            return Some(Identity::Iam { principal });
        }
        let claims = &authorizer.jwt.as_ref()?.claims;
        Identity::from_claims(|name| claims.get(name).map(|value| Claim::Text(value.clone())))
    }

    /// A REST API (payload 1.0) request's: `identity.userArn`, else the `sub` and the groups
    /// of `authorizer.claims`.
    pub fn from_rest_api(context: &ApiGatewayProxyRequestContext) -> Option<Identity> {
        if let Some(principal) = present(context.identity.user_arn.as_deref()) {
            return Some(Identity::Iam { principal });
        }
        let claims = context.authorizer.fields.get("claims")?;
        let claims = HashMap::<String, Claim>::deserialize(claims).ok()?;
        Identity::from_claims(|name| claims.get(name).cloned())
    }

    fn from_claims(claim: impl Fn(&str) -> Option<Claim>) -> Option<Identity> {
        let subject = match claim("sub")? {
            Claim::Text(sub) => present(Some(&sub))?,
            _ => return None,
        };
        let groups = GROUP_CLAIMS
            .iter()
            .filter_map(|name| claim(name))
            .flat_map(Claim::into_items)
            .collect();
        Some(Identity::Jwt { subject, groups })
    }
}

impl From<Identity> for Caller {
    fn from(identity: Identity) -> Caller {
        match identity {
            Identity::Iam { principal } => Caller::new(principal),
            Identity::Jwt { subject, groups } => Caller {
                principal: subject,
                groups,
                fixed_role: None,
            },
        }
    }
}

/// The role mapping and the per-job-type allowlist.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    #[serde(default)]
    pub roles: BTreeMap<String, Role>,
    #[serde(default)]
    pub job_types: BTreeMap<String, Vec<String>>,
}

impl AuthConfig {
    /// Reads `CRONLEDGER_API_AUTH` (absent: nobody has a role; only a fixed local identity
    /// gets in).
    pub fn from_env() -> Result<AuthConfig, String> {
        match std::env::var("CRONLEDGER_API_AUTH") {
            Ok(text) if !text.trim().is_empty() => AuthConfig::parse(&text),
            _ => Ok(AuthConfig::default()),
        }
    }

    pub fn parse(text: &str) -> Result<AuthConfig, String> {
        serde_json::from_str(text).map_err(|e| format!("CRONLEDGER_API_AUTH is not valid: {e}"))
    }

    fn matches(pattern: &str, caller: &Caller) -> bool {
        if let Some(group) = pattern.strip_prefix("group:") {
            return caller.groups.iter().any(|g| g == group);
        }
        match pattern.strip_suffix('*') {
            Some(prefix) => caller.principal.starts_with(prefix),
            None => caller.principal == pattern,
        }
    }

    /// The strongest role the caller has, if any.
    pub fn role_of(&self, caller: &Caller) -> Option<Role> {
        if caller.fixed_role.is_some() {
            return caller.fixed_role;
        }
        self.roles
            .iter()
            .filter(|(pattern, _)| AuthConfig::matches(pattern, caller))
            .map(|(_, role)| *role)
            .max()
    }

    /// Refuses a caller below `needed`.
    pub fn require(&self, caller: Option<&Caller>, needed: Role) -> Result<Role, ApiError> {
        let Some(caller) = caller else {
            return Err(ApiError::unauthenticated(
                "no caller identity in the request context",
            ));
        };
        match self.role_of(caller) {
            None => Err(ApiError::forbidden(format!(
                "`{}` has no cronledger role",
                caller.principal
            ))),
            Some(role) if role < needed => Err(ApiError::forbidden(format!(
                "`{}` is {}, this needs {}",
                caller.principal,
                role.as_str(),
                needed.as_str()
            ))
            .with_details(serde_json::json!({"role": role, "needed": needed}))),
            Some(role) => Ok(role),
        }
    }

    /// Whether the caller may create or change schedules whose job is of `job_type`.
    pub fn may_use_job_type(&self, caller: &Caller, job_type: &str) -> bool {
        if caller.fixed_role.is_some() {
            return true;
        }
        match self.job_types.get(job_type) {
            None => true,
            Some(allowed) => allowed.iter().any(|p| AuthConfig::matches(p, caller)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An HTTP API (payload 2.0) request context with this authorizer.
    fn http_api(authorizer: serde_json::Value) -> ApiGatewayV2httpRequestContext {
        serde_json::from_value(json!({
            "requestId": "r", "http": {"method": "GET", "path": "/v1/schedules"},
            "authorizer": authorizer,
        }))
        .expect("an HTTP API request context")
    }

    /// A REST API (payload 1.0) request context with this identity and authorizer.
    fn rest_api(
        identity: serde_json::Value,
        authorizer: serde_json::Value,
    ) -> ApiGatewayProxyRequestContext {
        serde_json::from_value(json!({
            "requestId": "r", "httpMethod": "GET", "path": "/prod/v1/schedules",
            "identity": identity, "authorizer": authorizer,
        }))
        .expect("a REST API request context")
    }

    fn jwt(subject: &str, groups: &[&str]) -> Identity {
        Identity::Jwt {
            subject: subject.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn http_api_iam_context() {
        let context = http_api(json!({"iam": {
            "accessKey": "k", "accountId": "1", "callerId": "AROA:s1", "principalOrgId": null,
            "userArn": "arn:aws:sts::1:assumed-role/Ops/s1", "userId": "AROA:s1",
            "cognitoIdentity": null}}));
        let identity = Identity::from_http_api(&context);
        assert_eq!(
            identity,
            Some(Identity::Iam {
                principal: "arn:aws:sts::1:assumed-role/Ops/s1".into()
            })
        );
        assert_eq!(
            identity.map(Caller::from),
            Some(Caller::new("arn:aws:sts::1:assumed-role/Ops/s1"))
        );
    }

    #[test]
    fn http_api_jwt_context_and_its_groups() {
        // API Gateway passes every claim as text, a list flattened to `[a b]`.
        let context = http_api(json!({"jwt": {"claims": {
            "sub": "u1", "cognito:groups": "[ops admins]", "exp": "1773144000",
            "iss": "https://cognito-idp.us-east-1.amazonaws.com/pool"}, "scopes": null}}));
        let identity = Identity::from_http_api(&context);
        assert_eq!(identity, Some(jwt("u1", &["ops", "admins"])));
        let caller = Caller::from(identity.unwrap());
        assert_eq!((caller.principal.as_str(), caller.groups.len()), ("u1", 2));
        // Every group claim counts: `groups` and `roles` too, and `a,b` lists.
        let context = http_api(json!({"jwt": {"claims": {
            "sub": " u2 ", "groups": "readers", "roles": "ops,oncall"}}}));
        let Some(Identity::Jwt {
            subject,
            mut groups,
        }) = Identity::from_http_api(&context)
        else {
            panic!("a JWT identity");
        };
        groups.sort();
        assert_eq!(
            (subject.as_str(), groups),
            (
                "u2",
                vec!["oncall".to_string(), "ops".into(), "readers".into()]
            )
        );
        // A single group, unbracketed; no group claim at all.
        let single = http_api(json!({"jwt": {"claims": {"sub": "u3", "cognito:groups": "ops"}}}));
        assert_eq!(Identity::from_http_api(&single), Some(jwt("u3", &["ops"])));
        let none = http_api(json!({"jwt": {"claims": {"sub": "u4"}}}));
        assert_eq!(Identity::from_http_api(&none), Some(jwt("u4", &[])));
    }

    #[test]
    fn rest_api_iam_and_cognito_contexts() {
        let iam = rest_api(
            json!({"userArn": "arn:aws:iam::1:user/alice", "caller": "AIDA1",
                   "accessKey": "k", "sourceIp": "10.0.0.1", "user": "AIDA1"}),
            json!(null),
        );
        assert_eq!(
            Identity::from_rest_api(&iam),
            Some(Identity::Iam {
                principal: "arn:aws:iam::1:user/alice".into()
            })
        );
        // A Cognito user pool authorizer: the claims in the authorizer, as text...
        let cognito = rest_api(
            json!({"sourceIp": "10.0.0.1"}),
            json!({"claims": {"sub": "u1", "cognito:groups": "ops,admins", "email_verified": "true"}}),
        );
        assert_eq!(
            Identity::from_rest_api(&cognito),
            Some(jwt("u1", &["ops", "admins"]))
        );
        // ...or, from an authorizer that passes JSON, a list.
        let listed = rest_api(
            json!({}),
            json!({"claims": {"sub": "u1", "cognito:groups": ["ops", "admins"], "exp": 1773144000}}),
        );
        assert_eq!(
            Identity::from_rest_api(&listed),
            Some(jwt("u1", &["ops", "admins"]))
        );
    }

    #[test]
    fn no_identity_in_the_context() {
        for authorizer in [
            json!(null),
            json!({}),
            json!({"iam": {"userArn": ""}}),
            json!({"iam": {"userArn": null}}),
            json!({"jwt": {"claims": {"cognito:groups": "[ops]"}}}),
            json!({"jwt": {"claims": {"sub": "  "}}}),
            json!({"lambda": {"sub": "u1"}}),
        ] {
            assert_eq!(
                Identity::from_http_api(&http_api(authorizer.clone())),
                None,
                "{authorizer}"
            );
        }
        for (identity, authorizer) in [
            (json!({}), json!(null)),
            (json!({"sourceIp": "10.0.0.1", "userArn": null}), json!({})),
            (json!({"userArn": " "}), json!({"principalId": "u1"})),
            (json!({}), json!({"claims": "sub=u1"})),
            (json!({}), json!({"claims": {"sub": ["u1"]}})),
        ] {
            assert_eq!(
                Identity::from_rest_api(&rest_api(identity.clone(), authorizer.clone())),
                None,
                "{identity} {authorizer}"
            );
        }
    }

    #[test]
    fn strongest_matching_role_wins_and_prefixes_match() {
        let config = AuthConfig::parse(
            r#"{"roles": {"arn:aws:sts::1:assumed-role/Ops/*": "operator", "group:admins": "admin", "bob": "viewer"},
                "job_types": {"lambda": ["group:admins"]}}"#,
        )
        .unwrap();
        let ops = Caller::new("arn:aws:sts::1:assumed-role/Ops/s1");
        assert_eq!(config.role_of(&ops), Some(Role::Operator));
        let bob = Caller::new("bob").with_groups(&["admins"]);
        assert_eq!(config.role_of(&bob), Some(Role::Admin));
        assert!(config.may_use_job_type(&bob, "lambda"));
        assert!(!config.may_use_job_type(&ops, "lambda"));
        assert!(config.may_use_job_type(&ops, "http"));
        assert_eq!(config.role_of(&Caller::new("eve")), None);
        assert_eq!(
            config
                .require(None, Role::Viewer)
                .unwrap_err()
                .status
                .as_u16(),
            401
        );
        assert_eq!(
            config
                .require(Some(&ops), Role::Admin)
                .unwrap_err()
                .status
                .as_u16(),
            403
        );
        assert!(AuthConfig::parse(r#"{"roles": {"x": "root"}}"#).is_err());
        assert_eq!(
            Caller::local("admin").unwrap().fixed_role,
            Some(Role::Admin)
        );
        assert_eq!(Caller::local("ann:operator").unwrap().principal, "ann");
        assert_eq!(Caller::local("superuser"), None);
    }
}
