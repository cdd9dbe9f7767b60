//! The OpenAPI 3 document, built from the route table ([`super::routes`]): every served route
//! appears with its method, path parameters, query, headers, body, role and statuses, because
//! the router is built from the same table. Request schemas list the fields the request
//! types accept (they refuse any other).

use axum::extract::State;
use axum::Json;
use serde_json::{json, Map, Value};

use super::{routes, Api, RouteDoc};

pub async fn serve(State(_api): State<Api>) -> Json<Value> {
    Json(document())
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": props, "required": required})
}

/// Request and answer schemas by name.
pub fn schemas() -> Value {
    let time = json!({"type": "string", "format": "date-time"});
    let note = json!({"type": "string", "maxLength": 1000});
    let occurrence = json!({"type": "string", "format": "date-time", "description": "a fire time of the schedule (else 422 SCHEDULED_FOR_NOT_AN_OCCURRENCE); default the latest at or before now"});
    json!({
        "Error": obj(json!({"code": {"type": "string"}, "message": {"type": "string"}, "details": {"description": "5xx: request_id, the id of the log line with the cause (also the x-request-id header)"}}), &["code", "message", "details"]),
        "Note": obj(json!({"note": note}), &[]),
        "RetryRequest": obj(json!({"note": note, "definition": {"enum": ["original", "current"], "default": "original", "description": "original: the job of the version the run was created under; current: re-pin the run to the schedule's current version and run its job"}}), &[]),
        "ScheduleDocument": {"type": "object", "description": "A schedule as in a manifest (id, cron, timezone, misfire, overlap, grace, max_auto_catch_up, max_runtime, priority, side_effects, idempotent, max_attempts, owner, catch_up, approval (none, every_run), approval_timeout, jitter (a duration under the shortest interval, at most 1h), retention (7d to 400d, default 90d), enabled, name, after (with it, cron and timezone may be left out: the stored upstreams' grid is inherited and stored), accept_partial, verify, max_failed_children (a count or a share like \"2%\"), batch_lane, job (with guard {max_affected}; noop: affected, children, fail_children; type steps: steps [{name, max_runtime, max_attempts, and a target's fields}])); validated with the core's codes, unknown fields refused (SCHEDULE_UNKNOWN_FIELD); each of details.issues has code, field, message and the schedule's id."},
        "PreviewRequest": obj(json!({"schedule": {"$ref": "#/components/schemas/ScheduleDocument"}, "count": {"type": "integer", "minimum": 1}, "after": time}), &["schedule"]),
        "RunNowRequest": obj(json!({"mode": {"enum": ["reuse", "new"]}, "scheduled_for": occurrence, "note": note}), &[]),
        "RunAtRequest": obj(json!({"at": time, "mode": {"enum": ["reuse", "new"]}, "scheduled_for": occurrence, "note": note}), &["at"]),
        "BackfillRequest": obj(json!({
            "from": time, "to": time,
            "reprocess": {"enum": ["missing", "failed", "all"]},
            "concurrency": {"type": "integer", "minimum": 1, "maximum": 100},
            "batch_size": {"type": "integer", "minimum": 1, "maximum": 500},
            "rate_per_minute": {"type": "number", "exclusiveMinimum": 0},
            "pause_when": obj(json!({"realtime_backlog": {"type": "integer"}, "error_rate": {"type": "number"}, "alarms": {"type": "array", "items": {"type": "string"}}}), &[]),
            "dry_run": {"type": "boolean"},
            "verify": {"type": "object", "description": "the backfill's own source of each window's expected {count, checksum} (an http, lambda or noop target, as a schedule's verify), asked after each of its runs instead of the schedule's"},
            "cascade": {"type": "boolean", "default": false, "description": "as each of the backfill's runs ends, re-run the same window of the schedules that run after this one (and theirs), under the same backfill"},
            "note": note,
        }), &["from", "to"]),
        "KillSwitchRequest": obj(json!({"engaged": {"type": "boolean"}, "note": note}), &["engaged", "note"]),
        "Schedule": {"type": "object", "properties": {"id": {"type": "string"}, "version": {"type": "integer"}, "state": {"enum": ["ACTIVE", "PAUSED", "ARCHIVED"]}, "describe": {"type": ["string", "null"], "description": "the timing in words, with its zone"}, "spec": {"$ref": "#/components/schemas/ScheduleDocument"}, "next_run_at": time, "pauses": {"type": "array"}, "health": {"$ref": "#/components/schemas/Health"}}},
        "Health": {"type": ["object", "null"], "description": "priority; last_run {status, scheduled_for, ended_at, duration_ms} (the newest ended run); next_run_at; success_rate_7d and success_rate_30d (succeeded / (succeeded + failed), null without ended windows) with counts_7d and counts_30d {succeeded, failed, skipped}; freshness {within, target, attainment_30d, met} when the schedule has an slo (rates and target are fractions 0-1; skipped windows count against attainment); consecutive_failures and awaiting_approval over the newest 25 runs. null where the api keeps no counters; left out with ?health=false."},
        "Run": {"type": "object", "description": "A ledger entry (schedule, scheduled_for, trigger, status, reason, attempts, window_start, window_end, idempotency_key, replay_group_id, range_end, count) plus run_id, lane, forced, timestamps and result; a steps job's run adds steps: one checkpoint per step, in order, {name, status (PENDING, RUNNING, SUCCESS, FAILED), attempts, started_at, ended_at, output, error_code}. One run (GET) adds upstream and downstream when its schedule runs after others or others after it: the same window's run of each, {schedule, scheduled_for, run_id, status} (status null: not recorded yet). One run (GET, retry) adds attempt_detail (count, current) and attempt_history: its attempts oldest first (the last 20), each {number, lease_epoch, worker, started_at, finished_at, duration_ms, outcome (SUCCESS, PARTIAL_SUCCESS, FAILED_RETRYABLE, FAILED, STALLED, LEASE_TAKEN_OVER; null while running), status, reason, error {code, message}}, and attempts_unlisted (older attempts beyond that bound)."},
        "SchedulePage": {"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/Schedule"}}, "next": {"type": ["string", "null"]}}},
        "RunPage": {"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}}, "next": {"type": ["string", "null"]}}},
        "RunOutcome": {"type": "object", "properties": {"created": {"type": "boolean"}, "reused": {"type": "boolean"}, "idempotent_replay": {"type": "boolean"}, "run": {"$ref": "#/components/schemas/Run"}, "backfill": {"type": ["object", "null"]}}},
        "Backfill": {"type": "object", "description": "id, schedule, state, held, from, to, reprocess, limits, total, queued, running, succeeded, failed, skipped, remaining, rate_per_minute, eta, approval_required, approval_reasons (EVERY_RUN, OVER_LIMIT, BEFORE_SCHEDULE_CREATED), approved_by, approved_at (a dry run: total_windows, size, windows, approval_required, approval_reasons, approval_over)."},
        "Verification": {"type": "object", "description": "expected_windows, succeeded, missing, failed, not_run, in_flight, complete, reported_count_total (all over every window), problems[{scheduled_for, problem, statuses}] and reported[{scheduled_for, count, checksum}] (one page of each: problems_total, reported_total, truncated, next_cursor)."},
        "Preview": {"type": "object"}, "RiskReport": {"type": "object"}, "AuditLog": {"type": "object", "description": "schedule, entries (one page, oldest first), total, next"},
        "BackfillList": {"type": "object", "description": "items (one page), next"}, "SystemStatus": {"type": "object"}, "SystemAudit": {"type": "object", "description": "entries (newest first), truncated (older ones left off past the page's byte budget)"},
        "RunAtOutcome": {"type": "object"}, "Object": {"type": "object"},
        "WhoAmI": obj(json!({"principal": {"type": "string"}, "role": {"enum": ["viewer", "operator", "admin"]}, "groups": {"type": "array", "items": {"type": "string"}}}), &["principal", "role", "groups"]),
        "ConsoleFile": {"type": "string", "description": "HTML, CSS or JavaScript of the console (ETag; If-None-Match answers 304), or config.json: {auth: jwt, issuer, client_id, scopes} | {auth: iam} | {auth: local}"},
    })
}

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
    let (ok, schema) = doc.ok;
    // The console's files are not JSON (but for its config).
    let media = if schema == "ConsoleFile" {
        "text/html"
    } else {
        "application/json"
    };
    responses.insert(
        ok.to_string(),
        json!({"description": status_text(ok), "content": {media: {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}}),
    );
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
            json!({"description": status_text(code), "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}),
        );
    }
    let mut op = json!({
        "summary": doc.summary,
        "operationId": format!("{} {}", doc.method, doc.path),
        "parameters": params,
        "responses": responses,
        "x-cronledger-role": doc.role.map(|r| r.as_str()),
    });
    if let (Some(body), Some(obj)) = (doc.body, op.as_object_mut()) {
        obj.insert(
            "requestBody".into(),
            json!({"required": !matches!(body, "Note" | "RetryRequest"), "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{body}")}}}}),
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
        "openapi": "3.0.3",
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
            for name in route.doc.body.into_iter().chain([route.doc.ok.1]) {
                assert!(schemas.get(name).is_some(), "schema {name} missing");
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
