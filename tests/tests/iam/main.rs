//! IAM proven from the suite: no emulator checks IAM, so each function's clients record every
//! AWS call they make (cronledger_aws::recorder) while a slice of each function's flows runs
//! against the emulators, and every call is evaluated against the role the SAM template gives
//! that function (its Allow statements, resources resolved for a fixed account, region and
//! stack, conditions where present). Permissions no call exercised are listed; each is
//! exercised or written down in [`NOT_EXERCISED`] with why it is granted.

mod flows;

use std::collections::{BTreeMap, BTreeSet};

use cronledger_aws::recorder::RecordedCall;
use cronledger_tests::iam::{allows, glob, ResourceEntry, Stack, Statement};

use flows::recorded_calls;

/// Each component and the template function it runs as.
const FUNCTIONS: &[(&str, &str)] = &[
    ("ticker", "TickerFunction"),
    ("worker", "WorkerFunction"),
    ("reconciler", "ReconcilerFunction"),
    ("api", "ApiFunction"),
    ("auditor", "AuditorFunction"),
];

/// Permissions the template grants that no recorded call exercises, by function, action
/// and resource as the template writes it (each a pattern: `*` any run), with why each is
/// granted all the same. An entry that matches nothing unexercised fails the test.
const NOT_EXERCISED: &[(&str, &str, &str, &str)] = &[
    (
        "*",
        "logs:*",
        "*",
        "the Lambda service writes each function's logs with its role; no code calls CloudWatch Logs",
    ),
    (
        "*",
        "dynamodb:TransactWriteItems",
        "*",
        "AWS authorises a transaction item by item (PutItem, UpdateItem, DeleteItem), which is what \
         the recorder checks; the enclosing action is granted as well",
    ),
    (
        "*",
        "sns:Publish",
        "!If [HasAlertTopicPattern, *",
        "topics a schedule names in `alerts.topic` (within AlertTopicPattern); this slice's \
         schedules alert to the stack's topic",
    ),
    (
        "api",
        "sns:Publish",
        "!If [CreateAlertTopic, *",
        "alerts an api request raises (a backfill held for approval, a run's operator action) are \
         published at once; this slice raises none",
    ),
    (
        "api",
        "lambda:*",
        "*",
        "the kill switch disables the worker's event source mappings (WorkerIntake); no emulator \
         here serves Lambda, so the test's api has none",
    ),
    (
        "worker",
        "sqs:GetQueueAttributes",
        "*",
        "the event source mappings read their lane with the worker's role; the worker's code does not",
    ),
    (
        "worker",
        "sqs:SendMessage",
        "!GetAtt *DeadLetterQueue.Arn",
        "a poison message (one no run can be read from) goes to its lane's DLQ; none in this slice",
    ),
    (
        "*",
        "sqs:SendMessage",
        "!GetAtt *Queue.Arn",
        "a function may send to every lane its work can be on (live work by priority, catch-up, \
         backfills, manual runs, a run re-sent to its own lane); this slice's work reaches the \
         normal, correction, backfill and manual lanes, not every function each",
    ),
    (
        "worker",
        "sqs:ChangeMessageVisibility",
        "*",
        "heartbeats and retry backoff extend a message on whatever lane it came from; this \
         slice's retry is on the normal lane",
    ),
    (
        "worker",
        "sqs:DeleteMessage",
        "!GetAtt RealtimeQueue.Arn",
        "the event source deletes what the worker acknowledged; nothing in this slice is on the \
         realtime lane (CRITICAL and HIGH schedules)",
    ),
    (
        "ticker",
        "dynamodb:Query",
        "!Sub ${LedgerTable.Arn}/index/active",
        "the run history's overlap reads (runs still RUNNING before it, PENDING runs to re-send); \
         this slice's ticker fires with nothing running before",
    ),
    (
        "worker",
        "dynamodb:Query",
        "!Sub ${LedgerTable.Arn}/index/active",
        "runs still RUNNING before the newest page of history (overlap); none in this slice",
    ),
    (
        "worker",
        "dynamodb:BatchGetItem",
        "!GetAtt LedgerTable.Arn",
        "the items behind those index entries; as above",
    ),
    (
        "worker",
        "dynamodb:PutItem",
        "!GetAtt LedgerTable.Arn",
        "children and alerts the worker records (a conditional put); this slice's failures alert \
         from the worker's run end as updates",
    ),
    (
        "worker",
        "sns:Publish",
        "!If [CreateAlertTopic, *",
        "the worker's alerts (a failure streak, a late run); this slice's one failure raises none",
    ),
];

/// Each function's statements, by component name.
fn roles(stack: &Stack) -> BTreeMap<&'static str, Vec<Statement>> {
    FUNCTIONS
        .iter()
        .map(|(component, function)| (*component, stack.statements(&stack.role_of(function))))
        .collect()
}

/// The recorded accesses no statement of their function's role allows, in words.
fn denials(roles: &BTreeMap<&str, Vec<Statement>>, calls: &[RecordedCall]) -> BTreeSet<String> {
    let mut denied = BTreeSet::new();
    for call in calls {
        let statements = roles
            .get(call.function.as_str())
            .unwrap_or_else(|| panic!("{} is no function of the template", call.function));
        for access in &call.accesses {
            if !allows(statements, access) {
                denied.insert(format!(
                    "{}: {} on {} ({} in {}, context {:?})",
                    call.function,
                    access.action,
                    access.resource,
                    call.operation,
                    call.scope,
                    access.context
                ));
            }
        }
    }
    denied
}

/// Whether IAM ever evaluates `action` on this resource: of DynamoDB's actions only Query
/// and Scan name an index (a statement granting item actions on a table and its indexes
/// grants nothing on the indexes but those).
fn applies(action: &str, resource: &ResourceEntry) -> bool {
    !resource.pattern.contains("/index/") || matches!(action, "dynamodb:Query" | "dynamodb:Scan")
}

/// (function, action, resource as the template writes it) of every Allow grant no recorded
/// access of that function used.
fn unexercised(
    roles: &BTreeMap<&str, Vec<Statement>>,
    calls: &[RecordedCall],
) -> BTreeSet<(String, String, String)> {
    let mut granted = BTreeSet::new();
    for (function, statements) in roles {
        for statement in statements.iter().filter(|s| s.allow) {
            for action in &statement.actions {
                for resource in statement.resources.iter().filter(|r| applies(action, r)) {
                    granted.insert((function.to_string(), action.clone(), resource.label.clone()));
                }
            }
        }
    }
    for call in calls {
        for access in &call.accesses {
            for statement in &roles[call.function.as_str()] {
                if let Some(entry) = statement.entry_for(access) {
                    let action = statement
                        .actions
                        .iter()
                        .find(|a| glob(&a.to_lowercase(), &access.action.to_lowercase()))
                        .cloned()
                        .unwrap_or_default();
                    granted.remove(&(call.function.clone(), action, entry.label.clone()));
                }
            }
        }
    }
    granted
}

#[tokio::test]
async fn every_recorded_aws_call_is_allowed_by_its_role() {
    let (deployment, calls) = recorded_calls().await;
    let stack = deployment.stack();
    let roles = roles(&stack);
    let functions: BTreeSet<&str> = calls.iter().map(|c| c.function.as_str()).collect();
    assert_eq!(
        functions,
        FUNCTIONS.iter().map(|(c, _)| *c).collect(),
        "every function's calls are recorded"
    );
    let denied = denials(&roles, &calls);
    assert!(
        denied.is_empty(),
        "calls the template's roles do not allow:\n{}",
        denied.into_iter().collect::<Vec<_>>().join("\n")
    );

    let unused = unexercised(&roles, &calls);
    println!("permissions no recorded call exercised:");
    for (function, action, resource) in &unused {
        println!("  {function}: {action} on {resource}");
    }
    let explains = |(f, a, r, _): &&(&str, &str, &str, &str),
                    (function, action, resource): &(String, String, String)| {
        glob(f, function) && glob(a, action) && glob(r, resource)
    };
    let unexplained: Vec<_> = unused
        .iter()
        .filter(|grant| !NOT_EXERCISED.iter().any(|entry| explains(&entry, grant)))
        .collect();
    assert!(
        unexplained.is_empty(),
        "granted, never exercised and not written down in NOT_EXERCISED: {unexplained:#?}"
    );
    let stale: Vec<_> = NOT_EXERCISED
        .iter()
        .filter(|entry| !unused.iter().any(|grant| explains(entry, grant)))
        .collect();
    assert!(
        stale.is_empty(),
        "written down in NOT_EXERCISED but exercised (or no longer granted): {stale:#?}"
    );
}

/// The parsed template without the statements of `role` that grant `action`.
fn without_grant(stack: &mut Stack, role: &str, action: &str) {
    let policies = &mut stack.template_mut()["Resources"][role]["Properties"]["Policies"];
    let mut removed = 0;
    for policy in policies.as_sequence_mut().into_iter().flatten() {
        let statements = &mut policy["PolicyDocument"]["Statement"];
        if let Some(list) = statements.as_sequence_mut() {
            let before = list.len();
            list.retain(|s| {
                let actions = match &s["Action"] {
                    serde_norway::Value::Sequence(items) => items.clone(),
                    one => vec![one.clone()],
                };
                !actions.iter().any(|a| a.as_str() == Some(action))
            });
            removed += before - list.len();
        }
    }
    assert_eq!(removed, 1, "{role} has one statement granting {action}");
}

#[tokio::test]
async fn a_statement_removed_from_the_template_denies_the_calls_it_allowed() {
    let (deployment, calls) = recorded_calls().await;
    let mut stack = deployment.stack();
    assert!(denials(&roles(&stack), &calls).is_empty());
    // The worker's reads and writes of the ledger, its queries among them.
    without_grant(&mut stack, "WorkerRole", "dynamodb:Query");
    let denied = denials(&roles(&stack), &calls);
    assert!(
        denied
            .iter()
            .any(|d| d.starts_with("worker: dynamodb:Query on ")),
        "{denied:#?}"
    );
    assert!(
        denied.iter().all(|d| d.starts_with("worker: ")),
        "only the worker's calls: {denied:#?}"
    );
    // Without index `catalog` the ticker could not seed a shard's catalog: the denial the test
    // found in the template.
    let mut stack = deployment.stack();
    let resources = &mut stack.template_mut()["Resources"]["TickerRole"]["Properties"]["Policies"]
        [0]["PolicyDocument"]["Statement"][1]["Resource"];
    let list = resources
        .as_sequence_mut()
        .expect("the ticker's table resources");
    list.retain(|r| !format!("{r:?}").contains("index/catalog"));
    let denied = denials(&roles(&stack), &calls);
    let catalog = format!("table/{}/index/catalog", deployment.ledger.table);
    assert!(
        denied
            .iter()
            .any(|d| d.starts_with("ticker: dynamodb:Query on ") && d.contains(&catalog)),
        "{denied:#?}"
    );
}
