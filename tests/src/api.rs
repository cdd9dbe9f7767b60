//! Helpers for the api tests: the router on an [`AppEnv`] (its table, lanes and virtual
//! clock), callers of each role, a fake EventBridge Scheduler, and one-call requests through
//! the router with `tower::ServiceExt::oneshot`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::Router;
use chrono::{DateTime, Utc};
use cronledger_app::alerting::Alerter;
use cronledger_app::api::system::ControlError;
use cronledger_app::api::{Api, ApiConfig, ApiDeps, AuthConfig, Caller, SystemControl};
use cronledger_app::auditor::{Auditor, AuditorConfig};
use cronledger_app::backfill::{BackfillPassReport, BackfillReleaser};
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::{
    AlertStore, HealthStore, MemoryNotifier, MemoryStore, OpsStore, RequestMeter,
};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use crate::app::AppEnv;

/// Principals of the tests' role mapping.
pub const VIEWER: &str = "arn:aws:iam::111122223333:user/viewer";
pub const OPERATOR: &str = "arn:aws:sts::111122223333:assumed-role/Ops/session-1";
pub const ADMIN: &str = "arn:aws:iam::111122223333:user/admin";
/// An admin who may also create `lambda` jobs (the allowlisted type).
pub const LAMBDA_ADMIN: &str = "arn:aws:iam::111122223333:user/lambda-admin";
/// Authenticated, but without any role.
pub const STRANGER: &str = "arn:aws:iam::111122223333:user/stranger";

pub fn auth_config() -> AuthConfig {
    AuthConfig::parse(&format!(
        r#"{{"roles": {{"{VIEWER}": "viewer", "arn:aws:sts::111122223333:assumed-role/Ops/*": "operator",
             "{ADMIN}": "admin", "{LAMBDA_ADMIN}": "admin", "group:platform-admins": "admin"}},
            "job_types": {{"lambda": ["{LAMBDA_ADMIN}", "group:platform-admins"]}}}}"#
    ))
    .expect("test auth config")
}

/// EventBridge Scheduler as a map of schedule names to enabled, plus the one-time schedules
/// created.
#[derive(Default)]
pub struct FakeScheduler {
    pub states: Mutex<BTreeMap<String, bool>>,
    pub one_time: Mutex<Vec<(String, DateTime<Utc>, Value)>>,
}

impl FakeScheduler {
    pub fn new(names: &[&str]) -> Arc<FakeScheduler> {
        let fake = FakeScheduler::default();
        *lock(&fake.states) = names.iter().map(|n| (n.to_string(), true)).collect();
        Arc::new(fake)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[async_trait]
impl SystemControl for FakeScheduler {
    fn automatic(&self) -> Vec<String> {
        lock(&self.states).keys().cloned().collect()
    }

    async fn enabled(&self, name: &str) -> Result<Option<bool>, ControlError> {
        Ok(lock(&self.states).get(name).copied())
    }

    async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), ControlError> {
        lock(&self.states).insert(name.to_string(), enabled);
        Ok(())
    }

    async fn create_one_time(
        &self,
        name: &str,
        at: DateTime<Utc>,
        input: &Value,
    ) -> Result<(), ControlError> {
        lock(&self.one_time).push((name.to_string(), at, input.clone()));
        Ok(())
    }
}

/// An answer: status, JSON body (Null when empty or not JSON), headers.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
    pub headers: HeaderMap,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

pub struct ApiEnv {
    pub env: AppEnv,
    pub api: Api,
    pub router: Router,
    pub scheduler: Arc<FakeScheduler>,
    /// The auditor behind `POST /v1/audit/runs` (its metric kept for the test to read).
    pub auditor: Arc<Auditor>,
    /// Where its alerts are published.
    pub notifier: Arc<MemoryNotifier>,
}

impl ApiEnv {
    pub async fn new(now: DateTime<Utc>) -> ApiEnv {
        ApiEnv::with_config(now, ApiConfig::default()).await
    }

    pub async fn with_config(now: DateTime<Utc>, config: ApiConfig) -> ApiEnv {
        let env = AppEnv::new(LaneSettings::default(), now).await;
        let table = Arc::new(env.ledger.ledger.clone());
        ApiEnv::assemble(env, table, config)
    }

    /// The same api, workers included, on the in-memory store the simulator runs on instead
    /// of the table (the lanes stay the emulator's queues): a test written once over
    /// [`ApiEnv::on`] holds on both stores.
    pub async fn in_memory(now: DateTime<Utc>) -> ApiEnv {
        let mut env = AppEnv::new(LaneSettings::default(), now).await;
        let memory = Arc::new(MemoryStore::new(crate::SHARDS, RequestMeter::new()));
        env.store = memory.clone();
        ApiEnv::assemble(env, memory, ApiConfig::default())
    }

    /// [`ApiEnv::new`] on DynamoDB (`memory: false`) or [`ApiEnv::in_memory`].
    pub async fn on(memory: bool, now: DateTime<Utc>) -> ApiEnv {
        if memory {
            ApiEnv::in_memory(now).await
        } else {
            ApiEnv::new(now).await
        }
    }

    /// The api over `env`'s lanes and clock, with `stores` (the same ledger as `env.store`)
    /// behind its operations, health counters and alerts.
    fn assemble<S>(env: AppEnv, stores: Arc<S>, config: ApiConfig) -> ApiEnv
    where
        S: OpsStore + HealthStore + AlertStore + 'static,
    {
        let scheduler = FakeScheduler::new(&["cronledger-ticker", "cronledger-reconciler"]);
        let ops: Arc<dyn OpsStore> = stores.clone();
        let notifier = Arc::new(MemoryNotifier::new());
        let auditor = Arc::new(
            Auditor::new(
                env.store.clone(),
                Arc::new(env.clock.clone()),
                AuditorConfig::default(),
            )
            .with_alerts(Arc::new(Alerter::new(stores.clone(), notifier.clone())))
            .keeping_metrics(),
        );
        let api = Api::new(ApiDeps {
            store: env.store.clone(),
            ops,
            health: Some(stores),
            lanes: env.queue.clone(),
            clock: Arc::new(env.clock.clone()),
            system: Some(scheduler.clone()),
            signals: None,
            auditor: Some(auditor.clone()),
            auth: auth_config(),
            config,
        });
        let router = api.router();
        ApiEnv {
            env,
            api,
            router,
            scheduler,
            auditor,
            notifier,
        }
    }

    /// The backfill release step on the same store and lanes.
    pub fn releaser(&self) -> BackfillReleaser {
        BackfillReleaser {
            store: self.env.store.clone(),
            ops: Arc::new(self.env.ledger.ledger.clone()),
            lanes: self.env.queue.clone(),
            signals: None,
            alerter: None,
        }
    }

    /// Receives what `lane` holds and hands it to a worker, until nothing comes; how many
    /// messages it handled.
    pub async fn drain(&self, lane: cronledger_core::Lane) -> usize {
        let worker = self.env.worker(crate::app::worker_config("api-tests"));
        let mut handled = 0;
        loop {
            let got = self
                .env
                .receive(lane, false, 10, std::time::Duration::from_millis(600))
                .await;
            if got.is_empty() {
                return handled;
            }
            handled += got.len();
            self.env.deliver(&worker, lane, &got).await;
        }
    }

    pub async fn release(&self) -> BackfillPassReport {
        let report = self.releaser().pass(self.env.clock.now_value()).await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        report
    }

    /// A request as `who` (a principal; `None`: no identity), with a JSON body.
    pub async fn call(
        &self,
        who: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        self.call_with(who.map(Caller::new), method, path, body, &[])
            .await
    }

    /// `GET path` as `who`.
    pub async fn get(&self, who: &str, path: &str) -> Answer {
        self.call(Some(who), Method::GET, path, None).await
    }

    /// `POST path` as `who`.
    pub async fn post(&self, who: &str, path: &str, body: Option<Value>) -> Answer {
        self.call(Some(who), Method::POST, path, body).await
    }

    /// `PUT path` as `who`.
    pub async fn put(&self, who: &str, path: &str, body: Option<Value>) -> Answer {
        self.call(Some(who), Method::PUT, path, body).await
    }

    /// `DELETE path` as `who`.
    pub async fn delete(&self, who: &str, path: &str, body: Option<Value>) -> Answer {
        self.call(Some(who), Method::DELETE, path, body).await
    }

    pub async fn call_with(
        &self,
        caller: Option<Caller>,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        self.raw(caller, method, path, bytes, headers).await
    }

    /// Any bytes as the body (malformed JSON, oversize bodies).
    pub async fn raw(
        &self,
        caller: Option<Caller>,
        method: Method,
        path: &str,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let method_text = method.to_string();
        let mut req = Request::builder().method(method).uri(path);
        if !body.is_empty()
            && !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        {
            req = req.header("content-type", "application/json");
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let mut req = req.body(Body::from(body)).expect("a request");
        if let Some(caller) = caller {
            req.extensions_mut().insert(caller);
        }
        let resp = self
            .router
            .clone()
            .oneshot(req)
            .await
            .expect("the router answers");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.expect("a body").to_bytes();
        let content_type = headers.get("content-type").and_then(|v| v.to_str().ok());
        crate::contract::check(&method_text, path, status.as_u16(), content_type, &bytes);
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer {
            status,
            body,
            headers,
        }
    }
}

/// Reads the virtual clock (the tests' `ManualClock` is behind the `Clock` trait).
pub trait NowValue {
    fn now_value(&self) -> DateTime<Utc>;
}

impl NowValue for cronledger_app::clock::ManualClock {
    fn now_value(&self) -> DateTime<Utc> {
        cronledger_app::clock::Clock::now(self)
    }
}
