use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;

use super::*;
use crate::{Reason, Run, RunStatus, Schedule, Trigger};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("test instants are valid")
}

fn about(priority: Priority) -> About<'static> {
    About {
        schedule: "billing-sync",
        owner: Some("team-billing"),
        priority,
    }
}

fn run() -> RunRef<'static> {
    RunRef {
        key: "billing-sync/RUN#2026-12-01T09:00:00Z",
        window: Window::new(at("2026-12-01T08:00:00Z"), at("2026-12-01T09:00:00Z")),
    }
}

#[test]
fn the_failure_threshold_follows_priority_unless_set() {
    let default = AlertSettings::default();
    assert_eq!(default.failure_threshold(Priority::Critical), Some(1));
    assert_eq!(default.failure_threshold(Priority::High), Some(2));
    assert_eq!(default.failure_threshold(Priority::Normal), Some(3));
    assert_eq!(default.failure_threshold(Priority::Low), Some(3));
    let set = AlertSettings {
        after_failures: Some(5),
        ..AlertSettings::default()
    };
    assert_eq!(set.failure_threshold(Priority::Low), Some(5));
    let never = AlertSettings {
        after_failures: Some(0),
        ..AlertSettings::default()
    };
    assert_eq!(never.failure_threshold(Priority::Critical), None);
}

#[test]
fn failures_alert_at_n_as_a_warning_and_at_2n_as_critical_and_nowhere_else() {
    let now = at("2026-12-01T09:05:00Z");
    let settings = AlertSettings::default();
    let fired: Vec<(u32, Severity)> = (1..=10)
        .filter_map(|streak| {
            failures_in_a_row(&about(Priority::Normal), &settings, streak, &run(), now)
                .map(|a| (streak, a.severity))
        })
        .collect();
    assert_eq!(fired, vec![(3, Severity::Warning), (6, Severity::Critical)]);
    // A LOW job alerts at 3 failures too, and never pages.
    let low: Vec<(u32, Severity)> = (1..=10)
        .filter_map(|streak| {
            failures_in_a_row(&about(Priority::Low), &settings, streak, &run(), now)
                .map(|a| (streak, a.severity))
        })
        .collect();
    assert_eq!(low, vec![(3, Severity::Warning), (6, Severity::Warning)]);
}

/// The source requirements' defaults: failures in a row that alert, by priority.
#[test]
fn by_default_failures_alert_after_1_2_3_and_3_in_a_row_by_priority() {
    let settings = AlertSettings::default();
    let now = at("2026-12-01T09:05:00Z");
    for (priority, first, severity) in [
        (Priority::Critical, 1, Severity::Warning),
        (Priority::High, 2, Severity::Warning),
        (Priority::Normal, 3, Severity::Warning),
        (Priority::Low, 3, Severity::Warning),
    ] {
        let alerted: Vec<(u32, Severity)> = (1..=first)
            .filter_map(|streak| {
                failures_in_a_row(&about(priority), &settings, streak, &run(), now)
                    .map(|a| (streak, a.severity))
            })
            .collect();
        assert_eq!(alerted, vec![(first, severity)], "{priority:?}");
    }
}

#[test]
fn a_failure_alert_names_its_run_window_and_owner_and_is_keyed_by_the_run() {
    let alert = failures_in_a_row(
        &about(Priority::High),
        &AlertSettings::default(),
        2,
        &run(),
        at("2026-12-01T09:05:00Z"),
    )
    .expect("the threshold alerts");
    assert_eq!(alert.kind, AlertKind::ConsecutiveFailures);
    assert_eq!(alert.owner.as_deref(), Some("team-billing"));
    assert_eq!(alert.run.as_deref(), Some(run().key));
    assert_eq!(alert.window, Some(run().window));
    assert_eq!(
        alert.key(),
        "CONSECUTIVE_FAILURES#billing-sync/RUN#2026-12-01T09:00:00Z"
    );
    let body = serde_json::to_value(&alert).expect("serializes");
    assert_eq!(body["kind"], "CONSECUTIVE_FAILURES");
    assert_eq!(body["severity"], "warning");
}

#[test]
fn recovery_is_announced_only_after_a_failure_alert() {
    let now = at("2026-12-01T10:05:00Z");
    let s = AlertSettings::default();
    assert!(recovered(&about(Priority::Normal), &s, 2, &run(), now).is_none());
    let r = recovered(&about(Priority::Critical), &s, 3, &run(), now).expect("alerted before");
    assert_eq!(r.kind, AlertKind::Recovered);
    assert_eq!(r.severity, Severity::Info, "an all-clear never pages");
}

#[test]
fn pause_on_failure_needs_the_setting() {
    let off = AlertSettings::default();
    assert!(!pauses_on_failure(&off, 100));
    let on = AlertSettings {
        pause_after_failures: Some(3),
        ..AlertSettings::default()
    };
    assert!(!pauses_on_failure(&on, 2));
    assert!(pauses_on_failure(&on, 3));
    assert!(pauses_on_failure(&on, 4));
}

#[test]
fn a_deadline_alerts_for_a_run_unfinished_or_finished_late() {
    let deadline = Some(Span::hours(1));
    let a = about(Priority::Normal);
    let due = at("2026-12-01T10:00:00Z");
    assert!(deadline_missed(&a, deadline, &run(), None, due).is_none());
    let open = deadline_missed(&a, deadline, &run(), None, due + TimeDelta::seconds(1))
        .expect("unfinished past its deadline");
    assert!(open.message.contains("not finished"), "{}", open.message);
    let late = deadline_missed(&a, deadline, &run(), Some(due + TimeDelta::minutes(3)), due)
        .expect("finished late");
    assert_eq!(
        late.key(),
        open.key(),
        "one alert per run, whoever sees it first"
    );
    assert!(deadline_missed(&a, deadline, &run(), Some(due), due + TimeDelta::hours(2)).is_none());
    assert!(deadline_missed(&a, None, &run(), None, due + TimeDelta::days(9)).is_none());
}

#[test]
fn awaiting_approval_alerts_once_then_reminds_each_period() {
    let s = AlertSettings::default();
    let a = about(Priority::Normal);
    let since = at("2026-12-01T00:00:00Z");
    let keys: Vec<String> = [0, 1, 3, 4, 5, 8, 9]
        .iter()
        .filter_map(|h| {
            awaiting_approval(
                &a,
                &s,
                "catchup:x:1",
                12,
                since,
                since + TimeDelta::hours(*h),
            )
            .map(|al| al.key())
        })
        .collect();
    assert_eq!(
        keys,
        vec![
            "AWAITING_APPROVAL#catchup:x:1",
            "AWAITING_APPROVAL#catchup:x:1",
            "AWAITING_APPROVAL#catchup:x:1",
            "AWAITING_APPROVAL#catchup:x:1#reminder-1",
            "AWAITING_APPROVAL#catchup:x:1#reminder-1",
            "AWAITING_APPROVAL#catchup:x:1#reminder-2",
            "AWAITING_APPROVAL#catchup:x:1#reminder-2",
        ]
    );
    assert!(awaiting_approval(&a, &s, "g", 0, since, since).is_none());
}

#[test]
fn missed_windows_with_held_work_are_critical_and_low_jobs_never_page() {
    let gap = Gap {
        gap_id: "catchup:billing-sync:2026-12-01T00:00:00Z",
        missed: 6,
        first: at("2026-12-01T00:00:00Z"),
        last: at("2026-12-01T05:00:00Z"),
        decision: "held for approval".into(),
        held: 6,
    };
    let now = at("2026-12-01T06:00:00Z");
    let normal = missed_windows(&about(Priority::Normal), &gap, now).expect("a gap alerts");
    assert_eq!(normal.severity, Severity::Critical);
    assert!(normal.message.contains("6 await approval"));
    let low = missed_windows(&about(Priority::Low), &gap, now).expect("a gap alerts");
    assert_eq!(low.severity, Severity::Warning);
    let none = Gap { missed: 0, ..gap };
    assert!(missed_windows(&about(Priority::Normal), &none, now).is_none());
}

fn gap_of(held: u32) -> Gap<'static> {
    Gap {
        gap_id: "catchup:billing-sync:2026-12-01T00:00:00Z",
        missed: 3,
        first: at("2026-12-01T00:00:00Z"),
        last: at("2026-12-01T02:00:00Z"),
        decision: "skipped".into(),
        held,
    }
}

#[test]
fn a_critical_schedules_first_gap_is_a_warning_and_a_second_within_remind_after_is_critical() {
    let now = at("2026-12-01T03:00:00Z");
    let critical = about(Priority::Critical);
    let first = missed_windows(&critical, &gap_of(0), now).expect("a gap alerts");
    assert_eq!(first.severity, Severity::Warning, "one miss is a warning");
    assert!(escalates_repeated_gaps(Priority::Critical));
    let second = repeated_gap(first.clone(), Span::hours(4));
    assert_eq!(second.severity, Severity::Critical, "two misses page");
    assert_eq!(second.key(), first.key(), "still the same gap's one alert");
    assert!(
        second.message.contains("another gap within 4h"),
        "{}",
        second.message
    );
    for other in [Priority::High, Priority::Normal, Priority::Low] {
        assert!(!escalates_repeated_gaps(other), "{other:?}");
    }
    // Only a gap's alert escalates.
    let failure = failures_in_a_row(&critical, &AlertSettings::default(), 1, &run(), now)
        .expect("CRITICAL alerts at the first failure");
    assert_eq!(
        repeated_gap(failure.clone(), Span::hours(4)).severity,
        failure.severity
    );
}

#[test]
fn lateness_holds_belong_to_their_outage_other_holds_to_their_run() {
    for late in [
        Reason::PolicyManual,
        Reason::GapTooLong,
        Reason::SideEffects,
        Reason::CapExceeded,
    ] {
        assert!(held_for_lateness(Some(late)), "{late:?}");
    }
    for own in [
        Reason::ApprovalRequired,
        Reason::WorkerLost,
        Reason::AffectedOverLimit,
        Reason::RetriesExhausted,
    ] {
        assert!(!held_for_lateness(Some(own)), "{own:?}");
    }
    assert!(!held_for_lateness(None));
    assert_eq!(
        outage_group("asks", at("2026-11-29T00:30:00Z")),
        "outage:asks:2026-11-29T00:30:00Z"
    );
}

fn manual_schedule() -> Schedule {
    let spec = crate::spec::parse_manifest(
        r#"{"schedules": [{"id": "asks", "cron": "*/10 * * * *", "timezone": "UTC",
            "misfire": "MANUAL", "job": {"type": "noop"}}]}"#,
        &crate::ValidationRules::default(),
        at("2026-11-29T00:00:00Z"),
    )
    .expect("a valid manifest")
    .remove(0);
    Schedule::new(spec).expect("a valid schedule")
}

/// A live run of `schedule` at `at` as the ticker wrote it, then `status` and `reason`.
fn live_run(schedule: &Schedule, at_text: &str, status: RunStatus, reason: Option<Reason>) -> Run {
    let at_time = at(at_text);
    let mut run = schedule.pending_run(
        at_time,
        Window::new(at_time - TimeDelta::minutes(10), at_time),
        crate::run::Origin::Expected,
        Trigger::Scheduled,
        at_time,
        1,
    );
    run.status = status;
    run.reason = reason;
    run
}

#[test]
fn an_outage_begins_at_the_late_runs_just_before_its_gap() {
    let schedule = manual_schedule();
    let gap_first = at("2026-11-29T00:40:00Z");
    let now = at("2026-11-29T01:35:00Z");
    // Nothing late before the gap: it begins the outage.
    let on_time = live_run(&schedule, "2026-11-29T00:30:00Z", RunStatus::Success, None);
    assert_eq!(
        outage_start(&schedule, gap_first, &[on_time], now),
        (gap_first, 0)
    );
    // The window fired as the outage began, still waiting past its grace (its worker will
    // hold it), and the one before it, held late already: both are the outage's.
    let waiting = live_run(&schedule, "2026-11-29T00:30:00Z", RunStatus::Queued, None);
    let held = live_run(
        &schedule,
        "2026-11-29T00:20:00Z",
        RunStatus::ManualRequired,
        Some(Reason::PolicyManual),
    );
    let earlier = live_run(&schedule, "2026-11-29T00:10:00Z", RunStatus::Success, None);
    assert_eq!(
        outage_start(&schedule, gap_first, &[earlier, held, waiting.clone()], now),
        (at("2026-11-29T00:20:00Z"), 2)
    );
    // A run held for its own reason (an unknown outcome) is its own request.
    let lost = live_run(
        &schedule,
        "2026-11-29T00:30:00Z",
        RunStatus::ManualRequired,
        Some(Reason::WorkerLost),
    );
    assert_eq!(
        outage_start(&schedule, gap_first, &[lost], now),
        (gap_first, 0)
    );
    // Not late yet (within its grace): not part of an outage.
    let fresh_now = at("2026-11-29T00:30:30Z");
    assert_eq!(
        outage_start(&schedule, gap_first, &[waiting], fresh_now),
        (gap_first, 0)
    );
}

#[test]
fn the_headline_is_one_short_ascii_line() {
    let mut alert = backfill_paused(
        &about(Priority::Normal),
        "backfill bf-1",
        "realtime lane behind: 1,200 messages — 결제",
        at("2026-12-01T06:00:00Z"),
    );
    alert.message = format!("{}\n{}", alert.message, "x".repeat(300));
    let h = alert.headline();
    assert!(h.len() < 100, "{h}");
    assert!(h.chars().all(|c| c.is_ascii_graphic() || c == ' '), "{h}");
}

#[test]
fn slo_targets_read_as_percent() {
    let slo: FreshnessSlo =
        serde_json::from_value(serde_json::json!({"within": "30m", "target": "99.5%"}))
            .expect("parses");
    assert_eq!(slo.target, 99.5);
    assert_eq!(slo.within, Span::minutes(30));
    let back = serde_json::to_value(slo).expect("serializes");
    assert_eq!(back["target"], "99.5%");
}

#[test]
fn an_incomplete_ledger_alerts_once_per_range_with_counts_and_a_sample() {
    let day = Window::new(at("2026-12-01T00:00:00Z"), at("2026-12-02T00:00:00Z"));
    let missing = [at("2026-12-01T03:00:00Z"), at("2026-12-01T04:00:00Z")];
    let twice = [at("2026-12-01T09:00:00Z")];
    let found = Incompleteness {
        range: day,
        missing: 7,
        missing_sample: &missing,
        duplicates: 1,
        duplicate_sample: &twice,
        unexplained: 0,
        unexplained_sample: &[],
    };
    let now = at("2026-12-02T01:00:00Z");
    let alert =
        ledger_incomplete(&about(Priority::Normal), &found, now).expect("an incomplete ledger");
    assert_eq!(alert.kind, AlertKind::LedgerIncomplete);
    assert_eq!(alert.severity, Severity::Critical);
    assert_eq!(alert.schedule, "billing-sync");
    assert_eq!(alert.owner.as_deref(), Some("team-billing"));
    assert_eq!(alert.window, Some(day));
    assert_eq!(
        alert.key(),
        "LEDGER_INCOMPLETE#audit:2026-12-01T00:00:00Z/2026-12-02T00:00:00Z"
    );
    assert_eq!(
        alert.message,
        "ledger audit of 2026-12-01T00:00:00Z/2026-12-02T00:00:00Z: windows 7 missing \
         (2026-12-01T03:00:00Z, 2026-12-01T04:00:00Z, ...); 1 duplicated \
         (2026-12-01T09:00:00Z); 0 unexplained"
    );
    // The same range audited again (a retry, an operator's run) is the same alert.
    let again = ledger_incomplete(&about(Priority::Normal), &found, now + TimeDelta::hours(3))
        .expect("still incomplete");
    assert_eq!(again.key(), alert.key());
    // A LOW schedule's is a warning; a complete ledger alerts nothing.
    let low = ledger_incomplete(&about(Priority::Low), &found, now).expect("an alert");
    assert_eq!(low.severity, Severity::Warning);
    let complete = Incompleteness {
        missing: 0,
        missing_sample: &[],
        duplicates: 0,
        duplicate_sample: &[],
        ..found
    };
    assert!(ledger_incomplete(&about(Priority::Normal), &complete, now).is_none());
}

fn status() -> impl Strategy<Value = RunStatus> {
    prop_oneof![
        Just(RunStatus::Success),
        Just(RunStatus::PartialSuccess),
        Just(RunStatus::Failed),
        Just(RunStatus::Skipped),
        Just(RunStatus::Coalesced),
        Just(RunStatus::Running),
        Just(RunStatus::Queued),
    ]
}

proptest! {
    /// The streak is the FAILED runs after the newest success, whatever sits between them.
    #[test]
    fn the_streak_counts_failures_since_the_last_success(history in proptest::collection::vec(status(), 0..40)) {
        let streak = failure_streak(history.iter().copied());
        let since_success = history
            .iter()
            .rposition(|s| matches!(s, RunStatus::Success | RunStatus::PartialSuccess))
            .map_or(&history[..], |i| &history[i + 1..]);
        let failures = since_success.iter().filter(|s| **s == RunStatus::Failed).count() as u32;
        prop_assert_eq!(streak, failures);
    }

    /// However a schedule fails, it alerts at most twice per streak, and the second is critical.
    #[test]
    fn a_streak_alerts_at_most_twice(n in 1u32..6, len in 0u32..40) {
        let settings = AlertSettings { after_failures: Some(n), ..AlertSettings::default() };
        let now = at("2026-12-01T09:05:00Z");
        let fired: Vec<Severity> = (1..=len)
            .filter_map(|s| failures_in_a_row(&about(Priority::Normal), &settings, s, &run(), now))
            .map(|a| a.severity)
            .collect();
        prop_assert!(fired.len() <= 2);
        prop_assert_eq!(fired.len() as u32, u32::from(len >= n) + u32::from(len >= 2 * n));
        if fired.len() == 2 {
            prop_assert_eq!(fired[1], Severity::Critical);
        }
    }

    /// A tracker that reminds at `next_reminder` raises each reminder exactly once, however
    /// late or often the passes that look at it run.
    #[test]
    fn reminders_at_next_reminder_raise_each_one_once(gaps in proptest::collection::vec(1i64..20_000, 1..40), hours in 1u64..6) {
        let settings = AlertSettings { remind_after: Some(Span::hours(hours)), ..AlertSettings::default() };
        let a = about(Priority::Normal);
        let since = at("2026-12-01T00:00:00Z");
        let mut remind_at = next_reminder(&settings, since, since);
        prop_assert_eq!(remind_at, since + TimeDelta::hours(hours as i64));
        let mut now = since;
        let mut raised = Vec::new();
        for gap in gaps {
            now += TimeDelta::seconds(gap);
            if now < remind_at {
                continue;
            }
            let alert = awaiting_approval(&a, &settings, "g", 1, since, now).expect("still waiting");
            raised.push(alert.key());
            remind_at = next_reminder(&settings, since, now);
            prop_assert!(remind_at > now);
        }
        let due = (now - since).num_seconds() / (hours as i64 * 3600);
        let expected: Vec<String> = (1..=due).map(|n| format!("AWAITING_APPROVAL#g#reminder-{n}")).collect();
        // A late pass covers the reminders it slept through with the newest one.
        prop_assert!(raised.len() as i64 <= due);
        prop_assert!(raised.iter().all(|k| expected.contains(k)));
        let mut unique = raised.clone();
        unique.dedup();
        prop_assert_eq!(unique.len(), raised.len(), "each reminder once");
        if due > 0 {
            prop_assert_eq!(raised.last(), expected.last());
        }
    }
}
