//! JSON Schemas of the types whose text form serde writes by hand (spans, percents, time
//! zones, steps), and the manifest's schema. Every other type derives its schema from the
//! same serde attributes that read and write it, so the two cannot drift.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value};

use crate::calendar::CalendarSpec;
use crate::span::Span;
use crate::spec::{JobSpec, ScheduleSpec};
use crate::steps::{Step, STEP_FIELDS};

/// `2%` (0% to 100%), as `max_failed_children` takes a share.
pub fn percent(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": "^[0-9]+(\\.[0-9]+)?%$",
        "description": "a share of the children, 0% to 100%",
    })
}

/// `95%`, or a bare number read as percent (an slo's `target`).
pub fn percent_or_number(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "percent in (0, 100]: `99.5%` or 99.5",
        "anyOf": [
            {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?%$"},
            {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
        ],
    })
}

/// An IANA zone name.
pub fn time_zone(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "description": "an IANA time zone name such as Asia/Seoul or UTC",
        "examples": ["UTC", "Asia/Seoul", "Europe/Berlin"],
    })
}

impl JsonSchema for Span {
    fn schema_name() -> Cow<'static, str> {
        "Span".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^(0|([0-9]+[smhdw])+)$",
            "description": "a duration: whole numbers with units s, m, h, d, w, summed (90s, 5m, 1h30m, 7d); 0 for none",
            "examples": ["5m", "1h30m", "7d"],
        })
    }
}

impl JsonSchema for Step {
    fn schema_name() -> Cow<'static, str> {
        "Step".into()
    }

    /// A target's own schema (http, lambda, handler or noop) with the step's fields beside
    /// its fields: a step is one flat object in a manifest.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let target = JobSpec::json_schema(generator);
        let runtime = generator.subschema_for::<Span>();
        let variants: Vec<Value> = target
            .get("oneOf")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|variant| variant_type(variant) != Some("steps"))
            .map(|mut variant| {
                if let Some(props) = variant.get_mut("properties").and_then(Value::as_object_mut) {
                    props.insert(STEP_FIELDS[0].into(), json_step_name());
                    props.insert(STEP_FIELDS[1].into(), runtime.clone().to_value());
                    props.insert(
                        STEP_FIELDS[2].into(),
                        serde_json::json!({"type": "integer", "minimum": 1}),
                    );
                }
                if let Some(required) = variant.get_mut("required").and_then(Value::as_array_mut) {
                    if !required.iter().any(|field| field == STEP_FIELDS[0]) {
                        required.push(Value::from(STEP_FIELDS[0]));
                    }
                }
                variant
            })
            .collect();
        json_schema!({
            "description": "one step: a target (http, lambda, handler or noop) with its own name and, optionally, max_runtime and max_attempts beside the target's fields",
            "oneOf": variants,
        })
    }
}

fn json_step_name() -> Value {
    serde_json::json!({"type": "string", "minLength": 1})
}

/// The `type` a job variant's schema pins (`{"properties": {"type": {"const": ...}}}`).
fn variant_type(variant: &Value) -> Option<&str> {
    let pinned = variant.get("properties")?.get("type")?;
    pinned
        .get("const")
        .and_then(Value::as_str)
        .or_else(|| pinned.get("enum")?.get(0)?.as_str())
}

/// The JSON Schema (2020-12) of a manifest: `schedules:` and a list of schedule documents,
/// and `calendars:` beside it, a mapping of names to calendars.
/// A document may leave `cron` and `timezone` out when it has `after` (it inherits its
/// upstreams' grid); what a schema cannot say (a cron expression that parses, a time zone
/// that exists, limits that depend on the deployment) is checked by `cronledger validate`.
pub fn manifest_schema() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    let mut document = ScheduleSpec::json_schema(&mut generator).to_value();
    relax_grid_fields(&mut document);
    let calendar = generator.subschema_for::<CalendarSpec>().to_value();
    let mut definitions = generator.take_definitions(true);
    definitions.insert("ScheduleDocument".into(), document);
    let mut root = Map::new();
    root.insert(
        "$schema".into(),
        "https://json-schema.org/draft/2020-12/schema".into(),
    );
    root.insert("title".into(), "cronledger manifest".into());
    root.insert(
        "description".into(),
        "Schedules for cronledger: `cronledger validate -f FILE` checks what a schema cannot (cron expressions, time zones, deployment limits).".into(),
    );
    root.insert("type".into(), "object".into());
    root.insert("additionalProperties".into(), false.into());
    root.insert("required".into(), serde_json::json!(["schedules"]));
    root.insert(
        "properties".into(),
        serde_json::json!({
            "calendars": {
                "type": "object",
                "description": "Named calendars: the local dates the schedules naming them (`calendars: [NAME]`) do not run on.",
                "propertyNames": {"pattern": "^[a-z0-9-]{1,64}$"},
                "additionalProperties": calendar,
            },
            "schedules": {"type": "array", "items": {"$ref": "#/$defs/ScheduleDocument"}},
        }),
    );
    root.insert("$defs".into(), Value::Object(definitions));
    Value::Object(root)
}

/// `cron` and `timezone` are required unless the document has `after`.
fn relax_grid_fields(document: &mut Value) {
    let grid = ["cron", "timezone"];
    if let Some(required) = document.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|field| !grid.iter().any(|g| field == g));
    }
    if let Some(obj) = document.as_object_mut() {
        obj.insert(
            "anyOf".into(),
            serde_json::json!([{"required": grid}, {"required": ["after"]}]),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_schema_requires_a_grid_or_upstreams() {
        let schema = manifest_schema();
        let document = &schema["$defs"]["ScheduleDocument"];
        let required: Vec<&str> = document["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(required.contains(&"id") && required.contains(&"job"));
        assert!(!required.contains(&"cron"));
        assert_eq!(document["additionalProperties"], false);
        assert!(document["anyOf"].is_array());
    }

    #[test]
    fn the_manifest_schema_has_named_calendars_beside_the_schedules() {
        let schema = manifest_schema();
        let calendars = &schema["properties"]["calendars"];
        assert_eq!(calendars["type"], "object");
        assert_eq!(
            calendars["additionalProperties"]["$ref"],
            "#/$defs/CalendarSpec"
        );
        let calendar = &schema["$defs"]["CalendarSpec"];
        assert_eq!(calendar["additionalProperties"], false);
        assert_eq!(
            calendar["properties"]["exclude"]["items"]["$ref"],
            "#/$defs/DateSel"
        );
        assert_eq!(schema["required"], serde_json::json!(["schedules"]));
    }

    #[test]
    fn a_step_schema_has_the_step_fields_beside_each_target_and_no_nested_steps() {
        let mut generator = SchemaGenerator::default();
        let step = Step::json_schema(&mut generator).to_value();
        let variants = step["oneOf"].as_array().unwrap();
        assert_eq!(variants.len(), 4, "{step}");
        for variant in variants {
            assert!(variant["properties"]["name"].is_object(), "{variant}");
            assert_ne!(variant_type(variant), Some("steps"));
        }
    }
}
