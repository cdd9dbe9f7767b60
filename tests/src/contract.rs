//! The contract test: every answer the api gives in the suite is checked against its own
//! `/openapi.json`. The operation is found from the method and the path (a path no route
//! matches answers the error schema); the status must be one the operation documents, and a
//! JSON body must validate against that status's schema (answers refuse undocumented fields:
//! `additionalProperties: false`). One undocumented field or status fails the test that saw it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde_json::{json, Value};

/// The document, and a validator per schema reference, built once per test binary.
struct Contract {
    document: Value,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

fn contract() -> &'static Contract {
    static CONTRACT: OnceLock<Contract> = OnceLock::new();
    CONTRACT.get_or_init(|| Contract {
        document: cronledger_app::api::openapi::document(),
        validators: Mutex::new(HashMap::new()),
    })
}

/// Whether a concrete path (no query) matches an OpenAPI path template.
fn matches(template: &str, path: &str) -> bool {
    let (mut t, mut p) = (template.split('/'), path.split('/'));
    loop {
        match (t.next(), p.next()) {
            (None, None) => return true,
            (Some("{path}"), Some(_)) => return true,
            (Some(seg), Some(actual)) if seg.starts_with('{') || seg == actual => {
                if seg.starts_with('{') && actual.is_empty() {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// The operation of `method path`: a literal template wins over one with parameters.
fn operation<'a>(document: &'a Value, method: &str, path: &str) -> Option<(&'a str, &'a Value)> {
    let paths = document["paths"].as_object()?;
    let mut found: Vec<(&str, &Value)> = paths
        .iter()
        .filter(|(template, _)| matches(template, path))
        .filter_map(|(template, item)| Some((template.as_str(), item.get(method)?)))
        .collect();
    found.sort_by_key(|(template, _)| template.matches('{').count());
    found.into_iter().next()
}

fn validator(reference: &str) -> Arc<jsonschema::Validator> {
    let contract = contract();
    let mut cache = contract
        .validators
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    cache
        .entry(reference.to_string())
        .or_insert_with(|| {
            let schema = json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$ref": reference,
                "components": contract.document["components"],
            });
            Arc::new(
                jsonschema::draft202012::new(&schema)
                    .unwrap_or_else(|e| panic!("the schema {reference} does not compile: {e}")),
            )
        })
        .clone()
}

/// Panics unless `status` and `body` are what the document promises for `method path`.
pub fn check(method: &str, uri: &str, status: u16, content_type: Option<&str>, body: &[u8]) {
    let contract = contract();
    let path = uri.split('?').next().unwrap_or(uri);
    let method = method.to_ascii_lowercase();
    let error_ref = "#/components/schemas/ErrorBody".to_string();
    let (label, reference) = match operation(&contract.document, &method, path) {
        Some((template, op)) => {
            let Some(response) = op["responses"].get(status.to_string()) else {
                // 304 answers a conditional GET of the console's files, which carry an ETag.
                if status == 304 && template.starts_with("/console") {
                    return;
                }
                panic!(
                    "{} {template} answered {status}, which its OpenAPI operation does not document \
                     (documented: {:?}); body: {}",
                    method.to_uppercase(),
                    op["responses"].as_object().map(|r| r.keys().collect::<Vec<_>>()),
                    String::from_utf8_lossy(body)
                );
            };
            let Some(json) = response["content"].get("application/json") else {
                return; // the console's files: HTML, CSS, JavaScript
            };
            let reference = json["schema"]["$ref"].as_str().unwrap_or("").to_string();
            (format!("{} {template}", method.to_uppercase()), reference)
        }
        // No route: a 404 or 405 error answer.
        None => (
            format!("{} {path} (no route)", method.to_uppercase()),
            error_ref,
        ),
    };
    if content_type.is_some_and(|c| !c.starts_with("application/json")) {
        return; // a console file under a JSON-documented path (config.json is JSON)
    }
    if body.is_empty() && status == 204 {
        return;
    }
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(e) => panic!("{label} answered {status} with a body that is not JSON: {e}"),
    };
    let errors: Vec<String> = validator(&reference)
        .iter_errors(&value)
        .take(5)
        .map(|e| format!("at {}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{label} answered {status} with a body its OpenAPI schema ({reference}) refuses:\n{}\nbody: {value}",
        errors.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_their_paths_only() {
        assert!(matches("/v1/schedules/{id}", "/v1/schedules/a"));
        assert!(!matches("/v1/schedules/{id}", "/v1/schedules/a/runs"));
        assert!(!matches("/v1/schedules/{id}", "/v1/schedules/"));
        assert!(matches("/console/{path}", "/console/assets/app.js"));
    }

    const ME: &[u8] = br#"{"principal": "arn:aws:iam::1:user/a", "role": "viewer", "groups": []}"#;

    #[test]
    fn a_documented_answer_passes() {
        check("GET", "/v1/whoami", 200, Some("application/json"), ME);
    }

    #[test]
    #[should_panic(expected = "refuses")]
    fn an_undocumented_field_fails() {
        let body = br#"{"principal": "a", "role": "viewer", "groups": [], "team": "x"}"#;
        check("GET", "/v1/whoami", 200, Some("application/json"), body);
    }

    #[test]
    #[should_panic(expected = "refuses")]
    fn a_missing_field_fails() {
        check(
            "GET",
            "/v1/whoami",
            200,
            Some("application/json"),
            br#"{"principal": "a"}"#,
        );
    }

    #[test]
    #[should_panic(expected = "does not document")]
    fn an_undocumented_status_fails() {
        check("GET", "/v1/whoami", 409, Some("application/json"), ME);
    }
}
