//! Calendars and bounds: excluded dates are recorded, never run and never missing; windows
//! outside `start_at`..`end_at` (or past `max_runs`) do not exist; every field is validated
//! with its stable code.

mod common;

use chrono::{DateTime, Duration, Utc};
use common::{schedule_value, utc, validation_now};
use cronledger_core::admission::{decide, Admission, Ask, Candidate, Moment};
use cronledger_core::calendar::{CalendarSet, CalendarSpec};
use cronledger_core::planner::Action;
use cronledger_core::spec::validate_schedule;
use cronledger_core::{
    plan, Code, Coverage, PlanInput, PlannerConfig, Reason, RunKey, RunStatus, Schedule,
    ScheduleSpec, Trigger, ValidationRules,
};
use proptest::prelude::*;
use serde_json::{json, Value};

fn spec_with(cron: &str, tz: &str, extra: Value) -> Result<ScheduleSpec, Vec<Code>> {
    let mut doc = schedule_value("s", cron, tz);
    if let (Some(doc), Some(extra)) = (doc.as_object_mut(), extra.as_object()) {
        doc.extend(extra.clone());
    }
    validate_schedule(&doc, "", &ValidationRules::local(), validation_now())
        .map_err(|issues| issues.into_iter().map(|i| i.code).collect())
}

fn schedule(cron: &str, tz: &str, extra: Value) -> Schedule {
    Schedule::new(spec_with(cron, tz, extra).expect("a valid spec")).expect("compiles")
}

fn holidays() -> CalendarSet {
    let mut set = CalendarSet::default();
    set.0.insert(
        "kr-holidays".into(),
        serde_json::from_value::<CalendarSpec>(
            json!({"exclude": ["2026-12-25", "2027-01-01..2027-01-02"]}),
        )
        .expect("calendar"),
    );
    set
}

#[test]
fn every_new_field_is_validated_with_its_own_code() {
    let cases = [
        (
            json!({"exclude": ["2026-02-30"]}),
            Code::ScheduleInvalidExclude,
        ),
        (
            json!({"exclude": "2026-12-25"}),
            Code::ScheduleInvalidExclude,
        ),
        (
            json!({"exclude": ["2026-12-26..2026-12-24"]}),
            Code::ScheduleInvalidExclude,
        ),
        (json!({"calendars": ["Bad Name"]}), Code::CalendarInvalid),
        (json!({"calendars": ["a", "a"]}), Code::CalendarInvalid),
        (json!({"start_at": "tomorrow"}), Code::ScheduleInvalidBounds),
        (
            json!({"start_at": "2027-01-02", "end_at": "2027-01-01"}),
            Code::ScheduleInvalidBounds,
        ),
        (json!({"max_runs": 0}), Code::ScheduleInvalidBounds),
        (json!({"max_runs": -3}), Code::ScheduleInvalidBounds),
        (json!({"max_runs": 100_001}), Code::ScheduleInvalidBounds),
        (json!({"dst": {"gap": "later"}}), Code::ScheduleInvalidDst),
        (
            json!({"dst": {"fold": "first", "extra": 1}}),
            Code::ScheduleInvalidDst,
        ),
    ];
    for (extra, code) in cases {
        let codes = spec_with("0 2 * * *", "Asia/Seoul", extra.clone()).expect_err("refused");
        assert!(codes.contains(&code), "{extra}: {codes:?}");
    }
    let ok = spec_with(
        "0 2 * * *",
        "Asia/Seoul",
        json!({"calendars": ["kr-holidays"], "exclude": ["2026-12-31"], "start_at": "2026-12-01",
               "end_at": "2027-03-01T00:00:00+09:00", "max_runs": 50, "dst": {"gap": "skip", "fold": "both"}}),
    )
    .expect("valid");
    // Written back as read: the stored document is the manifest's.
    let round: ScheduleSpec = serde_json::from_value(serde_json::to_value(&ok).unwrap()).unwrap();
    assert_eq!(round, ok);
    assert_eq!(
        serde_json::to_value(&ok).unwrap()["end_at"],
        "2027-03-01T00:00:00+09:00"
            .parse::<DateTime<Utc>>()
            .map(|_| "2027-02-28T15:00:00Z")
            .unwrap()
    );
}

#[test]
fn bounds_cut_the_grid_inclusive_at_both_ends_and_keep_the_first_business_window() {
    let s = schedule(
        "0 2 * * *",
        "Asia/Seoul",
        json!({"start_at": "2026-12-03", "end_at": "2026-12-05T02:00:00+09:00"}),
    );
    let all: Vec<_> = s
        .between(utc("2026-11-01T00:00:00Z"), utc("2027-01-01T00:00:00Z"))
        .collect();
    assert_eq!(
        all,
        vec![
            utc("2026-12-02T17:00:00Z"),
            utc("2026-12-03T17:00:00Z"),
            utc("2026-12-04T17:00:00Z")
        ]
    );
    assert_eq!(s.next_after(utc("2026-01-01T00:00:00Z")), Some(all[0]));
    assert_eq!(s.next_after(all[2]), None);
    assert_eq!(s.prev_before(utc("2027-06-01T00:00:00Z")), Some(all[2]));
    assert_eq!(s.prev_before(all[0]), None);
    assert!(!s.is_occurrence(utc("2026-12-01T17:00:00Z")));
    assert!(s.is_occurrence(all[1]));
    assert_eq!(
        s.count_between(utc("2026-11-01T00:00:00Z"), utc("2027-01-01T00:00:00Z")),
        3
    );
    // The first window still covers the day before it: the business window follows the
    // expression, bounds only say which windows exist.
    assert_eq!(s.window_for(all[0]).start, utc("2026-12-01T17:00:00Z"));
    assert!(s.has_ended(utc("2026-12-05T00:00:00Z")));
    assert!(!s.has_ended(all[2] - Duration::seconds(1)));
    assert_eq!(s.ends_at(), Some(utc("2026-12-04T17:00:00Z")));
}

#[test]
fn max_runs_counts_from_start_at_or_from_the_schedules_creation() {
    let from_start = schedule(
        "*/10 * * * *",
        "UTC",
        json!({"start_at": "2026-12-03T10:05:00Z", "max_runs": 3}),
    );
    assert_eq!(from_start.ends_at(), Some(utc("2026-12-03T10:30:00Z")));
    let unanchored = schedule("*/10 * * * *", "UTC", json!({"max_runs": 3}));
    assert_eq!(unanchored.ends_at(), None, "no anchor yet: unbounded");
    let anchored = unanchored.anchored(utc("2026-12-03T11:00:00Z"));
    // The creation instant is itself a window: it counts.
    assert_eq!(anchored.ends_at(), Some(utc("2026-12-03T11:20:00Z")));
    // The earlier of end_at and the max_runs end wins (the count walks windows within
    // end_at, so here the end is the last window end_at allows).
    let both = schedule(
        "*/10 * * * *",
        "UTC",
        json!({"start_at": "2026-12-03T10:00:00Z", "end_at": "2026-12-03T10:15:00Z", "max_runs": 5}),
    );
    assert_eq!(both.ends_at(), Some(utc("2026-12-03T10:10:00Z")));
    assert_eq!(
        both.between(utc("2026-12-03T09:00:00Z"), utc("2026-12-04T00:00:00Z"))
            .count(),
        2
    );
}

#[test]
fn excluded_dates_are_local_dates_of_the_fire_time_in_the_schedules_zone() {
    // 02:00 Seoul on 2026-12-25 is 2026-12-24T17:00Z: excluded by its local date.
    let s = schedule(
        "0 2 * * *",
        "Asia/Seoul",
        json!({"calendars": ["kr-holidays"], "exclude": ["2026-12-31"]}),
    );
    let cals = holidays();
    assert!(s.excluded_by(&cals, utc("2026-12-24T17:00:00Z")));
    assert!(!s.excluded_by(&cals, utc("2026-12-23T17:00:00Z")));
    assert!(
        s.excluded_by(&cals, utc("2026-12-31T17:00:00Z")),
        "2027-01-01 local"
    );
    assert!(
        s.excluded_by(&cals, utc("2027-01-01T17:00:00Z")),
        "2027-01-02 local"
    );
    assert!(!s.excluded_by(&cals, utc("2027-01-02T17:00:00Z")));
    assert!(
        s.excluded_by(&cals, utc("2026-12-30T17:00:00Z")),
        "its own 2026-12-31"
    );
    // Without the calendars resolved only its own list applies; with them, both.
    assert!(!s.excluded(utc("2026-12-24T17:00:00Z")));
    let resolved = s.clone().with_calendars(&cals);
    assert!(resolved.excluded(utc("2026-12-24T17:00:00Z")));
    // A calendar the set does not have excludes nothing.
    assert!(!s.excluded_by(&CalendarSet::default(), utc("2026-12-24T17:00:00Z")));
}

const TRIGGERS: [Trigger; 5] = [
    Trigger::Scheduled,
    Trigger::CatchUp,
    Trigger::Manual,
    Trigger::Backfill,
    Trigger::Dependency,
];

/// The rule book against every trigger, at creation and at start, paused or not, with every
/// lever on: an excluded window is SKIPPED (EXCLUDED) when it is created, whoever creates it,
/// except an operator's own run; at start (a run already created) the calendar is not asked
/// again: an edit changes the future only.
#[test]
fn the_rule_book_records_an_excluded_window_skipped_on_every_creating_path() {
    let spec = spec_with(
        "* * * * *",
        "UTC",
        json!({"approval": "every_run", "overlap": "QUEUE_NEW"}),
    )
    .unwrap();
    let now = utc("2026-12-25T10:00:00Z");
    let key = RunKey::expected("s", now);
    for trigger in TRIGGERS {
        for moment in [Moment::Create, Moment::Start] {
            for stopped in [None, Some(Reason::Paused)] {
                let ask = Ask {
                    moment,
                    spec: &spec,
                    run: Candidate {
                        key: &key,
                        trigger,
                        status: RunStatus::Pending,
                        reason: None,
                        lane: None,
                        resuming: false,
                    },
                    stopped,
                    others: &[],
                    excluded: true,
                    late: None,
                    now,
                };
                let answer = decide(&ask);
                let skipped = answer
                    == Admission::Skip {
                        reason: Reason::Excluded,
                    };
                let expected = moment == Moment::Create && trigger != Trigger::Manual;
                assert_eq!(
                    skipped, expected,
                    "{trigger:?} at {moment:?}, stopped {stopped:?}: {answer:?}"
                );
            }
        }
    }
}

#[test]
fn the_planner_skips_excluded_windows_in_a_gap_as_excluded_not_missed() {
    let s = schedule(
        "0 * * * *",
        "UTC",
        json!({"misfire": "SKIP", "grace": "1m", "exclude": ["2026-12-25"]}),
    );
    let existing = Coverage::new();
    let p = plan(PlanInput {
        schedule: &s,
        watermark: utc("2026-12-24T20:00:00Z"),
        now: utc("2026-12-26T03:30:00Z"),
        existing: &existing,
        pauses: &[],
        config: PlannerConfig::default(),
    })
    .unwrap();
    let count = |reason: Reason| -> u32 {
        p.entries
            .iter()
            .filter(|e| e.action == Action::Skip { reason })
            .map(|e| e.count)
            .sum()
    };
    // 21:00..23:00 on the 24th and 00:00..03:00 on the 26th missed; all 24 of the 25th excluded.
    assert_eq!(count(Reason::Excluded), 24, "{:?}", p.entries);
    assert_eq!(count(Reason::Missed), 3 + 4);
    assert_eq!(p.totals.expected, 31);
}

proptest! {
    /// Every window of a bounded schedule, walked or counted, lies within its bounds, and
    /// the walk agrees with the count.
    #[test]
    fn bounded_walks_and_counts_agree(start in 0i64..5000, len in 0i64..5000, runs in prop::option::of(1u32..40), from in -2000i64..8000, span in 0i64..8000) {
        let base = utc("2026-11-01T00:00:00Z");
        let start_at = base + Duration::minutes(start);
        let end_at = start_at + Duration::minutes(len);
        let mut extra = json!({"start_at": start_at.to_rfc3339(), "end_at": end_at.to_rfc3339()});
        if let Some(n) = runs {
            extra["max_runs"] = json!(n);
        }
        let s = schedule("*/7 * * * *", "America/New_York", extra);
        let after = base + Duration::minutes(from);
        let until = after + Duration::minutes(span);
        let walked: Vec<_> = s.between(after, until).collect();
        prop_assert_eq!(walked.len() as u64, s.count_between(after, until));
        for t in &walked {
            prop_assert!(*t >= start_at && *t <= end_at && s.is_occurrence(*t));
        }
        if let Some(n) = runs {
            prop_assert!(s.between(base - Duration::days(1), base + Duration::days(30)).count() <= n as usize);
        }
    }
}
