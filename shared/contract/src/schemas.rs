//! The OpenAPI components, generated from the contract's types: answers as the api writes
//! them (a field the api may leave out is optional, every other one required, `null` where
//! it may be), request bodies as the api reads them (defaulted fields optional). Where a type
//! reads and writes differently (the schedule document: defaults filled in on the way out),
//! the request side is named `{Name}Input`.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value};

use crate::*;

/// Where the components live in the OpenAPI document.
pub const COMPONENTS: &str = "#/components/schemas/";

/// The schedule document a manifest and the api's create, replace, diff and preview take.
pub const SCHEDULE_DOCUMENT: &str = "ScheduleDocument";

/// A reference to the schedule document's component (what `PreviewRequest.schedule` is).
pub fn schedule_document_ref(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"$ref": format!("{COMPONENTS}{SCHEDULE_DOCUMENT}")})
}

/// The name a type's schema has among the components.
pub fn name_of<T: JsonSchema>() -> Cow<'static, str> {
    T::schema_name()
}

fn generator(settings: SchemaSettings) -> SchemaGenerator {
    settings
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator()
}

/// Every answer and request body's schema, and what they refer to, by name.
pub fn components() -> Map<String, Value> {
    let mut answers = generator(SchemaSettings::draft2020_12().for_serialize());
    macro_rules! each {
        ($gen:ident: $($t:ty),+ $(,)?) => { $( let _ = $gen.subschema_for::<$t>(); )+ };
    }
    each!(answers: ErrorBody, ScheduleView, SchedulePage, Preview, ChangeDiff, AuditLog,
        RunView, RunPage, RunOutcome, ApprovalOutcome, RunAtOutcome, BackfillView, BackfillList, BackfillPlan,
        Verification, SystemStatus, SystemAudit, WhoAmI, CompletenessReport, CalendarView,
        CalendarList, CalendarDeleted, CalendarAuditLog, ReplayView, ReplayPlan);
    let mut components = answers.take_definitions(true);

    let mut requests = generator(SchemaSettings::draft2020_12().for_deserialize());
    each!(requests: Note, RunNowRequest, RunAtRequest, RetryRequest, BackfillRequest,
        KillSwitchRequest, PreviewRequest, AuditRunRequest, cronledger_core::calendar::CalendarSpec,
        ReplayRequest);
    let mut inputs = requests.take_definitions(true);
    // The schedule document, as the manifest's schema has it.
    let mut manifest = cronledger_core::schema::manifest_schema();
    rewrite_refs(&mut manifest, &|r| {
        r.strip_prefix("#/$defs/")
            .map(|name| format!("{COMPONENTS}{name}"))
    });
    if let Some(Value::Object(defs)) = manifest.get_mut("$defs").map(Value::take) {
        inputs.extend(defs);
    }
    merge_inputs(&mut components, inputs);
    components
}

/// Adds the request side's definitions; one that differs from the answer side's of the same
/// name becomes `{name}Input`, and the request side's references follow it.
fn merge_inputs(components: &mut Map<String, Value>, mut inputs: Map<String, Value>) {
    let renamed: Vec<String> = inputs
        .iter()
        .filter(|(name, schema)| components.get(*name).is_some_and(|a| a != *schema))
        .map(|(name, _)| name.clone())
        .collect();
    let rename = |r: &str| {
        let name = r.strip_prefix(COMPONENTS)?;
        renamed
            .iter()
            .any(|n| n == name)
            .then(|| format!("{COMPONENTS}{name}Input"))
    };
    for schema in inputs.values_mut() {
        rewrite_refs(schema, &rename);
    }
    for (name, schema) in inputs {
        let name = if renamed.contains(&name) {
            format!("{name}Input")
        } else {
            name
        };
        components.insert(name, schema);
    }
}

/// Every `$ref` that `to` maps to a new target points there instead.
fn rewrite_refs(value: &mut Value, to: &dyn Fn(&str) -> Option<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(s) if key == "$ref" => {
                        if let Some(target) = to(s) {
                            *s = target;
                        }
                    }
                    _ => rewrite_refs(v, to),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_refs(v, to)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reference points at a component that exists.
    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    match v {
                        Value::String(s) if key == "$ref" => out.push(s.clone()),
                        _ => refs(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_reference_resolves_and_the_document_reads_apart_from_its_view() {
        let components = components();
        let mut all = Vec::new();
        refs(&Value::Object(components.clone()), &mut all);
        for r in &all {
            let name = r.strip_prefix(COMPONENTS).unwrap_or_else(|| panic!("{r}"));
            assert!(components.contains_key(name), "{r} does not resolve");
        }
        for name in [
            SCHEDULE_DOCUMENT,
            "ScheduleView",
            "RunView",
            "ErrorBody",
            "BackfillRequest",
        ] {
            assert!(components.contains_key(name), "{name} missing");
        }
        // Answers require what the api always writes; requests only what they need.
        let view = &components["ScheduleView"];
        assert!(view["required"]
            .as_array()
            .unwrap()
            .contains(&"next_run_at".into()));
        let backfill = &components["BackfillRequest"];
        assert_eq!(backfill["required"], serde_json::json!(["from", "to"]));
        assert_eq!(backfill["additionalProperties"], false);
    }
}
