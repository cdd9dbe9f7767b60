//! The table is defined once, in infra/table.json; the SAM template must say the same, and
//! its lanes must be exactly the code's. No emulator needed.

use std::collections::BTreeSet;

use cronledger_aws::table::TABLE_JSON;
use cronledger_core::Lane;
use serde_json::Value as Json;
use serde_norway::Value as Yaml;

const TEMPLATE: &str = include_str!("../../infra/template.yaml");

/// Properties that define a table's shape: the template may add others (backups, tags),
/// but these must match table.json exactly.
const SHAPE: &[&str] = &[
    "AttributeDefinitions",
    "KeySchema",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "BillingMode",
    "ProvisionedThroughput",
    "TimeToLiveSpecification",
];

fn template() -> Yaml {
    serde_norway::from_str(TEMPLATE).expect("template.yaml parses")
}

fn resources(template: &Yaml) -> impl Iterator<Item = (&str, &Yaml)> {
    template["Resources"]
        .as_mapping()
        .expect("Resources is a mapping")
        .iter()
        .map(|(k, v)| (k.as_str().expect("resource names are strings"), v))
}

/// `!Ref X` / `!GetAtt X.Arn` as text, plain scalars as themselves.
fn text(value: &Yaml) -> String {
    match value {
        Yaml::Tagged(tagged) => format!("{} {}", tagged.tag, text(&tagged.value)),
        Yaml::String(s) => s.clone(),
        Yaml::Number(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// Lists whose order carries no meaning are sorted, so only content is compared.
fn normalized(mut value: Json) -> Json {
    if let Some(obj) = value.as_object_mut() {
        for key in ["AttributeDefinitions", "GlobalSecondaryIndexes"] {
            if let Some(Json::Array(items)) = obj.get_mut(key) {
                items.sort_by_key(|i| i.to_string());
            }
        }
    }
    value
}

/// Every difference between table.json and the template's table, in words.
fn table_drift(table_json: &str, template: &Yaml) -> Vec<String> {
    let table: Json = serde_json::from_str(table_json).expect("table.json parses");
    let tables: Vec<_> = resources(template)
        .filter(|(_, r)| text(&r["Type"]) == "AWS::DynamoDB::Table")
        .collect();
    assert_eq!(tables.len(), 1, "the template has exactly one table");
    let props: Json =
        serde_json::to_value(&tables[0].1["Properties"]).expect("table properties as JSON");
    let (table, props) = (normalized(table), normalized(props));
    SHAPE
        .iter()
        .filter(|key| table.get(**key) != props.get(**key))
        .map(|key| {
            format!(
                "{key}: table.json has {:?}, template has {:?}",
                table.get(*key),
                props.get(*key)
            )
        })
        .collect()
}

#[test]
fn the_template_table_matches_table_json() {
    let drift = table_drift(TABLE_JSON, &template());
    assert!(
        drift.is_empty(),
        "infra/table.json and infra/template.yaml drifted:\n{}",
        drift.join("\n")
    );
}

#[test]
fn the_drift_check_notices_changes() {
    let template = template();
    let variants = [
        TABLE_JSON.replace(
            r#""ProjectionType": "ALL""#,
            r#""ProjectionType": "KEYS_ONLY""#,
        ),
        TABLE_JSON.replace(
            r#""AttributeName": "expires_at""#,
            r#""AttributeName": "ttl""#,
        ),
        TABLE_JSON.replace(r#""AttributeType": "S" }"#, r#""AttributeType": "N" }"#),
        TABLE_JSON.replace(r#""IndexName": "catalog""#, r#""IndexName": "all""#),
        TABLE_JSON.replace("PAY_PER_REQUEST", "PROVISIONED"),
    ];
    for variant in variants {
        assert_ne!(variant, TABLE_JSON, "the replacement applies");
        assert!(
            !table_drift(&variant, &template).is_empty(),
            "not noticed:\n{variant}"
        );
    }
}

#[test]
fn the_template_lanes_are_exactly_the_code_lanes_each_with_a_redriving_dlq() {
    let template = template();
    assert_eq!(text(&template["Transform"]), "AWS::Serverless-2016-10-31");
    assert!(
        template["Parameters"]["MaxReceiveCount"].is_mapping(),
        "maxReceiveCount is a parameter"
    );

    let tag = |resource: &Yaml, key: &str| -> Option<String> {
        resource["Properties"]["Tags"]
            .as_sequence()?
            .iter()
            .find(|t| text(&t["Key"]) == key)
            .map(|t| text(&t["Value"]))
    };
    let mut lanes = BTreeSet::new();
    let mut dlqs = BTreeSet::new();
    for (name, resource) in resources(&template) {
        if text(&resource["Type"]) != "AWS::SQS::Queue" {
            continue;
        }
        if let Some(lane) = tag(resource, "cronledger:dlq-for") {
            assert!(dlqs.insert((lane, name.to_string())), "one DLQ per lane");
            continue;
        }
        let lane = tag(resource, "cronledger:lane")
            .unwrap_or_else(|| panic!("queue {name} is tagged with its lane or its DLQ role"));
        let redrive = &resource["Properties"]["RedrivePolicy"];
        assert_eq!(
            text(&redrive["maxReceiveCount"]),
            "!Ref MaxReceiveCount",
            "{name}"
        );
        lanes.insert((lane, text(&redrive["deadLetterTargetArn"])));
    }

    let code: BTreeSet<String> = Lane::ALL.iter().map(|l| l.as_str().to_string()).collect();
    let queued: BTreeSet<String> = lanes.iter().map(|(l, _)| l.clone()).collect();
    assert_eq!(queued, code, "template lanes vs Lane::ALL");
    assert_eq!(lanes.len(), code.len(), "one queue per lane");
    // Each lane redrives to its own DLQ.
    let expected: BTreeSet<(String, String)> = dlqs
        .iter()
        .map(|(lane, dlq)| (lane.clone(), format!("!GetAtt {dlq}.Arn")))
        .collect();
    assert_eq!(lanes, expected);
}
