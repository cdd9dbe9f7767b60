//! An http, lambda, handler or noop job's fields, its guard, and the secret-looking keys a
//! payload may not carry.

use super::field_reader::type_name;
use super::*;
use crate::steps::{Step, MAX_STEPS, STEP_FIELDS};

pub(super) fn validate_job(
    value: Option<&Value>,
    path: &str,
    rules: &ValidationRules,
    issues: &mut Vec<Issue>,
) -> Option<JobSpec> {
    let Some(value) = value else {
        issues.push(Issue::new(
            Code::ScheduleMissingField,
            path,
            "job is required, e.g. { type: http, url: ... }",
        ));
        return None;
    };
    if value.get("type").and_then(Value::as_str) == Some("steps") {
        return validate_steps(value, path, rules, issues);
    }
    let before = issues.len();
    if let Some(payload) = value.get("payload") {
        let size = serde_json::to_vec(payload).map(|b| b.len()).unwrap_or(0);
        if size > rules.max_payload_bytes {
            issues.push(Issue::new(
                Code::SchedulePayloadTooLarge,
                format!("{path}.payload"),
                format!(
                    "payload is {size} bytes; the limit is {} (store data elsewhere and pass a reference)",
                    rules.max_payload_bytes
                ),
            ));
        }
    }
    // `auth` holds a secret's name, never its value: it is checked on its own.
    let mut scanned = value.clone();
    if let Some(obj) = scanned.as_object_mut() {
        obj.remove("auth");
    }
    find_secret_keys(&scanned, path, &rules.secret_key_markers, issues);
    // The guard's fields are checked as plain data for their own paths and codes; a bad one
    // is left out of the typed parse so it is reported once.
    let mut typed = value.clone();
    if let Some(obj) = typed.as_object_mut() {
        if obj.contains_key("guard") && !valid_guard(obj.get("guard"), path, issues) {
            obj.remove("guard");
        }
        let is_http = obj.get("type").and_then(Value::as_str) == Some("http");
        let url = obj.get("url").and_then(Value::as_str).unwrap_or_default();
        if let Some(auth) = obj.get("auth").filter(|_| is_http) {
            let prefix = rules.secret_name_prefix.as_deref();
            if !check_auth(auth, url, path, prefix, issues) {
                obj.remove("auth");
            }
        }
        if let Some(affected) = obj.get("affected").filter(|v| !v.is_null()) {
            if affected.as_u64().is_none() {
                issues.push(Issue::new(
                    Code::ScheduleInvalidField,
                    format!("{path}.affected"),
                    format!(
                        "`affected` must be a whole number from 0, found {}",
                        type_name(affected)
                    ),
                ));
                obj.remove("affected");
            }
        }
    }
    let job = match serde_json::from_value::<JobSpec>(typed) {
        Ok(job) => job,
        Err(e) => {
            issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                path,
                format!("job: {e}"),
            ));
            return None;
        }
    };
    match &job {
        JobSpec::Http { url, timeout, .. } => {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                issues.push(Issue::new(
                    Code::ScheduleInvalidJob,
                    format!("{path}.url"),
                    format!(
                        "url `{}` must start with http:// or https://",
                        redact_url_credentials(url)
                    ),
                ));
            } else {
                check_http_url(url, path, rules.allow_loopback_targets, issues);
            }
            if *timeout == Span::ZERO {
                issues.push(Issue::new(
                    Code::ScheduleInvalidJob,
                    format!("{path}.timeout"),
                    "timeout must be longer than 0s",
                ));
            }
        }
        JobSpec::Handler { name, .. } if name.trim().is_empty() => {
            issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                format!("{path}.name"),
                "name must name a handler compiled into the worker",
            ));
        }
        JobSpec::Lambda { function, .. } if function.trim().is_empty() => {
            issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                format!("{path}.function"),
                "function must name a Lambda function or ARN",
            ));
        }
        _ => {}
    }
    (issues.len() == before).then_some(job)
}

/// A `type: steps` job: 1 to [`MAX_STEPS`] steps, each named (unique, like a schedule id)
/// and each an http, lambda, handler or noop target checked like a job of its own.
fn validate_steps(
    value: &Value,
    path: &str,
    rules: &ValidationRules,
    issues: &mut Vec<Issue>,
) -> Option<JobSpec> {
    let before = issues.len();
    let Some(obj) = value.as_object() else {
        issues.push(Issue::new(
            Code::ScheduleInvalidJob,
            path,
            "job must be a mapping",
        ));
        return None;
    };
    for key in obj.keys().filter(|k| *k != "type" && *k != "steps") {
        issues.push(Issue::new(
            Code::ScheduleUnknownField,
            format!("{path}.{key}"),
            format!("unknown field `{key}`; a steps job has only `steps` (each step has its own target)"),
        ));
    }
    let list = match obj.get("steps").and_then(Value::as_array) {
        Some(list) if !list.is_empty() && list.len() <= MAX_STEPS => list,
        _ => {
            issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                format!("{path}.steps"),
                format!("`steps` must list 1 to {MAX_STEPS} steps, each {{ name, type, ... }}"),
            ));
            return None;
        }
    };
    let mut steps = Vec::with_capacity(list.len());
    let mut names = std::collections::BTreeSet::new();
    for (i, raw) in list.iter().enumerate() {
        let step_path = format!("{path}.steps[{i}]");
        let Some(fields) = raw.as_object() else {
            issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                step_path,
                "a step must be a mapping",
            ));
            continue;
        };
        match fields.get("name").and_then(Value::as_str) {
            Some(name) if valid_id(name) && names.insert(name.to_string()) => {}
            Some(name) if valid_id(name) => issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                format!("{step_path}.name"),
                format!("step `{name}` is named twice; names key each step's checkpoint"),
            )),
            _ => issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                format!("{step_path}.name"),
                "every step needs a `name` of lowercase letters, digits and dashes (1-64)",
            )),
        }
        if fields.get("type").and_then(Value::as_str) == Some("steps") {
            issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                format!("{step_path}.type"),
                "steps do not nest: a step is http, lambda, handler or noop",
            ));
            continue;
        }
        let mut target = fields.clone();
        for field in STEP_FIELDS {
            target.remove(field);
        }
        let checked = validate_job(Some(&Value::Object(target)), &step_path, rules, issues);
        if checked.is_none() {
            continue;
        }
        match serde_json::from_value::<Step>(raw.clone()) {
            Ok(step) if step.max_attempts == Some(0) => issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                format!("{step_path}.max_attempts"),
                "max_attempts counts the first try: at least 1",
            )),
            Ok(step) if step.max_runtime == Some(Span::ZERO) => issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                format!("{step_path}.max_runtime"),
                "max_runtime must be longer than 0s",
            )),
            Ok(step) => steps.push(step),
            Err(e) => issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                step_path,
                format!("step: {e}"),
            )),
        }
    }
    (issues.len() == before).then_some(JobSpec::Steps { steps })
}

/// Checks `job.guard` (`{ max_affected: N }`, N a whole number from 0); false when it is
/// not usable (the problem is recorded).
fn valid_guard(guard: Option<&Value>, path: &str, issues: &mut Vec<Issue>) -> bool {
    let guard_path = format!("{path}.guard");
    let Some(obj) = guard.and_then(Value::as_object) else {
        issues.push(Issue::new(
            Code::ScheduleInvalidField,
            guard_path,
            format!(
                "`guard` must be a mapping like {{ max_affected: 1000 }}, found {}",
                guard.map(type_name).unwrap_or("nothing")
            ),
        ));
        return false;
    };
    let before = issues.len();
    for key in obj.keys().filter(|k| *k != "max_affected") {
        issues.push(Issue::new(
            Code::ScheduleUnknownField,
            format!("{guard_path}.{key}"),
            format!("unknown field `{key}`; a guard has only `max_affected`"),
        ));
    }
    match obj.get("max_affected") {
        Some(v) if v.as_u64().is_some() => {}
        Some(v) => issues.push(Issue::new(
            Code::ScheduleInvalidField,
            format!("{guard_path}.max_affected"),
            format!("`max_affected` must be a whole number from 0, found {v}"),
        )),
        None => issues.push(Issue::new(
            Code::ScheduleMissingField,
            format!("{guard_path}.max_affected"),
            "a guard needs `max_affected`: the most items one run may touch unapproved",
        )),
    }
    issues.len() == before
}

/// Reports every key, at any depth, that looks like it holds a secret.
pub(super) fn find_secret_keys(
    value: &Value,
    path: &str,
    markers: &[String],
    issues: &mut Vec<Issue>,
) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let child_path = format!("{path}.{key}");
                if looks_secret(key, markers) {
                    issues.push(Issue::new(
                        Code::SchedulePayloadSecret,
                        child_path.clone(),
                        format!(
                            "`{key}` looks like a secret; keep secrets in a secret store and pass its name"
                        ),
                    ));
                }
                find_secret_keys(child, &child_path, markers, issues);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                find_secret_keys(child, &format!("{path}[{i}]"), markers, issues);
            }
        }
        _ => {}
    }
}

/// Whether a key names a secret: a marker as whole words of the key, so `db_password`,
/// `accessToken` and `X-Api-Key` match but `max_tokens` does not.
fn looks_secret(key: &str, markers: &[String]) -> bool {
    let words = snake_words(key);
    let padded = format!("_{words}_");
    markers
        .iter()
        .any(|m| padded.contains(&format!("_{}_", snake_words(m))))
}

/// `accessToken`, `access-token` and `ACCESS_TOKEN` all become `access_token`.
fn snake_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    let mut prev_lower = false;
    for ch in text.chars() {
        if ch == '-' || ch == '_' || ch == ' ' || ch == '.' {
            out.push('_');
            prev_lower = false;
        } else if ch.is_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.extend(ch.to_lowercase());
            prev_lower = false;
        } else {
            out.push(ch);
            prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
        }
    }
    out
}
