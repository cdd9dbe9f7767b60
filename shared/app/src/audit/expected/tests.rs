use super::*;

use chrono::TimeZone;
use cronledger_core::attempt::AttemptEnd;
use cronledger_core::spec::validate_schedule;
use cronledger_core::steps::{StepCheckpoint, StepStatus};
use cronledger_core::{RunStatus, Trigger, ValidationRules};
use proptest::prelude::*;
use serde_json::{json, Value};

fn t(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn spec(cron: &str, more: Value) -> ScheduleSpec {
    let mut doc = json!({"id": "s", "cron": cron, "timezone": "UTC", "owner": "tests", "job": {"type": "noop"}});
    if let (Some(doc), Some(more)) = (doc.as_object_mut(), more.as_object()) {
        doc.extend(more.clone());
    }
    validate_schedule(
        &doc,
        "",
        &ValidationRules::default(),
        t("2026-01-01T00:00:00Z"),
    )
    .unwrap()
}

/// An audit log entry of a change: the spec and state it left, at `at`.
fn change(
    version: u64,
    action: AuditAction,
    at: &str,
    spec: &ScheduleSpec,
    state: &str,
) -> AuditEntry {
    AuditEntry {
        schedule_id: "s".into(),
        version,
        action,
        actor: "tests".into(),
        reason: "tests".into(),
        at: t(at),
        before: None,
        after: json!({"spec": spec, "version": version, "state": state, "pauses": []}),
        details: None,
    }
}

fn history(entries: &[AuditEntry]) -> History {
    History::from_log("s", entries, entries[0].at).unwrap()
}

fn hourly_since(at: &str) -> History {
    history(&[change(
        1,
        AuditAction::Create,
        at,
        &spec("0 * * * *", json!({})),
        "ACTIVE",
    )])
}

/// Hourly from 2026-03-01T00:00Z, then `cron` from `edit` (version 2).
fn hourly_then(edit: &str, cron: &str) -> History {
    history(&[
        change(
            1,
            AuditAction::Create,
            "2026-03-01T00:00:00Z",
            &spec("0 * * * *", json!({})),
            "ACTIVE",
        ),
        change(
            2,
            AuditAction::Update,
            edit,
            &spec(cron, json!({})),
            "ACTIVE",
        ),
    ])
}

fn times(list: &[&str]) -> Vec<DateTime<Utc>> {
    list.iter().map(|s| t(s)).collect()
}

/// The automatic entry of window `at`, named under `version`, in `status`.
fn entry(at: &str, version: u64, status: RunStatus) -> Run {
    entry_at(t(at), version, status)
}

fn entry_at(at: DateTime<Utc>, version: u64, status: RunStatus) -> Run {
    static HOURLY: std::sync::OnceLock<Schedule> = std::sync::OnceLock::new();
    let schedule = HOURLY.get_or_init(|| Schedule::new(spec("0 * * * *", json!({}))).unwrap());
    let mut run = schedule.pending_run(
        at,
        schedule.window_for(at),
        Origin::Expected,
        Trigger::Scheduled,
        at,
        version,
    );
    run.status = status;
    run
}

fn executed(mut run: Run, attempts: u32) -> Run {
    run.attempts = attempts;
    run.status = RunStatus::Success;
    run
}

fn range_record(first: &str, last: &str, count: u32) -> Run {
    let mut run = entry(first, 1, RunStatus::Skipped);
    run.trigger = Trigger::CatchUp;
    run.range_end = Some(t(last));
    run.count = count;
    run
}

fn audit_of(history: &History, runs: &[Run], from: &str, to: &str) -> Findings {
    audit(history, runs, &HashSet::new(), t(from), t(to))
}

#[test]
fn a_new_schedule_expects_the_windows_after_its_creation_within_the_range() {
    let h = hourly_since("2026-03-01T10:00:00Z");
    // The creation instant is no window of it: the first one is strictly after.
    assert_eq!(
        h.expected(t("2026-03-01T09:00:00Z"), t("2026-03-01T13:00:00Z")),
        times(&["2026-03-01T11:00:00Z", "2026-03-01T12:00:00Z"])
    );
    // `[from, to)`: from is in, to is out.
    assert_eq!(
        h.expected(t("2026-03-01T11:00:00Z"), t("2026-03-01T12:00:00Z")),
        times(&["2026-03-01T11:00:00Z"])
    );
    assert!(h
        .expected(t("2026-03-01T12:00:00Z"), t("2026-03-01T12:00:00Z"))
        .is_empty());
}

#[test]
fn each_version_expects_its_own_grid_up_to_the_next_change() {
    let h = hourly_then("2026-03-01T02:10:00Z", "*/30 * * * *");
    assert_eq!(
        h.expected(t("2026-03-01T01:00:00Z"), t("2026-03-01T04:00:00Z")),
        times(&[
            "2026-03-01T01:00:00Z",
            "2026-03-01T02:00:00Z",
            "2026-03-01T02:30:00Z",
            "2026-03-01T03:00:00Z",
            "2026-03-01T03:30:00Z",
        ])
    );
    // A window at the edit's very instant is the old version's.
    let h = hourly_then("2026-03-01T02:00:00Z", "30 * * * *");
    assert_eq!(
        h.expected(t("2026-03-01T01:30:00Z"), t("2026-03-01T03:00:00Z")),
        times(&["2026-03-01T02:00:00Z", "2026-03-01T02:30:00Z"])
    );
    assert_eq!(
        h.in_force_at(t("2026-03-01T02:00:00Z")).map(|v| v.number),
        Some(1)
    );
    assert_eq!(
        h.in_force_at(t("2026-03-01T02:00:01Z")).map(|v| v.number),
        Some(2)
    );
}

#[test]
fn paused_windows_are_expected_disabled_and_archived_ones_are_not() {
    let hourly = spec("0 * * * *", json!({}));
    let disabled = spec("0 * * * *", json!({"enabled": false}));
    let h = history(&[
        change(
            1,
            AuditAction::Create,
            "2026-03-01T00:00:00Z",
            &hourly,
            "ACTIVE",
        ),
        change(
            2,
            AuditAction::Pause,
            "2026-03-01T01:30:00Z",
            &hourly,
            "PAUSED",
        ),
        change(
            3,
            AuditAction::Resume,
            "2026-03-01T03:30:00Z",
            &hourly,
            "ACTIVE",
        ),
        change(
            4,
            AuditAction::Update,
            "2026-03-01T05:30:00Z",
            &disabled,
            "ACTIVE",
        ),
        change(
            5,
            AuditAction::Update,
            "2026-03-01T07:30:00Z",
            &hourly,
            "ACTIVE",
        ),
        change(
            6,
            AuditAction::Archive,
            "2026-03-01T09:30:00Z",
            &hourly,
            "ARCHIVED",
        ),
    ]);
    assert_eq!(
        h.expected(t("2026-03-01T00:00:00Z"), t("2026-03-01T12:00:00Z")),
        times(&[
            "2026-03-01T01:00:00Z",
            // Paused: expected (recorded SKIPPED, PAUSED).
            "2026-03-01T02:00:00Z",
            "2026-03-01T03:00:00Z",
            "2026-03-01T04:00:00Z",
            "2026-03-01T05:00:00Z",
            // Disabled from 05:30 to 07:30: none.
            "2026-03-01T08:00:00Z",
            "2026-03-01T09:00:00Z",
            // Archived at 09:30: none after.
        ])
    );
}

#[test]
fn bounds_limit_the_windows_of_every_version() {
    let bounded = spec(
        "0 * * * *",
        json!({"start_at": "2026-03-01T03:00:00Z", "end_at": "2026-03-01T05:00:00Z"}),
    );
    let h = history(&[change(
        1,
        AuditAction::Create,
        "2026-03-01T00:00:00Z",
        &bounded,
        "ACTIVE",
    )]);
    assert_eq!(
        h.expected(t("2026-03-01T00:00:00Z"), t("2026-03-01T12:00:00Z")),
        times(&[
            "2026-03-01T03:00:00Z",
            "2026-03-01T04:00:00Z",
            "2026-03-01T05:00:00Z"
        ])
    );
    // `max_runs` counts from the creation when there is no `start_at`.
    let three = spec("0 * * * *", json!({"max_runs": 3}));
    let h = history(&[change(
        1,
        AuditAction::Create,
        "2026-03-01T00:30:00Z",
        &three,
        "ACTIVE",
    )]);
    assert_eq!(
        h.expected(t("2026-03-01T00:00:00Z"), t("2026-03-01T12:00:00Z")),
        times(&[
            "2026-03-01T01:00:00Z",
            "2026-03-01T02:00:00Z",
            "2026-03-01T03:00:00Z"
        ])
    );
}

#[test]
fn a_log_entry_whose_spec_does_not_read_is_a_malformed_item() {
    let mut bad = change(
        1,
        AuditAction::Create,
        "2026-03-01T00:00:00Z",
        &spec("0 * * * *", json!({})),
        "ACTIVE",
    );
    bad.after = json!({"spec": {"id": "s"}});
    let err = History::from_log("s", &[bad], t("2026-03-01T00:00:00Z")).unwrap_err();
    assert_eq!(err.code(), "STORE_MALFORMED_ITEM");
    // Operators' actions are no versions.
    let mut action = change(
        1,
        AuditAction::RunNow,
        "2026-03-01T00:00:00Z",
        &spec("0 * * * *", json!({})),
        "ACTIVE",
    );
    action.after = Value::Null;
    let h = History::from_log("s", &[action], t("2026-03-01T00:00:00Z")).unwrap();
    assert!(h.versions().is_empty());
}

#[test]
fn every_window_is_accounted_missing_or_duplicated() {
    let h = hourly_since("2026-03-01T00:00:00Z");
    let mut manual = executed(entry("2026-03-01T03:00:00Z", 1, RunStatus::Success), 1);
    manual.key.origin = Origin::Manual("m1".into());
    manual.trigger = Trigger::Manual;
    let runs = vec![
        executed(entry("2026-03-01T01:00:00Z", 1, RunStatus::Success), 1),
        // 02:00 has no entry.
        executed(entry("2026-03-01T03:00:00Z", 1, RunStatus::Success), 1),
        manual,
        entry("2026-03-01T04:00:00Z", 1, RunStatus::Skipped),
        range_record("2026-03-01T05:00:00Z", "2026-03-01T07:00:00Z", 3),
        // A range and a single entry for 07:00.
        entry("2026-03-01T07:00:00Z", 1, RunStatus::Coalesced),
    ];
    let found = audit_of(&h, &runs, "2026-03-01T00:00:00Z", "2026-03-01T09:00:00Z");
    assert_eq!(found.expected, 8);
    assert_eq!(
        found.missing,
        times(&["2026-03-01T02:00:00Z", "2026-03-01T08:00:00Z"])
    );
    assert_eq!(found.accounted, 6);
    let dups: Vec<(DateTime<Utc>, u32, u32, &str)> = found
        .duplicates
        .iter()
        .map(|d| (d.scheduled_for, d.runs, d.executions, d.why.as_str()))
        .collect();
    assert_eq!(
        dups,
        [
            (t("2026-03-01T03:00:00Z"), 2, 2, WHY_RUNS),
            (t("2026-03-01T07:00:00Z"), 0, 0, WHY_ENTRIES)
        ]
    );
    assert_eq!(found.exactly_once, 4);
    assert!(found.unexplained.is_empty());
}

#[test]
fn a_backfill_of_a_window_that_ran_is_a_duplicate_and_one_of_a_window_that_did_not_is_not() {
    let h = hourly_since("2026-03-01T00:00:00Z");
    let backfill = |at: &str| {
        let mut run = executed(entry(at, 1, RunStatus::Success), 1);
        run.key.origin = Origin::Backfill("b1".into());
        run.trigger = Trigger::Backfill;
        run
    };
    let runs = vec![
        executed(entry("2026-03-01T01:00:00Z", 1, RunStatus::Success), 1),
        backfill("2026-03-01T01:00:00Z"),
        entry("2026-03-01T02:00:00Z", 1, RunStatus::ManualRequired),
        backfill("2026-03-01T02:00:00Z"),
    ];
    let found = audit_of(&h, &runs, "2026-03-01T00:30:00Z", "2026-03-01T02:30:00Z");
    assert_eq!(found.duplicates.len(), 1);
    assert_eq!(found.duplicates[0].scheduled_for, t("2026-03-01T01:00:00Z"));
    assert_eq!(found.duplicates[0].why, WHY_RUNS);
    assert_eq!((found.accounted, found.exactly_once), (2, 1));
}

#[test]
fn a_run_started_again_after_an_attempt_that_may_have_acted_is_a_duplicate() {
    let h = hourly_since("2026-03-01T00:00:00Z");
    let twice = executed(entry("2026-03-01T01:00:00Z", 1, RunStatus::Success), 2);
    let again = HashSet::from([twice.key.clone()]);
    let found = audit(
        &h,
        std::slice::from_ref(&twice),
        &again,
        t("2026-03-01T00:00:00Z"),
        t("2026-03-01T02:00:00Z"),
    );
    assert_eq!(found.duplicates[0].why, WHY_EXECUTIONS);
    assert_eq!(found.duplicates[0].executions, 2);
    assert_eq!(found.exactly_once, 0);
    // Its attempts are read: the job is not declared idempotent.
    assert_eq!(
        to_read(&h, std::slice::from_ref(&twice)),
        vec![twice.key.clone()]
    );
    let idempotent = history(&[change(
        1,
        AuditAction::Create,
        "2026-03-01T00:00:00Z",
        &spec("0 * * * *", json!({"idempotent": true})),
        "ACTIVE",
    )]);
    assert!(to_read(&idempotent, &[twice]).is_empty());
}

fn attempt(number: u64, outcome: Option<AttemptOutcome>) -> Attempt {
    Attempt {
        number,
        start: None,
        end: outcome.map(|outcome| AttemptEnd {
            finished_at: t("2026-03-01T01:00:00Z"),
            outcome,
            status: RunStatus::Success,
            reason: None,
            error_code: None,
            message: None,
        }),
    }
}

#[test]
fn only_a_reported_failure_or_a_dry_run_lets_an_attempt_start_again_unnoticed() {
    use AttemptOutcome as O;
    let run = executed(entry("2026-03-01T01:00:00Z", 1, RunStatus::Success), 3);
    let retried = [
        attempt(1, Some(O::FailedRetryable)),
        attempt(2, Some(O::Held)),
        attempt(3, Some(O::Success)),
    ];
    assert!(!acted_again(&run, &retried));
    for acted in [O::Success, O::PartialSuccess, O::Stalled, O::LeaseTakenOver] {
        let attempts = [
            attempt(1, Some(O::FailedRetryable)),
            attempt(2, Some(acted)),
            attempt(3, Some(O::Success)),
        ];
        assert!(acted_again(&run, &attempts), "{acted}");
    }
    // No end recorded, or not kept: it cannot be shown not to have acted.
    let unknown = [
        attempt(1, Some(O::FailedRetryable)),
        attempt(2, None),
        attempt(3, Some(O::Success)),
    ];
    assert!(acted_again(&run, &unknown));
    assert!(acted_again(&run, &[attempt(3, Some(O::Success))]));
    // One attempt: nothing started again.
    let once = executed(entry("2026-03-01T01:00:00Z", 1, RunStatus::Success), 1);
    assert!(!acted_again(&once, &[attempt(1, Some(O::Success))]));
}

#[test]
fn a_steps_job_starting_its_next_step_is_no_second_execution() {
    let step = |name: &str, attempts: u32| StepCheckpoint {
        name: name.into(),
        status: StepStatus::Success,
        attempts,
        started_at: None,
        ended_at: None,
        output: None,
        error_code: None,
    };
    let h = hourly_since("2026-03-01T00:00:00Z");
    let mut run = executed(entry("2026-03-01T01:00:00Z", 1, RunStatus::Success), 2);
    run.steps = vec![step("extract", 1), step("load", 1)];
    assert!(to_read(&h, std::slice::from_ref(&run)).is_empty());
    // The second step started twice, after a stalled attempt of it.
    run.attempts = 3;
    run.steps = vec![step("extract", 1), step("load", 2)];
    let attempts = [
        attempt(1, Some(AttemptOutcome::Success)),
        attempt(2, Some(AttemptOutcome::Stalled)),
        attempt(3, Some(AttemptOutcome::Success)),
    ];
    assert_eq!(to_read(&h, std::slice::from_ref(&run)).len(), 1);
    assert!(acted_again(&run, &attempts));
    let failed_once = [
        attempt(1, Some(AttemptOutcome::Success)),
        attempt(2, Some(AttemptOutcome::FailedRetryable)),
        attempt(3, Some(AttemptOutcome::Success)),
    ];
    assert!(!acted_again(&run, &failed_once));
}

#[test]
fn entries_no_version_could_have_made_are_unexplained() {
    let h = hourly_then("2026-03-01T02:10:00Z", "30 * * * *");
    let runs = vec![
        entry("2026-03-01T01:00:00Z", 1, RunStatus::Success),
        // Off the grid of the version it names.
        entry("2026-03-01T01:30:00Z", 1, RunStatus::Success),
        // A window before the edit recorded after it, under the new version: explained.
        entry("2026-03-01T02:00:00Z", 2, RunStatus::Skipped),
        // A version the log does not have.
        entry("2026-03-01T02:30:00Z", 7, RunStatus::Success),
        // The old grid after the edit, named under the new version.
        entry("2026-03-01T03:00:00Z", 2, RunStatus::Success),
    ];
    let found = audit_of(&h, &runs, "2026-03-01T00:00:00Z", "2026-03-01T04:00:00Z");
    let why: Vec<(DateTime<Utc>, &str)> = found
        .unexplained
        .iter()
        .map(|u| (u.scheduled_for, u.why.as_str()))
        .collect();
    assert_eq!(
        why,
        [
            (t("2026-03-01T01:30:00Z"), WHY_NOT_A_WINDOW),
            (t("2026-03-01T02:30:00Z"), WHY_UNKNOWN_VERSION),
            (t("2026-03-01T03:00:00Z"), WHY_NOT_A_WINDOW),
        ]
    );
    // 02:30 has an entry (its version aside) and 03:30 none.
    assert_eq!(found.missing, times(&["2026-03-01T03:30:00Z"]));
}

#[test]
fn a_range_record_from_before_the_range_accounts_for_its_windows_in_it() {
    let h = hourly_since("2026-03-01T00:00:00Z");
    let runs = vec![range_record(
        "2026-03-01T01:00:00Z",
        "2026-03-01T04:00:00Z",
        4,
    )];
    let found = audit_of(&h, &runs, "2026-03-01T03:00:00Z", "2026-03-01T06:00:00Z");
    assert_eq!(found.expected, 3);
    assert_eq!(found.missing, times(&["2026-03-01T05:00:00Z"]));
    // Its first window is not in the range: it is not judged here.
    assert!(found.unexplained.is_empty());
}

const CRONS: [&str; 5] = [
    "* * * * *",
    "*/7 * * * *",
    "0 * * * *",
    "15,45 */2 * * *",
    "0 3 * * 1",
];
const ZONES: [&str; 3] = ["UTC", "Europe/Berlin", "America/New_York"];

fn instant(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 28, 0, 0, 0).unwrap() + TimeDelta::minutes(minutes)
}

/// A history from (minute offset, cron index, zone index, state) changes, the first a
/// creation.
fn random_history(changes: &[(i64, usize, usize, u8)]) -> History {
    let mut at = 0i64;
    let entries: Vec<AuditEntry> = changes
        .iter()
        .enumerate()
        .map(|(i, &(gap, cron, zone, state))| {
            at += gap;
            let enabled = state != 3;
            let spec = spec(
                CRONS[cron],
                json!({"timezone": ZONES[zone], "enabled": enabled}),
            );
            let (action, state) = match (i, state) {
                (0, _) => (AuditAction::Create, "ACTIVE"),
                (_, 1) => (AuditAction::Pause, "PAUSED"),
                (_, 2) => (AuditAction::Archive, "ARCHIVED"),
                _ => (AuditAction::Update, "ACTIVE"),
            };
            let mut entry = change(i as u64 + 1, action, "2026-03-28T00:00:00Z", &spec, state);
            entry.at = instant(at);
            entry
        })
        .collect();
    history(&entries)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Minute by minute: a minute is expected exactly when the version in force then (the
    /// last change strictly before it) is enabled, not archived, and fires on it. Spans the
    /// spring-forward night of Europe/Berlin and the weeks around it.
    #[test]
    fn the_expected_windows_are_each_minute_the_version_in_force_fires_on(
        changes in prop::collection::vec((0i64..3000, 0usize..5, 0usize..3, 0u8..5), 1..5),
        from in 0i64..6000,
        length in 0i64..4000,
    ) {
        let h = random_history(&changes);
        let (from, to) = (instant(from), instant(from + length));
        let expected = h.expected(from, to);
        let mut brute = Vec::new();
        let mut m = from;
        while m < to {
            if h.in_force_at(m).is_some_and(|v| v.expects() && v.schedule.is_occurrence(m)) {
                brute.push(m);
            }
            m += TimeDelta::minutes(1);
        }
        prop_assert_eq!(&expected, &brute);
        // A ledger with one entry per expected window accounts for each exactly once.
        let runs: Vec<Run> = expected
            .iter()
            .map(|w| {
                let v = h.in_force_at(*w).map_or(1, |v| v.number);
                entry_at(*w, v, RunStatus::Success)
            })
            .collect();
        let found = audit(&h, &runs, &HashSet::new(), from, to);
        prop_assert_eq!(found.expected as usize, expected.len());
        prop_assert_eq!(found.exactly_once, found.expected);
        prop_assert!(found.missing.is_empty() && found.duplicates.is_empty());
        prop_assert!(found.unexplained.is_empty(), "{:?}", found.unexplained);
    }
}
