//! The table is defined once, in infra/table.json; the SAM template must say the same, its
//! lanes must be exactly the code's (names, redrive, one worker event source each), its
//! reconciler knobs and auditor schedule the code's defaults, its functions the workspace's
//! binaries. No emulator needed.

use std::collections::BTreeSet;

use cronledger_app::api::{ApiConfig, WORKER_TIMEOUT_VARIABLE};
use cronledger_app::reconciler::ReconcilerConfig;
use cronledger_aws::lanes::{queue_names, LaneSettings};
use cronledger_aws::notify::{ALERT_TOPIC_ENV, CONSOLE_URL_ENV};
use cronledger_aws::table::TABLE_JSON;
use cronledger_core::{Lane, Span, ValidationRules};
use serde_json::Value as Json;
use serde_norway::Value as Yaml;

const TEMPLATE: &str = include_str!("../../infra/template.yaml");

/// What the functions that publish alerts read to build their notifier.
const NOTIFIER_VARIABLES: &[&str] = &[ALERT_TOPIC_ENV, CONSOLE_URL_ENV];
/// The functions that publish alerts.
const ALERTING_FUNCTIONS: &[&str] = &[
    "WorkerFunction",
    "ReconcilerFunction",
    "ApiFunction",
    "AuditorFunction",
];
/// The alert topic: the stack's own unless AlertTopicArn names one.
const ALERT_TOPIC: &str = "!If [CreateAlertTopic, !Ref AlertTopic, !Ref AlertTopicArn]";

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

/// `value` as a stack with every parameter at its default deploys it: `!Ref` of a parameter
/// is its default, `!If [TableProvisioned, ...]` takes its on-demand branch (the default
/// billing mode), and `!Ref AWS::NoValue` leaves the property out (`None`).
fn as_deployed(value: &Yaml, parameters: &Yaml) -> Option<Yaml> {
    match value {
        Yaml::Tagged(tagged) if tagged.tag == "!Ref" => match tagged.value.as_str() {
            Some("AWS::NoValue") => None,
            Some(name) if parameters[name]["Default"] != Yaml::Null => {
                Some(parameters[name]["Default"].clone())
            }
            _ => Some(value.clone()),
        },
        Yaml::Tagged(tagged) if tagged.tag == "!If" => {
            let branches = tagged.value.as_sequence()?;
            let provisioned =
                parameters["TableBillingMode"]["Default"].as_str() == Some("PROVISIONED");
            match branches.first().and_then(Yaml::as_str) {
                Some("TableProvisioned") => {
                    as_deployed(branches.get(if provisioned { 1 } else { 2 })?, parameters)
                }
                _ => Some(value.clone()),
            }
        }
        Yaml::Mapping(mapping) => Some(Yaml::Mapping(
            mapping
                .iter()
                .filter_map(|(k, v)| as_deployed(v, parameters).map(|v| (k.clone(), v)))
                .collect(),
        )),
        Yaml::Sequence(items) => Some(Yaml::Sequence(
            items
                .iter()
                .filter_map(|v| as_deployed(v, parameters))
                .collect(),
        )),
        other => Some(other.clone()),
    }
}

/// Every difference between table.json and the template's table, in words.
fn table_drift(table_json: &str, template: &Yaml) -> Vec<String> {
    let table: Json = serde_json::from_str(table_json).expect("table.json parses");
    let tables: Vec<_> = resources(template)
        .filter(|(_, r)| text(&r["Type"]) == "AWS::DynamoDB::Table")
        .collect();
    assert_eq!(tables.len(), 1, "the template has exactly one table");
    let deployed = as_deployed(&tables[0].1["Properties"], &template["Parameters"])
        .expect("the table has properties");
    let props: Json = serde_json::to_value(&deployed).expect("table properties as JSON");
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
            r#""ProjectionType": "KEYS_ONLY""#,
            r#""ProjectionType": "ALL""#,
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

fn resource<'a>(template: &'a Yaml, name: &str) -> &'a Yaml {
    let found = &template["Resources"][name];
    assert!(found.is_mapping(), "the template has a resource {name}");
    found
}

/// A parameter's default, as the text an environment variable would carry.
fn parameter_default(template: &Yaml, name: &str) -> String {
    let default = &template["Parameters"][name]["Default"];
    assert!(!default.is_null(), "parameter {name} has a default");
    text(default)
}

/// `!Sub ["FORMAT", {Prefix: ...}]`: the format and the prefix expression.
fn sub_with_prefix(value: &Yaml) -> Option<(String, &Yaml)> {
    let Yaml::Tagged(tagged) = value else {
        return None;
    };
    if tagged.tag != "!Sub" {
        return None;
    }
    let parts = tagged.value.as_sequence()?;
    Some((text(parts.first()?), &parts.get(1)?["Prefix"]))
}

#[test]
fn the_lane_queues_have_the_names_the_functions_resolve() {
    let template = template();
    let prefix =
        &template["Globals"]["Function"]["Environment"]["Variables"]["CRONLEDGER_QUEUE_PREFIX"];
    assert!(
        !prefix.is_null(),
        "every function gets CRONLEDGER_QUEUE_PREFIX"
    );
    let mut named = 0;
    for (name, resource) in resources(&template) {
        if text(&resource["Type"]) != "AWS::SQS::Queue" {
            continue;
        }
        let tags = resource["Properties"]["Tags"]
            .as_sequence()
            .expect("queues are tagged");
        let (key, lane) = tags
            .iter()
            .map(|t| (text(&t["Key"]), text(&t["Value"])))
            .find(|(k, _)| k == "cronledger:lane" || k == "cronledger:dlq-for")
            .unwrap_or_else(|| panic!("queue {name} names its lane"));
        let lane = Lane::ALL
            .iter()
            .copied()
            .find(|l| l.as_str() == lane)
            .unwrap_or_else(|| panic!("{name}: {lane} is a lane"));
        let (queue, dlq) = queue_names("${Prefix}", lane);
        let expected = if key == "cronledger:lane" { queue } else { dlq };
        let (format, queue_prefix) = sub_with_prefix(&resource["Properties"]["QueueName"])
            .unwrap_or_else(|| panic!("{name}: QueueName is !Sub [FORMAT, {{Prefix: ...}}]"));
        assert_eq!(format, expected, "{name}");
        assert_eq!(
            queue_prefix, prefix,
            "{name}: the prefix is the functions' CRONLEDGER_QUEUE_PREFIX"
        );
        named += 1;
    }
    assert_eq!(named, 2 * Lane::ALL.len(), "a queue and a DLQ per lane");
}

#[test]
fn the_redrive_and_visibility_fit_the_code_and_the_worker() {
    let template = template();
    assert_eq!(
        parameter_default(&template, "MaxReceiveCount"),
        LaneSettings::default().max_receive_count.to_string(),
        "the template and the local stacks (LaneSettings, bootstrap.py) redrive alike"
    );
    // Lambda refuses an SQS event source whose queue hides a message for less than the
    // function's timeout.
    let worker_timeout = resource(&template, "WorkerFunction")["Properties"]["Timeout"]
        .as_u64()
        .expect("the worker has its own timeout");
    let visibility = &template["Parameters"]["LaneVisibilityTimeout"];
    for key in ["MinValue", "Default"] {
        let seconds = visibility[key].as_u64().expect("a whole number");
        assert!(
            seconds >= worker_timeout,
            "LaneVisibilityTimeout {key} {seconds} < worker timeout {worker_timeout}"
        );
    }
}

#[test]
fn the_worker_consumes_every_lane_with_partial_failures_and_its_own_budget() {
    let template = template();
    let lane_queues: BTreeSet<String> = resources(&template)
        .filter(|(_, r)| {
            r["Properties"]["Tags"]
                .as_sequence()
                .is_some_and(|tags| tags.iter().any(|t| text(&t["Key"]) == "cronledger:lane"))
        })
        .map(|(name, _)| format!("!GetAtt {name}.Arn"))
        .collect();
    assert_eq!(lane_queues.len(), Lane::ALL.len());
    let events = resource(&template, "WorkerFunction")["Properties"]["Events"]
        .as_mapping()
        .expect("the worker has events");
    let mut consumed = BTreeSet::new();
    let mut budgets = BTreeSet::new();
    for (name, event) in events {
        let name = text(name);
        assert_eq!(text(&event["Type"]), "SQS", "{name}");
        let props = &event["Properties"];
        assert!(
            consumed.insert(text(&props["Queue"])),
            "{name}: one event source per lane"
        );
        assert_eq!(
            props["FunctionResponseTypes"]
                .as_sequence()
                .map(|s| s.iter().map(text).collect::<Vec<_>>()),
            Some(vec!["ReportBatchItemFailures".to_string()]),
            "{name}: partial batch failures"
        );
        let budget = text(&props["ScalingConfig"]["MaximumConcurrency"]);
        let parameter = budget
            .strip_prefix("!Ref ")
            .unwrap_or_else(|| panic!("{name}: the lane budget is a parameter"));
        assert!(
            template["Parameters"][parameter]["MinValue"]
                .as_u64()
                .is_some_and(|min| min >= 2),
            "{name}: {parameter} allows no budget below SQS's minimum of 2"
        );
        assert!(
            budgets.insert(parameter.to_string()),
            "{name}: a budget of its own"
        );
    }
    assert_eq!(
        consumed, lane_queues,
        "the worker consumes exactly the lanes"
    );
}

#[test]
fn the_reconciler_knobs_default_to_the_codes_defaults_and_are_read() {
    let template = template();
    let variables = resource(&template, "ReconcilerFunction")["Properties"]["Environment"]
        ["Variables"]
        .as_mapping()
        .expect("the reconciler has its own variables");
    // Variables set from a single parameter, at that parameter's default (the notifier's
    // are read by `notifier_from_env`, not the reconciler's config).
    let knobs: Vec<(String, String)> = variables
        .iter()
        .filter(|(name, _)| !NOTIFIER_VARIABLES.contains(&text(name).as_str()))
        .filter_map(|(name, value)| {
            let parameter = text(value).strip_prefix("!Ref ")?.to_string();
            Some((text(name), parameter_default(&template, &parameter)))
        })
        .collect();
    assert!(
        knobs.len() >= 8,
        "the catch-up knobs are parameters: {knobs:?}"
    );
    let lookup = |overrides: &[(String, String)]| {
        let env: Vec<(String, String)> = knobs
            .iter()
            .map(|(name, value)| {
                let value = overrides
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(value, |(_, v)| v);
                (name.clone(), value.clone())
            })
            .collect();
        move |name: &str| env.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    };
    let deployed = ReconcilerConfig::from_lookup(1, lookup(&[])).expect("the defaults parse");
    let code = ReconcilerConfig::default();
    assert_eq!(
        format!("{:?}", deployed.planner),
        format!("{:?}", code.planner)
    );
    assert_eq!(
        format!("{:?}", deployed.release),
        format!("{:?}", code.release)
    );
    assert_eq!(format!("{:?}", deployed.pause), format!("{:?}", code.pause));
    // A misspelled variable would be ignored silently: each one must be read.
    for (name, _) in &knobs {
        let garbage = [(name.clone(), "garbage".to_string())];
        assert!(
            ReconcilerConfig::from_lookup(1, lookup(&garbage)).is_err(),
            "{name} is not read by the reconciler"
        );
    }
}

#[test]
fn the_api_validates_against_the_workers_timeout() {
    let template = template();
    let worker_timeout = resource(&template, "WorkerFunction")["Properties"]["Timeout"]
        .as_u64()
        .expect("the worker has its own timeout");
    let variables = &resource(&template, "ApiFunction")["Properties"]["Environment"]["Variables"];
    let told = text(&variables[WORKER_TIMEOUT_VARIABLE]);
    assert_eq!(
        told,
        worker_timeout.to_string(),
        "the api is told the worker's timeout"
    );
    let read =
        ApiConfig::from_lookup(|name| (name == WORKER_TIMEOUT_VARIABLE).then(|| told.clone()))
            .expect("the template's value parses");
    assert_eq!(read.rules.worker_timeout, Span::seconds(worker_timeout));
    // `cronledger validate` has no environment: its default must be the same.
    assert_eq!(
        ValidationRules::default().worker_timeout,
        Span::seconds(worker_timeout)
    );
    assert!(ApiConfig::from_lookup(|_| Some("15m".to_string())).is_err());
}

#[test]
fn the_backfill_approval_limit_defaults_to_the_codes() {
    let template = template();
    let variables = &resource(&template, "ApiFunction")["Properties"]["Environment"]["Variables"];
    assert_eq!(
        text(&variables["CRONLEDGER_BACKFILL_APPROVAL_OVER"]),
        "!Ref BackfillApprovalOver"
    );
    assert_eq!(
        parameter_default(&template, "BackfillApprovalOver"),
        cronledger_app::api::ApiConfig::default()
            .backfill_approval_over
            .to_string()
    );
}

fn yaml(source: &str) -> Yaml {
    serde_norway::from_str(source).expect("a YAML expression")
}

/// The statements of a function's role that allow `action`.
fn role_statements<'a>(template: &'a Yaml, function: &str, action: &str) -> Vec<&'a Yaml> {
    let role = text(&resource(template, function)["Properties"]["Role"]);
    let role = role
        .strip_prefix("!GetAtt ")
        .and_then(|r| r.strip_suffix(".Arn"))
        .unwrap_or_else(|| panic!("{function}: Role is !GetAtt ROLE.Arn"));
    let policies = resource(template, role)["Properties"]["Policies"]
        .as_sequence()
        .unwrap_or_else(|| panic!("{role} has inline policies"));
    policies
        .iter()
        .flat_map(|p| {
            p["PolicyDocument"]["Statement"]
                .as_sequence()
                .into_iter()
                .flatten()
        })
        .filter(|statement| {
            let actions = &statement["Action"];
            text(actions) == action
                || actions
                    .as_sequence()
                    .is_some_and(|list| list.iter().any(|a| text(a) == action))
        })
        .collect()
}

#[test]
fn the_alerting_functions_know_the_alert_topic_and_may_publish_to_it() {
    let template = template();
    let topic = yaml(ALERT_TOPIC);
    assert_eq!(
        text(&resource(&template, "AlertTopic")["Condition"]),
        "CreateAlertTopic",
        "the stack's topic exists only when AlertTopicArn names none"
    );
    for function in ALERTING_FUNCTIONS {
        let variables = &resource(&template, function)["Properties"]["Environment"]["Variables"];
        assert_eq!(
            variables[ALERT_TOPIC_ENV], topic,
            "{function}: {ALERT_TOPIC_ENV}"
        );
        assert_eq!(
            text(&variables[CONSOLE_URL_ENV]),
            "!Ref ConsoleUrl",
            "{function}: {CONSOLE_URL_ENV}"
        );
        let publish = role_statements(&template, function, "sns:Publish");
        let resources: Vec<&Yaml> = publish
            .iter()
            .flat_map(|s| s["Resource"].as_sequence().into_iter().flatten())
            .collect();
        assert!(
            resources.contains(&&topic),
            "{function} may publish to the alert topic"
        );
        assert!(
            resources
                .iter()
                .any(|r| format!("{r:?}").contains("${AlertTopicPattern}")),
            "{function} may publish to the schedules' topics (AlertTopicPattern)"
        );
    }
    assert_eq!(template["Outputs"]["AlertTopicArn"]["Value"], topic);
}

#[test]
fn every_alarm_notifies_the_alert_topic_on_alarm_and_ok() {
    let template = template();
    let target = yaml(&format!(
        "[!If [HasAlarmTopic, !Ref AlarmTopicArn, {ALERT_TOPIC}]]"
    ));
    let mut alarms = 0;
    for (name, alarm) in resources(&template) {
        if text(&alarm["Type"]) != "AWS::CloudWatch::Alarm" {
            continue;
        }
        for actions in ["AlarmActions", "OKActions"] {
            assert_eq!(alarm["Properties"][actions], target, "{name}: {actions}");
        }
        alarms += 1;
    }
    assert!(alarms >= 10, "the alarms were found: {alarms}");
}

/// Whether `statement` names an index of the table among its resources.
fn names_an_index(statement: &Yaml) -> bool {
    let resources = &statement["Resource"];
    let listed: Vec<&Yaml> = match resources.as_sequence() {
        Some(list) => list.iter().collect(),
        None => vec![resources],
    };
    listed.iter().any(|r| text(r).contains("/index/"))
}

#[test]
fn a_function_that_queries_an_index_may_read_the_items_behind_it() {
    // The indexes project keys only; readers fetch the items with BatchGetItem.
    let template = template();
    for function in [
        "TickerFunction",
        "WorkerFunction",
        "ReconcilerFunction",
        "ApiFunction",
        "AuditorFunction",
    ] {
        let queries_an_index = role_statements(&template, function, "dynamodb:Query")
            .into_iter()
            .any(names_an_index);
        if queries_an_index {
            assert!(
                !role_statements(&template, function, "dynamodb:BatchGetItem").is_empty(),
                "{function} queries an index but may not BatchGetItem"
            );
        }
    }
}

/// The only unauthenticated routes are the console's static shell, which the router serves
/// without a role; everything else goes through the authorizer of the `$default` route.
#[test]
fn only_the_consoles_shell_is_public_and_the_console_knows_the_authorizer() {
    use cronledger_app::api::console::{
        CONSOLE_AUTH_VARIABLE, CONSOLE_CLIENT_ID_VARIABLE, CONSOLE_ISSUER_VARIABLE,
    };
    let template = template();
    let api = &resource(&template, "HttpApi")["Properties"]["DefinitionBody"];
    let mut public = BTreeSet::new();
    for (path, methods) in api["paths"].as_mapping().expect("paths").iter() {
        let path = text(path);
        for (method, op) in methods.as_mapping().expect("methods").iter() {
            let secured = !op["security"].is_null();
            assert_eq!(secured, path == "/$default", "{path} {}", text(method));
            if !secured {
                public.insert(format!("{} {path}", text(method).to_uppercase()));
            }
        }
    }
    // API Gateway's greedy `{proxy+}` is the router's catch-all `{*path}`.
    let served: BTreeSet<String> = cronledger_app::api::routes()
        .into_iter()
        .filter(|r| r.doc.role.is_none() && r.doc.path.starts_with("/console"))
        .map(|r| {
            format!(
                "{} {}",
                r.doc.method,
                r.doc.path.replace("{*path}", "{proxy+}")
            )
        })
        .collect();
    assert_eq!(public, served);
    assert_eq!(public.len(), 2, "{public:?}");

    let variables = &resource(&template, "ApiFunction")["Properties"]["Environment"]["Variables"];
    assert_eq!(
        variables[CONSOLE_AUTH_VARIABLE],
        yaml("!If [UseJwt, jwt, iam]")
    );
    assert_eq!(
        variables[CONSOLE_ISSUER_VARIABLE],
        yaml("!If [UseJwt, !Ref JwtIssuer, !Ref AWS::NoValue]")
    );
    let client = format!("{:?}", variables[CONSOLE_CLIENT_ID_VARIABLE]);
    for part in ["ConsoleClientId", "JwtAudience", "UseJwt"] {
        assert!(
            client.contains(part),
            "{CONSOLE_CLIENT_ID_VARIABLE}: {client}"
        );
    }
    // The deployed defaults (IAM) parse: the api function starts.
    let lookup = |name: &str| (name == CONSOLE_AUTH_VARIABLE).then(|| "iam".to_string());
    assert!(ApiConfig::from_lookup(lookup).is_ok());
}

/// Every function the template deploys is a workspace binary that `infra/build` builds and
/// checks (`target/lambda/NAME/`), and every function binary is deployed.
#[test]
fn the_template_deploys_exactly_the_function_binaries_infra_build_builds() {
    let template = template();
    let build = include_str!("../../infra/build");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut deployed = BTreeSet::new();
    for (name, resource) in resources(&template) {
        if text(&resource["Type"]) != "AWS::Serverless::Function" {
            continue;
        }
        let code = text(&resource["Properties"]["CodeUri"]);
        let binary = code
            .strip_prefix("../target/lambda/")
            .and_then(|b| b.strip_suffix('/'))
            .unwrap_or_else(|| panic!("{name}: CodeUri {code} is cargo-lambda's output"));
        let checked = build
            .lines()
            .find_map(|l| l.trim().strip_prefix("for f in "))
            .and_then(|l| l.strip_suffix("; do"))
            .expect("infra/build checks each artifact");
        assert!(
            build.contains(&format!("-p {binary} ")) || build.contains(&format!("-p {binary}\n")),
            "infra/build builds {binary}"
        );
        assert!(
            checked.split(' ').any(|f| f == binary),
            "infra/build checks {binary}'s artifact"
        );
        assert!(
            root.join("functions")
                .join(binary)
                .join("Cargo.toml")
                .is_file(),
            "functions/{binary} is a crate"
        );
        assert_eq!(
            text(&resource["Properties"]["FunctionName"]),
            format!("!Sub ${{AWS::StackName}}-{binary}"),
            "{name}"
        );
        deployed.insert(binary.to_string());
    }
    let crates: BTreeSet<String> = std::fs::read_dir(root.join("functions"))
        .expect("functions/ is readable")
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(deployed, crates, "every function crate is deployed");
    let workspace = include_str!("../../Cargo.toml");
    for binary in &deployed {
        assert!(
            workspace.contains(&format!("\"functions/{binary}\"")),
            "functions/{binary} is a workspace member"
        );
    }
}

/// The EventBridge Scheduler schedules are the kill switch's: the api is told every one's
/// name and may read and update each, and Scheduler may invoke each one's function.
#[test]
fn the_kill_switch_covers_every_automatic_schedule() {
    let template = template();
    let api = &resource(&template, "ApiFunction")["Properties"]["Environment"]["Variables"];
    let told: Vec<String> = [
        "CRONLEDGER_RECONCILER_SCHEDULES",
        "CRONLEDGER_AUDITOR_SCHEDULES",
    ]
    .iter()
    .flat_map(|v| {
        text(&api[*v])
            .split(',')
            .map(str::to_string)
            .collect::<Vec<_>>()
    })
    .collect();
    let update = role_statements(&template, "ApiFunction", "scheduler:UpdateSchedule");
    let updatable = format!(
        "{:?}",
        update.iter().map(|s| &s["Resource"]).collect::<Vec<_>>()
    );
    let scheduler_role = format!("{:?}", resource(&template, "SchedulerRole")["Properties"]);
    let mut schedules = 0;
    for (name, schedule) in resources(&template) {
        if text(&schedule["Type"]) != "AWS::Scheduler::Schedule" {
            continue;
        }
        schedules += 1;
        let props = &schedule["Properties"];
        let named = text(&props["Name"]);
        if !named.starts_with("ticker-") {
            // The tickers' names come from the shard groups (CRONLEDGER_TICKER_SCHEDULES).
            assert!(told.contains(&named), "the api is told {named}: {told:?}");
        }
        assert!(
            updatable.contains(&format!("{name}.Arn")),
            "the kill switch may update {name}"
        );
        let target = text(&props["Target"]["Arn"]);
        let function = target
            .strip_prefix("!GetAtt ")
            .and_then(|t| t.strip_suffix(".Arn"))
            .unwrap_or_else(|| panic!("{name} targets a function of the stack"));
        let function_name = text(&resource(&template, function)["Properties"]["FunctionName"]);
        let function_name = function_name.trim_start_matches("!Sub ");
        assert!(
            scheduler_role.contains(function_name),
            "Scheduler may invoke {function_name}"
        );
    }
    assert_eq!(schedules, 6, "four tickers, the reconciler, the auditor");
}

/// The auditor runs daily at the code's time with Scheduler's event, reads the ledger and
/// writes nothing of it but its alerts' records, and its metric has an alarm below 1.
#[test]
fn the_auditor_runs_daily_reads_the_ledger_and_writes_only_alert_records() {
    use cronledger_app::auditor::{AuditEvent, AuditorConfig};
    use cronledger_aws::codec::alert::encode;
    use cronledger_aws::keys::schedule_pk;
    use cronledger_aws::RecordedAlert;
    use cronledger_core::alerts::{Alert, AlertKind, Severity};

    let template = template();
    // The schedule: the code's daily time, Scheduler's input read as a daily pass.
    let schedule = &resource(&template, "AuditorSchedule")["Properties"];
    assert_eq!(text(&schedule["ScheduleExpression"]), "!Ref AuditSchedule");
    assert_eq!(text(&schedule["ScheduleExpressionTimezone"]), "UTC");
    assert_eq!(
        text(&schedule["Target"]["Arn"]),
        "!GetAtt AuditorFunction.Arn"
    );
    let deployed = parameter_default(&template, "AuditSchedule");
    let code = AuditorConfig::default()
        .daily_timing()
        .expect("the code's time parses");
    let template_timing = AuditorConfig {
        daily_at: deployed.clone(),
        ..AuditorConfig::default()
    }
    .daily_timing()
    .expect("the template's AuditSchedule parses");
    let mut at = cronledger_tests::t("2026-03-01T00:30:00Z");
    for _ in 0..3 {
        let next = code.next_after(at).expect("a next pass");
        assert_eq!(template_timing.next_after(at), Some(next), "{deployed}");
        at = next;
    }
    let input = text(&schedule["Target"]["Input"])
        .replace("<aws.scheduler.scheduled-time>", "2026-03-10T01:00:00Z");
    let event: Json = serde_json::from_str(&input).expect("the input is JSON");
    assert!(matches!(
        AuditEvent::from_json(&event),
        Ok(AuditEvent::Daily { .. })
    ));

    // Reads: the table and the catalog index, without conditions.
    let role = "AuditorFunction";
    for read in [
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
    ] {
        let statements = role_statements(&template, role, read);
        assert!(!statements.is_empty(), "the auditor may {read}");
    }
    for forbidden in [
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:TransactWriteItems",
        "dynamodb:Scan",
        "sqs:SendMessage",
        "sqs:GetQueueUrl",
        "scheduler:UpdateSchedule",
    ] {
        assert!(
            role_statements(&template, role, forbidden).is_empty(),
            "the auditor may not {forbidden}"
        );
    }
    // Writes: alert records only, in schedule partitions, with an alert record's attributes.
    let alert = Alert {
        kind: AlertKind::LedgerIncomplete,
        severity: Severity::Critical,
        schedule: "nightly".into(),
        owner: None,
        window: None,
        run: None,
        message: "m".into(),
        console_url: None,
        at: cronledger_tests::t("2026-03-10T01:00:00Z"),
        subject: "audit:x".into(),
    };
    let mut attributes = BTreeSet::new();
    for published in [None, Some(alert.at)] {
        let recorded = RecordedAlert {
            alert: alert.clone(),
            recorded_at: alert.at,
            published_at: published,
        };
        attributes.extend(encode(&recorded).expect("encodes").into_keys());
    }
    // The schema version the item engine stamps on every item it writes (the ledger's
    // `schema::SCHEMA_VERSION`), alert records included.
    attributes.insert("sv".to_string());
    for write in ["dynamodb:PutItem", "dynamodb:UpdateItem"] {
        let statements = role_statements(&template, role, write);
        assert_eq!(statements.len(), 1, "{write}");
        let statement = statements[0];
        assert_eq!(text(&statement["Resource"]), "!GetAtt LedgerTable.Arn");
        let condition = &statement["Condition"];
        let leading: Vec<String> = condition["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
            .as_sequence()
            .expect("partition keys named")
            .iter()
            .map(text)
            .collect();
        assert_eq!(leading, [format!("{}*", schedule_pk(""))]);
        let allowed: BTreeSet<String> = condition["ForAllValues:StringEquals"]
            ["dynamodb:Attributes"]
            .as_sequence()
            .expect("attributes named")
            .iter()
            .map(text)
            .collect();
        assert_eq!(allowed, attributes, "an alert record's attributes, no more");
    }

    // The alarm: the fleet-wide metric below 1.
    let alarm = &resource(&template, "LedgerIncompleteAlarm")["Properties"];
    assert_eq!(text(&alarm["MetricName"]), "LedgerCompleteness");
    assert_eq!(text(&alarm["ComparisonOperator"]), "LessThanThreshold");
    assert_eq!(text(&alarm["Threshold"]), "1");
    assert_eq!(text(&alarm["Statistic"]), "Minimum");
}

/// The functions a deploy may roll out gradually, each with the alarm that rolls it back.
const CANARIED: &[(&str, &str)] = &[
    ("ApiFunction", "ApiFunctionErrorsAlarm"),
    ("WorkerFunction", "WorkerFunctionErrorsAlarm"),
];

/// GradualDeployment is off unless asked for; the api and the worker publish a `live` alias
/// that, when it is on, CodeDeploy moves 10% then all after 5 minutes, rolled back by the
/// function's errors alarm (fast enough to fire inside the 5 minutes). The other functions
/// have no alias.
#[test]
fn gradual_deployment_canaries_the_api_and_worker_alias_behind_their_errors_alarms() {
    let template = template();
    let parameter = &template["Parameters"]["GradualDeployment"];
    assert_eq!(parameter_default(&template, "GradualDeployment"), "false");
    assert_eq!(parameter["AllowedValues"], yaml(r#"["true", "false"]"#));
    for (function, alarm) in CANARIED {
        let props = &resource(&template, function)["Properties"];
        assert_eq!(text(&props["AutoPublishAlias"]), "live", "{function}");
        assert_eq!(
            props["DeploymentPreference"],
            yaml(&format!(
                "{{Enabled: !Ref GradualDeployment, Type: Canary10Percent5Minutes, \
                 Alarms: [!Ref {alarm}]}}"
            )),
            "{function}"
        );
        // As deployed by default, SAM creates no CodeDeploy application or group.
        let deployed = as_deployed(&props["DeploymentPreference"], &template["Parameters"])
            .expect("a preference");
        assert_eq!(text(&deployed["Enabled"]), "false", "{function}");

        let alarm = &resource(&template, alarm)["Properties"];
        assert_eq!(text(&alarm["Namespace"]), "AWS/Lambda");
        assert_eq!(text(&alarm["MetricName"]), "Errors");
        assert_eq!(
            alarm["Dimensions"],
            yaml(&format!("[{{Name: FunctionName, Value: !Ref {function}}}]"))
        );
        let seconds = |key: &str| text(&alarm[key]).parse::<u64>().expect(key);
        assert!(
            seconds("Period") * seconds("DatapointsToAlarm") < 300,
            "{function}'s alarm fires within the canary's 5 minutes"
        );
    }
    for (name, function) in resources(&template) {
        if text(&function["Type"]) == "AWS::Serverless::Function"
            && !CANARIED.iter().any(|(f, _)| *f == name)
        {
            let props = &function["Properties"];
            assert!(props["AutoPublishAlias"].is_null(), "{name}");
            assert!(props["DeploymentPreference"].is_null(), "{name}");
        }
    }
}

/// What calls the api and the worker calls their `live` alias, so a canary's traffic split
/// covers every call: the HTTP API's integrations and its invoke permission; the lanes' event
/// sources (SAM points an AutoPublishAlias function's events at the alias); and the kill
/// switch finds and may update the alias's event source mappings.
#[test]
fn the_http_api_and_the_kill_switch_reach_the_live_aliases() {
    let template = template();
    let paths = &resource(&template, "HttpApi")["Properties"]["DefinitionBody"]["paths"];
    let mut integrations = 0;
    for (_, methods) in paths.as_mapping().expect("paths") {
        for (_, op) in methods.as_mapping().expect("methods") {
            let uri = &op["x-amazon-apigateway-integration"]["uri"];
            assert_eq!(text(uri), "!Ref ApiFunction.Alias");
            integrations += 1;
        }
    }
    assert_eq!(integrations, 3);
    let permission = &resource(&template, "ApiInvokePermission")["Properties"];
    assert_eq!(text(&permission["FunctionName"]), "!Ref ApiFunction.Alias");

    let events = resource(&template, "WorkerFunction")["Properties"]["Events"]
        .as_mapping()
        .expect("the lanes' event sources");
    assert!(events.iter().all(|(_, e)| text(&e["Type"]) == "SQS"));

    let intake = text(
        &resource(&template, "ApiFunction")["Properties"]["Environment"]["Variables"]
            ["CRONLEDGER_WORKER_FUNCTION"],
    );
    assert!(
        intake.ends_with("function:${AWS::StackName}-worker:live"),
        "{intake}"
    );
    let update = role_statements(&template, "ApiFunction", "lambda:UpdateEventSourceMapping");
    assert_eq!(update.len(), 1);
    assert_eq!(
        text(&update[0]["Condition"]["StringEquals"]["lambda:FunctionArn"]),
        intake,
        "the kill switch may update the mappings it lists"
    );
}

/// `infra/samconfig.toml` (beside the template, where SAM looks for it) deploys with the
/// capabilities the template's roles need, uploads through a bucket SAM resolves, asks before
/// changing a stack, and overrides only parameters the template has, with allowed values.
#[test]
fn samconfig_deploys_the_template_with_its_capabilities_and_parameters() {
    let config = include_str!("../../infra/samconfig.toml");
    let value = |key: &str| {
        config
            .lines()
            .find_map(|line| {
                let rest = line.trim().strip_prefix(key)?.trim_start();
                Some(rest.strip_prefix('=')?.trim().to_string())
            })
            .unwrap_or_else(|| panic!("samconfig.toml sets {key}"))
    };
    let template = template();
    let stack = value("stack_name");
    assert!(stack.trim_matches('"').len() <= 53, "{stack}");
    assert!(value("capabilities").contains("CAPABILITY_IAM"));
    assert_eq!(value("resolve_s3"), "true");
    assert_eq!(value("confirm_changeset"), "true");
    let overrides = value("parameter_overrides");
    let overrides = overrides
        .strip_prefix('"')
        .and_then(|o| o.strip_suffix('"'))
        .expect("a quoted string")
        .replace("\\\"", "\"");
    for pair in overrides.split_whitespace() {
        let (name, given) = pair.split_once('=').expect("NAME=VALUE");
        let parameter = &template["Parameters"][name];
        assert!(
            parameter.is_mapping(),
            "the template has a parameter {name}"
        );
        if let Some(allowed) = parameter["AllowedValues"].as_sequence() {
            let given = given.trim_matches('"');
            assert!(allowed.iter().any(|a| text(a) == given), "{name}={given}");
        }
    }
}

/// SAM's own transform of the template (the translator cfn-lint brings), with its functions'
/// code at a placeholder S3 address, for one value of GradualDeployment.
const SAM_TRANSFORM: &str = r#"
import json, os, sys
os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
from samtranslator.yaml_helper import yaml_parse
from samtranslator.translator.transform import transform

class NoManagedPolicies:
    def load(self):
        return {}

template = yaml_parse(open(sys.argv[1]).read())
for resource in template["Resources"].values():
    if resource.get("Type") == "AWS::Serverless::Function":
        resource["Properties"]["CodeUri"] = "s3://bucket/code.zip"
print(json.dumps(transform(template, {"GradualDeployment": sys.argv[2]}, NoManagedPolicies())))
"#;

/// A Python that has the SAM translator: python3's, else the one cfn-lint runs on.
fn sam_python() -> String {
    use std::process::Command;
    let has_translator = |python: &str| {
        Command::new(python)
            .args(["-c", "import samtranslator"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has_translator("python3") {
        return "python3".into();
    }
    let shebang = Command::new("sh")
        .args(["-c", "head -n1 \"$(command -v cfn-lint)\""])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    let python = shebang.trim().trim_start_matches("#!").to_string();
    assert!(
        has_translator(&python),
        "no Python with the SAM translator: run infra/lint once (it installs cfn-lint, which brings it)"
    );
    python
}

/// The template's resources as CloudFormation receives them with each of `values` as
/// GradualDeployment (the translator runs once per value, all at once).
fn transformed<const N: usize>(values: [&str; N]) -> [serde_json::Map<String, Json>; N] {
    let template = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml");
    let python = sam_python();
    let running = values.map(|gradual| {
        std::process::Command::new(&python)
            .args(["-c", SAM_TRANSFORM, template, gradual])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the SAM translator runs")
    });
    running.map(|child| {
        let out = child.wait_with_output().expect("the SAM translator ends");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut template: Json =
            serde_json::from_slice(&out.stdout).expect("a transformed template");
        match template["Resources"].take() {
            Json::Object(resources) => resources,
            other => panic!("no resources: {other}"),
        }
    })
}

/// As deployed: GradualDeployment=true adds CodeDeploy (an application, its role, a canary
/// group per function with that function's errors alarm and rollback on alarm) and the
/// aliases' update policy through it, and changes nothing else; "false" adds none of it. Either
/// way the lanes' event sources and the HTTP API call the `live` aliases.
#[test]
fn sam_adds_the_canary_deployments_only_when_gradual_deployment_is_true() {
    let [off, mut on] = transformed(["false", "true"]);
    let codedeploy: Vec<String> = on
        .iter()
        .filter(|(name, r)| {
            r["Type"]
                .as_str()
                .is_some_and(|t| t.starts_with("AWS::CodeDeploy::"))
                || *name == "CodeDeployServiceRole"
        })
        .map(|(name, _)| name.clone())
        .collect();
    assert_eq!(codedeploy.len(), 4, "{codedeploy:?}");
    for (function, alarm) in CANARIED {
        let group = &on[&format!("{function}DeploymentGroup")]["Properties"];
        assert_eq!(
            group["AlarmConfiguration"],
            serde_json::json!({"Enabled": true, "Alarms": [{"Name": {"Ref": alarm}}]})
        );
        assert!(group["DeploymentConfigName"]
            .to_string()
            .contains("Canary10Percent5Minutes"));
        assert!(group["AutoRollbackConfiguration"]["Events"]
            .to_string()
            .contains("DEPLOYMENT_STOP_ON_ALARM"));
        let alias = format!("{function}Aliaslive");
        assert_eq!(
            on[&alias]["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]["DeploymentGroupName"],
            serde_json::json!({"Ref": format!("{function}DeploymentGroup")})
        );
        assert!(off[&alias]["UpdatePolicy"].is_null(), "{alias}");
        if let Some(Json::Object(alias)) = on.get_mut(&alias) {
            alias.remove("UpdatePolicy");
        }
    }
    for name in &codedeploy {
        on.remove(name);
    }
    let changed: Vec<&String> = on
        .keys()
        .chain(off.keys())
        .filter(|name| on.get(*name) != off.get(*name))
        .collect();
    assert!(
        changed.is_empty(),
        "GradualDeployment also changes {changed:?}"
    );

    let lanes: Vec<&Json> = off
        .values()
        .filter(|r| r["Type"] == "AWS::Lambda::EventSourceMapping")
        .collect();
    assert_eq!(lanes.len(), Lane::ALL.len());
    for lane in lanes {
        assert_eq!(
            lane["Properties"]["FunctionName"],
            serde_json::json!({"Ref": "WorkerFunctionAliaslive"})
        );
    }
    let api = off["HttpApi"]["Properties"]["Body"].to_string();
    assert_eq!(
        api.matches(r#""uri":{"Ref":"ApiFunctionAliaslive"}"#)
            .count(),
        3
    );
    assert!(!api.contains("ApiFunction.Arn"), "{api}");
}
