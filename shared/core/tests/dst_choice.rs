//! A schedule's DST choice (`dst: {gap: next_valid | skip, fold: first | both}`) on real
//! transitions: America/New_York (one hour) and Australia/Lord_Howe (half an hour). Each
//! override is checked by exact instants, by `next_after` chains, `prev_before`,
//! `is_occurrence`, and by `count_between` and `between` against a naive minute-by-minute
//! walk that applies the rules' definitions directly.

mod common;

use std::sync::OnceLock;

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use common::{schedule_value, utc, validation_now};
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use cronledger_core::dst::{DstChoice, FoldRule, GapRule};
use cronledger_core::spec::validate_schedule;
use cronledger_core::{Code, DstNote, Span, Timing, ValidationRules};
use proptest::prelude::*;
use serde_json::{json, Value};

fn choice(gap: Option<GapRule>, fold: Option<FoldRule>) -> DstChoice {
    DstChoice { gap, fold }
}

const SKIP: DstChoice = DstChoice {
    gap: Some(GapRule::Skip),
    fold: None,
};
const NEXT_VALID: DstChoice = DstChoice {
    gap: Some(GapRule::NextValid),
    fold: None,
};
const FIRST: DstChoice = DstChoice {
    gap: None,
    fold: Some(FoldRule::First),
};
const BOTH: DstChoice = DstChoice {
    gap: None,
    fold: Some(FoldRule::Both),
};

fn timing(expr: &str, tz: &str, dst: DstChoice) -> Timing {
    common::timing(expr, tz).with_dst(dst)
}

fn instants(texts: &[&str]) -> Vec<DateTime<Utc>> {
    texts.iter().map(|t| utc(t)).collect()
}

/// `prev_before` of an instant written as text.
fn prev(t: &Timing, before: &str) -> Option<DateTime<Utc>> {
    t.prev_before(utc(before))
}

/// `count_between` of two instants written as text.
fn count(t: &Timing, after: &str, until: &str) -> u64 {
    t.count_between(utc(after), utc(until))
}

// ---------------------------------------------------------------- the naive walk

/// `expr` (5-field POSIX) parsed as the timing parses it, to match wall times with.
fn pattern(expr: &str) -> Cron {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .unwrap_or_else(|e| panic!("`{expr}`: {e}"))
}

/// Every occurrence in `(after, until]` by the rules' definitions, one UTC minute at a time
/// (all transitions and offsets of the zones used are whole minutes):
/// - a wall time that happens once fires if it matches;
/// - a repeated wall time fires on its first pass if it matches, and on its second pass too
///   under `fold: both`;
/// - under `gap: next_valid`, the first instant after a gap fires if any wall minute the gap
///   swallowed matches (once, and only once if it matches itself as well).
fn naive_walk(
    expr: &str,
    timing: &Timing,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let tz = timing.tz();
    let (gap, fold) = timing.dst_rules().unwrap();
    let cron = pattern(expr);
    let wall_matches = |wall: NaiveDateTime| cron.is_time_matching(&wall).unwrap();
    let offset = |t: DateTime<Utc>| tz.offset_from_utc_datetime(&t.naive_utc()).fix();
    let minute = Duration::minutes(1);
    let mut t = DateTime::from_timestamp((after.timestamp().div_euclid(60) + 1) * 60, 0).unwrap();
    let mut out = Vec::new();
    while t <= until {
        let wall = t.with_timezone(&tz).naive_local();
        let fires = match tz.from_local_datetime(&wall) {
            LocalResult::Single(_) => wall_matches(wall),
            LocalResult::Ambiguous(first, _) => {
                wall_matches(wall) && (first.with_timezone(&Utc) == t || fold == FoldRule::Both)
            }
            LocalResult::None => unreachable!("an instant's own wall time exists"),
        };
        let jump = offset(t).local_minus_utc() - offset(t - minute).local_minus_utc();
        let swallowed = jump > 0
            && gap == GapRule::NextValid
            && (1..=jump / 60).any(|m| wall_matches(wall - Duration::minutes(i64::from(m))));
        if fires || swallowed {
            out.push(t);
        }
        t += minute;
    }
    out
}

/// Checks one expression under one choice over `(after, until]` against the naive walk:
/// the `between` chain, `count_between`, and `is_occurrence` and `prev_before` at every minute
/// within an hour and a half of an occurrence or a clock change (and every 17th elsewhere,
/// which keeps the debug build quick on the quiet stretches of a daily expression).
fn assert_agrees_with_walk(expr: &str, tz: &str, dst: DstChoice, after: &str, until: &str) {
    let t = timing(expr, tz, dst);
    let (after, until) = (utc(after), utc(until));
    let expected = naive_walk(expr, &t, after, until);
    let label = format!("`{expr}` in {tz} under {dst:?}");
    let found: Vec<_> = t.between(after, until).collect();
    assert_eq!(found, expected, "{label}: between");
    assert_eq!(
        t.count_between(after, until),
        expected.len() as u64,
        "{label}: count_between"
    );
    let zone = t.tz();
    let offset = |at: DateTime<Utc>| zone.offset_from_utc_datetime(&at.naive_utc()).fix();
    let margin = Duration::minutes(90);
    let mut minute =
        DateTime::from_timestamp((after.timestamp().div_euclid(60) + 1) * 60, 0).unwrap();
    let mut step = 0;
    while minute <= until {
        let near = step % 17 == 0
            || offset(minute - margin) != offset(minute + margin)
            || expected.iter().any(|e| (*e - minute).abs() <= margin);
        if near {
            assert_eq!(
                t.is_occurrence(minute),
                expected.contains(&minute),
                "{label}: is_occurrence({minute})"
            );
            let last_before = expected.iter().rev().find(|e| **e < minute).copied();
            if last_before.is_some() {
                assert_eq!(
                    t.prev_before(minute),
                    last_before,
                    "{label}: prev_before({minute})"
                );
            }
        }
        minute += Duration::minutes(1);
        step += 1;
    }
}

// ---------------------------------------------------------------- America/New_York

// 2026-03-08: 02:00 EST -> 03:00 EDT at 07:00Z; 02:00-02:59 does not exist.
// 2026-11-01: 02:00 EDT -> 01:00 EST at 06:00Z; 01:00-01:59 happens at 05:xxZ and 06:xxZ.

#[test]
fn new_york_fixed_time_gap_skip_has_no_run_that_day() {
    let t = timing("30 2 * * *", "America/New_York", SKIP);
    assert!(t.is_fixed_time());
    assert_eq!(
        t.next_n(utc("2026-03-06T12:00:00Z"), 3),
        instants(&[
            "2026-03-07T07:30:00Z",
            "2026-03-09T06:30:00Z",
            "2026-03-10T06:30:00Z",
        ])
    );
    // The default would have run at 03:00 EDT; here nothing does.
    assert!(!t.is_occurrence(utc("2026-03-08T07:00:00Z")));
    assert!(
        timing("30 2 * * *", "America/New_York", DstChoice::default())
            .is_occurrence(utc("2026-03-08T07:00:00Z"))
    );
    assert_eq!(
        prev(&t, "2026-03-09T06:30:00Z"),
        Some(utc("2026-03-07T07:30:00Z"))
    );
    assert_eq!(
        count(&t, "2026-03-01T00:00:00Z", "2026-03-15T00:00:00Z"),
        13
    );
    // A time that exists on the day is untouched.
    let t = timing("30 3 * * *", "America/New_York", SKIP);
    assert!(t.is_occurrence(utc("2026-03-08T07:30:00Z")));
    // The fall-back day keeps the default fold rule: the first pass only.
    let t = timing("30 1 * * *", "America/New_York", SKIP);
    assert_eq!(
        t.next_n(utc("2026-11-01T00:00:00Z"), 2),
        instants(&["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"])
    );
    assert_agrees_with_walk(
        "30 2 * * *",
        "America/New_York",
        SKIP,
        "2026-03-07T00:00:00Z",
        "2026-03-10T00:00:00Z",
    );
}

#[test]
fn new_york_fixed_time_fold_both_runs_on_both_passes() {
    let t = timing("30 1 * * *", "America/New_York", BOTH);
    assert_eq!(
        t.next_n(utc("2026-10-31T12:00:00Z"), 3),
        instants(&[
            "2026-11-01T05:30:00Z", // 01:30 EDT
            "2026-11-01T06:30:00Z", // 01:30 EST
            "2026-11-02T06:30:00Z",
        ])
    );
    // From anywhere between the passes, the second is next.
    for from in [
        "2026-11-01T05:30:00Z",
        "2026-11-01T05:59:59Z",
        "2026-11-01T06:10:00Z",
    ] {
        assert_eq!(
            t.next_after(utc(from)),
            Some(utc("2026-11-01T06:30:00Z")),
            "{from}"
        );
    }
    assert_eq!(
        t.dst_note(utc("2026-11-01T05:30:00Z")),
        Some(DstNote::FirstPass)
    );
    assert_eq!(
        t.dst_note(utc("2026-11-01T06:30:00Z")),
        Some(DstNote::SecondPass)
    );
    assert!(t.is_occurrence(utc("2026-11-01T06:30:00Z")));
    assert_eq!(
        prev(&t, "2026-11-02T06:30:00Z"),
        Some(utc("2026-11-01T06:30:00Z"))
    );
    assert_eq!(
        prev(&t, "2026-11-01T06:30:00Z"),
        Some(utc("2026-11-01T05:30:00Z"))
    );
    assert_eq!(
        count(&t, "2026-10-25T00:00:00Z", "2026-11-08T00:00:00Z"),
        15
    );
    // The spring gap keeps the default gap rule: 03:00 EDT.
    let gap = timing("30 2 * * *", "America/New_York", BOTH);
    assert!(gap.is_occurrence(utc("2026-03-08T07:00:00Z")));
    assert_agrees_with_walk(
        "30 1 * * *",
        "America/New_York",
        BOTH,
        "2026-10-31T00:00:00Z",
        "2026-11-03T00:00:00Z",
    );
}

#[test]
fn new_york_interval_gap_next_valid_runs_once_after_the_gap() {
    // 02:10 and 02:40 are swallowed; 03:00 EDT is not a slot, so it is one added run.
    let t = timing("10,40 * * * *", "America/New_York", NEXT_VALID);
    assert!(!t.is_fixed_time());
    assert_eq!(
        t.next_n(utc("2026-03-08T06:10:00Z"), 4),
        instants(&[
            "2026-03-08T06:40:00Z", // 01:40 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT, for 02:10 and 02:40
            "2026-03-08T07:10:00Z", // 03:10 EDT
            "2026-03-08T07:40:00Z",
        ])
    );
    assert_eq!(
        t.dst_note(utc("2026-03-08T07:00:00Z")),
        Some(DstNote::ShiftedPastGap)
    );
    assert_eq!(
        prev(&t, "2026-03-08T07:10:00Z"),
        Some(utc("2026-03-08T07:00:00Z"))
    );
    assert_eq!(
        prev(&t, "2026-03-08T07:00:00Z"),
        Some(utc("2026-03-08T06:40:00Z"))
    );
    let day = (utc("2026-03-08T05:00:00Z"), utc("2026-03-09T04:00:00Z"));
    assert_eq!(t.count_between(day.0, day.1), 46 + 1);
    // Without the choice the two slots are simply missing.
    let default = timing("10,40 * * * *", "America/New_York", DstChoice::default());
    assert_eq!(default.count_between(day.0, day.1), 46);
    assert!(!default.is_occurrence(utc("2026-03-08T07:00:00Z")));

    // Hourly: 02:00 is swallowed but 03:00 EDT already fires; still one run, 23 that day.
    let hourly = timing("0 * * * *", "America/New_York", NEXT_VALID);
    assert_eq!(hourly.count_between(day.0, day.1), 23);
    assert_eq!(hourly.dst_note(utc("2026-03-08T07:00:00Z")), None);
    // Two slots in the hour only, both swallowed: one run at 03:00 EDT.
    let pair = timing("0,30 2 * * *", "America/New_York", NEXT_VALID);
    assert_eq!(
        pair.next_n(utc("2026-03-07T12:00:00Z"), 3),
        instants(&[
            "2026-03-08T07:00:00Z",
            "2026-03-09T06:00:00Z",
            "2026-03-09T06:30:00Z",
        ])
    );
    assert_eq!(
        prev(&pair, "2026-03-09T06:00:00Z"),
        Some(utc("2026-03-08T07:00:00Z"))
    );
    for expr in ["10,40 * * * *", "0 * * * *", "0,30 2 * * *", "*/7 * * * *"] {
        assert_agrees_with_walk(
            expr,
            "America/New_York",
            NEXT_VALID,
            "2026-03-07T12:00:00Z",
            "2026-03-08T20:00:00Z",
        );
    }
}

#[test]
fn new_york_interval_fold_first_skips_the_second_pass() {
    let t = timing("*/15 * * * *", "America/New_York", FIRST);
    assert_eq!(
        t.next_n(utc("2026-11-01T05:40:00Z"), 3),
        instants(&[
            "2026-11-01T05:45:00Z", // 01:45 EDT
            "2026-11-01T07:00:00Z", // 02:00 EST: 01:00-01:45 EST do not fire
            "2026-11-01T07:15:00Z",
        ])
    );
    // From inside the second pass, the next is after it.
    assert_eq!(
        t.next_after(utc("2026-11-01T06:20:00Z")),
        Some(utc("2026-11-01T07:00:00Z"))
    );
    assert!(!t.is_occurrence(utc("2026-11-01T06:15:00Z")));
    assert!(t.is_occurrence(utc("2026-11-01T05:15:00Z")));
    assert_eq!(
        prev(&t, "2026-11-01T07:00:00Z"),
        Some(utc("2026-11-01T05:45:00Z"))
    );
    assert_eq!(
        prev(&t, "2026-11-01T06:40:00Z"),
        Some(utc("2026-11-01T05:45:00Z"))
    );
    let day = (utc("2026-11-01T04:00:00Z"), utc("2026-11-02T05:00:00Z"));
    assert_eq!(t.count_between(day.0, day.1), 96);
    let hourly = timing("0 * * * *", "America/New_York", FIRST);
    assert_eq!(hourly.count_between(day.0, day.1), 24);
    assert_eq!(
        hourly.dst_note(utc("2026-11-01T05:00:00Z")),
        Some(DstNote::FirstPass)
    );
    for expr in ["*/15 * * * *", "0 * * * *", "0,30 1 * * *", "*/7 * * * *"] {
        assert_agrees_with_walk(
            expr,
            "America/New_York",
            FIRST,
            "2026-10-31T20:00:00Z",
            "2026-11-01T12:00:00Z",
        );
    }
}

#[test]
fn new_york_both_rules_overridden_at_once() {
    // Fixed-time, the opposite of both defaults.
    let fixed = choice(Some(GapRule::Skip), Some(FoldRule::Both));
    assert_agrees_with_walk(
        "30 1 * * *",
        "America/New_York",
        fixed,
        "2026-10-30T00:00:00Z",
        "2026-11-03T00:00:00Z",
    );
    assert_agrees_with_walk(
        "30 2 * * *",
        "America/New_York",
        fixed,
        "2026-03-06T00:00:00Z",
        "2026-03-10T00:00:00Z",
    );
    // Interval, the opposite of both defaults.
    let interval = choice(Some(GapRule::NextValid), Some(FoldRule::First));
    for (after, until) in [
        ("2026-03-07T20:00:00Z", "2026-03-08T12:00:00Z"),
        ("2026-10-31T20:00:00Z", "2026-11-01T12:00:00Z"),
    ] {
        assert_agrees_with_walk("5,35 * * * *", "America/New_York", interval, after, until);
    }
}

#[test]
fn new_york_calendar_stats_follow_the_choice() {
    let from = utc("2026-01-01T05:00:00Z");
    let hourly = timing("0 * * * *", "America/New_York", FIRST).calendar_stats(from, 365);
    assert_eq!(hourly.total, 365 * 24 - 1); // 23 in spring, 24 in autumn
    assert_eq!(hourly.max_per_day, 24);

    let fixed = timing("30 1 * * *", "America/New_York", BOTH).calendar_stats(from, 365);
    assert_eq!(fixed.total, 366);
    assert_eq!((fixed.max_per_day, fixed.typical_per_day), (2, 1));
    assert_eq!(fixed.min_gap, Some(Span::hours(1)));

    let skipped = timing("30 2 * * *", "America/New_York", SKIP).calendar_stats(from, 365);
    assert_eq!(skipped.total, 364);

    // The added run at 03:00 EDT is 20 minutes after 01:40 EST and 10 before 03:10 EDT: the
    // closest two runs of the year, which the interval floor is checked against.
    let added = timing("10,40 * * * *", "America/New_York", NEXT_VALID).calendar_stats(from, 365);
    assert_eq!(added.total, 365 * 48 - 2 + 1 + 2);
    assert_eq!(added.min_gap, Some(Span::minutes(10)));
}

// ---------------------------------------------------------------- Australia/Lord_Howe

// 2026-04-05: 02:00 (+11) -> 01:30 (+10:30) at 15:00Z on 04-04; 01:30-01:59 happens twice.
// 2026-10-04: 02:00 (+10:30) -> 02:30 (+11) at 15:30Z on 10-03; 02:00-02:29 does not exist.

#[test]
fn lord_howe_fixed_time_overrides() {
    let skip = timing("15 2 * * *", "Australia/Lord_Howe", SKIP);
    assert_eq!(
        skip.next_n(utc("2026-10-02T12:00:00Z"), 2),
        instants(&["2026-10-02T15:45:00Z", "2026-10-04T15:15:00Z"])
    );
    assert!(!skip.is_occurrence(utc("2026-10-03T15:30:00Z")));
    assert_eq!(
        prev(&skip, "2026-10-04T15:15:00Z"),
        Some(utc("2026-10-02T15:45:00Z"))
    );
    assert_agrees_with_walk(
        "15 2 * * *",
        "Australia/Lord_Howe",
        SKIP,
        "2026-10-02T00:00:00Z",
        "2026-10-05T00:00:00Z",
    );

    let both = timing("45 1 * * *", "Australia/Lord_Howe", BOTH);
    assert_eq!(
        both.next_n(utc("2026-04-04T12:00:00Z"), 3),
        instants(&[
            "2026-04-04T14:45:00Z", // 01:45 +11
            "2026-04-04T15:15:00Z", // 01:45 +10:30
            "2026-04-05T15:15:00Z",
        ])
    );
    assert_eq!(
        prev(&both, "2026-04-04T15:15:00Z"),
        Some(utc("2026-04-04T14:45:00Z"))
    );
    assert!(both.is_occurrence(utc("2026-04-04T15:15:00Z")));
    // 01:15 is before the repeated half hour: once.
    let once = timing("15 1 * * *", "Australia/Lord_Howe", BOTH);
    assert_eq!(
        count(&once, "2026-04-04T12:00:00Z", "2026-04-05T12:00:00Z"),
        1
    );
    assert_agrees_with_walk(
        "45 1 * * *",
        "Australia/Lord_Howe",
        BOTH,
        "2026-04-03T00:00:00Z",
        "2026-04-06T00:00:00Z",
    );
}

#[test]
fn lord_howe_interval_overrides() {
    // 02:00 is swallowed and 02:30 (+11) is not an hourly slot: one added run, 24 that day.
    let hourly = timing("0 * * * *", "Australia/Lord_Howe", NEXT_VALID);
    assert_eq!(
        hourly.next_n(utc("2026-10-03T14:00:00Z"), 3),
        instants(&[
            "2026-10-03T14:30:00Z", // 01:00 +10:30
            "2026-10-03T15:30:00Z", // 02:30 +11, for 02:00
            "2026-10-03T16:00:00Z", // 03:00 +11
        ])
    );
    assert_eq!(
        hourly.dst_note(utc("2026-10-03T15:30:00Z")),
        Some(DstNote::ShiftedPastGap)
    );
    assert_eq!(
        count(&hourly, "2026-10-03T13:30:00Z", "2026-10-04T13:00:00Z"),
        24
    );
    assert_eq!(
        prev(&hourly, "2026-10-03T16:00:00Z"),
        Some(utc("2026-10-03T15:30:00Z"))
    );
    for expr in ["0 * * * *", "*/20 * * * *", "*/15 * * * *"] {
        assert_agrees_with_walk(
            expr,
            "Australia/Lord_Howe",
            NEXT_VALID,
            "2026-10-03T06:00:00Z",
            "2026-10-03T22:00:00Z",
        );
    }

    let quarter = timing("*/15 * * * *", "Australia/Lord_Howe", FIRST);
    assert_eq!(
        quarter.next_n(utc("2026-04-04T14:29:00Z"), 3),
        instants(&[
            "2026-04-04T14:30:00Z", // 01:30 +11
            "2026-04-04T14:45:00Z", // 01:45 +11
            "2026-04-04T15:30:00Z", // 02:00 +10:30
        ])
    );
    assert!(!quarter.is_occurrence(utc("2026-04-04T15:00:00Z")));
    assert_eq!(
        prev(&quarter, "2026-04-04T15:30:00Z"),
        Some(utc("2026-04-04T14:45:00Z"))
    );
    assert_eq!(
        count(&quarter, "2026-04-04T13:00:00Z", "2026-04-05T13:30:00Z"),
        96
    );
    for expr in ["*/15 * * * *", "0 * * * *", "40,50 1 * * *"] {
        assert_agrees_with_walk(
            expr,
            "Australia/Lord_Howe",
            FIRST,
            "2026-04-04T06:00:00Z",
            "2026-04-04T22:00:00Z",
        );
    }
}

// ---------------------------------------------------------------- notes in words

#[test]
fn notes_name_the_rule_that_applied() {
    let both = timing("30 1 * * *", "America/New_York", BOTH);
    assert_eq!(
        both.describe_dst_note(DstNote::SecondPass),
        "DST overlap: this local time happens twice; second pass (dst.fold: both)"
    );
    let default = timing("30 2 * * *", "America/New_York", DstChoice::default());
    assert_eq!(
        default.describe_dst_note(DstNote::ShiftedPastGap),
        "DST gap: the scheduled local time does not exist; runs at the first instant after \
         the gap (dst.gap: next_valid, the default for a fixed-time expression)"
    );
    let interval = timing("0 * * * *", "America/New_York", DstChoice::default());
    assert!(interval
        .describe_dst_note(DstNote::FirstPass)
        .ends_with("(dst.fold: both, the default for an interval expression)"));
    // The schedule's description names only the rules it chose.
    assert_eq!(
        both.describe(),
        "every day at 01:30 (America/New_York, dst.fold: both)"
    );
    assert_eq!(default.describe(), "every day at 02:30 (America/New_York)");
}

// ---------------------------------------------------------------- validation

fn issues_for(dst: Value, cron: &str) -> Vec<cronledger_core::Issue> {
    let mut doc = schedule_value("job", cron, "America/New_York");
    doc["dst"] = dst;
    match validate_schedule(&doc, "", &ValidationRules::default(), validation_now()) {
        Ok(_) => Vec::new(),
        Err(issues) => issues,
    }
}

#[test]
fn dst_is_refused_on_a_rate_and_for_unknown_values() {
    let issues = issues_for(json!({"fold": "both"}), "rate(5 minutes)");
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].code, Code::ScheduleInvalidDst);
    assert_eq!(issues[0].field, "dst");
    assert!(
        issues[0].message.contains("rate(5 minutes)"),
        "{}",
        issues[0].message
    );
    // An empty choice is the default, which a rate may carry.
    assert!(issues_for(json!({}), "rate(5 minutes)").is_empty());

    for bad in [
        json!({"gap": "later"}),
        json!({"fold": "second"}),
        json!({"fold": "both", "when": "always"}),
        json!("skip"),
    ] {
        let issues = issues_for(bad.clone(), "30 2 * * *");
        assert!(
            issues.iter().any(|i| i.code == Code::ScheduleInvalidDst),
            "{bad}: {issues:?}"
        );
    }
    assert!(issues_for(json!({"gap": "skip", "fold": "both"}), "30 2 * * *").is_empty());
    assert!(issues_for(json!({"gap": "next_valid"}), "*/15 * * * *").is_empty());
}

#[test]
fn a_dependent_does_not_inherit_the_grid_of_a_rate_with_a_dst_choice() {
    let text = r#"
schedules:
  - id: extract
    cron: rate(1 hour)
    timezone: UTC
    dst: { fold: both }
    job: { type: noop }
  - id: load
    after: [extract]
    dst: { gap: skip }
    job: { type: noop }
"#;
    let Err(cronledger_core::Invalid(issues)) = common::manifest(text) else {
        panic!("a rate with `dst` must be refused");
    };
    // The upstream's own issue only: its grid is not valid, so the dependent (whose `dst`
    // would be refused on the rate too) is not judged against it.
    let codes: Vec<_> = issues.iter().map(|i| (i.code, i.field.as_str())).collect();
    assert_eq!(
        codes,
        vec![(Code::ScheduleInvalidDst, "schedules[extract].dst")]
    );
}

// ---------------------------------------------------------------- property

const EXPRESSIONS: &[&str] = &[
    "30 2 * * *",
    "30 1 * * *",
    "45 1 * * *",
    "15 2 * * *",
    "0 * * * *",
    "*/15 * * * *",
    "10,40 * * * *",
    "*/7 * * * *",
    "0,30 2 * * *",
    "0 9 * * 1-5",
    "rate(90 minutes)",
];
const ZONES: &[&str] = &[
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Santiago", // the clock changes at local midnight
    "Asia/Beirut",      // falls back from midnight to 23:00 the day before
    "Asia/Kathmandu",   // no DST: checked at the others' changes
];

/// Every 2026 clock change of the zones above, to the second: found by reading each zone's
/// offset every six hours and bisecting where it differs.
fn clock_changes() -> &'static [DateTime<Utc>] {
    static CHANGES: OnceLock<Vec<DateTime<Utc>>> = OnceLock::new();
    CHANGES.get_or_init(|| {
        let mut changes = Vec::new();
        for name in ZONES {
            let tz = common::zone(name);
            let offset = |t: i64| {
                let at = DateTime::from_timestamp(t, 0).unwrap().naive_utc();
                tz.offset_from_utc_datetime(&at).fix()
            };
            let (start, end) = (utc("2026-01-01T00:00:00Z"), utc("2027-01-01T00:00:00Z"));
            let mut t = start.timestamp();
            while t < end.timestamp() {
                let (mut before, mut after) = (t, t + 6 * 3600);
                if offset(before) != offset(after) {
                    while after - before > 1 {
                        let middle = before + (after - before) / 2;
                        if offset(middle) == offset(before) {
                            before = middle;
                        } else {
                            after = middle;
                        }
                    }
                    changes.push(DateTime::from_timestamp(after, 0).unwrap());
                }
                t += 6 * 3600;
            }
        }
        assert_eq!(
            changes.len(),
            8,
            "two changes a year in each DST zone: {changes:?}"
        );
        changes
    })
}

const GAPS: [Option<GapRule>; 3] = [None, Some(GapRule::NextValid), Some(GapRule::Skip)];
const FOLDS: [Option<FoldRule>; 3] = [None, Some(FoldRule::First), Some(FoldRule::Both)];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn counts_and_prev_agree_with_the_chain(
        expr in 0..EXPRESSIONS.len(),
        tz in 0..ZONES.len(),
        near in 0..8usize,
        gap in 0..GAPS.len(),
        fold in 0..FOLDS.len(),
        offset_secs in -2 * 86_400i64..2 * 86_400,
        span_secs in 0i64..3 * 86_400,
    ) {
        let t = timing(EXPRESSIONS[expr], ZONES[tz], choice(GAPS[gap], FOLDS[fold]));
        let a = clock_changes()[near] + Duration::seconds(offset_secs);
        let b = a + Duration::seconds(span_secs);
        prop_assert_eq!(t.count_between(a, b), t.between(a, b).count() as u64);

        let next = t.next_after(a).unwrap();
        let prev = t.prev_before(next).unwrap();
        prop_assert!(prev <= a, "{}: prev_before({}) = {} is after {}", t, next, prev, a);
        prop_assert!(t.is_occurrence(prev) && t.is_occurrence(next));
        // Nothing lies between `prev_before(a)` and `a`.
        let p = t.prev_before(a).unwrap();
        prop_assert!(p < a && t.next_after(p).unwrap() >= a, "{}: prev_before({}) = {}", t, a, p);
        prop_assert!(t.is_occurrence(p));
    }

    #[test]
    fn cron_chains_agree_with_the_naive_walk(
        expr in 0..EXPRESSIONS.len() - 1,
        tz in 0..ZONES.len(),
        near in 0..8usize,
        gap in 0..GAPS.len(),
        fold in 0..FOLDS.len(),
        offset_mins in -6 * 60i64..6 * 60,
    ) {
        let source = EXPRESSIONS[expr];
        let t = timing(source, ZONES[tz], choice(GAPS[gap], FOLDS[fold]));
        let a = clock_changes()[near] + Duration::minutes(offset_mins) - Duration::hours(6);
        let b = a + Duration::hours(12);
        let expected = naive_walk(source, &t, a, b);
        prop_assert_eq!(t.between(a, b).collect::<Vec<_>>(), expected.clone());
        prop_assert_eq!(t.count_between(a, b), expected.len() as u64);
    }
}
