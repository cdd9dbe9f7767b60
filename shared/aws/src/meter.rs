//! Request accounting: how many AWS calls (and HTTP attempts, and DynamoDB capacity units)
//! each store or lane operation costs, so later work can report requests per fired run.
//!
//! An SDK interceptor counts every call and every attempt (retries included). The store and
//! lane operations name themselves with [`metered`], a task-local scope the interceptor reads,
//! so a count is keyed by (scope, `Service.Operation`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use aws_sdk_dynamodb::types::ConsumedCapacity;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

tokio::task_local! {
    static SCOPE: &'static str;
}

const WRITE_OPERATIONS: &[&str] = &[
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "TransactWriteItems",
    "BatchWriteItem",
];

/// Scope name for calls made outside any [`metered`] block.
pub const UNSCOPED: &str = "-";

/// Runs `fut` with its AWS calls counted under `scope` (e.g. `create_run`).
pub async fn metered<F: Future>(scope: &'static str, fut: F) -> F::Output {
    SCOPE.scope(scope, fut).await
}

fn current_scope() -> &'static str {
    SCOPE.try_with(|s| *s).unwrap_or(UNSCOPED)
}

/// What one (scope, operation) pair cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Calls made by the code (one per SDK operation invocation).
    pub calls: u64,
    /// HTTP requests sent, retries included: what AWS bills and throttles.
    pub attempts: u64,
    pub read_units: f64,
    pub write_units: f64,
}

impl Usage {
    fn add(&mut self, other: &Usage) {
        self.calls += other.calls;
        self.attempts += other.attempts;
        self.read_units += other.read_units;
        self.write_units += other.write_units;
    }
}

/// A point-in-time copy of the counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeterSnapshot {
    /// Keyed by (scope, `Service.Operation`).
    pub usage: BTreeMap<(String, String), Usage>,
}

impl MeterSnapshot {
    pub fn total(&self) -> Usage {
        self.sum(|_, _| true)
    }

    /// Everything counted under one store or lane operation.
    pub fn scope(&self, scope: &str) -> Usage {
        self.sum(|s, _| s == scope)
    }

    /// Everything counted for one SDK operation (e.g. `DynamoDB.PutItem`), any scope.
    pub fn operation(&self, operation: &str) -> Usage {
        self.sum(|_, o| o == operation)
    }

    fn sum(&self, keep: impl Fn(&str, &str) -> bool) -> Usage {
        let mut total = Usage::default();
        for ((scope, op), usage) in &self.usage {
            if keep(scope, op) {
                total.add(usage);
            }
        }
        total
    }
}

/// Shared counters; cheap to clone. Attach it to SDK clients as an interceptor.
#[derive(Debug, Clone, Default)]
pub struct RequestMeter {
    counts: Arc<Mutex<BTreeMap<(String, String), Usage>>>,
}

impl RequestMeter {
    pub fn new() -> RequestMeter {
        RequestMeter::default()
    }

    pub fn snapshot(&self) -> MeterSnapshot {
        MeterSnapshot {
            usage: self.lock().clone(),
        }
    }

    /// Adds DynamoDB's reported capacity to the current scope. Emulators (and TOTAL mode)
    /// may report only the aggregate `CapacityUnits`, so the operation decides its kind.
    pub(crate) fn record_capacity<'a>(
        &self,
        operation: &str,
        capacity: impl IntoIterator<Item = &'a ConsumedCapacity>,
    ) {
        let units: f64 = capacity
            .into_iter()
            .map(|c| {
                c.capacity_units().unwrap_or_else(|| {
                    c.read_capacity_units().unwrap_or(0.0) + c.write_capacity_units().unwrap_or(0.0)
                })
            })
            .sum();
        let writes = WRITE_OPERATIONS.contains(&operation);
        self.update(&format!("DynamoDB.{operation}"), |u| {
            if writes {
                u.write_units += units;
            } else {
                u.read_units += units;
            }
        });
    }

    fn update(&self, operation: &str, f: impl FnOnce(&mut Usage)) {
        let key = (current_scope().to_string(), operation.to_string());
        f(self.lock().entry(key).or_default());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Usage>> {
        // Counters stay usable even if a panicking thread held the lock.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn operation_name(cfg: &ConfigBag) -> String {
    match cfg.load::<Metadata>() {
        Some(m) => format!("{}.{}", m.service(), m.name()),
        None => "unknown".to_string(),
    }
}

impl Intercept for RequestMeter {
    fn name(&self) -> &'static str {
        "cronledger.RequestMeter"
    }

    // Once per call, like `read_before_execution`, but late enough that the operation's
    // metadata is in the bag (a client-level interceptor runs `read_before_execution` before
    // the operation's configuration is applied, so every call would count as `unknown`).
    fn read_before_serialization(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.update(&operation_name(cfg), |u| u.calls += 1);
        Ok(())
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.update(&operation_name(cfg), |u| u.attempts += 1);
        Ok(())
    }
}
