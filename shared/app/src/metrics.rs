//! CloudWatch Embedded Metric Format: metrics are JSON log lines that CloudWatch Logs turns
//! into metrics, with no API call and no extra latency in the function.
//!
//! Dimensions: `Function` always, `Schedule` only where the cardinality allows. A value put
//! for a schedule is published under `{Function, Schedule}` and `{Function}` (the aggregate
//! alarms use). A schedule dimension creates one metric per schedule and metric name; past
//! [`PER_SCHEDULE_LIMIT`] distinct schedules in one flush, the rest are aggregated under
//! `Schedule=_other` so a large fleet cannot explode the metric count.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

pub const NAMESPACE: &str = "cronledger";
pub const PER_SCHEDULE_LIMIT: usize = 100;

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
        self.lock()
            .entry((None, name, unit))
            .or_default()
            .push(value);
    }

    /// A per-schedule value (see the cardinality note above).
    pub fn put_for(&self, schedule: &str, name: &'static str, unit: Unit, value: f64) {
        self.lock()
            .entry((Some(schedule.to_string()), name, unit))
            .or_default()
            .push(value);
    }

    pub fn count(&self, name: &'static str, n: u64) {
        self.put(name, Unit::Count, n as f64);
    }

    pub fn count_for(&self, schedule: &str, name: &'static str, n: u64) {
        self.put_for(schedule, name, Unit::Count, n as f64);
    }

    /// The EMF documents for everything collected, emptying the collector.
    pub fn drain(&self, function: &str, at: DateTime<Utc>) -> Vec<Value> {
        let values = std::mem::take(&mut *self.lock());
        let mut schedules: Vec<&String> =
            values.keys().filter_map(|(s, _, _)| s.as_ref()).collect();
        schedules.dedup();
        let kept: std::collections::BTreeSet<&String> =
            schedules.into_iter().take(PER_SCHEDULE_LIMIT).collect();
        // Group by the dimension value each document carries.
        let mut docs: BTreeMap<Option<String>, Samples> = BTreeMap::new();
        for ((schedule, name, unit), v) in &values {
            let dim = schedule.as_ref().map(|s| {
                if kept.contains(s) {
                    s.clone()
                } else {
                    "_other".to_string()
                }
            });
            docs.entry(dim)
                .or_default()
                .entry((*name, *unit))
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

fn document(function: &str, schedule: Option<&str>, at: DateTime<Utc>, metrics: &Samples) -> Value {
    // A per-schedule document also feeds the function-wide metric (second dimension set),
    // so alarms on `{Function}` see every schedule without a second, double-counted put.
    let dimensions: Vec<Vec<&str>> = match schedule {
        Some(_) => vec![vec!["Function", "Schedule"], vec!["Function"]],
        None => vec![vec!["Function"]],
    };
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
                "Dimensions": dimensions,
                "Metrics": definitions,
            }],
        }),
    );
    doc.insert("Function".into(), Value::from(function));
    if let Some(s) = schedule {
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

    #[test]
    fn writes_valid_emf_with_and_without_the_schedule_dimension() {
        let m = Metrics::new();
        m.count("RunsCreated", 3);
        m.count_for("daily", "MissedWindows", 2);
        m.put_for("daily", "StartDelay", Unit::Milliseconds, 120.0);
        m.put_for("daily", "StartDelay", Unit::Milliseconds, 80.0);
        let docs = m.drain("ticker", "2026-01-01T00:00:00Z".parse().unwrap());
        assert_eq!(docs.len(), 2);
        let global = &docs[0];
        assert_eq!(global["RunsCreated"], 3.0);
        assert_eq!(
            global["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0],
            json!(["Function"])
        );
        let daily = &docs[1];
        assert_eq!(daily["Schedule"], "daily");
        assert_eq!(daily["MissedWindows"], 2.0);
        assert_eq!(daily["StartDelay"], json!([120.0, 80.0]));
        assert_eq!(
            daily["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Function", "Schedule"], ["Function"]]),
            "per schedule and rolled up per function"
        );
        assert!(m.drain("ticker", Utc::now()).is_empty(), "drained");
    }

    #[test]
    fn caps_the_schedule_dimension() {
        let m = Metrics::new();
        for i in 0..(PER_SCHEDULE_LIMIT + 5) {
            m.count_for(&format!("s{i:04}"), "MissedWindows", 1);
        }
        let docs = m.drain("reconciler", Utc::now());
        assert_eq!(docs.len(), PER_SCHEDULE_LIMIT + 1);
        let other = docs.iter().find(|d| d["Schedule"] == "_other").unwrap();
        assert_eq!(other["MissedWindows"], json!([1.0, 1.0, 1.0, 1.0, 1.0]));
    }
}
