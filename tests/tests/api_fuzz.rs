//! Every route of the api's own OpenAPI document, driven with generated bad input: path ids,
//! query values, headers and bodies that are oversize, of the wrong type, unicode, or huge
//! numbers. No answer may be a 5xx, every error must be the JSON error shape with a code,
//! and the api must still answer a good request afterwards.
//!
//! `PROPTEST_CASES` sets how many requests (default 96: the emulator serves one request at a
//! time, and this stays well under a minute).

use axum::http::{HeaderValue, Method, StatusCode};
use cronledger_tests::api::{Answer, ApiEnv, ADMIN, OPERATOR, VIEWER};
use cronledger_tests::t;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Map, Value};

const NOW: &str = "2026-03-10T12:00:30Z";

/// One documented operation: method, path template, query names, header names, and the
/// body schema's property names (empty without a body).
#[derive(Debug, Clone)]
struct Operation {
    method: Method,
    path: String,
    query: Vec<String>,
    headers: Vec<String>,
    body_fields: Option<Vec<String>>,
}

fn operations(doc: &Value) -> Vec<Operation> {
    let schemas = &doc["components"]["schemas"];
    let mut ops = Vec::new();
    for (path, methods) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in methods.as_object().into_iter().flatten() {
            let Ok(method) = Method::from_bytes(method.to_ascii_uppercase().as_bytes()) else {
                continue;
            };
            let names = |place: &str| -> Vec<String> {
                op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| p["in"] == place)
                    .filter_map(|p| p["name"].as_str().map(str::to_string))
                    .collect()
            };
            let schema = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                .as_str()
                .and_then(|r| r.rsplit('/').next())
                .map(|name| &schemas[name]);
            let body_fields = schema.map(|s| {
                let mut fields: Vec<String> = s["properties"]
                    .as_object()
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                if fields.is_empty() {
                    // A schedule document: its fields are described, not listed.
                    fields = ["id", "cron", "timezone", "job", "overlap", "max_attempts"]
                        .map(String::from)
                        .to_vec();
                }
                fields
            });
            ops.push(Operation {
                method,
                path: path.clone(),
                query: names("query"),
                headers: names("header"),
                body_fields,
            });
        }
    }
    ops
}

/// Bad text of every kind: long, unicode, control characters, huge numbers, dates at the
/// ends of time, JSON and path syntax.
fn bad_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (1usize..3000).prop_map(|n| "a".repeat(n)),
        "\\PC{0,40}",
        "[\\x00-\\x1f\\x7f]{1,8}",
        Just(String::new()),
        Just("18446744073709551616".into()),
        Just("-1".into()),
        Just("1e400".into()),
        Just("NaN".into()),
        Just("0".into()),
        Just("9999-12-31T23:59:59Z".into()),
        Just("0000-01-01T00:00:00Z".into()),
        Just("2026-03-01T02:00:00Z~M~".into()),
        Just("2026-03-01T02:00:00Z~B~x~y".into()),
        Just("../../etc/passwd".into()),
        Just("{\"a\":[".into()),
        Just("nightly".into()),
        Just("FAILED".into()),
        Just("high-risk".into()),
        Just("W/\"99999999999999999999\"".into()),
    ]
}

/// Bad JSON values for a body field.
fn bad_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        bad_text().prop_map(Value::String),
        Just(json!(1e300)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A request body: a documented body with bad fields, any JSON, bytes that are not JSON,
/// or one past the size limit.
#[derive(Debug, Clone)]
enum BodyKind {
    Fields(Vec<(usize, Value)>),
    Any(Value),
    Bytes(Vec<u8>),
    Oversize(usize),
}

fn body_kind() -> impl Strategy<Value = BodyKind> {
    prop_oneof![
        4 => prop::collection::vec((0usize..16, bad_value()), 0..5).prop_map(BodyKind::Fields),
        2 => bad_value().prop_map(BodyKind::Any),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(BodyKind::Bytes),
        1 => (65_000usize..80_000).prop_map(BodyKind::Oversize),
    ]
}

/// One generated request against one operation.
#[derive(Debug, Clone)]
struct Case {
    op: usize,
    path_values: Vec<Option<String>>,
    query: Vec<(usize, String)>,
    headers: Vec<(usize, String)>,
    body: BodyKind,
    caller: usize,
}

fn case(ops: usize) -> impl Strategy<Value = Case> {
    (
        0..ops,
        prop::collection::vec(prop::option::weighted(0.7, bad_text()), 2),
        prop::collection::vec((0usize..8, bad_text()), 0..4),
        prop::collection::vec((0usize..8, bad_text()), 0..3),
        body_kind(),
        0usize..4,
    )
        .prop_map(|(op, path_values, query, headers, body, caller)| Case {
            op,
            path_values,
            query,
            headers,
            body,
            caller,
        })
}

/// Percent-encodes everything but unreserved characters (a path segment or query value).
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The request a case makes.
struct Generated {
    method: Method,
    uri: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    caller: Option<&'static str>,
}

fn request(op: &Operation, case: &Case) -> Generated {
    let mut path = op.path.clone();
    let defaults = [
        ("{id}", "fz"),
        ("{backfill}", "bf0"),
        ("{run}", "2026-03-10T12:00:00Z"),
        ("{calendar}", "cal0"),
    ];
    for (i, (param, good)) in defaults.iter().enumerate() {
        let value = case
            .path_values
            .get(i.min(1))
            .cloned()
            .flatten()
            .unwrap_or_else(|| good.to_string());
        path = path.replace(param, &encode(&value));
    }
    let mut names = op.query.clone();
    names.push("unexpected".into());
    let query: Vec<String> = case
        .query
        .iter()
        .map(|(i, v)| format!("{}={}", names[i % names.len()], encode(v)))
        .collect();
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let mut header_names = op.headers.clone();
    header_names.extend(["content-type", "if-match", "idempotency-key"].map(String::from));
    let headers = case
        .headers
        .iter()
        .map(|(i, v)| (header_names[i % header_names.len()].clone(), v.clone()))
        .filter(|(_, v)| HeaderValue::from_str(v).is_ok())
        .collect();
    let body = match &case.body {
        BodyKind::Fields(fields) => {
            let names = op.body_fields.clone().unwrap_or_default();
            let mut obj = Map::new();
            for (i, v) in fields {
                if !names.is_empty() {
                    obj.insert(names[i % names.len()].clone(), v.clone());
                }
            }
            Value::Object(obj).to_string().into_bytes()
        }
        BodyKind::Any(v) => v.to_string().into_bytes(),
        BodyKind::Bytes(b) => b.clone(),
        BodyKind::Oversize(n) => format!("{{\"note\": \"{}\"}}", "n".repeat(*n)).into_bytes(),
    };
    Generated {
        method: op.method.clone(),
        uri: path,
        headers,
        body,
        caller: [Some(ADMIN), Some(OPERATOR), Some(VIEWER), None][case.caller],
    }
}

fn check(what: &str, a: &Answer) -> Result<(), TestCaseError> {
    prop_assert!(
        !a.status.is_server_error(),
        "{what}: {} {}",
        a.status,
        a.body
    );
    if a.status.is_client_error() {
        let shaped = a.body["code"].as_str().is_some_and(|c| !c.is_empty())
            && a.body["message"].is_string()
            && a.body.get("details").is_some();
        prop_assert!(shaped, "{what}: {} {}", a.status, a.body);
    }
    Ok(())
}

#[test]
fn every_route_survives_generated_bad_input() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let api = rt.block_on(ApiEnv::new(t(NOW)));
    let doc = rt.block_on(async {
        let fz = json!({"id": "fz", "cron": "0 2 * * *", "timezone": "UTC", "owner": "tests",
                        "overlap": "ALLOW", "job": {"type": "noop"}});
        let made = api.post(ADMIN, "/v1/schedules", Some(fz)).await;
        assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
        api.get(VIEWER, "/openapi.json").await.body
    });
    let ops = operations(&doc);
    assert!(ops.len() > 25, "{}", ops.len());
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(96);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let statuses = std::sync::Mutex::new(std::collections::BTreeMap::<(u16, String), u32>::new());
    let result = runner.run(&case(ops.len()), |case| {
        let op = &ops[case.op];
        let Generated {
            method,
            uri,
            headers,
            body,
            caller,
        } = request(op, &case);
        let what = format!("{method} {}", uri.chars().take(300).collect::<String>());
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let answer = rt.block_on(api.raw(
            caller.map(cronledger_app::api::Caller::new),
            method,
            &uri,
            body,
            &headers,
        ));
        if let Ok(mut tally) = statuses.lock() {
            *tally
                .entry((answer.status.as_u16(), answer.code().to_string()))
                .or_default() += 1;
        }
        check(&what, &answer)
    });
    // What the cases reached, for whoever reads the output.
    println!("answers by status and code: {statuses:?}");
    if let Err(e) = result {
        panic!("{e}");
    }
    let still = rt.block_on(api.get(VIEWER, "/v1/schedules/fz"));
    assert_eq!(still.status, StatusCode::OK, "{:?}", still.body);
}
