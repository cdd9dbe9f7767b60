//! Each function's slice of work, run on the emulators with its clients recording: the
//! deployment they share, and the order a deployment lives them.

use aws_config::SdkConfig;
use aws_sdk_scheduler::types::{FlexibleTimeWindow, FlexibleTimeWindowMode, ScheduleState, Target};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use chrono::{DateTime, TimeDelta, Utc};
use cronledger_app::api::system::SchedulerControl;
use cronledger_app::api::{ApiConfig, Caller};
use cronledger_app::auditor::{AuditEvent, AuditorConfig};
use cronledger_app::clock::ManualClock;
use cronledger_app::deployment::Connected;
use cronledger_app::jobs::http_auth::{HttpAuthorizer, SecretCache, SecretsManagerSource};
use cronledger_app::jobs::{HttpJob, HttpOptions, JobTargets};
use cronledger_app::reconciler::{
    AwsSignals, ReconcileEvent, ReconcilerConfig, SchedulerTickers, Signals,
};
use cronledger_app::ticker::TickEvent;
use cronledger_app::wiring::{Components, Deps};
use cronledger_aws::lanes::{LaneSettings, SqsRecord};
use cronledger_aws::prelude::*;
use cronledger_aws::recorder::{CallRecorder, RecordedCall};
use cronledger_aws::{AwsClients, ChangeMeta, DynamoLedger, SnsNotifier, SqsLanes};
use cronledger_core::Lane;
use cronledger_tests::api::{auth_config, ADMIN, OPERATOR, VIEWER};
use cronledger_tests::app::worker_config;
use cronledger_tests::iam::{test_account, Stack};
use cronledger_tests::reconcile::reconciler_config;
use cronledger_tests::sns::TestTopic;
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{clients, spec_with, t, unique_name, TestLanes, TestLedger, SHARDS};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

const TEMPLATE: &str = include_str!("../../../infra/template.yaml");
/// The template's default secret prefix: the worker may read `cronledger/*`.
const SECRET_PREFIX: &str = "cronledger/";

/// The automatic schedules the template creates in its schedule group (the kill switch's).
const AUTOMATIC: &[(&str, &str)] = &[
    ("ticker-1", "TickerFunction"),
    ("reconciler", "ReconcilerFunction"),
    ("auditor", "AuditorFunction"),
];

/// The deployment every function's clients reach: one table, the lanes, the alert topic,
/// an http job's secret, the schedule group and its automatic schedules, under a stack name
/// of its own. What the test sets up itself is made with clients that record nothing.
pub struct Deployment {
    pub ledger: TestLedger,
    lanes: TestLanes,
    topic: TestTopic,
    secret: String,
    stack_name: String,
    sdk: SdkConfig,
    pub recorder: CallRecorder,
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
        let deployment = Deployment {
            ledger,
            lanes,
            topic,
            secret,
            stack_name: unique_name("cl-iam"),
            sdk,
            recorder: CallRecorder::new(test_account()),
        };
        deployment.create_automatic_schedules().await;
        deployment
    }

    /// The schedule group and the automatic schedules, ENABLED, as the stack creates them.
    async fn create_automatic_schedules(&self) {
        let scheduler = aws_sdk_scheduler::Client::new(&self.sdk);
        let group = self.schedule_group();
        scheduler
            .create_schedule_group()
            .name(&group)
            .send()
            .await
            .expect("the schedule group");
        let stack = self.stack();
        for (name, function) in AUTOMATIC {
            let target = Target::builder()
                .arn(stack.arn_of(function))
                .role_arn(stack.arn_of("SchedulerRole"))
                .build()
                .expect("a target");
            let off = FlexibleTimeWindow::builder()
                .mode(FlexibleTimeWindowMode::Off)
                .build()
                .expect("a window");
            scheduler
                .create_schedule()
                .name(*name)
                .group_name(&group)
                .schedule_expression("cron(* * * * ? *)")
                .state(ScheduleState::Enabled)
                .flexible_time_window(off)
                .target(target)
                .send()
                .await
                .expect("an automatic schedule");
        }
    }

    fn schedule_group(&self) -> String {
        self.stack().physical_name("SchedulerGroup")
    }

    /// `function`'s EventBridge Scheduler client, recording.
    fn scheduler(&self, function: &str) -> aws_sdk_scheduler::Client {
        let config = aws_sdk_scheduler::config::Builder::from(&self.sdk)
            .interceptor(self.recorder.interceptor(function))
            .build();
        aws_sdk_scheduler::Client::from_conf(config)
    }

    /// The stack whose names are this deployment's.
    pub fn stack(&self) -> Stack {
        Stack::new(
            TEMPLATE,
            &self.stack_name,
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

/// The api as its function wires it: the kill switch and one-off runs on EventBridge
/// Scheduler (the worker's event source mappings left out: no emulator here serves Lambda).
async fn api_router(deployment: &Deployment, clock: &ManualClock) -> Router {
    let connected = deployment.connect("api").await;
    let stack = deployment.stack();
    let control = SchedulerControl {
        client: deployment.scheduler("api"),
        group: Some(deployment.schedule_group()),
        automatic: AUTOMATIC.iter().map(|(name, _)| name.to_string()).collect(),
        target_arn: Some(stack.arn_of("ApiFunction")),
        role_arn: Some(stack.arn_of("SchedulerRole")),
        intake: None,
    };
    let api = deployment.components(&connected, clock).api(
        Some(Arc::new(control)),
        None,
        auth_config(),
        ApiConfig::default(),
    );
    api.router()
}

/// The kill switch engaged and released: every automatic schedule read and updated.
async fn kill_switch_flows(deployment: &Deployment, clock: &ManualClock) {
    let router = api_router(deployment, clock).await;
    for engaged in [true, false] {
        let body = json!({"engaged": engaged, "note": "iam"});
        call(
            &router,
            ADMIN,
            Method::POST,
            "/v1/system/kill-switch",
            Some(body),
        )
        .await;
    }
    call(&router, VIEWER, Method::GET, "/v1/system", None).await;
}

/// The api's slice: schedules (create, read, list, update, pause), calendars (create, list,
/// delete), runs (run now, list), backfills (create, list), audits (schedule, system, on
/// demand).
async fn api_flows(deployment: &Deployment, clock: &ManualClock) {
    let router = api_router(deployment, clock).await;
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
    let later = json!({"at": "2026-03-10T15:30:00Z", "note": "after the vendor window"});
    call(
        &router,
        OPERATOR,
        Method::POST,
        "/v1/schedules/every/run-at",
        Some(later),
    )
    .await;
    let range =
        json!({"from": "2026-03-10T10:00:00Z", "to": "2026-03-10T10:30:00Z", "reprocess": "all"});
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
    let cloudwatch = aws_sdk_cloudwatch::config::Builder::from(&deployment.sdk)
        .interceptor(deployment.recorder.interceptor("reconciler"))
        .build();
    let signals: Arc<dyn Signals> = Arc::new(AwsSignals::new(
        connected.lanes.clone(),
        aws_sdk_cloudwatch::Client::from_conf(cloudwatch),
    ));
    let group = Some(deployment.schedule_group());
    let config = ReconcilerConfig {
        ticker_schedules: vec![AUTOMATIC[0].0.to_string()],
        ticker_schedule_group: group.clone(),
        ..reconciler_config()
    };
    let tickers = SchedulerTickers::new(deployment.scheduler("reconciler"), group);
    let reconciler = components
        .reconciler(signals.clone(), config)
        .with_ticker_check(Arc::new(tickers));
    let report = reconciler.reconcile(&ReconcileEvent::at(at)).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let released = components.backfill_releaser(Some(signals)).pass(at).await;
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
pub async fn recorded_calls() -> (Deployment, Vec<RecordedCall>) {
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
    // A window missed a few minutes ago: caught up on the correction lane.
    let soon = later + TimeDelta::minutes(12);
    clock.set(soon);
    reconciler_flows(&deployment, &clock, soon).await;
    worker_flows(&deployment, &clock).await;
    kill_switch_flows(&deployment, &clock).await;
    let calls = deployment.recorder.calls();
    (deployment, calls)
}
