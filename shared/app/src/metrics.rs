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

/// The only dimension set: bounded by the four functions that publish.
pub const DIMENSIONS: &[&str] = &["Function"];

/// Declares [`Metric`]: each variant's name is its metric name, so no emit site can name a
/// metric the catalog does not own.
macro_rules! metrics {
    ($($(#[$doc:meta])* $name:ident: $unit:ident,)+) => {
        /// Every metric the code can emit. [`Metrics`] takes nothing else, and [`CATALOG`]
        /// says which function emits which.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Metric {
            $($(#[$doc])* $name,)+
        }

        impl Metric {
            /// Every variant, in declaration order.
            pub const ALL: &'static [Metric] = &[$(Metric::$name,)+];

            /// The CloudWatch metric name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Metric::$name => stringify!($name),)+
                }
            }

            pub fn unit(self) -> Unit {
                match self {
                    $(Metric::$name => Unit::$unit,)+
                }
            }
        }
    };
}

metrics! {
    TickErrors: Count,
    WindowsLeftForReconciler: Count,
    RunsCreated: Count,
    /// Ticker: paused or overlap; worker: a late start its policy skips.
    RunsSkipped: Count,
    LostDispatchesResent: Count,
    DeliveriesHeldByKillSwitch: Count,
    RunsStarted: Count,
    /// A live scheduled run's first attempt's start minus its scheduled time.
    StartDelay: Milliseconds,
    /// A catch-up, backfill or operator's run's first attempt's start minus its release.
    ReleaseDelay: Milliseconds,
    RunsMovedToCorrection: Count,
    RunsFailed: Count,
    RunsHeldForApproval: Count,
    RunsCoalesced: Count,
    RunsWaitingForResume: Count,
    RunsHeldOutcomeUnknown: Count,
    RunsHeldByGuard: Count,
    RunsAwaitingPlan: Count,
    RunsSucceeded: Count,
    AttemptsRetried: Count,
    RunDuration: Milliseconds,
    StepsSucceeded: Count,
    ChildrenSpawned: Count,
    ChildrenSucceeded: Count,
    ChildrenFailed: Count,
    SchedulesPausedOnFailure: Count,
    LateBacklogPlannedInPart: Count,
    LateRunsPlanned: Count,
    StuckRuns: Count,
    MissedWindows: Count,
    CatchUpRunsCreated: Count,
    WindowsSkipped: Count,
    WindowsCoalesced: Count,
    WindowsAwaitingApproval: Count,
    CatchUpReleasePaused: Count,
    CatchUpReleaseResumed: Count,
    CatchUpReleased: Count,
    ReconcileErrors: Count,
    TickerScheduleUnhealthy: Count,
    BackfillsProposed: Count,
    DependencyRuns: Count,
    UpstreamSkipped: Count,
    /// Alerts recorded and published (or queued) by this call: not the ones already raised.
    AlertsRaised: Count,
    AlertsPublishedFromOutbox: Count,
    /// The auditor: the audited range's windows accounted for exactly once over its expected
    /// windows, fleet-wide (1: complete; an on-demand audit of one schedule names it).
    LedgerCompleteness: Ratio,
}

/// The functions that publish metrics (the api publishes none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Function {
    Ticker,
    Worker,
    Reconciler,
    Auditor,
}

impl Function {
    pub const ALL: &'static [Function] = &[
        Function::Ticker,
        Function::Worker,
        Function::Reconciler,
        Function::Auditor,
    ];

    /// The `Function` dimension's value.
    pub fn name(self) -> &'static str {
        match self {
            Function::Ticker => "ticker",
            Function::Worker => "worker",
            Function::Reconciler => "reconciler",
            Function::Auditor => "auditor",
        }
    }
}

/// Every metric each function emits. With [`DIMENSIONS`] this is the whole set of custom
/// metrics the system can publish (metrics × functions), independent of the schedule count;
/// the tests check it both ways against the emit sites.
pub const CATALOG: &[(Function, &[Metric])] = &[
    (
        Function::Ticker,
        &[
            Metric::TickErrors,
            Metric::WindowsLeftForReconciler,
            Metric::RunsCreated,
            Metric::RunsSkipped,
            Metric::LostDispatchesResent,
        ],
    ),
    (
        Function::Worker,
        &[
            Metric::DeliveriesHeldByKillSwitch,
            Metric::RunsStarted,
            Metric::StartDelay,
            Metric::ReleaseDelay,
            Metric::RunsMovedToCorrection,
            Metric::RunsSkipped,
            Metric::RunsFailed,
            Metric::RunsHeldForApproval,
            Metric::RunsCoalesced,
            Metric::RunsWaitingForResume,
            Metric::RunsHeldOutcomeUnknown,
            Metric::RunsHeldByGuard,
            Metric::RunsAwaitingPlan,
            Metric::RunsSucceeded,
            Metric::AttemptsRetried,
            Metric::RunDuration,
            Metric::StepsSucceeded,
            Metric::ChildrenSpawned,
            Metric::ChildrenSucceeded,
            Metric::ChildrenFailed,
            Metric::SchedulesPausedOnFailure,
            Metric::AlertsRaised,
        ],
    ),
    (
        Function::Reconciler,
        &[
            Metric::LateBacklogPlannedInPart,
            Metric::LateRunsPlanned,
            Metric::StuckRuns,
            Metric::MissedWindows,
            Metric::CatchUpRunsCreated,
            Metric::WindowsSkipped,
            Metric::WindowsCoalesced,
            Metric::WindowsAwaitingApproval,
            Metric::CatchUpReleasePaused,
            Metric::CatchUpReleaseResumed,
            Metric::CatchUpReleased,
            Metric::ReconcileErrors,
            Metric::TickerScheduleUnhealthy,
            Metric::BackfillsProposed,
            Metric::DependencyRuns,
            Metric::UpstreamSkipped,
            Metric::AlertsRaised,
            Metric::AlertsPublishedFromOutbox,
        ],
    ),
    // One metric, whatever the fleet: per-schedule findings go in the LEDGER_INCOMPLETE
    // alerts, not in dimensions. The alerts it raises are not counted here.
    (Function::Auditor, &[Metric::LedgerCompleteness]),
];

/// The metrics `function` emits.
pub fn catalog_of(function: Function) -> &'static [Metric] {
    CATALOG
        .iter()
        .find(|(f, _)| *f == function)
        .map_or(&[], |(_, metrics)| *metrics)
}

/// How many custom metrics the whole system can publish: one per cataloged metric and function.
pub fn custom_metric_bound() -> usize {
    CATALOG.iter().map(|(_, metrics)| metrics.len()).sum()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unit {
    Count,
    Milliseconds,
    /// A fraction in [0, 1] (CloudWatch's unit `None`).
    Ratio,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
            Unit::Ratio => "None",
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

    /// A function-wide value, in the metric's unit.
    pub fn put(&self, metric: Metric, value: f64) {
        self.push(None, metric, value);
    }

    /// A value about one schedule: published function-wide, with the schedule as a property
    /// of its document (see the module note).
    pub fn put_for(&self, schedule: &str, metric: Metric, value: f64) {
        self.push(Some(schedule.to_string()), metric, value);
    }

    pub fn count(&self, metric: Metric, n: u64) {
        debug_assert_eq!(metric.unit(), Unit::Count, "{metric:?} is not a count");
        self.put(metric, n as f64);
    }

    pub fn count_for(&self, schedule: &str, metric: Metric, n: u64) {
        debug_assert_eq!(metric.unit(), Unit::Count, "{metric:?} is not a count");
        self.put_for(schedule, metric, n as f64);
    }

    /// Whether `other` collects into the same values (a clone of this collector).
    pub fn same_as(&self, other: &Metrics) -> bool {
        Arc::ptr_eq(&self.values, &other.values)
    }

    fn push(&self, schedule: Option<String>, metric: Metric, value: f64) {
        self.lock()
            .entry((schedule, metric.name(), metric.unit()))
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
        m.count(Metric::RunsCreated, 3);
        m.count_for("daily", Metric::MissedWindows, 2);
        m.put_for("daily", Metric::StartDelay, 120.0);
        m.put_for("daily", Metric::StartDelay, 80.0);
        let docs = m.drain("ticker", at());
        assert_eq!(docs.len(), 2);
        let global = &docs[0];
        assert_eq!(global["RunsCreated"], 3.0);
        assert!(global.get("Schedule").is_none());
        let daily = &docs[1];
        assert_eq!(daily["Schedule"], "daily");
        assert_eq!(daily["MissedWindows"], 2.0);
        assert_eq!(daily["StartDelay"], json!([120.0, 80.0]));
        let units: Vec<&Value> = daily["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| &m["Unit"])
            .collect();
        assert_eq!(units, [&json!("Count"), &json!("Milliseconds")]);
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
        for i in 0..schedules {
            for metric in catalog_of(Function::Worker) {
                m.put_for(&format!("s{i:06}"), *metric, 1.0);
            }
        }
        custom_metrics(&m.drain("worker", at()))
    }

    #[test]
    fn the_custom_metric_count_does_not_grow_with_the_schedule_count() {
        let one = worker_metrics_for(1);
        let many = worker_metrics_for(2_000);
        assert_eq!(one, many);
        assert_eq!(
            one.len(),
            catalog_of(Function::Worker).len(),
            "one metric per worker name: {one:?}"
        );
        assert!(one
            .iter()
            .all(|(_, dims)| dims == &[("Function".to_string(), "worker".to_string())]));
    }

    #[test]
    fn the_whole_system_publishes_a_fixed_number_of_custom_metrics() {
        assert_eq!(custom_metric_bound(), 46);
        for (function, metrics) in CATALOG {
            let unique: BTreeSet<&Metric> = metrics.iter().collect();
            assert_eq!(
                unique.len(),
                metrics.len(),
                "{function:?} lists a metric twice"
            );
        }
        let functions: BTreeSet<Function> = CATALOG.iter().map(|(f, _)| *f).collect();
        assert_eq!(functions.len(), CATALOG.len(), "one entry per function");
        assert_eq!(functions, Function::ALL.iter().copied().collect());
    }

    /// Where each function's emit sites are (paths under `src/`, prefixes): its component,
    /// and the shared code that component gives its own [`Metrics`] (the alerter the wiring
    /// builds for it). A shared file that emits must be attributed here.
    const EMIT_SITES: &[(Function, &[&str])] = &[
        (Function::Ticker, &["ticker/"]),
        (Function::Worker, &["worker/", "alerting"]),
        (Function::Reconciler, &["reconciler/", "alerting"]),
        (Function::Auditor, &["auditor"]),
    ];

    /// Files that name metrics without emitting them in a function.
    const NOT_EMIT_SITES: &[&str] = &["metrics.rs", "simulate/"];

    /// Every source file under `src/`, relative path and text without its test module.
    fn sources() -> Vec<(String, String)> {
        fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<(String, String)>) {
            let entries = std::fs::read_dir(dir).expect("the crate's sources are readable");
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, root, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let relative = path.strip_prefix(root).expect("under src");
                    let relative = relative.to_string_lossy().replace('\\', "/");
                    if relative.ends_with("/tests.rs") {
                        continue;
                    }
                    let text = std::fs::read_to_string(&path).expect("readable source");
                    let code = match text.find("#[cfg(test)]\nmod ") {
                        Some(tests) => text[..tests].to_string(),
                        None => text,
                    };
                    out.push((relative, code));
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut out = Vec::new();
        walk(&root, &root, &mut out);
        assert!(out.len() > 20, "found the sources: {}", out.len());
        out
    }

    /// The metrics `code` names (`Metric::X`), by name.
    fn named(code: &str) -> BTreeSet<String> {
        code.split("Metric::")
            .skip(1)
            .map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .filter(|name| name != "ALL")
            .collect()
    }

    #[test]
    fn every_metric_the_code_emits_is_cataloged_for_its_function_and_every_cataloged_one_is_emitted(
    ) {
        let sources = sources();
        let is = |path: &str, prefixes: &[&str]| prefixes.iter().any(|p| path.starts_with(p));
        let mut problems = Vec::new();
        for (path, code) in &sources {
            let attributed = EMIT_SITES.iter().any(|(_, p)| is(path, p));
            if !attributed && !is(path, NOT_EMIT_SITES) && !named(code).is_empty() {
                problems.push(format!(
                    "{path} emits {:?}: attribute it in EMIT_SITES",
                    named(code)
                ));
            }
        }
        for (function, prefixes) in EMIT_SITES {
            let emitted: BTreeSet<String> = sources
                .iter()
                .filter(|(path, _)| is(path, prefixes))
                .flat_map(|(_, code)| named(code))
                .collect();
            let cataloged: BTreeSet<String> = catalog_of(*function)
                .iter()
                .map(|m| m.name().to_string())
                .collect();
            for name in emitted.difference(&cataloged) {
                problems.push(format!("{function:?} emits {name}, not in its catalog"));
            }
            for name in cataloged.difference(&emitted) {
                problems.push(format!("{function:?} catalogs {name}, emitted by no path"));
            }
        }
        for metric in Metric::ALL {
            if !CATALOG.iter().any(|(_, m)| m.contains(metric)) {
                problems.push(format!("{metric:?} is in no function's catalog"));
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    /// The template's alarms on cronledger's own metrics name cataloged metrics of the
    /// function in their dimension (an alarm on a name nothing publishes never fires).
    #[test]
    fn the_templates_alarms_name_cataloged_metrics() {
        let template = include_str!("../../../infra/template.yaml");
        let alarms: Vec<&str> = template.split("Namespace: cronledger\n").skip(1).collect();
        assert!(alarms.len() >= 5, "found the alarms: {}", alarms.len());
        for alarm in alarms {
            let field = |key: &str| {
                alarm
                    .lines()
                    .take(3)
                    .find_map(|l| l.trim().strip_prefix(key).map(str::trim))
                    .unwrap_or_default()
                    .to_string()
            };
            let name = field("MetricName:");
            let dimensions = field("Dimensions:");
            let function = Function::ALL
                .iter()
                .find(|f| dimensions == format!("[{{ Name: Function, Value: {} }}]", f.name()))
                .unwrap_or_else(|| {
                    panic!("{name}: dimensions {dimensions:?} are not {{Function}}")
                });
            assert!(
                catalog_of(*function).iter().any(|m| m.name() == name),
                "the {} does not emit {name}",
                function.name()
            );
        }
    }

    /// README's Observability section is written from the catalog: its bound and every name.
    #[test]
    fn the_readme_states_the_catalog() {
        let readme = include_str!("../../../README.md");
        let bound = format!("at most {} custom metrics", custom_metric_bound());
        assert!(readme.contains(&bound), "README must say `{bound}`");
        let section = readme
            .split("## Observability")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("README has an Observability section");
        for (function, metrics) in CATALOG {
            let rows: Vec<&str> = section
                .lines()
                .filter(|l| l.starts_with(&format!("| {} |", function.name())))
                .collect();
            for metric in *metrics {
                assert!(
                    rows.iter()
                        .any(|row| row.contains(&format!("`{}`", metric.name()))),
                    "README's Observability table lists {} for the {}",
                    metric.name(),
                    function.name()
                );
            }
        }
    }
}
