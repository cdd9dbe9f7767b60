//! What the simulated functions would be billed for beyond DynamoDB: SQS requests as the
//! deployed functions make them, Lambda invocations and GB-seconds, the bytes of the log
//! lines they write, and the custom metrics their EMF documents create. The simulator calls
//! in at each invocation's end; [`Bill::measured`] turns it, with the meter, into the cost
//! model's input.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cronledger_aws::MeterSnapshot;
use serde::Serialize;
use serde_json::Value;
use tracing_subscriber::fmt::MakeWriter;

use crate::cost::{Capacity, Corrections};
use crate::metrics::Metrics;

/// Each function's `MemorySize` in `infra/template.yaml` (a test holds them to it).
pub const MEMORY_MB: &[(&str, u32)] = &[
    ("ticker", 256),
    ("worker", 256),
    ("reconciler", 512),
    ("api", 256),
];

pub(super) fn memory_gb(function: &str) -> f64 {
    let mb = MEMORY_MB
        .iter()
        .find(|(f, _)| *f == function)
        .map_or(256, |(_, mb)| *mb);
    f64::from(mb) / 1024.0
}

tokio::task_local! {
    /// Wall time the current invocation spent waiting on the virtual clock (its job's
    /// duration passing), which is not handler time.
    static VIRTUAL_WAIT: Cell<Duration>;
}

/// Runs one invocation's handler: its output, and the wall time it took beyond the waits on
/// the virtual clock that [`note_virtual_wait`] reported.
pub async fn handler_time<F: Future>(handler: F) -> (F::Output, Duration) {
    let started = Instant::now();
    let (output, waited) = VIRTUAL_WAIT
        .scope(Cell::new(Duration::ZERO), async {
            let output = handler.await;
            (output, VIRTUAL_WAIT.with(Cell::get))
        })
        .await;
    (output, started.elapsed().saturating_sub(waited))
}

/// Notes wall time the current invocation spent waiting on the virtual clock.
pub fn note_virtual_wait(waited: Duration) {
    let _ = VIRTUAL_WAIT.try_with(|w| w.set(w.get() + waited));
}

/// The span `lambda_runtime` opens around each invocation: every JSON log line repeats it
/// (ids of the lengths Lambda gives).
pub fn invocation_span() -> tracing::Span {
    tracing::info_span!(
        "Lambda runtime invoke",
        requestId = "00000000-0000-0000-0000-000000000000",
        xrayTraceId = "Root=1-00000000-000000000000000000000000;Parent=0000000000000000;Sampled=0"
    )
}

/// Invocations of one function and their billed time.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FunctionUsage {
    pub invocations: u64,
    /// Lambda bills each invocation by the started millisecond.
    pub billed_ms: u64,
    /// Of `billed_ms`, the handlers' own (measured) time, the rest being the jobs' virtual
    /// durations.
    pub handler_ms: u64,
}

/// The simulation's non-DynamoDB bill, filled in as it runs. Cheap to share.
#[derive(Debug, Clone, Default)]
pub struct Bill {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    sqs_requests: AtomicU64,
    log_bytes: AtomicU64,
    functions: Mutex<BTreeMap<&'static str, FunctionUsage>>,
    metrics: Mutex<BTreeSet<String>>,
}

impl Bill {
    /// `n` SQS requests a deployed function or event source would make.
    pub fn sqs(&self, n: u64) {
        self.inner.sqs_requests.fetch_add(n, Ordering::Relaxed);
    }

    /// One invocation of `function`: `job` of virtual time plus `handler` of wall time.
    pub fn invocation(&self, function: &'static str, job: Duration, handler: Duration) {
        let handler_ms = handler.as_micros().div_ceil(1000) as u64;
        let billed_ms = (job + handler).as_micros().div_ceil(1000) as u64;
        let mut functions = self
            .inner
            .functions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let usage = functions.entry(function).or_default();
        usage.invocations += 1;
        usage.billed_ms += billed_ms.max(1);
        usage.handler_ms += handler_ms;
    }

    /// Flushes `metrics` as `function` would at its invocation's end: the EMF lines count
    /// as log bytes, and each (namespace, metric, dimension set and values) as a metric.
    pub fn flush_metrics(&self, metrics: &Metrics, function: &str) {
        let docs = metrics.drain(function, chrono::DateTime::UNIX_EPOCH);
        let mut seen = self
            .inner
            .metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for doc in docs {
            let line_bytes = doc.to_string().len() as u64 + 1;
            self.inner
                .log_bytes
                .fetch_add(line_bytes, Ordering::Relaxed);
            seen.extend(emf_metrics(&doc));
        }
    }

    /// A tracing dispatcher that formats events as the deployed functions do (their own
    /// subscriber, [`crate::logging::function_logs`], under the template's `LogFormat: JSON`
    /// at INFO) and counts the bytes instead of writing them.
    pub fn log_dispatch(&self) -> tracing::Dispatch {
        tracing::Dispatch::new(crate::logging::function_logs(
            true,
            tracing_subscriber::filter::LevelFilter::INFO,
            self.clone(),
        ))
    }

    pub fn functions(&self) -> BTreeMap<&'static str, FunctionUsage> {
        self.inner
            .functions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The pinned capacity figures: DynamoDB's from the meter (corrected), the rest from
    /// what was counted here.
    pub fn capacity(
        &self,
        dynamodb: &MeterSnapshot,
        emulator: bool,
        runs: u64,
    ) -> (Capacity, Corrections) {
        let (wru, rru, corrections) = corrected_units(dynamodb, emulator);
        let functions = self.functions();
        let capacity = Capacity {
            wru,
            rru,
            sqs_requests: self.inner.sqs_requests.load(Ordering::Relaxed),
            lambda_invocations: functions.values().map(|f| f.invocations).sum(),
            lambda_gb_seconds: functions
                .iter()
                .map(|(f, u)| u.billed_ms as f64 / 1000.0 * memory_gb(f))
                .sum(),
            log_bytes: self.inner.log_bytes.load(Ordering::Relaxed),
            custom_metrics: self
                .inner
                .metrics
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len() as u64,
            runs,
            // Set from the second-by-second profile (see `costing`).
            peak_wcu_per_s: 0.0,
            peak_rcu_per_s: 0.0,
        };
        (capacity, corrections)
    }
}

/// Every metric a document publishes: one per metric name and dimension set, keyed by the
/// dimension values it carries.
fn emf_metrics(doc: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let Some(directives) = doc["_aws"]["CloudWatchMetrics"].as_array() else {
        return found;
    };
    for directive in directives {
        let namespace = directive["Namespace"].as_str().unwrap_or_default();
        let names: Vec<&str> = directive["Metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["Name"].as_str())
            .collect();
        for set in directive["Dimensions"].as_array().into_iter().flatten() {
            let dims: Vec<String> = set
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|d| format!("{d}={}", doc[d].as_str().unwrap_or_default()))
                .collect();
            for name in &names {
                found.push(format!("{namespace}|{name}|{}", dims.join(",")));
            }
        }
    }
    found
}

/// The meter's DynamoDB units, with the emulator's known gaps filled in (see
/// [`Corrections`]): DynamoDB Local reports transactions (doubled) and index writes
/// (entering, leaving, a key change twice) as DynamoDB does, but a failed conditional write
/// carries no capacity and an empty Query is reported as 0 units.
pub fn corrected_units(snapshot: &MeterSnapshot, emulator: bool) -> (f64, f64, Corrections) {
    let mut wru = 0.0;
    let mut rru = 0.0;
    let mut corrections = Corrections::default();
    for ((_, operation), usage) in &snapshot.usage {
        let Some(name) = operation.strip_prefix("DynamoDB.") else {
            continue;
        };
        wru += usage.write_units;
        rru += usage.read_units;
        if !emulator {
            continue;
        }
        let unreported = usage.calls.saturating_sub(usage.reported);
        match name {
            "PutItem" | "UpdateItem" | "DeleteItem" => {
                corrections.unreported_writes += unreported;
                corrections.added_wru += unreported as f64;
            }
            "TransactWriteItems" => {
                corrections.unreported_writes += unreported;
                corrections.added_wru += 2.0 * unreported as f64;
            }
            "Query" | "GetItem" => {
                corrections.unreported_reads += unreported;
                corrections.added_rru += 0.5 * unreported as f64;
            }
            _ => {}
        }
    }
    (
        wru + corrections.added_wru,
        rru + corrections.added_rru,
        corrections,
    )
}

/// Counts what the log subscriber writes.
#[derive(Debug, Clone)]
pub struct CountingWriter(Arc<Inner>);

impl io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .log_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Bill {
    type Writer = CountingWriter;

    fn make_writer(&'a self) -> CountingWriter {
        CountingWriter(self.inner.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metric;

    const TEMPLATE: &str = include_str!("../../../../infra/template.yaml");

    /// `MemorySize` of a function's resource block, else the template's global one.
    fn template_memory(function: &str) -> u32 {
        let memory_in = |block: &str| -> Option<u32> {
            block
                .lines()
                .find_map(|l| l.trim().strip_prefix("MemorySize:"))
                .and_then(|v| v.trim().parse().ok())
        };
        // A block ends where the next two-space-indented key starts.
        let block_after = |header: &str| -> &str {
            let rest = TEMPLATE.split(header).nth(1).unwrap_or_default();
            let end = rest
                .match_indices("\n  ")
                .map(|(i, _)| i)
                .find(|i| rest[i + 3..].starts_with(|c: char| c.is_ascii_alphabetic()))
                .unwrap_or(rest.len());
            &rest[..end]
        };
        let global = memory_in(block_after("\nGlobals:\n")).expect("a global MemorySize");
        let mut name = function.to_string();
        name[..1].make_ascii_uppercase();
        let own = block_after(&format!("\n  {name}Function:\n"));
        assert!(!own.is_empty(), "{name}Function is in the template");
        memory_in(own).unwrap_or(global)
    }

    #[test]
    fn memory_sizes_match_the_template() {
        for (function, mb) in MEMORY_MB {
            assert_eq!(template_memory(function), *mb, "{function}");
        }
    }

    #[test]
    fn counts_one_metric_per_name_and_dimension_values() {
        let bill = Bill::default();
        let m = Metrics::new();
        m.count(Metric::RunsCreated, 1);
        m.put_for("a", Metric::StartDelay, 5.0);
        bill.flush_metrics(&m, "worker");
        m.put_for("a", Metric::StartDelay, 7.0);
        m.put_for("b", Metric::StartDelay, 7.0);
        bill.flush_metrics(&m, "worker");
        let (capacity, _) = bill.capacity(&MeterSnapshot::default(), false, 1);
        // RunsCreated{Function}; StartDelay{Function}: the schedule is a property, so more
        // schedules publish no more metrics.
        assert_eq!(capacity.custom_metrics, 2);
        assert!(capacity.log_bytes > 0, "EMF lines are log lines");
    }

    #[test]
    fn bills_invocations_by_the_started_millisecond() {
        let bill = Bill::default();
        bill.invocation(
            "worker",
            Duration::from_millis(200),
            Duration::from_micros(1500),
        );
        bill.invocation("reconciler", Duration::ZERO, Duration::from_micros(10));
        let (capacity, _) = bill.capacity(&MeterSnapshot::default(), false, 1);
        assert_eq!(capacity.lambda_invocations, 2);
        let expected = 0.202 * 0.25 + 0.001 * 0.5;
        assert!((capacity.lambda_gb_seconds - expected).abs() < 1e-12);
    }

    #[test]
    fn counts_the_json_log_lines_the_functions_would_write() {
        let bill = Bill::default();
        tracing::dispatcher::with_default(&bill.log_dispatch(), || {
            tracing::info!(run = "r1", "run finished");
            tracing::debug!("not at INFO");
        });
        let (capacity, _) = bill.capacity(&MeterSnapshot::default(), false, 1);
        let line = r#"{"level":"INFO","fields":{"message":"run finished","run":"r1"}}"#;
        assert_eq!(capacity.log_bytes, line.len() as u64 + 1);
    }
}
