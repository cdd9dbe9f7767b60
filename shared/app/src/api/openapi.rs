//! The OpenAPI 3 document, built from the route table ([`super::routes`]): every served route
//! appears with its method, path parameters, query, headers, body, role and statuses, because
//! the router is built from the same table. Request schemas list the fields the request
//! types accept (they refuse any other).

use axum::extract::State;
use axum::Json;
use serde_json::{json, Map, Value};

use cronledger_contract::schemas::{components, name_of, COMPONENTS};
use cronledger_contract::ErrorBody;

use super::{routes, Api, RouteDoc};

pub async fn serve(State(_api): State<Api>) -> Json<Value> {
    Json(document())
}

/// Every request and answer schema by name: the contract's, generated from its types, and
/// the two that are not JSON types of the api (the console's files, this document).
pub fn schemas() -> Map<String, Value> {
    let mut schemas = components();
    schemas.insert(
        CONSOLE_FILE.into(),
        json!({"type": "string", "description": "HTML, CSS or JavaScript of the console (ETag; If-None-Match answers 304), or config.json: {auth: jwt, issuer, client_id, scopes} | {auth: iam} | {auth: local}"}),
    );
    schemas.insert(
        OPENAPI_DOCUMENT.into(),
        json!({"type": "object", "description": "An OpenAPI 3.1 document (this one)"}),
    );
    schemas
}

/// The schema names of what is not a contract type.
pub const CONSOLE_FILE: &str = "ConsoleFile";
pub const OPENAPI_DOCUMENT: &str = "OpenApiDocument";

fn status_text(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        400 => "Malformed request (bad JSON, bad header, missing If-Match; CURSOR_INVALID: a cursor of another query, or altered)",
        401 => "No caller identity",
        403 => "The caller's role (or job-type allowlist) does not allow this",
        404 => "Not found",
        409 => "Conflicts with the current state",
        412 => "Stale If-Match: details.current_version is the current version",
        413 => "Body too large",
        422 => "Invalid field (core validation codes in details.issues)",
        500 => "INTERNAL: the cause is in the log under details.request_id (never in the answer)",
        428 => "A HIGH-risk change not confirmed (SCHEDULE_CHANGE_NEEDS_CONFIRMATION: details.risk, details.findings; send confirm=high-risk or X-Cronledger-Confirm: high-risk)",
        _ => "Error",
    }
}

fn operation(doc: &RouteDoc) -> Value {
    let mut params: Vec<Value> = doc
        .path
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| name.trim_start_matches('*'))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    params.extend(doc.query.iter().map(|(name, what)| {
        json!({"name": name, "in": "query", "required": false, "description": what, "schema": {"type": "string"}})
    }));
    params.extend(doc.headers.iter().map(|(name, what)| {
        json!({"name": name, "in": "header", "required": false, "description": what, "schema": {"type": "string"}})
    }));
    let mut responses = Map::new();
    for (ok, schema) in &doc.ok {
        // The console's files are not JSON (but for its config).
        let media = if schema == CONSOLE_FILE {
            "text/html"
        } else {
            "application/json"
        };
        responses.insert(
            ok.to_string(),
            json!({"description": status_text(*ok), "content": {media: {"schema": {"$ref": format!("{COMPONENTS}{schema}")}}}}),
        );
    }
    let mut errors: Vec<u16> = doc.errors.to_vec();
    if doc.role.is_some() {
        errors.extend([401, 403]);
    }
    if doc.body.is_some() {
        errors.extend([400, 413, 422]);
    } else if !doc.query.is_empty() {
        errors.push(422);
    }
    if doc.query.iter().any(|(name, _)| *name == "cursor") {
        errors.push(400);
    }
    if doc.role.is_some() {
        errors.push(500);
    }
    errors.sort_unstable();
    errors.dedup();
    for code in errors {
        responses.insert(
            code.to_string(),
            json!({"description": status_text(code), "content": {"application/json": {"schema": {"$ref": format!("{COMPONENTS}{}", name_of::<ErrorBody>())}}}}),
        );
    }
    let mut op = json!({
        "summary": doc.summary,
        "operationId": format!("{} {}", doc.method, doc.path),
        "parameters": params,
        "responses": responses,
        "x-cronledger-role": doc.role.map(|r| r.as_str()),
    });
    if let (Some(body), Some(obj)) = (&doc.body, op.as_object_mut()) {
        obj.insert(
            "requestBody".into(),
            json!({"required": body.required, "content": {"application/json": {"schema": {"$ref": format!("{COMPONENTS}{}", body.schema)}}}}),
        );
    }
    op
}

/// A route's path as OpenAPI writes it: axum's catch-all `{*rest}` is a plain `{rest}`.
pub fn path_key(path: &str) -> String {
    path.replace("{*", "{")
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for route in routes() {
        let doc = route.doc;
        let entry = paths.entry(path_key(doc.path)).or_insert_with(|| json!({}));
        if let Some(obj) = entry.as_object_mut() {
            obj.insert(doc.method.as_str().to_ascii_lowercase(), operation(&doc));
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "cronledger control plane",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Schedules, runs, backfills and the kill switch. Authenticated by API Gateway (IAM SigV4 or JWT); each operation's x-cronledger-role is the least role it needs (viewer < operator < admin). Every error is {code, message, details}.",
        },
        "paths": paths,
        "components": {"schemas": schemas()},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented_with_its_schemas() {
        let doc = document();
        let schemas = schemas();
        let mut count = 0;
        for route in routes() {
            let op = &doc["paths"][path_key(route.doc.path)]
                [route.doc.method.as_str().to_ascii_lowercase()];
            assert!(
                op.is_object(),
                "{} {} missing",
                route.doc.method,
                route.doc.path
            );
            count += 1;
            let body = route.doc.body.iter().map(|b| b.schema.clone());
            for name in body.chain(route.doc.ok.iter().map(|(_, s)| s.clone())) {
                assert!(schemas.get(&name).is_some(), "schema {name} missing");
            }
        }
        assert!(count > 25);
    }

    #[test]
    fn a_schedule_update_documents_its_high_risk_confirmation() {
        let put = &document()["paths"]["/v1/schedules/{id}"]["put"];
        let params = put["parameters"].as_array().cloned().unwrap_or_default();
        let has =
            |place: &str, name: &str| params.iter().any(|p| p["in"] == place && p["name"] == name);
        assert!(has("query", "confirm"), "{params:?}");
        assert!(has("header", "X-Cronledger-Confirm"), "{params:?}");
        let refused = put["responses"]["428"]["description"]
            .as_str()
            .unwrap_or("");
        assert!(
            refused.contains("SCHEDULE_CHANGE_NEEDS_CONFIRMATION"),
            "{put}"
        );
    }
}
