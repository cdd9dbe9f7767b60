//! Request accounting: how many AWS calls (and HTTP attempts, and DynamoDB capacity units)
//! each store or lane operation costs, so later work can report requests per fired run.
//!
//! An SDK interceptor counts every call and every attempt (retries included). The store and
//! lane operations name themselves with [`metered`], a task-local scope the interceptor reads,
//! so a count is keyed by (scope, `Service.Operation`).
//!
//! DynamoDB's consumed capacity (asked for with `ReturnConsumedCapacity: INDEXES`) is also
//! kept by table and by index, and SQS requests by the 64 KB chunks SQS bills. The in-memory
//! store, which makes no SDK call, records the same things through [`RequestMeter::record_call`]
//! and [`RequestMeter::record_units`].

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use aws_sdk_dynamodb::types::{Capacity, ConsumedCapacity};
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

/// SQS bills every 64 KB chunk of a request's payload as one request.
const SQS_BILLED_CHUNK: u64 = 64 * 1024;

/// Scope name for calls made outside any [`metered`] block.
pub const UNSCOPED: &str = "-";

/// Runs `fut` with its AWS calls counted under `scope` (e.g. `create_run`).
pub async fn metered<F: Future>(scope: &'static str, fut: F) -> F::Output {
    SCOPE.scope(scope, fut).await
}

pub(crate) fn current_scope() -> &'static str {
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
    /// Requests as SQS bills them: one per started 64 KB of each attempt's payload (SQS
    /// calls only; 0 for DynamoDB, which bills by capacity units).
    pub billed_requests: u64,
    /// Responses that reported consumed capacity above zero (SDK calls only). A call without
    /// one is a write whose condition failed (its error carries no capacity) or a read an
    /// emulator reported as free; see the cost model's corrections.
    pub reported: u64,
}

impl Usage {
    fn add(&mut self, other: &Usage) {
        self.calls += other.calls;
        self.attempts += other.attempts;
        self.read_units += other.read_units;
        self.write_units += other.write_units;
        self.billed_requests += other.billed_requests;
        self.reported += other.reported;
    }
}

/// Read and write capacity units consumed in one table or index.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Units {
    pub read: f64,
    pub write: f64,
}

impl Units {
    pub fn read(units: f64) -> Units {
        Units {
            read: units,
            write: 0.0,
        }
    }

    pub fn write(units: f64) -> Units {
        Units {
            read: 0.0,
            write: units,
        }
    }

    fn add(&mut self, other: Units) {
        self.read += other.read;
        self.write += other.write;
    }
}

/// Where consumed capacity went: a table's own items, or one of its global secondary indexes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CapacityTarget {
    pub table: String,
    /// `None`: the table itself.
    pub index: Option<String>,
}

/// A point-in-time copy of the counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeterSnapshot {
    /// Keyed by (scope, `Service.Operation`).
    pub usage: BTreeMap<(String, String), Usage>,
    /// Consumed capacity by table and index, as DynamoDB (or the in-memory store's model)
    /// reported it. Sums to `total()`'s units when every response broke its units down.
    pub capacity: BTreeMap<CapacityTarget, Units>,
    /// Bytes DynamoDB would bill as storage for the items written (with their index entries
    /// and per-item overhead), as of each item's last write: recorded by the in-memory store
    /// only (DynamoDB's responses do not say).
    pub stored_bytes: u64,
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

    /// Units consumed in one table's own items (`index: None`) or one of its indexes.
    pub fn units_in(&self, table: &str, index: Option<&str>) -> Units {
        self.capacity
            .get(&CapacityTarget {
                table: table.to_string(),
                index: index.map(str::to_string),
            })
            .copied()
            .unwrap_or_default()
    }

    /// Units consumed per index name, over every table.
    pub fn by_index(&self) -> BTreeMap<String, Units> {
        let mut by_index: BTreeMap<String, Units> = BTreeMap::new();
        for (target, units) in &self.capacity {
            if let Some(index) = &target.index {
                by_index.entry(index.clone()).or_default().add(*units);
            }
        }
        by_index
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
    counts: Arc<Mutex<MeterSnapshot>>,
    /// Billed storage by item key (PK, SK).
    stored: Arc<Mutex<HashMap<(String, String), u64>>>,
    /// Consumed capacity second by second, when a clock is attached ([`RequestMeter::timed_by`]).
    timeline: Arc<Mutex<Option<Timeline>>>,
}

/// The current second as a number (Unix seconds, virtual or real).
pub type SecondClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Units by target and by the second they were consumed in.
struct Timeline {
    clock: SecondClock,
    seconds: BTreeMap<CapacityTarget, BTreeMap<i64, Units>>,
}

impl std::fmt::Debug for Timeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeline")
            .field("targets", &self.seconds.len())
            .finish()
    }
}

impl RequestMeter {
    pub fn new() -> RequestMeter {
        RequestMeter::default()
    }

    /// From now on, also records each unit under the second `clock` says it is (the
    /// simulator's virtual clock): what provisioned capacity is sized from.
    pub fn timed_by(&self, clock: SecondClock) {
        *self.timeline.lock().unwrap_or_else(PoisonError::into_inner) = Some(Timeline {
            clock,
            seconds: BTreeMap::new(),
        });
    }

    /// The units recorded since [`RequestMeter::timed_by`], by target and second (empty when
    /// no clock is attached).
    pub fn units_by_second(&self) -> BTreeMap<CapacityTarget, BTreeMap<i64, Units>> {
        self.timeline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|t| t.seconds.clone())
            .unwrap_or_default()
    }

    fn time(&self, target: &CapacityTarget, units: Units) {
        let mut timeline = self.timeline.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(timeline) = timeline.as_mut() {
            let second = (timeline.clock)();
            timeline
                .seconds
                .entry(target.clone())
                .or_default()
                .entry(second)
                .or_default()
                .add(units);
        }
    }

    pub fn snapshot(&self) -> MeterSnapshot {
        let stored_bytes = self
            .stored
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .sum();
        MeterSnapshot {
            stored_bytes,
            ..self.lock().clone()
        }
    }

    /// Notes the billed storage of the item at (`pk`, `sk`) after a write (the in-memory
    /// store's; it replaces what the item took before).
    pub fn record_stored(&self, pk: String, sk: String, bytes: u64) {
        self.stored
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((pk, sk), bytes);
    }

    /// Adds DynamoDB's reported capacity to the current scope, and to each table and index
    /// the response breaks it down to (`ReturnConsumedCapacity: INDEXES`). Emulators (and
    /// TOTAL mode) may report only the aggregate `CapacityUnits`, so the operation decides
    /// its kind.
    pub(crate) fn record_capacity<'a>(
        &self,
        operation: &str,
        capacity: impl IntoIterator<Item = &'a ConsumedCapacity>,
    ) {
        let writes = WRITE_OPERATIONS.contains(&operation);
        let as_units = |units: f64| {
            if writes {
                Units::write(units)
            } else {
                Units::read(units)
            }
        };
        let mut total = Units::default();
        let mut parts: Vec<(CapacityTarget, Units)> = Vec::new();
        for c in capacity {
            total.add(as_units(c.capacity_units().unwrap_or_else(|| {
                c.read_capacity_units().unwrap_or(0.0) + c.write_capacity_units().unwrap_or(0.0)
            })));
            let table = c.table_name().unwrap_or_default().to_string();
            if let Some(own) = c.table() {
                let target = CapacityTarget {
                    table: table.clone(),
                    index: None,
                };
                parts.push((target, as_units(capacity_of(own))));
            }
            for (index, used) in c.global_secondary_indexes().into_iter().flatten() {
                let target = CapacityTarget {
                    table: table.clone(),
                    index: Some(index.clone()),
                };
                parts.push((target, as_units(capacity_of(used))));
            }
        }
        let mut counts = self.lock();
        let key = (current_scope().to_string(), format!("DynamoDB.{operation}"));
        let usage = counts.usage.entry(key).or_default();
        usage.read_units += total.read;
        usage.write_units += total.write;
        if total.read + total.write > 0.0 {
            usage.reported += 1;
        }
        // The timeline has a lock of its own, only ever taken after this one.
        for (target, units) in parts {
            self.time(&target, units);
            counts.capacity.entry(target).or_default().add(units);
        }
    }

    /// Counts one call of a DynamoDB operation (e.g. `"PutItem"`) made without the SDK (the
    /// in-memory store), as one call and one attempt under the current scope.
    pub fn record_call(&self, operation: &str) {
        self.update(&format!("DynamoDB.{operation}"), |u| {
            u.calls += 1;
            u.attempts += 1;
        });
    }

    /// Adds capacity units consumed by a DynamoDB operation made without the SDK to the
    /// current scope and to `target` (the table, or one of its indexes).
    pub fn record_units(&self, operation: &str, target: CapacityTarget, units: Units) {
        let mut counts = self.lock();
        let key = (current_scope().to_string(), format!("DynamoDB.{operation}"));
        let usage = counts.usage.entry(key).or_default();
        usage.read_units += units.read;
        usage.write_units += units.write;
        self.time(&target, units);
        counts.capacity.entry(target).or_default().add(units);
    }

    fn update(&self, operation: &str, f: impl FnOnce(&mut Usage)) {
        let key = (current_scope().to_string(), operation.to_string());
        f(self.lock().usage.entry(key).or_default());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MeterSnapshot> {
        // Counters stay usable even if a panicking thread held the lock.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A [`Capacity`]'s units: the total when given, else reads plus writes.
fn capacity_of(c: &Capacity) -> f64 {
    c.capacity_units().unwrap_or_else(|| {
        c.read_capacity_units().unwrap_or(0.0) + c.write_capacity_units().unwrap_or(0.0)
    })
}

/// Requests SQS bills for a payload of `bytes`: one per started 64 KB, at least one.
pub fn sqs_billed_requests(bytes: u64) -> u64 {
    bytes.div_ceil(SQS_BILLED_CHUNK).max(1)
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
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = operation_name(cfg);
        // The request body stands for the payload: the envelope around the messages is
        // small next to SQS's 64 KB chunk.
        let billed = operation.starts_with("SQS.").then(|| {
            let bytes = context.request().body().content_length().unwrap_or(0);
            sqs_billed_requests(bytes)
        });
        self.update(&operation, |u| {
            u.attempts += 1;
            u.billed_requests += billed.unwrap_or(0);
        });
        Ok(())
    }
}
