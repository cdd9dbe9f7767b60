//! Authorization. API Gateway authenticates (IAM SigV4, or a JWT authorizer); the function
//! decides what the caller may do from the identity in the request context:
//!
//! - IAM: `requestContext.authorizer.iam.userArn` (HTTP API) or
//!   `requestContext.identity.userArn` (REST API) is the principal (for an assumed role,
//!   `arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION`);
//! - JWT: `requestContext.authorizer.jwt.claims.sub` is the principal and the `groups`,
//!   `cognito:groups` or `roles` claims are its groups.
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

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

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

    /// Reads an API Gateway (HTTP API, payload 2.0, or REST) request context.
    pub fn from_request_context(context: &Value) -> Option<Caller> {
        let text = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        // REST API with IAM authorization: the signer is in `identity`.
        if let Some(arn) = text(context.get("identity").and_then(|i| i.get("userArn"))) {
            return Some(Caller::new(arn));
        }
        let authorizer = context.get("authorizer")?;
        if let Some(iam) = authorizer.get("iam") {
            if let Some(arn) = text(iam.get("userArn")) {
                return Some(Caller::new(arn));
            }
        }
        let claims = authorizer
            .get("jwt")
            .and_then(|j| j.get("claims"))
            .or_else(|| authorizer.get("claims"))?;
        let principal = text(claims.get("sub"))?;
        let mut groups = Vec::new();
        for name in ["groups", "cognito:groups", "roles"] {
            match claims.get(name) {
                Some(Value::Array(items)) => {
                    groups.extend(items.iter().filter_map(|g| g.as_str().map(str::to_string)))
                }
                // API Gateway flattens list claims to text: `[a b]` or `a,b`.
                Some(Value::String(s)) => groups.extend(
                    s.trim_matches(|c| c == '[' || c == ']')
                        .split([' ', ','])
                        .filter(|g| !g.is_empty())
                        .map(str::to_string),
                ),
                _ => {}
            }
        }
        Some(Caller {
            principal,
            groups,
            fixed_role: None,
        })
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

    #[test]
    fn reads_iam_and_jwt_contexts() {
        let iam = json!({"authorizer": {"iam": {"userArn": "arn:aws:iam::1:user/alice"}}});
        assert_eq!(
            Caller::from_request_context(&iam).map(|c| c.principal),
            Some("arn:aws:iam::1:user/alice".to_string())
        );
        let jwt = json!({"authorizer": {"jwt": {"claims": {"sub": "u1", "cognito:groups": "[ops admins]"}}}});
        let caller = Caller::from_request_context(&jwt).unwrap();
        assert_eq!(caller.groups, vec!["ops", "admins"]);
        assert_eq!(Caller::from_request_context(&json!({})), None);
        assert_eq!(
            Caller::from_request_context(&json!({"authorizer": {"iam": {"userArn": ""}}})),
            None
        );
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
