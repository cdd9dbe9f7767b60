//! CloudWatch Embedded Metric Format: metrics are JSON log lines that CloudWatch Logs turns
//! into metrics, with no API call and no extra latency in the function.
//!
//! Every metric has one dimension set, `{Function}`: the custom-metric count (what CloudWatch
//! bills) is fixed by [`CATALOG`], whatever the fleet's size. A value put for a schedule goes
//! in a document that names the schedule as a plain property (`Schedule`), not a dimension:
//! it adds to the function-wide metric, and per-schedule figures stay queryable from the log
//! lines with CloudWatch Logs Insights.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

pub const NAMESPACE: &str = "cronledger";

/// The only dimension set: bounded by the three functions.
pub const DIMENSIONS: &[&str] = &["Function"];

/// Every metric each function emits. With [`DIMENSIONS`] this is the whole set of custom
/// metrics the system can publish (names × functions), independent of the schedule count.
pub const CATALOG: &[(&str, &[&str])] = &[
    (
        "ticker",
        &[
            "TickErrors",
            "WindowsLeftForReconciler",
            "RunsCreated",
            "RunsSkipped",
            "LostDispatchesResent",
        ],
    ),
    (
        "worker",
        &[
            "DeliveriesHeldByKillSwitch",
            "RunsStarted",
            "StartDelay",
            "ReleaseDelay",
            "RunsMovedToCorrection",
            "RunsSkipped",
            "RunsFailed",
            "RunsHeldForApproval",
            "RunsCoalesced",
            "RunsWaitingForResume",
            "RunsHeldOutcomeUnknown",
            "RunsHeldByGuard",
            "RunsAwaitingPlan",
            "RunsSucceeded",
            "AttemptsRetried",
            "RunDuration",
        ],
    ),
    (
        "reconciler",
        &[
            "LateBacklogPlannedInPart",
            "LateRunsPlanned",
            "StuckRuns",
            "MissedWindows",
            "CatchUpRunsCreated",
            "WindowsSkipped",
            "WindowsCoalesced",
            "WindowsAwaitingApproval",
            "CatchUpReleasePaused",
            "CatchUpReleaseResumed",
            "CatchUpReleased",
            "ReconcileErrors",
            "TickerScheduleUnhealthy",
            "BackfillsProposed",
        ],
    ),
];

/// How many custom metrics the whole system can publish: one per cataloged name and function.
pub fn custom_metric_bound() -> usize {
    CATALOG.iter().map(|(_, names)| names.len()).sum()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unit {
    Count,
    Milliseconds,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

type Key = (Option<String>, &'static str, Unit);
/// The values of one EMF document: per metric name and unit.
type Samples = BTreeMap<(&'static str, Unit), Vec<f64>>;

/// Collects metric values during one invocation and writes them as EMF lines at the end.
#[derive(Clone, Default)]
pub struct Metrics {
    values: Arc<Mutex<BTreeMap<Key, Vec<f64>>>>,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// A function-wide value.
    pub fn put(&self, name: &'static str, unit: Unit, value: f64) {
        self.push(None, name, unit, value);
    }

    /// A value about one schedule: published function-wide, with the schedule as a property
    /// of its document (see the module note).
    pub fn put_for(&self, schedule: &str, name: &'static str, unit: Unit, value: f64) {
        self.push(Some(schedule.to_string()), name, unit, value);
    }

    pub fn count(&self, name: &'static str, n: u64) {
        self.put(name, Unit::Count, n as f64);
    }

    pub fn count_for(&self, schedule: &str, name: &'static str, n: u64) {
        self.put_for(schedule, name, Unit::Count, n as f64);
    }

    fn push(&self, schedule: Option<String>, name: &'static str, unit: Unit, value: f64) {
        self.lock()
            .entry((schedule, name, unit))
            .or_default()
            .push(value);
    }

    /// The EMF documents for everything collected, emptying the collector: one for the
    /// function-wide values, one per schedule named.
    pub fn drain(&self, function: &str, at: DateTime<Utc>) -> Vec<Value> {
        let values = std::mem::take(&mut *self.lock());
        let mut docs: BTreeMap<Option<String>, Samples> = BTreeMap::new();
        for ((schedule, name, unit), v) in values {
            docs.entry(schedule)
                .or_default()
                .entry((name, unit))
                .or_default()
                .extend(v);
        }
        docs.into_iter()
            .map(|(schedule, metrics)| document(function, schedule.as_deref(), at, &metrics))
            .collect()
    }

    /// Writes the EMF documents to stdout, one line each (Lambda ships stdout to CloudWatch).
    pub fn flush(&self, function: &str, at: DateTime<Utc>) {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for doc in self.drain(function, at) {
            let _ = writeln!(out, "{doc}");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, Vec<f64>>> {
        self.values.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The custom metrics EMF documents publish, as CloudWatch counts them: one per metric name
/// and set of dimension values (what the cost model bills).
pub fn custom_metrics(docs: &[Value]) -> BTreeSet<(String, Vec<(String, String)>)> {
    let mut metrics = BTreeSet::new();
    for doc in docs {
        let Some(directives) = doc["_aws"]["CloudWatchMetrics"].as_array() else {
            continue;
        };
        for directive in directives {
            let names = directive["Metrics"].as_array().into_iter().flatten();
            let names: Vec<&str> = names.filter_map(|m| m["Name"].as_str()).collect();
            let sets = directive["Dimensions"].as_array().into_iter().flatten();
            for set in sets.filter_map(Value::as_array) {
                let dimensions: Vec<(String, String)> = set
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|d| (d.to_string(), doc[d].as_str().unwrap_or("").to_string()))
                    .collect();
                for name in &names {
                    metrics.insert((name.to_string(), dimensions.clone()));
                }
            }
        }
    }
    metrics
}

fn document(function: &str, schedule: Option<&str>, at: DateTime<Utc>, metrics: &Samples) -> Value {
    let definitions: Vec<Value> = metrics
        .keys()
        .map(|(name, unit)| json!({"Name": name, "Unit": unit.as_str()}))
        .collect();
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": at.timestamp_millis(),
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [DIMENSIONS],
                "Metrics": definitions,
            }],
        }),
    );
    doc.insert("Function".into(), Value::from(function));
    if let Some(s) = schedule {
        // A property: kept in the log line for Logs Insights, never a dimension.
        doc.insert("Schedule".into(), Value::from(s));
    }
    for ((name, _), values) in metrics {
        // Several samples go as a list; CloudWatch aggregates them (Sum, Average, pNN).
        let value = if values.len() == 1 {
            Value::from(values[0])
        } else {
            Value::from(values.clone())
        };
        doc.insert((*name).to_string(), value);
    }
    Value::Object(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        "2026-01-01T00:00:00Z".parse().expect("instant")
    }

    #[test]
    fn writes_valid_emf_with_the_schedule_as_a_property() {
        let m = Metrics::new();
        m.count("RunsCreated", 3);
        m.count_for("daily", "MissedWindows", 2);
        m.put_for("daily", "StartDelay", Unit::Milliseconds, 120.0);
        m.put_for("daily", "StartDelay", Unit::Milliseconds, 80.0);
        let docs = m.drain("ticker", at());
        assert_eq!(docs.len(), 2);
        let global = &docs[0];
        assert_eq!(global["RunsCreated"], 3.0);
        assert!(global.get("Schedule").is_none());
        let daily = &docs[1];
        assert_eq!(daily["Schedule"], "daily");
        assert_eq!(daily["MissedWindows"], 2.0);
        assert_eq!(daily["StartDelay"], json!([120.0, 80.0]));
        for doc in &docs {
            assert_eq!(
                doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
                json!([["Function"]]),
                "the schedule is never a dimension"
            );
        }
        assert!(m.drain("ticker", Utc::now()).is_empty(), "drained");
    }

    /// Puts every worker metric for `schedules` schedules and returns the custom metrics the
    /// documents publish.
    fn worker_metrics_for(schedules: usize) -> BTreeSet<(String, Vec<(String, String)>)> {
        let m = Metrics::new();
        let (_, names) = CATALOG
            .iter()
            .find(|(function, _)| *function == "worker")
            .expect("worker metrics");
        for i in 0..schedules {
            for &name in names.iter() {
                m.count_for(&format!("s{i:06}"), name, 1);
            }
        }
        custom_metrics(&m.drain("worker", at()))
    }

    #[test]
    fn the_custom_metric_count_does_not_grow_with_the_schedule_count() {
        let one = worker_metrics_for(1);
        let many = worker_metrics_for(2_000);
        assert_eq!(one, many);
        assert_eq!(one.len(), 16, "one metric per worker name: {one:?}");
        assert!(one
            .iter()
            .all(|(_, dims)| dims == &[("Function".to_string(), "worker".to_string())]));
    }

    #[test]
    fn the_whole_system_publishes_a_fixed_number_of_custom_metrics() {
        assert_eq!(custom_metric_bound(), 35);
        for (function, names) in CATALOG {
            let unique: BTreeSet<&&str> = names.iter().collect();
            assert_eq!(unique.len(), names.len(), "{function} lists a name twice");
        }
    }
}
