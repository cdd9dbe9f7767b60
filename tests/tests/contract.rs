//! The published schemas are generated from the contract's types and kept current: the
//! manifest's JSON Schema in `schema/manifest.schema.json` accepts every example manifest
//! and refuses what the api would refuse.

use std::path::{Path, PathBuf};

use cronledger_core::schema::manifest_schema;
use serde_json::{json, Value};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn manifest_validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&manifest_schema()).expect("the manifest schema compiles")
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("example manifest");
    serde_norway::from_str(&text).expect("example manifest is YAML")
}

#[test]
fn the_published_manifest_schema_is_current() {
    let path = repo().join("schema/manifest.schema.json");
    let published: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).expect("schema/manifest.schema.json is in the repository"),
    )
    .expect("the published schema is JSON");
    assert!(
        published == manifest_schema(),
        "schema/manifest.schema.json is stale: regenerate it with \
         `cargo run -p cronledger-cli -- schema manifest -o schema/manifest.schema.json`"
    );
}

#[test]
fn every_example_manifest_is_valid_under_the_schema() {
    let validator = manifest_validator();
    let examples = std::fs::read_dir(repo().join("examples")).expect("examples/");
    let mut checked = 0;
    for entry in examples.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let doc = yaml(&path);
        let errors: Vec<String> = validator
            .iter_errors(&doc)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} examples found");
}

#[test]
fn the_manifest_schema_refuses_what_the_api_refuses() {
    let validator = manifest_validator();
    let good = json!({"id": "daily-report", "cron": "0 2 * * *", "timezone": "Asia/Seoul",
        "misfire": "RUN_ONCE", "grace": "10m", "max_failed_children": "2%",
        "slo": {"within": "30m", "target": "99%"},
        "job": {"type": "steps", "steps": [{"name": "a", "type": "noop", "duration": "1s"}]}});
    let manifest = |schedule: Value| json!({"schedules": [schedule]});
    assert!(validator.is_valid(&manifest(good.clone())));
    let with = |field: &str, value: Value| {
        let mut s = good.clone();
        s[field] = value;
        manifest(s)
    };
    for (what, bad) in [
        ("an unknown field", with("colour", json!("blue"))),
        (
            "an unknown misfire policy",
            with("misfire", json!("SOMETIMES")),
        ),
        ("a span without a unit", with("grace", json!("10"))),
        (
            "a job of no known type",
            with("job", json!({"type": "ftp"})),
        ),
        (
            "a step that nests steps",
            with(
                "job",
                json!({"type": "steps", "steps": [{"name": "x", "type": "steps", "steps": []}]}),
            ),
        ),
        ("no cron and no after", {
            let mut s = good.clone();
            s.as_object_mut().unwrap().remove("cron");
            manifest(s)
        }),
        (
            "an unknown top-level key",
            json!({"schedules": [], "defaults": {}}),
        ),
    ] {
        assert!(!validator.is_valid(&bad), "{what} was accepted: {bad}");
    }
    let mut dependent = good.clone();
    let obj = dependent.as_object_mut().unwrap();
    obj.remove("cron");
    obj.remove("timezone");
    obj.insert("after".into(), json!(["daily-report"]));
    assert!(
        validator.is_valid(&manifest(dependent)),
        "a schedule with `after` inherits its grid"
    );
}

/// The OpenAPI 3.1 specification's own schema of a document (from spec.openapis.org,
/// Apache-2.0), kept in the repository so the test needs no network.
fn openapi_31_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(repo().join("tests/fixtures/openapi-3.1.schema.json"))
        .expect("the OpenAPI 3.1 schema fixture");
    let schema: Value = serde_json::from_str(&text).expect("the fixture is JSON");
    jsonschema::draft202012::new(&schema).expect("the OpenAPI 3.1 schema compiles")
}

#[test]
fn the_openapi_document_is_a_valid_openapi_31_document() {
    let document = cronledger_app::api::openapi::document();
    assert_eq!(document["openapi"], "3.1.0");
    let errors: Vec<String> = openapi_31_validator()
        .iter_errors(&document)
        .take(10)
        .map(|e| format!("at {}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // Each component is a JSON Schema (2020-12, OpenAPI 3.1's dialect) that compiles, with
    // its references resolved against the document.
    let components = document["components"]["schemas"]
        .as_object()
        .expect("components");
    assert!(components.len() > 60, "{} components", components.len());
    for (name, schema) in components {
        assert!(
            jsonschema::meta::is_valid(&json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "allOf": [schema]
            })),
            "{name} is not a valid JSON Schema"
        );
        let rooted = json!({
            "$ref": format!("#/components/schemas/{name}"),
            "components": document["components"],
        });
        if let Err(e) = jsonschema::draft202012::new(&rooted) {
            panic!("{name} does not compile: {e}");
        }
    }
}

#[test]
fn the_openapi_31_validator_refuses_a_broken_document() {
    let mut document = cronledger_app::api::openapi::document();
    document["paths"]["/v1/whoami"]["get"]["responses"] = json!("none");
    assert!(!openapi_31_validator().is_valid(&document));
}
