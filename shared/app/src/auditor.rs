//! The auditor (invariant 23): once a day, and on demand, the completeness audit of a range
//! ([`crate::audit::completeness`]), published. It reads the ledger and the schedules' audit
//! logs, decides nothing and writes nothing to the ledger: what it finds goes out as
//! `LedgerCompleteness` (one fleet-wide EMF metric, the alarm's) and, per schedule whose
//! ledger is wrong over the range, one LEDGER_INCOMPLETE alert through the alerts pipeline
//! (recorded once per schedule and range by the alert store, then published).
//!
//! The daily pass (EventBridge Scheduler, `{"time": ...}`) audits the UTC day before the
//! event's, `[day - 1, day)`, and does nothing while the kill switch holds (windows due
//! meanwhile are not fired until the release, and would read as missing). An on-demand audit
//! (`{"from", "to", "schedule"?}`, the function's event or `POST /v1/audit/runs`) runs
//! whatever the switch says: it only reads.
//!
//! The function, the local runner and the api call [`Auditor::run`]; nothing here shares a
//! decision with the ticker or the reconciler: the windows are the audit's, recomputed with
//! the core's timing code.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, NaiveTime, Utc};
use cronledger_aws::notify::notifier_from_env;
use cronledger_aws::{AwsClients, AwsSettings, DynamoLedger, LedgerStore, SqsLanes, StoreError};
use cronledger_contract::{AuditRunRequest, CompletenessReport, ScheduleAudit};
use cronledger_core::alerts::{self, About, Incompleteness};
use cronledger_core::spec::valid_id;
use cronledger_core::{Priority, Span, Timing, Window};
use serde::Serialize;
use serde_json::Value;

use crate::alerting::{AlertFate, Alerter};
use crate::audit::{completeness, AuditPage, AuditRange};
use crate::clock::{Clock, SystemClock};
use crate::deployment::Deployment;
use crate::kill_switch::KillSwitchCheck;
use crate::metrics::{Function, Metric, Metrics};
use crate::wiring::{features_of, Components, Deps, Feature};

/// The auditor's typed errors, each with a stable code (the function's error, the api's
/// answer and the logs carry it).
#[derive(Debug, thiserror::Error)]
pub enum AuditorError {
    /// The invocation's event is neither a daily pass nor an on-demand audit.
    #[error("AUDIT_EVENT_INVALID: {0}")]
    Event(String),

    /// The range cannot be audited (empty, in the future, an invalid schedule id).
    #[error("AUDIT_RANGE_INVALID: {0}")]
    Range(String),

    /// The range is longer than one audit covers (`max_range`).
    #[error("AUDIT_RANGE_TOO_LONG: {0}")]
    RangeTooLong(String),

    #[error("AUDIT_CONFIG_INVALID: {0}")]
    Config(String),

    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AuditorError {
    pub fn code(&self) -> &'static str {
        match self {
            AuditorError::Event(_) => "AUDIT_EVENT_INVALID",
            AuditorError::Range(_) => "AUDIT_RANGE_INVALID",
            AuditorError::RangeTooLong(_) => "AUDIT_RANGE_TOO_LONG",
            AuditorError::Config(_) => "AUDIT_CONFIG_INVALID",
            AuditorError::Store(e) => e.code(),
        }
    }
}

/// What starts a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditEvent {
    /// EventBridge Scheduler's daily invocation: audits the UTC day before `time`'s.
    Daily { time: DateTime<Utc> },
    /// An operator's audit of a range, now.
    OnDemand(AuditRange),
}

impl AuditEvent {
    /// Reads the function's event: `{"from", "to", "schedule"?}` (on demand; unknown fields
    /// refused), else `{"time": ...}` (Scheduler's input, or a classic EventBridge rule event
    /// with `time` at the top).
    pub fn from_json(value: &Value) -> Result<AuditEvent, AuditorError> {
        let Some(fields) = value.as_object() else {
            return Err(AuditorError::Event(format!(
                "the event must be a JSON object, {{\"time\": ...}} or {{\"from\", \"to\", \"schedule\"?}}; got {}",
                shown(value)
            )));
        };
        if fields.contains_key("from") || fields.contains_key("to") {
            let request: AuditRunRequest =
                serde_json::from_value(value.clone()).map_err(|e| {
                    AuditorError::Event(format!(
                        "an on-demand audit is {{\"from\", \"to\", \"schedule\"?}} with RFC3339 instants: {e}"
                    ))
                })?;
            return Ok(AuditEvent::OnDemand(range_of(request)));
        }
        match fields.get("time") {
            Some(Value::String(text)) => DateTime::parse_from_rfc3339(text)
                .map(|t| AuditEvent::Daily {
                    time: t.with_timezone(&Utc),
                })
                .map_err(|e| AuditorError::Event(format!("`time` {text} is not RFC3339: {e}"))),
            Some(other) => Err(AuditorError::Event(format!(
                "`time` must be an RFC3339 instant, got {}",
                shown(other)
            ))),
            None => Err(AuditorError::Event(
                "neither a daily pass ({\"time\": ...}) nor an on-demand audit ({\"from\", \"to\", \"schedule\"?})"
                    .into(),
            )),
        }
    }
}

/// `value` as JSON text, cut to a line's worth for an error message.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// The range an on-demand request names.
pub fn range_of(request: AuditRunRequest) -> AuditRange {
    AuditRange {
        from: request.from,
        to: request.to,
        schedule: request.schedule,
    }
}

/// The UTC day before `time`'s: `[day - 1, day)`.
pub fn previous_utc_day(time: DateTime<Utc>) -> Result<AuditRange, AuditorError> {
    let day = time.date_naive();
    let yesterday = day
        .pred_opt()
        .ok_or_else(|| AuditorError::Event(format!("`time` {time} has no day before it")))?;
    Ok(AuditRange {
        from: yesterday.and_time(NaiveTime::MIN).and_utc(),
        to: day.and_time(NaiveTime::MIN).and_utc(),
        schedule: None,
    })
}

/// The auditor's knobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditorConfig {
    /// When the daily pass runs, in UTC: a cron expression (EventBridge's `cron(...)` form
    /// too), read with the core's timing code. The template's `AuditSchedule` parameter
    /// defaults to the same (a test holds them together); the local runner follows this one.
    pub daily_at: String,
    /// Longest range one audit covers.
    pub max_range: Span,
    /// Missing windows a report lists per schedule (the counts are whole).
    pub max_missing: usize,
    /// Windows of each kind (missing, duplicated, unexplained) an alert names.
    pub sample: usize,
}

impl Default for AuditorConfig {
    fn default() -> Self {
        AuditorConfig {
            daily_at: "0 1 * * *".into(),
            max_range: Span::days(31),
            max_missing: AuditPage::default().max_missing,
            sample: 5,
        }
    }
}

impl AuditorConfig {
    /// The daily pass's times.
    pub fn daily_timing(&self) -> Result<Timing, AuditorError> {
        Timing::parse(&self.daily_at, chrono_tz::UTC)
            .map_err(|e| AuditorError::Config(format!("daily_at `{}`: {e}", self.daily_at)))
    }
}

/// Where a pass's metric goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsOut {
    /// Written to stdout as EMF at the end of each pass (Lambda ships it to CloudWatch).
    Stdout,
    /// Kept in [`Auditor::metrics`] for the caller (the local runner drops them, tests read
    /// them).
    Kept,
}

/// Which kind of pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditTrigger {
    Daily,
    OnDemand,
}

/// What one pass found and published: the INFO line, the function's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditSummary {
    pub trigger: AuditTrigger,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The kill switch held the daily pass: nothing audited, nothing published.
    pub kill_switch_engaged: bool,
    /// The published `LedgerCompleteness` (`None`: nothing audited).
    pub completeness: Option<f64>,
    /// Schedules audited.
    pub schedules: usize,
    pub expected: u64,
    pub accounted: u64,
    pub missing: u64,
    pub duplicates: u64,
    pub unexplained: u64,
    /// Schedules whose ledger is wrong over the range (one LEDGER_INCOMPLETE each).
    pub incomplete: Vec<String>,
    /// LEDGER_INCOMPLETE alerts this pass recorded (and published, or left to the outbox).
    pub alerts_raised: u32,
    /// Alerts found recorded for the same schedule and range (an earlier pass, a retry).
    pub alerts_already_raised: u32,
}

impl AuditSummary {
    fn new(trigger: AuditTrigger, range: &AuditRange) -> AuditSummary {
        AuditSummary {
            trigger,
            from: range.from,
            to: range.to,
            schedule: range.schedule.clone(),
            kill_switch_engaged: false,
            completeness: None,
            schedules: 0,
            expected: 0,
            accounted: 0,
            missing: 0,
            duplicates: 0,
            unexplained: 0,
            incomplete: Vec::new(),
            alerts_raised: 0,
            alerts_already_raised: 0,
        }
    }
}

/// A pass that audited: what it published, and the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Audited {
    pub summary: AuditSummary,
    pub report: CompletenessReport,
}

/// What a pass did.
#[derive(Debug, Clone, PartialEq)]
pub enum AuditOutcome {
    Audited(Box<Audited>),
    /// The kill switch held the daily pass.
    Held(AuditSummary),
}

impl AuditOutcome {
    pub fn summary(&self) -> &AuditSummary {
        match self {
            AuditOutcome::Audited(audited) => &audited.summary,
            AuditOutcome::Held(summary) => summary,
        }
    }
}

pub struct Auditor {
    store: Arc<dyn LedgerStore>,
    /// "Now" for on-demand audits (their range may not reach past it).
    clock: Arc<dyn Clock>,
    config: AuditorConfig,
    metrics: Metrics,
    metrics_out: MetricsOut,
    kill_switch: Option<Arc<KillSwitchCheck>>,
    /// Where LEDGER_INCOMPLETE goes; `None`: only logged.
    alerter: Option<Arc<Alerter>>,
}

impl Auditor {
    pub fn new(
        store: Arc<dyn LedgerStore>,
        clock: Arc<dyn Clock>,
        config: AuditorConfig,
    ) -> Auditor {
        Auditor {
            store,
            clock,
            config,
            metrics: Metrics::new(),
            metrics_out: MetricsOut::Stdout,
            kill_switch: None,
            alerter: None,
        }
    }

    pub fn with_kill_switch_opt(mut self, check: Option<Arc<KillSwitchCheck>>) -> Auditor {
        self.kill_switch = check;
        self
    }

    /// Its alerts through `alerter`. They are not counted in its metrics: the auditor
    /// publishes one metric (the alerts are its per-schedule findings).
    pub fn with_alerts(mut self, alerter: Arc<Alerter>) -> Auditor {
        self.alerter = Some(alerter);
        self
    }

    /// Keeps each pass's metric in [`Auditor::metrics`] instead of writing it out.
    pub fn keeping_metrics(mut self) -> Auditor {
        self.metrics_out = MetricsOut::Kept;
        self
    }

    pub fn config(&self) -> &AuditorConfig {
        &self.config
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn features(&self) -> std::collections::BTreeSet<Feature> {
        features_of(
            &self.metrics,
            self.kill_switch.is_some(),
            self.alerter.as_ref(),
            &[],
        )
    }

    /// One pass: the range `event` names checked, audited, and its findings published (the
    /// metric, an alert per schedule whose ledger is wrong); one INFO line.
    pub async fn run(&self, event: &AuditEvent) -> Result<AuditOutcome, AuditorError> {
        let outcome = self.pass(event).await;
        match &outcome {
            Ok(outcome) => {
                let s = outcome.summary();
                tracing::info!(
                    trigger = ?s.trigger,
                    from = %s.from,
                    to = %s.to,
                    schedule = s.schedule.as_deref(),
                    kill_switch_engaged = s.kill_switch_engaged,
                    completeness = s.completeness,
                    schedules = s.schedules,
                    expected = s.expected,
                    accounted = s.accounted,
                    missing = s.missing,
                    duplicates = s.duplicates,
                    unexplained = s.unexplained,
                    incomplete = ?s.incomplete,
                    alerts_raised = s.alerts_raised,
                    alerts_already_raised = s.alerts_already_raised,
                    "audit done"
                );
            }
            Err(e) => tracing::warn!(code = e.code(), error = %e, event = ?event, "audit failed"),
        }
        outcome
    }

    async fn pass(&self, event: &AuditEvent) -> Result<AuditOutcome, AuditorError> {
        let (trigger, range, now) = match event {
            AuditEvent::Daily { time } => (AuditTrigger::Daily, previous_utc_day(*time)?, *time),
            AuditEvent::OnDemand(range) => {
                (AuditTrigger::OnDemand, range.clone(), self.clock.now())
            }
        };
        self.check(&range, now)?;
        if trigger == AuditTrigger::Daily {
            if let Some(check) = &self.kill_switch {
                if check.engaged(now).await {
                    let mut held = AuditSummary::new(trigger, &range);
                    held.kill_switch_engaged = true;
                    return Ok(AuditOutcome::Held(held));
                }
            }
        }
        let page = AuditPage {
            max_missing: self.config.max_missing,
            after: None,
        };
        let report = completeness(self.store.as_ref(), range.clone(), page).await?;
        let summary = self.publish(&report, trigger, &range, now).await;
        Ok(AuditOutcome::Audited(Box::new(Audited { summary, report })))
    }

    fn check(&self, range: &AuditRange, now: DateTime<Utc>) -> Result<(), AuditorError> {
        if range.from >= range.to {
            return Err(AuditorError::Range(format!(
                "`from` {} must be before `to` {}",
                range.from, range.to
            )));
        }
        let longest = self.config.max_range;
        if range.to - range.from > longest.as_delta() {
            return Err(AuditorError::RangeTooLong(format!(
                "{} to {} is longer than {} (audit it in parts)",
                range.from,
                range.to,
                longest.humanized()
            )));
        }
        if range.to > now {
            return Err(AuditorError::Range(format!(
                "`to` {} is after now ({now}): windows not yet due would read as missing",
                range.to
            )));
        }
        if let Some(id) = range.schedule.as_deref().filter(|id| !valid_id(id)) {
            return Err(AuditorError::Range(format!(
                "`schedule` `{id}` is not a schedule id ([a-z0-9-], 1 to 64)"
            )));
        }
        Ok(())
    }

    /// The metric and the alerts of `report`.
    async fn publish(
        &self,
        report: &CompletenessReport,
        trigger: AuditTrigger,
        range: &AuditRange,
        now: DateTime<Utc>,
    ) -> AuditSummary {
        let mut summary = AuditSummary::new(trigger, range);
        summary.completeness = Some(report.completeness);
        summary.schedules = report.schedules.len();
        let audited = Window::new(range.from, range.to);
        for audit in &report.schedules {
            summary.expected += audit.expected;
            summary.accounted += audit.accounted;
            summary.missing += audit.missing_count;
            summary.duplicates += audit.duplicates.len() as u64;
            summary.unexplained += audit.unexplained.len() as u64;
            if self.alert(audit, audited, now, &mut summary).await {
                summary.incomplete.push(audit.schedule.clone());
            }
        }
        match &range.schedule {
            None => self
                .metrics
                .put(Metric::LedgerCompleteness, report.completeness),
            Some(schedule) => {
                self.metrics
                    .put_for(schedule, Metric::LedgerCompleteness, report.completeness)
            }
        }
        if self.metrics_out == MetricsOut::Stdout {
            self.metrics.flush(Function::Auditor.name(), now);
        }
        summary
    }

    /// Raises LEDGER_INCOMPLETE for `audit` when its ledger is wrong; whether it is.
    async fn alert(
        &self,
        audit: &ScheduleAudit,
        range: Window,
        now: DateTime<Utc>,
        summary: &mut AuditSummary,
    ) -> bool {
        let sample = self.config.sample;
        let first = |times: &mut dyn Iterator<Item = DateTime<Utc>>| -> Vec<DateTime<Utc>> {
            times.take(sample).collect()
        };
        let missing = first(&mut audit.missing.iter().copied());
        let duplicated = first(&mut audit.duplicates.iter().map(|d| d.scheduled_for));
        let unexplained = first(&mut audit.unexplained.iter().map(|u| u.scheduled_for));
        let found = Incompleteness {
            range,
            missing: audit.missing_count,
            missing_sample: &missing,
            duplicates: audit.duplicates.len() as u64,
            duplicate_sample: &duplicated,
            unexplained: audit.unexplained.len() as u64,
            unexplained_sample: &unexplained,
        };
        if found.is_complete() {
            return false;
        }
        // Addressed as the schedule's other alerts are (owner, priority, topic); a schedule
        // gone since is still named, at NORMAL priority, to the stack's topic.
        let stored = self.store.get_schedule(&audit.schedule).await.ok();
        let (about, topic) = match &stored {
            Some(stored) => (About::of(&stored.spec), stored.spec.alerts.topic.as_deref()),
            None => (
                About {
                    schedule: &audit.schedule,
                    owner: None,
                    priority: Priority::Normal,
                },
                None,
            ),
        };
        let Some(alert) = alerts::ledger_incomplete(&about, &found, now) else {
            return false;
        };
        match &self.alerter {
            Some(alerter) => match alerter.raise(&alert, topic).await {
                AlertFate::AlreadyRaised => summary.alerts_already_raised += 1,
                _ => summary.alerts_raised += 1,
            },
            None => tracing::warn!(
                kind = %alert.kind,
                schedule = %alert.schedule,
                key = %alert.key(),
                message = %alert.message,
                "alert (no alert topic configured)"
            ),
        }
        true
    }
}

impl Components {
    /// The auditor on these dependencies: the ledger (read), the kill switch (its daily
    /// pass), alerts recorded and published; its metric written out after each pass.
    pub fn auditor(&self, config: AuditorConfig) -> Auditor {
        let deps = self.deps();
        Auditor::new(deps.store.clone(), deps.clock.clone(), config)
            .with_kill_switch_opt(deps.kill_switch.clone())
            .with_alerts(Arc::new(Alerter::new(
                deps.alerts.clone(),
                deps.notifier.clone(),
            )))
    }
}

/// The auditor as its function runs it: the deployment's table, read as it is (unlike
/// [`Deployment::connect`], no shard-count claim, which is a write, and no queue looked up:
/// the auditor sends nothing, so its lanes stay unresolved), alerts to the SNS topic the
/// environment names, the system clock.
pub async fn deployed(deployment: &Deployment, config: AuditorConfig) -> Auditor {
    let clients = AwsClients::from_env(&AwsSettings::default()).await;
    let ledger = Arc::new(DynamoLedger::new(
        &clients,
        deployment.table.clone(),
        deployment.shards,
    ));
    let lanes = Arc::new(SqsLanes::new(clients.sqs.clone(), BTreeMap::new()));
    let deps = Deps::on(
        ledger,
        lanes,
        notifier_from_env(&clients),
        Arc::new(SystemClock),
    );
    Components::build(deps).auditor(config)
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use cronledger_aws::notify::MemoryNotifier;
    use cronledger_aws::{ChangeMeta, KillSwitch, MemoryStore, RequestMeter};
    use cronledger_contract::{DuplicateWindow, UnexplainedEntry};
    use cronledger_core::alerts::{AlertKind, Severity};
    use cronledger_core::run::Origin;
    use cronledger_core::{Schedule, ScheduleSpec, Trigger, ValidationRules};
    use cronledger_ledger::prelude::*;

    use super::*;
    use crate::clock::ManualClock;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("test instants are valid")
    }

    const DAY: &str = "2026-03-09T00:00:00Z";
    const PASS: &str = "2026-03-10T01:00:00Z";

    fn hourly() -> ScheduleSpec {
        cronledger_core::spec::parse_manifest(
            r#"{"schedules": [{"id": "hourly", "cron": "0 * * * *", "timezone": "UTC",
                "owner": "team-a", "priority": "HIGH", "job": {"type": "noop"}}]}"#,
            &ValidationRules::default(),
            at(DAY),
        )
        .expect("a valid manifest")
        .remove(0)
    }

    /// A store with `hourly` created at the start of the audited day, its windows of that day
    /// recorded but for `leave_out`.
    async fn ledger(leave_out: &[DateTime<Utc>]) -> Arc<MemoryStore> {
        let store = Arc::new(MemoryStore::new(1, RequestMeter::new()));
        let spec = hourly();
        let meta = ChangeMeta {
            actor: "test".into(),
            reason: "test".into(),
            at: at(DAY) - Duration::minutes(1),
            details: None,
        };
        store
            .create_schedule(spec.clone(), meta)
            .await
            .expect("create");
        let schedule = Schedule::new(spec).expect("compiles");
        for h in 0..=24 {
            let scheduled_for = at(DAY) + Duration::hours(h);
            if leave_out.contains(&scheduled_for) {
                continue;
            }
            let run = schedule.pending_run(
                scheduled_for,
                schedule.window_for(scheduled_for),
                Origin::Expected,
                Trigger::Scheduled,
                scheduled_for,
                1,
            );
            store.create_run(&run).await.expect("run");
        }
        store
    }

    /// The auditor as the components wire it (kill switch, alerts), its metric kept.
    fn auditor(store: Arc<MemoryStore>, notifier: Arc<MemoryNotifier>) -> Auditor {
        let clock = Arc::new(ManualClock::new(at(PASS)));
        Auditor::new(store.clone(), clock, AuditorConfig::default())
            .with_kill_switch_opt(Some(Arc::new(KillSwitchCheck::new(store.clone()))))
            .with_alerts(Arc::new(Alerter::new(store, notifier)))
            .keeping_metrics()
    }

    fn completeness_of(docs: &[Value]) -> Vec<(Option<String>, f64)> {
        docs.iter()
            .filter_map(|d| {
                let value = d.get(Metric::LedgerCompleteness.name())?.as_f64()?;
                assert_eq!(d["Function"], "auditor");
                Some((
                    d.get("Schedule")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    value,
                ))
            })
            .collect()
    }

    #[test]
    fn the_daily_pass_audits_the_utc_day_before_its_time() {
        for time in [
            "2026-03-10T01:00:00Z",
            "2026-03-10T00:00:00Z",
            "2026-03-10T23:59:59Z",
        ] {
            let range = previous_utc_day(at(time)).expect("a day");
            assert_eq!(
                (range.from, range.to),
                (at(DAY), at("2026-03-10T00:00:00Z"))
            );
            assert_eq!(range.schedule, None);
        }
        let times = AuditorConfig::default().daily_timing().expect("parses");
        assert_eq!(times.next_after(at(DAY)), Some(at("2026-03-09T01:00:00Z")));
    }

    #[tokio::test]
    async fn a_missing_window_raises_ledger_incomplete_once_and_completeness_below_1() {
        let missing = at("2026-03-09T07:00:00Z");
        let store = ledger(&[missing]).await;
        let notifier = Arc::new(MemoryNotifier::new());
        let auditor = auditor(store.clone(), notifier.clone());
        let daily = AuditEvent::Daily { time: at(PASS) };
        let AuditOutcome::Audited(audited) = auditor.run(&daily).await.expect("a pass") else {
            panic!("not held");
        };
        let summary = &audited.summary;
        assert_eq!(
            (summary.expected, summary.accounted, summary.missing),
            (24, 23, 1)
        );
        assert_eq!(summary.incomplete, ["hourly"]);
        assert_eq!(
            (summary.alerts_raised, summary.alerts_already_raised),
            (1, 0)
        );
        let sent = notifier.sent();
        assert_eq!(sent.len(), 1);
        let alert = &sent[0].alert;
        assert_eq!(alert.kind, AlertKind::LedgerIncomplete);
        assert_eq!(alert.schedule, "hourly");
        assert_eq!(alert.owner.as_deref(), Some("team-a"));
        assert_eq!(alert.severity, Severity::Critical);
        assert_eq!(
            alert.window,
            Some(Window::new(at(DAY), at("2026-03-10T00:00:00Z")))
        );
        assert!(
            alert.message.contains("1 missing (2026-03-09T07:00:00Z)"),
            "{}",
            alert.message
        );
        let published = completeness_of(&auditor.metrics().drain("auditor", at(PASS)));
        assert_eq!(published, [(None, 23.0 / 24.0)]);
        // The alert is recorded in the schedule's partition.
        let recorded = store.alerts_of("hourly", 10).await.expect("alerts");
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].alert.key(), alert.key());

        // Again (a retry, a second pass over the same day): the metric again, not the alert.
        let again = auditor.run(&daily).await.expect("a pass");
        assert_eq!(again.summary().alerts_already_raised, 1);
        assert_eq!(again.summary().alerts_raised, 0);
        assert_eq!(notifier.sent().len(), 1, "once per schedule and range");
        assert_eq!(
            completeness_of(&auditor.metrics().drain("auditor", at(PASS))),
            [(None, 23.0 / 24.0)]
        );
    }

    #[tokio::test]
    async fn a_complete_ledger_publishes_1_and_no_alert() {
        let notifier = Arc::new(MemoryNotifier::new());
        let auditor = auditor(ledger(&[]).await, notifier.clone());
        let outcome = auditor
            .run(&AuditEvent::Daily { time: at(PASS) })
            .await
            .expect("a pass");
        let summary = outcome.summary();
        assert_eq!(summary.completeness, Some(1.0));
        assert_eq!((summary.expected, summary.accounted), (24, 24));
        assert!(summary.incomplete.is_empty());
        assert!(notifier.sent().is_empty());
        assert_eq!(
            completeness_of(&auditor.metrics().drain("auditor", at(PASS))),
            [(None, 1.0)]
        );
    }

    #[tokio::test]
    async fn the_kill_switch_holds_the_daily_pass_not_an_operators_audit() {
        let store = ledger(&[at("2026-03-09T07:00:00Z")]).await;
        let notifier = Arc::new(MemoryNotifier::new());
        let auditor = auditor(store.clone(), notifier.clone());
        let switch = KillSwitch {
            engaged: true,
            since: at(DAY),
            actor: "ops".into(),
            note: "bad deploy".into(),
        };
        store.put_kill_switch(&switch).await.expect("engaged");
        let held = auditor
            .run(&AuditEvent::Daily { time: at(PASS) })
            .await
            .expect("a pass");
        assert!(
            matches!(held, AuditOutcome::Held(ref s) if s.kill_switch_engaged),
            "{held:?}"
        );
        assert!(notifier.sent().is_empty());
        assert!(auditor.metrics().drain("auditor", at(PASS)).is_empty());
        let range = previous_utc_day(at(PASS)).expect("a day");
        let asked = auditor
            .run(&AuditEvent::OnDemand(AuditRange {
                schedule: Some("hourly".into()),
                ..range
            }))
            .await
            .expect("an on-demand audit");
        assert!(matches!(asked, AuditOutcome::Audited(_)));
        assert_eq!(notifier.sent().len(), 1);
        // One schedule's audit names it on its metric's document.
        assert_eq!(
            completeness_of(&auditor.metrics().drain("auditor", at(PASS))),
            [(Some("hourly".to_string()), 23.0 / 24.0)]
        );
    }

    #[tokio::test]
    async fn an_alert_names_a_sample_of_each_kind_and_whole_counts() {
        let store = ledger(&[]).await;
        let notifier = Arc::new(MemoryNotifier::new());
        let mut auditor = auditor(store, notifier.clone());
        auditor.config.sample = 2;
        let range = previous_utc_day(at(PASS)).expect("a day");
        let hour = |h: i64| at(DAY) + Duration::hours(h);
        let report = CompletenessReport {
            from: range.from,
            to: range.to,
            schedules: vec![
                ScheduleAudit {
                    schedule: "hourly".into(),
                    expected: 24,
                    accounted: 20,
                    missing: vec![hour(1), hour(2), hour(3)],
                    missing_count: 4,
                    duplicates: vec![DuplicateWindow {
                        scheduled_for: hour(5),
                        runs: 2,
                        executions: 2,
                        why: "RUNS".into(),
                    }],
                    unexplained: vec![UnexplainedEntry {
                        scheduled_for: hour(6) + Duration::minutes(30),
                        trigger: "SCHEDULED".into(),
                        status: "QUEUED".into(),
                        schedule_version: 1,
                        why: "NOT_A_WINDOW".into(),
                    }],
                },
                ScheduleAudit {
                    schedule: "gone".into(),
                    expected: 1,
                    accounted: 0,
                    missing: vec![hour(9)],
                    missing_count: 1,
                    duplicates: Vec::new(),
                    unexplained: Vec::new(),
                },
            ],
            completeness: 19.0 / 25.0,
            next: None,
        };
        let summary = auditor
            .publish(&report, AuditTrigger::OnDemand, &range, at(PASS))
            .await;
        assert_eq!(summary.incomplete, ["hourly", "gone"]);
        assert_eq!(
            (summary.missing, summary.duplicates, summary.unexplained),
            (5, 1, 1)
        );
        let sent = notifier.sent();
        assert_eq!(sent.len(), 2);
        assert_eq!(
            sent[0].alert.message,
            "ledger audit of 2026-03-09T00:00:00Z/2026-03-10T00:00:00Z: windows 4 missing \
             (2026-03-09T01:00:00Z, 2026-03-09T02:00:00Z, ...); 1 duplicated \
             (2026-03-09T05:00:00Z); 1 unexplained (2026-03-09T06:30:00Z)"
        );
        // A schedule no longer stored is still named, at NORMAL priority, without an owner.
        assert_eq!(sent[1].alert.schedule, "gone");
        assert_eq!(sent[1].alert.owner, None);
    }
}
