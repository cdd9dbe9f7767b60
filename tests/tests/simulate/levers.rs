//! The operator's levers in a simulation (pause, resume, the kill switch, approving what
//! awaits approval) and the execution facts of each ledger entry.

use chrono::{DateTime, Utc};
use cronledger_app::faults::CrashPoint;
use cronledger_app::simulate::{
    Outage, ScheduleAt, SimulatedEntry, SimulationConfig, SimulationReport,
};
use cronledger_aws::BackfillState;
use cronledger_core::{Reason, RunStatus};
use cronledger_tests::{spec_with, t};
use serde_json::json;

use super::{assert_accounted, assert_all_accounted, run, summary};

fn entries_of<'a>(report: &'a SimulationReport, id: &str) -> Vec<&'a SimulatedEntry> {
    report.ledger.iter().filter(|e| e.schedule == id).collect()
}

fn first_start(e: &SimulatedEntry) -> Option<DateTime<Utc>> {
    e.first_started_at.as_deref().map(t)
}

fn window(e: &SimulatedEntry) -> DateTime<Utc> {
    t(&e.scheduled_for)
}

/// What a pause of `id` from `paused` to `resumed` leaves: nothing of it starts in between
/// (a window already in a lane at the pause included), and every window in between is
/// SKIPPED (PAUSED), never executed.
pub(super) fn assert_paused_between(
    report: &SimulationReport,
    id: &str,
    paused: DateTime<Utc>,
    resumed: DateTime<Utc>,
) {
    for e in entries_of(report, id) {
        let w = window(e);
        if let Some(started) = first_start(e) {
            assert!(started < paused || started >= resumed, "{e:?}");
        }
        if paused < w && w < resumed {
            assert_eq!(
                (
                    e.status,
                    e.reason,
                    e.executions,
                    e.first_started_at.as_deref()
                ),
                (RunStatus::Skipped, Some(Reason::Paused), 0, None),
                "{e:?}"
            );
        }
    }
}

/// Paused at 00:10 and resumed at 00:20: the ticker records the windows between SKIPPED
/// (PAUSED) and nothing of the schedule starts in between; it runs again after the resume,
/// and the other schedule never stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_holds_the_schedule_until_its_resume() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T00:30:00Z"));
    let (paused, resumed) = (t("2026-03-01T00:10:00Z"), t("2026-03-01T00:20:00Z"));
    config.pauses = vec![ScheduleAt::parse("pause", "minutely@2026-03-01T00:10:00Z").unwrap()];
    config.resumes = vec![ScheduleAt::parse("resume", "minutely@2026-03-01T00:20:00Z").unwrap()];
    let specs = vec![
        spec_with("minutely", "* * * * *", json!({"misfire": "SKIP"})),
        spec_with("minutely-other", "* * * * *", json!({"misfire": "SKIP"})),
    ];
    let report = run(specs, config).await;
    assert_all_accounted(&report);
    let minutely = entries_of(&report, "minutely");
    assert_eq!(minutely.len(), 30);
    assert_paused_between(&report, "minutely", paused, resumed);
    for e in &minutely {
        if window(e) > resumed {
            assert_eq!(e.status, RunStatus::Success, "{e:?}");
            assert_eq!(e.executions, 1, "{e:?}");
        }
    }
    assert!(summary(&report, "minutely").skipped >= 9);
    assert_eq!(summary(&report, "minutely-other").ran, 30);
    assert_eq!(
        report.stats.levers,
        [
            "2026-03-01T00:10:00Z paused minutely",
            "2026-03-01T00:20:00Z resumed minutely"
        ]
    );
}

/// The only schedule paused: every tick finds nothing due, and the simulation skips idle
/// ticks; after the resume it ticks again and the schedule runs on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_paused_schedule_runs_on_time_after_its_resume() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T00:20:00Z"));
    config.pauses = vec![ScheduleAt::parse("pause", "minutely@2026-03-01T00:05:00Z").unwrap()];
    config.resumes = vec![ScheduleAt::parse("resume", "minutely@2026-03-01T00:10:00Z").unwrap()];
    let specs = vec![spec_with(
        "minutely",
        "* * * * *",
        json!({"misfire": "SKIP"}),
    )];
    let report = run(specs, config).await;
    assert_all_accounted(&report);
    let after: Vec<&SimulatedEntry> = entries_of(&report, "minutely")
        .into_iter()
        .filter(|e| window(e) > t("2026-03-01T00:10:00Z"))
        .collect();
    assert_eq!(after.len(), 10);
    for e in after {
        assert_eq!(e.status, RunStatus::Success, "{e:?}");
        assert_eq!(first_start(e), Some(window(e)), "{e:?}");
    }
}

/// The kill switch on 00:10..00:25: nothing starts inside it, the messages wait in their
/// lanes, and afterwards every window of the range is accounted for by the misfire policies
/// (late starts judged by the worker, missed windows by the reconciler), nothing in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kill_switch_starts_nothing_and_loses_nothing() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T00:45:00Z"));
    let switch =
        Outage::parse_as("kill switch", "2026-03-01T00:10:00Z..2026-03-01T00:25:00Z").unwrap();
    config.kill_switches = vec![switch];
    let specs = vec![
        spec_with("minutely-skip", "* * * * *", json!({"misfire": "SKIP"})),
        spec_with(
            "five-minutely-once",
            "*/5 * * * *",
            json!({"misfire": "RUN_ONCE", "side_effects": false}),
        ),
        spec_with(
            "five-minutely-catch-up",
            "*/5 * * * *",
            json!({"misfire": "CATCH_UP_ALL", "side_effects": false}),
        ),
    ];
    let report = run(specs, config).await;
    assert_all_accounted(&report);
    for e in &report.ledger {
        if let Some(started) = first_start(e) {
            assert!(
                !switch.covers(started),
                "started inside the kill switch: {e:?}"
            );
        }
    }
    // Ran before and after it, nothing during it: no tick, no pass, no delivery.
    let started: Vec<DateTime<Utc>> = report.ledger.iter().filter_map(first_start).collect();
    assert!(started.iter().any(|s| *s < switch.from));
    assert!(started.iter().any(|s| *s >= switch.to));
    assert_eq!(report.stats.kill_switches, [switch]);
    assert!(report.stats.outages.is_empty());
    assert_eq!(
        report.stats.levers,
        [
            "2026-03-01T00:10:00Z kill switch on",
            "2026-03-01T00:25:00Z kill switch off"
        ]
    );
    // The windows due inside it were judged afterwards: SKIP skipped them, all but the two
    // still inside their grace when it went off (00:23 and 00:24, fired late by the 00:25
    // tick, as `grace` says).
    let skip = summary(&report, "minutely-skip");
    assert!(skip.skipped >= 13, "{skip:?}");
    // CATCH_UP_ALL caught up the windows the reconciler found missed (00:15, 00:20).
    let catch_up = summary(&report, "five-minutely-catch-up");
    assert_eq!(catch_up.caught_up, 2, "{catch_up:?}");
}

/// `misfire: MANUAL` behind an outage holds its missed windows for an operator; approving
/// everything at 00:35 runs them (through the manual lane), and the CATCH_UP_ALL schedule
/// with side effects gets its held gap released by resuming its paused backfill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_everything_runs_what_awaited_approval() {
    let config = || {
        let mut c = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T00:40:00Z"));
        c.outages = vec![Outage::parse("2026-03-01T00:10:00Z..2026-03-01T00:25:00Z").unwrap()];
        c
    };
    let specs = || {
        vec![
            spec_with(
                "five-minutely-manual",
                "*/5 * * * *",
                json!({"misfire": "MANUAL"}),
            ),
            spec_with(
                "minutely-effects",
                "* * * * *",
                json!({"misfire": "CATCH_UP_ALL", "side_effects": true}),
            ),
        ]
    };
    let mut approving = config();
    let approved_at = t("2026-03-01T00:35:00Z");
    approving.approve_all_at = vec![approved_at];
    let (held, approved) = tokio::join!(run(specs(), config()), run(specs(), approving));
    assert_all_accounted(&held);
    assert_all_accounted(&approved);

    let waiting: Vec<&str> = entries_of(&held, "five-minutely-manual")
        .into_iter()
        .filter(|e| e.status == RunStatus::ManualRequired)
        .map(|e| e.scheduled_for.as_str())
        .collect();
    assert!(waiting.len() >= 3, "{waiting:?}");
    for e in entries_of(&approved, "five-minutely-manual") {
        if waiting.contains(&e.scheduled_for.as_str()) {
            assert_eq!(e.status, RunStatus::Success, "{e:?}");
            assert_eq!(e.executions, 1, "{e:?}");
            assert!(first_start(e).is_some_and(|s| s >= approved_at), "{e:?}");
        }
    }
    let manual = summary(&approved, "five-minutely-manual");
    assert_eq!(manual.manual, 0, "{manual:?}");

    // The gap held behind a paused proposal: resumed, its windows released and folded.
    assert!(summary(&held, "minutely-effects").manual > 0);
    assert_eq!(summary(&approved, "minutely-effects").manual, 0);
    assert!(approved
        .backfills
        .iter()
        .all(|b| b.state != BackfillState::Paused));
    let pulled = &approved.stats.levers;
    assert_eq!(pulled.len(), 1, "{pulled:?}");
    assert!(
        pulled[0].starts_with("2026-03-01T00:35:00Z approved "),
        "{pulled:?}"
    );
    assert!(
        approved.stats.errors.is_empty(),
        "{:?}",
        approved.stats.errors
    );
}

/// Each entry says how many times its job was called and when its first attempt started:
/// once, twice (a retried failure), never (a window missed in an outage, null).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_count_their_executions_and_first_start() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T00:15:00Z"));
    // 00:10 is past its 2-minute grace when the outage ends.
    config.outages = vec![Outage::parse("2026-03-01T00:06:00Z..2026-03-01T00:14:00Z").unwrap()];
    let specs = vec![
        spec_with("once", "*/5 * * * *", json!({"misfire": "SKIP"})),
        spec_with(
            "flaky",
            "*/5 * * * *",
            json!({"misfire": "SKIP", "job": {"type": "noop", "fail_times": 1}}),
        ),
    ];
    let report = run(specs, config).await;
    assert_all_accounted(&report);
    let entry = |id: &str, at: &str| {
        report
            .ledger
            .iter()
            .find(|e| e.schedule == id && e.scheduled_for == at)
            .unwrap_or_else(|| panic!("no entry {id} {at}"))
    };
    let facts = |e: &SimulatedEntry| {
        let doc = serde_json::to_value(e).unwrap();
        (
            e.status,
            doc["executions"].clone(),
            doc["first_started_at"].clone(),
        )
    };
    assert_eq!(
        facts(entry("once", "2026-03-01T00:05:00Z")),
        (RunStatus::Success, json!(1), json!("2026-03-01T00:05:00Z"))
    );
    let flaky = entry("flaky", "2026-03-01T00:05:00Z");
    assert_eq!(
        facts(flaky),
        (RunStatus::Success, json!(2), json!("2026-03-01T00:05:00Z"))
    );
    assert_eq!(flaky.attempts, 2);
    for id in ["once", "flaky"] {
        let missed = entry(id, "2026-03-01T00:10:00Z");
        assert_eq!(missed.status, RunStatus::Skipped, "{missed:?}");
        assert_eq!(facts(missed).1, json!(0));
        assert_eq!(facts(missed).2, serde_json::Value::Null);
    }
    // Only added: the ledger's own fields are all still there.
    let doc = serde_json::to_value(flaky).unwrap();
    for field in [
        "schedule",
        "scheduled_for",
        "trigger",
        "status",
        "reason",
        "attempts",
        "window_start",
        "window_end",
        "idempotency_key",
        "replay_group_id",
    ] {
        assert!(doc.get(field).is_some(), "no {field} in {doc}");
    }
}

/// A completion write lost after the job succeeded: an idempotent job runs again, and that
/// second execution is a duplicate like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reexecution_after_a_lost_completion_is_a_duplicate() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T00:10:00Z"));
    config.crashes = vec![CrashPoint::BeforeCompletionWrite];
    config.crash_every = 100;
    let specs = vec![spec_with(
        "minutely-idempotent",
        "* * * * *",
        json!({"misfire": "SKIP", "idempotent": true}),
    )];
    let report = run(specs, config).await;
    assert_accounted(&report, |_| 1);
    let s = summary(&report, "minutely-idempotent");
    assert_eq!(s.reexecuted_after_lost_completion, 1, "{s:?}");
    let twice: Vec<&SimulatedEntry> = report.ledger.iter().filter(|e| e.executions == 2).collect();
    assert_eq!(twice.len(), 1, "{twice:?}");
}
