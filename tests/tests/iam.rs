//! IAM proven from the suite: no emulator checks IAM, so each function's clients record every
//! AWS call they make (cronledger_aws::recorder) while a slice of each function's flows runs
//! against the emulators, and every call is evaluated against the role the SAM template gives
//! that function (its Allow statements, resources resolved for a fixed account, region and
//! stack, conditions where present). Permissions no call exercised are listed; each is
//! exercised or written down in [`NOT_EXERCISED`] with why it is granted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use chrono::{DateTime, TimeDelta, Utc};
use cronledger_app::api::{ApiConfig, Caller};
use cronledger_app::auditor::{AuditEvent, AuditorConfig};
use cronledger_app::clock::ManualClock;
use cronledger_app::deployment::Connected;
use cronledger_app::jobs::http_auth::{HttpAuthorizer, SecretCache, SecretsManagerSource};
use cronledger_app::jobs::{HttpJob, HttpOptions, JobTargets};
use cronledger_app::reconciler::ReconcileEvent;
use cronledger_app::ticker::TickEvent;
use cronledger_app::wiring::{Components, Deps};
use cronledger_aws::lanes::{LaneSettings, SqsRecord};
use cronledger_aws::prelude::*;
use cronledger_aws::recorder::{CallRecorder, RecordedCall};
use cronledger_aws::{AwsClients, ChangeMeta, DynamoLedger, SnsNotifier, SqsLanes};
use cronledger_core::Lane;
use cronledger_tests::api::{auth_config, ADMIN, OPERATOR, VIEWER};
use cronledger_tests::app::worker_config;
use cronledger_tests::iam::{allows, glob, test_account, ResourceEntry, Stack, Statement};
use cronledger_tests::reconcile::{reconciler_config, FakeSignals};
use cronledger_tests::sns::TestTopic;
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{clients, spec_with, t, unique_name, TestLanes, TestLedger, SHARDS};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const TEMPLATE: &str = include_str!("../../infra/template.yaml");
const STACK: &str = "cronledger-iam";
/// The template's default secret prefix: the worker may read `cronledger/*`.
const SECRET_PREFIX: &str = "cronledger/";

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
        "scheduler:*",
        "*",
        "the kill switch turns the automatic schedules off and on, a one-off run is a one-time \
         schedule (SchedulerControl); the test's api has no Scheduler wired",
    ),
    (
        "api",
        "iam:PassRole",
        "*",
        "a one-off run's schedule passes the Scheduler role; as above",
    ),
    (
        "api",
        "lambda:*",
        "*",
        "the kill switch disables the worker's event source mappings; no emulator here serves Lambda",
    ),
    (
        "reconciler",
        "scheduler:GetSchedule",
        "*",
        "the ticker check (SchedulerTickers) reads the ticker schedules; the test's reconciler has \
         no Scheduler wired",
    ),
    (
        "reconciler",
        "sqs:GetQueueAttributes",
        "*",
        "the pause signals (AwsSignals) read the realtime backlog and the catch-up DLQs; the test's \
         reconciler reads fake signals",
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
        "sqs:*",
        "!GetAtt *Queue.Arn",
        "lanes this slice's work does not reach: a function may send to (and the worker receive, \
         delete and extend on) every lane its work can be on; the lanes of live, catch-up, backfill \
         and manual work are each exercised by some function",
    ),
    (
        "ticker",
        "dynamodb:Query",
        "!Sub ${LedgerTable.Arn}/index/*",
        "the run history's overlap reads (index `active`) and due schedules (index `due`); this \
         slice's ticker fires from its catalog with nothing running before",
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

/// The deployment every function's clients reach: one table, the lanes, the alert topic,
/// an http job's secret; calls made through `setup` are the test's, not a function's.
struct Deployment {
    ledger: TestLedger,
    lanes: TestLanes,
    topic: TestTopic,
    secret: String,
    recorder: CallRecorder,
}

impl Deployment {
    async fn new() -> Deployment {
        let ledger = TestLedger::new().await;
        let lanes = TestLanes::with_clients(clients().await, LaneSettings::default()).await;
        let topic = TestTopic::new().await;
        let secret = format!("{SECRET_PREFIX}{}", unique_name("iam"));
        let sdk = cronledger_aws::config::load_sdk_config(&Default::default()).await;
        aws_sdk_secretsmanager::Client::new(&sdk)
            .create_secret()
            .name(&secret)
            .secret_string("s3cr3t")
            .send()
            .await
            .expect("the job's secret");
        Deployment {
            ledger,
            lanes,
            topic,
            secret,
            recorder: CallRecorder::new(test_account()),
        }
    }

    /// The stack whose names are this deployment's.
    fn stack(&self) -> Stack {
        Stack::new(
            TEMPLATE,
            STACK,
            &[
                ("TableName", &self.ledger.table),
                ("QueuePrefix", &self.lanes.prefix),
                ("AlertTopicArn", &self.topic.arn),
            ],
        )
    }

    /// `function`'s clients: every call recorded as its.
    fn clients(&self, function: &str) -> AwsClients {
        self.ledger.clients.recorded_as(&self.recorder, function)
    }

    /// As `Deployment::connect` at a cold start: the shard count claimed, the lanes resolved.
    async fn connect(&self, function: &str) -> Connected {
        let clients = self.clients(function);
        let ledger = DynamoLedger::new(&clients, self.ledger.table.clone(), SHARDS);
        ledger.claim_shard_count().await.expect("the shard count");
        let lanes = SqsLanes::resolve(clients.sqs.clone(), &self.lanes.prefix)
            .await
            .expect("the lanes");
        Connected {
            ledger: Arc::new(ledger),
            lanes: Arc::new(lanes),
            clients,
        }
    }

    /// `function`'s components, as the functions wire them, alerts to the test's topic.
    fn components(&self, connected: &Connected, clock: &ManualClock) -> Components {
        let notifier = SnsNotifier::new(
            connected.clients.sns.clone(),
            Some(self.topic.arn.clone()),
            None,
        );
        Components::build(Deps::on(
            connected.ledger.clone(),
            connected.lanes.clone(),
            Arc::new(notifier),
            Arc::new(clock.clone()),
        ))
    }
}

async fn call(
    router: &Router,
    who: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    call_with(router, who, method, path, body, &[]).await
}

async fn call_with(
    router: &Router,
    who: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> Value {
    let mut request = Request::builder().method(method.clone()).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let mut request = request.body(Body::from(bytes)).expect("a request");
    request.extensions_mut().insert(Caller::new(who));
    let response = router.clone().oneshot(request).await.expect("an answer");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert!(
        status.is_success() || status == StatusCode::NOT_FOUND && method == Method::GET,
        "{method} {path}: {status} {answer}"
    );
    answer
}

/// The api's slice: schedules (create, read, list, update, pause), calendars (create, list,
/// delete), runs (run now, list), backfills (create, list), audits (schedule, system, on
/// demand).
async fn api_flows(deployment: &Deployment, clock: &ManualClock) {
    let connected = deployment.connect("api").await;
    let api = deployment.components(&connected, clock).api(
        None,
        None,
        auth_config(),
        ApiConfig::default(),
    );
    let router = api.router();
    let schedule = json!({"id": "every", "cron": "*/10 * * * *", "timezone": "UTC",
        "owner": "tests", "job": {"type": "noop"}});
    call(
        &router,
        ADMIN,
        Method::POST,
        "/v1/schedules",
        Some(schedule.clone()),
    )
    .await;
    call(&router, VIEWER, Method::GET, "/v1/schedules", None).await;
    call(&router, VIEWER, Method::GET, "/v1/schedules/every", None).await;
    let mut changed = schedule.clone();
    changed["cron"] = json!("*/15 * * * *");
    call_with(
        &router,
        ADMIN,
        Method::PUT,
        "/v1/schedules/every",
        Some(changed),
        &[("If-Match", "\"1\"")],
    )
    .await;
    let calendar = json!({"exclude": ["2026-12-25"]});
    call(
        &router,
        OPERATOR,
        Method::PUT,
        "/v1/calendars/holidays",
        Some(calendar),
    )
    .await;
    call(&router, VIEWER, Method::GET, "/v1/calendars", None).await;
    call(
        &router,
        OPERATOR,
        Method::DELETE,
        "/v1/calendars/holidays",
        None,
    )
    .await;
    call(
        &router,
        OPERATOR,
        Method::POST,
        "/v1/schedules/every/runs",
        Some(json!({})),
    )
    .await;
    call(
        &router,
        VIEWER,
        Method::GET,
        "/v1/schedules/every/runs",
        None,
    )
    .await;
    let range = json!({"from": "2026-03-10T08:00:00Z", "to": "2026-03-10T09:00:00Z", "reprocess": "missing"});
    call(
        &router,
        OPERATOR,
        Method::POST,
        "/v1/schedules/every/backfills",
        Some(range),
    )
    .await;
    call(&router, VIEWER, Method::GET, "/v1/backfills", None).await;
    call(
        &router,
        VIEWER,
        Method::GET,
        "/v1/schedules/every/audit",
        None,
    )
    .await;
    call(&router, VIEWER, Method::GET, "/v1/system/audit", None).await;
    let audit = json!({"from": "2026-03-10T08:00:00Z", "to": "2026-03-10T09:00:00Z"});
    call(
        &router,
        OPERATOR,
        Method::POST,
        "/v1/audit/runs",
        Some(audit),
    )
    .await;
}

/// The ticker's slice: a tick that fires the due windows to their live lane.
async fn ticker_flows(deployment: &Deployment, clock: &ManualClock, at: DateTime<Utc>) {
    let connected = deployment.connect("ticker").await;
    let config = cronledger_tests::app::ticker_config();
    let ticker = deployment.components(&connected, clock).ticker(config);
    let report = ticker
        .tick(&TickEvent {
            time: at,
            shards: None,
        })
        .await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.sent > 0, "the tick fired nothing: {report:?}");
}

/// The worker's slice: every lane's messages received, run (an http job reading its secret,
/// failing and alerting) and deleted, as its event source mappings do with its role.
async fn worker_flows(deployment: &Deployment, clock: &ManualClock) {
    let connected = deployment.connect("worker").await;
    let sdk = cronledger_aws::config::load_sdk_config(&Default::default()).await;
    let secrets = aws_sdk_secretsmanager::config::Builder::from(&sdk)
        .interceptor(deployment.recorder.interceptor("worker"))
        .build();
    let source =
        SecretsManagerSource::from_client(aws_sdk_secretsmanager::Client::from_conf(secrets));
    let authorizer = HttpAuthorizer::default().with_secrets(Arc::new(SecretCache::new(
        Arc::new(source),
        Duration::from_secs(60),
    )));
    let http = HttpJob::with_options(HttpOptions {
        authorizer,
        ..HttpOptions::local()
    })
    .expect("an http client");
    let worker = deployment
        .components(&connected, clock)
        .worker(JobTargets::new(http), worker_config("iam"));
    for &lane in Lane::ALL.iter() {
        loop {
            let received = connected
                .lanes
                .receive(lane, false, 10, Duration::from_millis(200))
                .await
                .expect("receive");
            if received.is_empty() {
                break;
            }
            let records: Vec<SqsRecord> = received.iter().map(SqsRecord::from).collect();
            let report = worker.handle_batch(lane, &records).await;
            for (record, (_, outcome)) in records.iter().zip(&report.outcomes) {
                if !outcome.keeps_message() {
                    connected
                        .lanes
                        .delete(lane, &record.receipt_handle)
                        .await
                        .expect("delete");
                }
            }
        }
    }
}

/// The reconciler's slice: a pass that catches up missed windows and publishes the alert
/// outbox, then the release of operators' backfills.
async fn reconciler_flows(deployment: &Deployment, clock: &ManualClock, at: DateTime<Utc>) {
    let connected = deployment.connect("reconciler").await;
    let components = deployment.components(&connected, clock);
    let reconciler = components.reconciler(Arc::new(FakeSignals::default()), reconciler_config());
    let report = reconciler.reconcile(&ReconcileEvent::at(at)).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let released = components.backfill_releaser(None).pass(at).await;
    assert!(released.errors.is_empty(), "{:?}", released.errors);
}

/// The auditor's slice: an on-demand audit of a range with unaccounted windows, which
/// records and publishes LEDGER_INCOMPLETE. Its connection, as `auditor::deployed`'s: no
/// shard-count claim, no lanes.
async fn auditor_flows(
    deployment: &Deployment,
    clock: &ManualClock,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) {
    let clients = deployment.clients("auditor");
    let ledger = Arc::new(DynamoLedger::new(
        &clients,
        deployment.ledger.table.clone(),
        SHARDS,
    ));
    let connected = Connected {
        ledger,
        lanes: Arc::new(SqsLanes::new(clients.sqs.clone(), BTreeMap::new())),
        clients,
    };
    let auditor = deployment
        .components(&connected, clock)
        .auditor(AuditorConfig::default());
    let event = AuditEvent::from_json(&json!({"from": from, "to": to})).expect("an audit event");
    let outcome = auditor.run(&event).await.expect("an audit");
    assert!(
        outcome.summary().alerts_raised > 0,
        "{:?}",
        outcome.summary()
    );
}

/// Every function's slice, in the order a deployment lives them; the calls recorded.
async fn recorded_calls() -> (Deployment, Vec<RecordedCall>) {
    let deployment = Deployment::new().await;
    let webhook = Webhook::start(Answer::Fail(500)).await;
    let created = t("2026-03-10T10:00:00Z");
    let clock = ManualClock::new(created);
    // An http job that reads its secret, fails and alerts, created by the test itself.
    let job = json!({"job": {"type": "http", "url": webhook.url, "timeout": "5s",
        "auth": {"secret": deployment.secret, "prefix": "Bearer "}}});
    let meta = ChangeMeta {
        actor: "tests".into(),
        reason: "iam".into(),
        at: created,
        details: None,
    };
    deployment
        .ledger
        .ledger
        .create_schedule(spec_with("hooked", "0 * * * *", job), meta)
        .await
        .expect("the http schedule");

    api_flows(&deployment, &clock).await;
    let tick = t("2026-03-10T11:00:00Z");
    clock.set(tick);
    ticker_flows(&deployment, &clock, tick).await;
    worker_flows(&deployment, &clock).await;
    let later = tick + TimeDelta::minutes(35);
    clock.set(later);
    auditor_flows(&deployment, &clock, created, later).await;
    reconciler_flows(&deployment, &clock, later).await;
    worker_flows(&deployment, &clock).await;
    let calls = deployment.recorder.calls();
    (deployment, calls)
}

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
