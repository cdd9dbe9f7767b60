//! Alerts in a simulated stretch: what each kind of trouble tells the schedule's owner, and
//! that each condition is told once (the simulator publishes to a list, through the same
//! record-then-publish path as SNS in AWS).

use std::sync::Arc;

use cronledger_app::faults::CrashPoint;
use cronledger_app::simulate::{
    simulate, Outage, SimQueues, SimulationConfig, SimulationEnv, SimulationReport,
};
use cronledger_aws::prelude::*;
use cronledger_aws::{HealthStore, MemoryStore, RequestMeter, ScheduleState};
use cronledger_core::alerts::{Alert, AlertKind, Severity};
use cronledger_core::{Reason, RunStatus, ScheduleSpec};
use cronledger_tests::{spec_with, t};
use serde_json::json;

async fn on_memory(
    specs: Vec<ScheduleSpec>,
    config: &SimulationConfig,
) -> (SimulationReport, Arc<MemoryStore>) {
    let memory = Arc::new(MemoryStore::new(1, RequestMeter::new()));
    let env = SimulationEnv::on(memory.clone(), SimQueues::memory(), 1, None);
    let report = simulate(&env, specs, config)
        .await
        .expect("simulation in memory");
    (report, memory)
}

fn of<'a>(report: &'a SimulationReport, schedule: &str) -> Vec<&'a Alert> {
    report
        .alerts
        .iter()
        .filter(|a| a.schedule == schedule)
        .collect()
}

fn kinds(alerts: &[&Alert]) -> Vec<(AlertKind, Severity)> {
    alerts.iter().map(|a| (a.kind, a.severity)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_job_alerts_at_n_and_2n_failures_then_once_when_it_recovers() {
    let from = t("2026-11-29T00:00:00Z");
    let config = SimulationConfig::new(from, t("2026-11-29T02:00:00Z"));
    let spec = spec_with(
        "broken-then-fixed",
        "*/10 * * * *",
        json!({
            "owner": "team-ledger",
            "priority": "HIGH",
            "max_attempts": 1,
            "job": {"type": "noop", "fail_before": "2026-11-29T01:00:00Z"},
        }),
    );
    let (report, _) = on_memory(vec![spec], &config).await;
    let alerts = of(&report, "broken-then-fixed");
    assert_eq!(
        kinds(&alerts),
        vec![
            (AlertKind::ConsecutiveFailures, Severity::Warning),
            (AlertKind::ConsecutiveFailures, Severity::Critical),
            (AlertKind::Recovered, Severity::Info),
        ],
        "{alerts:#?}"
    );
    // HIGH alerts at 2 failures in a row: the second and fourth failed runs, and the first
    // success (the window of 01:00, the first the fixed job serves).
    let runs: Vec<&str> = alerts.iter().filter_map(|a| a.run.as_deref()).collect();
    assert_eq!(
        runs,
        [
            "broken-then-fixed/RUN#2026-11-29T00:20:00Z",
            "broken-then-fixed/RUN#2026-11-29T00:40:00Z",
            "broken-then-fixed/RUN#2026-11-29T01:00:00Z",
        ]
    );
    assert!(alerts
        .iter()
        .all(|a| a.owner.as_deref() == Some("team-ledger")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_set_to_pause_on_failure_pauses_itself_audited_and_alerted() {
    let config = SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T02:00:00Z"));
    let spec = spec_with(
        "stops-itself",
        "*/10 * * * *",
        json!({
            "max_attempts": 1,
            "alerts": {"pause_after_failures": 3},
            "job": {"type": "noop", "fail_before": "2027-01-01T00:00:00Z"},
        }),
    );
    let (report, memory) = on_memory(vec![spec], &config).await;
    let alerts = of(&report, "stops-itself");
    assert_eq!(
        kinds(&alerts),
        vec![
            (AlertKind::ConsecutiveFailures, Severity::Warning),
            (AlertKind::PausedOnFailure, Severity::Critical),
        ],
        "NORMAL alerts at 3 failures, and pauses there: {alerts:#?}"
    );
    let stored = memory.get_schedule("stops-itself").await.expect("schedule");
    assert_eq!(stored.state, ScheduleState::Paused);
    let audit = memory.audit_log("stops-itself").await.expect("audit");
    assert!(
        audit
            .iter()
            .any(|e| e.actor == "cronledger" && e.reason.contains("PAUSED_ON_FAILURE")),
        "{audit:#?}"
    );
    let ran = report
        .ledger
        .iter()
        .filter(|e| e.entry.schedule == "stops-itself" && e.executions > 0)
        .count();
    assert_eq!(ran, 3, "no run executes after the pause");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_deadline_alerts_once() {
    let config = SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T00:45:00Z"));
    let spec = spec_with(
        "slow",
        "*/15 * * * *",
        json!({"deadline": "1m", "max_runtime": "10m",
               "job": {"type": "noop", "duration": "3m"}}),
    );
    let (report, _) = on_memory(vec![spec], &config).await;
    let alerts = of(&report, "slow");
    let runs: Vec<&str> = alerts.iter().filter_map(|a| a.run.as_deref()).collect();
    assert!(
        alerts.iter().all(|a| a.kind == AlertKind::DeadlineMissed),
        "{alerts:#?}"
    );
    let mut unique = runs.clone();
    unique.dedup();
    assert_eq!(runs, unique, "one alert per run, whoever saw it first");
    assert!(runs.len() >= 2, "{runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_alerts_one_gap_per_schedule_and_held_work_awaits_approval() {
    let mut config = SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T03:00:00Z"));
    config.outages =
        vec![Outage::parse("2026-11-29T00:30:00Z..2026-11-29T01:30:00Z").expect("an outage")];
    let specs = vec![
        spec_with(
            "skips",
            "*/10 * * * *",
            json!({"misfire": "SKIP", "owner": "team-a"}),
        ),
        spec_with(
            "asks",
            "*/10 * * * *",
            json!({"misfire": "MANUAL", "owner": "team-b"}),
        ),
    ];
    let (report, memory) = on_memory(specs, &config).await;
    // The skipped windows are counted for the schedule's health, as many as the ledger holds.
    let skipped: u64 = report
        .ledger
        .iter()
        .filter(|e| e.entry.schedule == "skips" && e.entry.status == RunStatus::Skipped)
        .map(|e| u64::from(e.entry.count.unwrap_or(1)))
        .sum();
    let day = t("2026-11-29T00:00:00Z").date_naive();
    let tallies = memory
        .outcome_days("skips", day, day)
        .await
        .expect("the day's counters");
    assert!(skipped > 0);
    assert_eq!(tallies.iter().map(|d| d.skipped).sum::<u64>(), skipped);
    let skips = of(&report, "skips");
    assert_eq!(
        kinds(&skips),
        vec![(AlertKind::MissedWindows, Severity::Warning)],
        "{skips:#?}"
    );
    let asks = of(&report, "asks");
    assert_eq!(
        kinds(&asks),
        vec![
            (AlertKind::MissedWindows, Severity::Critical),
            (AlertKind::AwaitingApproval, Severity::Warning),
        ],
        "{asks:#?}"
    );
    // The gap's held windows and the window that was under way when the outage began (found
    // late by its worker and held) are one request, named by the outage's first late window.
    assert_eq!(asks[1].subject, "outage:asks:2026-11-29T00:30:00Z");
    assert!(
        asks[0].message.contains("await approval"),
        "{}",
        asks[0].message
    );
}

/// One outage of a MANUAL schedule is one AWAITING_APPROVAL, whichever holds first: the
/// reconciler (the gap's windows, with the late window its worker will hold) or the worker
/// (the late window, before the reconciler finds the gap after it). The second holder's
/// alert is recorded once, under the outage's group, and not published again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_outage_of_a_manual_schedule_is_one_approval_request_whoever_holds_first() {
    // Ends on a reconciler pass (it tells the gap's 5 windows and the late one), then
    // between two passes (the worker takes the late window first and tells it alone).
    for (outage_end, first_told) in [
        ("2026-11-29T01:30:00Z", "6 run(s)"),
        ("2026-11-29T01:32:00Z", "1 run(s)"),
    ] {
        let mut config =
            SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T03:00:00Z"));
        config.outages =
            vec![Outage::parse(&format!("2026-11-29T00:30:00Z..{outage_end}")).expect("an outage")];
        let spec = spec_with("asks", "*/10 * * * *", json!({"misfire": "MANUAL"}));
        let (report, _) = on_memory(vec![spec], &config).await;
        let held: Vec<(String, Reason)> = report
            .ledger
            .iter()
            .filter(|e| e.entry.schedule == "asks" && e.entry.status == RunStatus::ManualRequired)
            .filter_map(|e| Some((e.entry.scheduled_for.clone(), e.entry.reason?)))
            .collect();
        assert!(
            held.iter()
                .any(|(at, reason)| at == "2026-11-29T00:30:00Z" && *reason == Reason::PolicyManual),
            "the worker held the late window: {held:?}"
        );
        assert!(held.len() >= 2, "and the reconciler the gap's: {held:?}");
        let told = awaiting(&report, "asks");
        assert_eq!(told.len(), 1, "outage until {outage_end}: {told:#?}");
        assert_eq!(told[0].subject, "outage:asks:2026-11-29T00:30:00Z");
        assert_eq!(told[0].run, None, "a request for the outage, not one run");
        assert!(
            told[0].message.starts_with(first_told),
            "{outage_end}: {}",
            told[0].message
        );
    }
}

/// A CRITICAL schedule's missed windows: one gap is a warning, a second within
/// `alerts.remind_after` of it is critical, and a gap after that is a warning again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_critical_schedules_second_gap_within_remind_after_is_critical() {
    let mut config = SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T07:00:00Z"));
    config.outages = [
        "2026-11-29T00:30:00Z..2026-11-29T01:00:00Z",
        "2026-11-29T01:30:00Z..2026-11-29T02:00:00Z",
        "2026-11-29T05:00:00Z..2026-11-29T05:30:00Z",
    ]
    .iter()
    .map(|o| Outage::parse(o).expect("an outage"))
    .collect();
    let specs = vec![
        spec_with(
            "pages",
            "*/10 * * * *",
            json!({"priority": "CRITICAL", "misfire": "SKIP", "alerts": {"remind_after": "2h"}}),
        ),
        spec_with(
            "tells",
            "*/10 * * * *",
            json!({"priority": "HIGH", "misfire": "SKIP", "alerts": {"remind_after": "2h"}}),
        ),
    ];
    let (report, _) = on_memory(specs, &config).await;
    let missed = |schedule| -> Vec<Severity> {
        of(&report, schedule)
            .into_iter()
            .filter(|a| a.kind == AlertKind::MissedWindows)
            .map(|a| a.severity)
            .collect()
    };
    let pages = missed("pages");
    assert_eq!(
        pages,
        vec![Severity::Warning, Severity::Critical, Severity::Warning],
        "{:#?}",
        of(&report, "pages")
    );
    let second = of(&report, "pages")
        .into_iter()
        .filter(|a| a.kind == AlertKind::MissedWindows)
        .nth(1)
        .expect("a second gap");
    assert!(
        second.message.contains("another gap within 2h"),
        "{}",
        second.message
    );
    assert_eq!(
        missed("tells"),
        vec![Severity::Warning; 3],
        "other priorities judge each gap alone"
    );
}

/// The simulator's reconciler pass interval: a reminder is raised by the first pass after
/// it is due.
const RECONCILER_EVERY: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// The AWAITING_APPROVAL alerts of `schedule`, in the order they were published.
fn awaiting<'a>(report: &'a SimulationReport, schedule: &str) -> Vec<&'a Alert> {
    of(report, schedule)
        .into_iter()
        .filter(|a| a.kind == AlertKind::AwaitingApproval)
        .collect()
}

/// A held gap is told once when it starts waiting, reminded once per `remind_after` while
/// it waits, and never again once an operator approved it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_windows_are_reminded_each_period_until_approved_then_never_again() {
    let mut config = SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T06:00:00Z"));
    config.outages =
        vec![Outage::parse("2026-11-29T00:30:00Z..2026-11-29T01:30:00Z").expect("an outage")];
    let approved = t("2026-11-29T04:00:00Z");
    config.approve_all_at = vec![approved];
    let spec = spec_with(
        "asks",
        "*/10 * * * *",
        json!({"misfire": "MANUAL", "alerts": {"remind_after": "1h"}}),
    );
    let (report, _) = on_memory(vec![spec], &config).await;
    let told = awaiting(&report, "asks");
    let firsts: Vec<&&Alert> = told
        .iter()
        .filter(|a| !a.subject.contains("#reminder-"))
        .collect();
    assert_eq!(
        firsts.len(),
        1,
        "the held gap and the held late window are one request: {told:#?}"
    );
    for first in firsts {
        let since = first.at;
        let due: Vec<i64> = (1..10)
            .filter(|k| since + chrono::TimeDelta::hours(*k) < approved)
            .collect();
        assert!(!due.is_empty(), "the test waits long enough for a reminder");
        let mut expected = vec![first.subject.clone()];
        expected.extend(
            due.iter()
                .map(|k| format!("{}#reminder-{k}", first.subject)),
        );
        let group: Vec<&&Alert> = told
            .iter()
            .filter(|a| a.subject.split("#reminder-").next() == Some(first.subject.as_str()))
            .collect();
        let subjects: Vec<&str> = group.iter().map(|a| a.subject.as_str()).collect();
        assert_eq!(subjects, expected, "{told:#?}");
        for (k, reminder) in due.iter().zip(&group[1..]) {
            let at = since + chrono::TimeDelta::hours(*k);
            assert!(
                reminder.at >= at && reminder.at <= at + RECONCILER_EVERY,
                "reminder {k} at {}, due {at}",
                reminder.at
            );
            assert!(reminder.message.contains("still await approval"));
        }
    }
}

/// Each window of an `approval: every_run` schedule is its own request: told once (the
/// ticker records it, the reconciler's outbox publishes it), reminded while it waits, and
/// left alone once it expired unapproved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_window_awaiting_approval_is_told_then_reminded_until_it_expires() {
    let config = SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T04:00:00Z"));
    let spec = spec_with(
        "approve-each",
        "0 * * * *",
        json!({
            "approval": "every_run",
            "approval_timeout": "90m",
            "alerts": {"remind_after": "1h"},
        }),
    );
    let (report, _) = on_memory(vec![spec], &config).await;
    let held: Vec<String> = report
        .ledger
        .iter()
        .filter(|e| {
            e.entry.schedule == "approve-each"
                && matches!(
                    e.entry.reason,
                    Some(Reason::ApprovalRequired | Reason::ApprovalTimeout)
                )
        })
        .map(|e| format!("approve-each/RUN#{}", e.entry.scheduled_for))
        .collect();
    assert!(held.len() >= 3, "{held:?}");
    let told = awaiting(&report, "approve-each");
    let mut reminded = 0;
    for key in &held {
        let subjects: Vec<&str> = told
            .iter()
            .filter(|a| a.run.as_deref() == Some(key.as_str()))
            .map(|a| a.subject.as_str())
            .collect();
        // Expired after 90 minutes: one reminder at most (at one hour).
        let reminder = format!("{key}#reminder-1");
        assert!(
            subjects == [key.as_str()] || subjects == [key.as_str(), reminder.as_str()],
            "{key}: {subjects:?}"
        );
        reminded += usize::from(subjects.len() == 2);
    }
    assert!(reminded >= 2, "windows that waited an hour were reminded");
    assert_eq!(told.len(), held.len() + reminded, "nothing else: {told:#?}");
}

/// A run whose worker vanished, of a job not declared idempotent, is held for an operator
/// (WORKER_LOST): the owner is told, naming the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_held_because_its_worker_vanished_awaits_approval_by_name() {
    let mut config = SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T01:00:00Z"));
    config.crashes = vec![CrashPoint::MidJob];
    config.crash_every = 3;
    let spec = spec_with("vanishes", "*/10 * * * *", json!({"owner": "team-c"}));
    let (report, _) = on_memory(vec![spec], &config).await;
    let lost: Vec<String> = report
        .ledger
        .iter()
        .filter(|e| e.reason == Some(Reason::WorkerLost))
        .map(|e| format!("vanishes/RUN#{}", e.entry.scheduled_for))
        .collect();
    assert!(!lost.is_empty(), "a crash held some window");
    let told = awaiting(&report, "vanishes");
    let named: Vec<&str> = told.iter().filter_map(|a| a.run.as_deref()).collect();
    assert_eq!(named, lost, "{told:#?}");
    assert!(told.iter().all(|a| a.owner.as_deref() == Some("team-c")));
}
