//! Cron and rate evaluation across real DST transitions, non-hour offsets and the
//! EventBridge and POSIX syntaxes. Every expectation is an exact UTC instant.

mod common;

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Timelike, Utc};
use common::{timing, utc, zone};
use cronledger_core::{DstNote, Span, Timing};
use proptest::prelude::*;

/// Occurrences whose local date (in the timing's zone) is `date`, in order.
fn fires_on(timing: &Timing, date: &str) -> Vec<DateTime<Utc>> {
    let date: NaiveDate = date.parse().unwrap();
    let tz = timing.tz();
    let start = tz
        .from_local_datetime(&date.and_hms_opt(0, 0, 0).unwrap())
        .earliest()
        .unwrap()
        .with_timezone(&Utc);
    let end = tz
        .from_local_datetime(&date.succ_opt().unwrap().and_hms_opt(0, 0, 0).unwrap())
        .earliest()
        .unwrap()
        .with_timezone(&Utc);
    timing
        .between(start - Duration::seconds(1), end - Duration::seconds(1))
        .collect()
}

fn instants(texts: &[&str]) -> Vec<DateTime<Utc>> {
    texts.iter().map(|t| utc(t)).collect()
}

/// A fixed-time expression on one local date fires exactly at `expected`.
fn assert_single_fire(expr: &str, tz: &str, date: &str, expected: &str, note: Option<DstNote>) {
    let t = timing(expr, tz);
    assert!(t.is_fixed_time(), "`{expr}` should count as fixed-time");
    let fires = fires_on(&t, date);
    assert_eq!(fires, instants(&[expected]), "`{expr}` in {tz} on {date}");
    assert_eq!(
        t.dst_note(fires[0]),
        note,
        "note for `{expr}` in {tz} on {date}"
    );
}

/// Hours of local wall-clock time among the fires, in order.
fn local_hours(timing: &Timing, fires: &[DateTime<Utc>]) -> Vec<u32> {
    fires
        .iter()
        .map(|f| f.with_timezone(&timing.tz()).hour())
        .collect()
}

// ---------------------------------------------------------------- America/New_York

#[test]
fn new_york_spring_forward_fixed_time_runs_once_at_the_end_of_the_gap() {
    // 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z); 02:30 does not exist.
    assert_single_fire(
        "30 2 * * *",
        "America/New_York",
        "2026-03-08",
        "2026-03-08T07:00:00Z",
        Some(DstNote::ShiftedPastGap),
    );
    // The days around it are ordinary.
    assert_single_fire(
        "30 2 * * *",
        "America/New_York",
        "2026-03-07",
        "2026-03-07T07:30:00Z",
        None,
    );
    assert_single_fire(
        "30 2 * * *",
        "America/New_York",
        "2026-03-09",
        "2026-03-09T06:30:00Z",
        None,
    );
    // A fixed time that exists is untouched on the transition day.
    assert_single_fire(
        "30 3 * * *",
        "America/New_York",
        "2026-03-08",
        "2026-03-08T07:30:00Z",
        None,
    );
    assert_single_fire(
        "59 1 * * *",
        "America/New_York",
        "2026-03-08",
        "2026-03-08T06:59:00Z",
        None,
    );
}

#[test]
fn new_york_fall_back_fixed_time_runs_once_on_the_first_pass() {
    // 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z); 01:30 happens at 05:30Z and 06:30Z.
    assert_single_fire(
        "30 1 * * *",
        "America/New_York",
        "2026-11-01",
        "2026-11-01T05:30:00Z",
        Some(DstNote::FirstPass),
    );
    assert_single_fire(
        "30 1 * * *",
        "America/New_York",
        "2026-11-02",
        "2026-11-02T06:30:00Z",
        None,
    );
    assert_single_fire(
        "30 2 * * *",
        "America/New_York",
        "2026-11-01",
        "2026-11-01T07:30:00Z",
        None,
    );
    // Searching from inside the repeated hour does not fire the second pass.
    let t = timing("30 1 * * *", "America/New_York");
    assert_eq!(
        t.next_after(utc("2026-11-01T05:30:00Z")),
        Some(utc("2026-11-02T06:30:00Z"))
    );
    assert_eq!(
        t.next_after(utc("2026-11-01T06:10:00Z")),
        Some(utc("2026-11-02T06:30:00Z"))
    );
}

#[test]
fn new_york_hourly_has_23_runs_in_spring_and_25_in_autumn() {
    let t = timing("0 * * * *", "America/New_York");
    assert!(!t.is_fixed_time());

    let spring = fires_on(&t, "2026-03-08");
    assert_eq!(spring.len(), 23);
    assert_eq!(spring[0], utc("2026-03-08T05:00:00Z"));
    assert_eq!(spring[1], utc("2026-03-08T06:00:00Z")); // 01:00 EST
    assert_eq!(spring[2], utc("2026-03-08T07:00:00Z")); // 03:00 EDT
    assert_eq!(spring[22], utc("2026-03-09T03:00:00Z")); // 23:00 EDT
    assert!(!local_hours(&t, &spring).contains(&2));
    assert!(spring.iter().all(|f| t.dst_note(*f).is_none()));

    let autumn = fires_on(&t, "2026-11-01");
    assert_eq!(autumn.len(), 25);
    assert_eq!(
        autumn[..4],
        instants(&[
            "2026-11-01T04:00:00Z",
            "2026-11-01T05:00:00Z", // 01:00 EDT
            "2026-11-01T06:00:00Z", // 01:00 EST
            "2026-11-01T07:00:00Z", // 02:00 EST
        ])[..]
    );
    assert_eq!(t.dst_note(autumn[1]), Some(DstNote::FirstPass));
    assert_eq!(t.dst_note(autumn[2]), Some(DstNote::SecondPass));
    assert_eq!(t.dst_note(autumn[3]), None);
    assert_eq!(autumn[24], utc("2026-11-02T04:00:00Z"));
}

#[test]
fn new_york_quarter_hourly_skips_the_missing_hour_and_runs_both_passes() {
    let t = timing("*/15 * * * *", "America/New_York");

    let spring = fires_on(&t, "2026-03-08");
    assert_eq!(spring.len(), 96 - 4);
    assert!(!local_hours(&t, &spring).contains(&2));
    // 01:45 EST is followed directly by 03:00 EDT: no hole in elapsed time.
    let after_0145 = t.next_after(utc("2026-03-08T06:45:00Z"));
    assert_eq!(after_0145, Some(utc("2026-03-08T07:00:00Z")));

    let autumn = fires_on(&t, "2026-11-01");
    assert_eq!(autumn.len(), 96 + 4);
    let repeated: Vec<_> = t
        .between(utc("2026-11-01T04:59:00Z"), utc("2026-11-01T07:00:00Z"))
        .collect();
    assert_eq!(
        repeated,
        instants(&[
            "2026-11-01T05:00:00Z",
            "2026-11-01T05:15:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-01T05:45:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T06:15:00Z",
            "2026-11-01T06:30:00Z",
            "2026-11-01T06:45:00Z",
            "2026-11-01T07:00:00Z",
        ])
    );
    let notes: Vec<_> = repeated.iter().map(|f| t.dst_note(*f)).collect();
    assert_eq!(notes[..4], [Some(DstNote::FirstPass); 4]);
    assert_eq!(notes[4..8], [Some(DstNote::SecondPass); 4]);
    assert_eq!(notes[8], None);
}

#[test]
fn new_york_calendar_stats_use_the_real_calendar() {
    let from = utc("2026-01-01T05:00:00Z"); // local midnight, 2026-01-01
    let hourly = timing("0 * * * *", "America/New_York").calendar_stats(from, 365);
    assert_eq!(hourly.days, 365);
    assert_eq!(hourly.total, 365 * 24); // one day short one hour, one day long one hour
    assert_eq!(hourly.max_per_day, 25);
    assert_eq!(hourly.typical_per_day, 24);
    assert_eq!(hourly.min_gap, Some(Span::hours(1)));

    let quarter = timing("*/15 * * * *", "America/New_York").calendar_stats(from, 365);
    assert_eq!(quarter.max_per_day, 100);
    assert_eq!(quarter.typical_per_day, 96);
    assert_eq!(quarter.min_gap, Some(Span::minutes(15)));

    // 02:30 EST on 03-07 (07:30Z) to 03:00 EDT on 03-08 (07:00Z) is 23h30m apart.
    let daily = timing("30 2 * * *", "America/New_York").calendar_stats(from, 365);
    assert_eq!(daily.total, 365);
    assert_eq!(daily.max_per_day, 1);
    assert_eq!(daily.typical_per_day, 1);
    assert_eq!(daily.min_gap, Some(Span::minutes(23 * 60 + 30)));

    // Weekdays only: the weekend gap never beats the 24h weekday gap, and DST days count.
    let weekdays = timing("0 9 * * 1-5", "America/New_York").calendar_stats(from, 365);
    assert_eq!(weekdays.total, 261);
    assert_eq!(weekdays.typical_per_day, 1);
    assert_eq!(weekdays.min_gap, Some(Span::hours(24)));
}

#[test]
fn calendar_stats_over_only_the_transition_days() {
    let hourly = timing("0 * * * *", "America/New_York");
    let spring = hourly.calendar_stats(utc("2026-03-08T05:00:00Z"), 1);
    assert_eq!((spring.days, spring.total, spring.max_per_day), (1, 23, 23));
    let autumn = hourly.calendar_stats(utc("2026-11-01T04:00:00Z"), 1);
    assert_eq!((autumn.days, autumn.total, autumn.max_per_day), (1, 25, 25));
    // A stretch that starts on a regular day and then crosses the autumn change.
    let week = hourly.calendar_stats(utc("2026-10-29T04:00:00Z"), 7);
    assert_eq!(week.total, 7 * 24 + 1);
    assert_eq!(week.max_per_day, 25);
}

// ---------------------------------------------------------------- Europe/Berlin

#[test]
fn berlin_both_transitions() {
    // 2026-03-29 02:00 CET -> 03:00 CEST at 01:00Z.
    assert_single_fire(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-03-29",
        "2026-03-29T01:00:00Z",
        Some(DstNote::ShiftedPastGap),
    );
    // 2026-10-25 03:00 CEST -> 02:00 CET at 01:00Z; 02:30 happens at 00:30Z and 01:30Z.
    assert_single_fire(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-25",
        "2026-10-25T00:30:00Z",
        Some(DstNote::FirstPass),
    );
    // 01:30 is not in Berlin's repeated hour.
    assert_single_fire(
        "30 1 * * *",
        "Europe/Berlin",
        "2026-10-25",
        "2026-10-24T23:30:00Z",
        None,
    );

    let hourly = timing("0 * * * *", "Europe/Berlin");
    assert_eq!(fires_on(&hourly, "2026-03-29").len(), 23);
    let autumn = fires_on(&hourly, "2026-10-25");
    assert_eq!(autumn.len(), 25);
    assert_eq!(
        autumn[2..4],
        instants(&["2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z"])[..]
    );
    let quarter = timing("*/15 * * * *", "Europe/Berlin");
    assert_eq!(fires_on(&quarter, "2026-03-29").len(), 92);
    assert_eq!(fires_on(&quarter, "2026-10-25").len(), 100);
}

// ---------------------------------------------------------------- Australia/Sydney

#[test]
fn sydney_both_transitions() {
    // DST ends 2026-04-05 03:00 AEDT -> 02:00 AEST (16:00Z on 04-04).
    assert_single_fire(
        "30 2 * * *",
        "Australia/Sydney",
        "2026-04-05",
        "2026-04-04T15:30:00Z",
        Some(DstNote::FirstPass),
    );
    // DST starts 2026-10-04 02:00 AEST -> 03:00 AEDT (16:00Z on 10-03).
    assert_single_fire(
        "30 2 * * *",
        "Australia/Sydney",
        "2026-10-04",
        "2026-10-03T16:00:00Z",
        Some(DstNote::ShiftedPastGap),
    );
    let hourly = timing("0 * * * *", "Australia/Sydney");
    assert_eq!(fires_on(&hourly, "2026-04-05").len(), 25);
    assert_eq!(fires_on(&hourly, "2026-10-04").len(), 23);
    let quarter = timing("*/15 * * * *", "Australia/Sydney");
    assert_eq!(fires_on(&quarter, "2026-04-05").len(), 100);
    let spring = fires_on(&quarter, "2026-10-04");
    assert_eq!(spring.len(), 92);
    assert!(!local_hours(&quarter, &spring).contains(&2));
}

// ---------------------------------------------------------------- non-hour offsets

#[test]
fn adelaide_half_hour_offset_with_dst() {
    // +10:30 -> +9:30 on 2026-04-05 at 03:00 local (16:30Z on 04-04).
    assert_single_fire(
        "30 2 * * *",
        "Australia/Adelaide",
        "2026-04-05",
        "2026-04-04T16:00:00Z",
        Some(DstNote::FirstPass),
    );
    // +9:30 -> +10:30 on 2026-10-04 at 02:00 local (16:30Z on 10-03).
    assert_single_fire(
        "30 2 * * *",
        "Australia/Adelaide",
        "2026-10-04",
        "2026-10-03T16:30:00Z",
        Some(DstNote::ShiftedPastGap),
    );
    let hourly = timing("0 * * * *", "Australia/Adelaide");
    let autumn = fires_on(&hourly, "2026-04-05");
    assert_eq!(autumn.len(), 25);
    assert!(
        autumn.iter().all(|f| f.minute() == 30),
        "local :00 is UTC :30"
    );
    assert_eq!(fires_on(&hourly, "2026-10-04").len(), 23);
}

#[test]
fn lord_howe_half_hour_dst_shift() {
    // DST ends 2026-04-05: 02:00 (+11) -> 01:30 (+10:30) at 15:00Z on 04-04;
    // 01:30-01:59 happens twice.
    assert_single_fire(
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-05",
        "2026-04-04T14:45:00Z",
        Some(DstNote::FirstPass),
    );
    // 01:15 is before the repeated half hour.
    assert_single_fire(
        "15 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-05",
        "2026-04-04T14:15:00Z",
        None,
    );
    // DST starts 2026-10-04: 02:00 (+10:30) -> 02:30 (+11) at 15:30Z on 10-03;
    // 02:15 does not exist and runs at 02:30.
    assert_single_fire(
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-04",
        "2026-10-03T15:30:00Z",
        Some(DstNote::ShiftedPastGap),
    );
    assert_single_fire(
        "45 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-04",
        "2026-10-03T15:45:00Z",
        None,
    );

    // Hourly: 01:00 is not repeated (only 01:30-01:59 is), so 24 in April; 02:00 is missing
    // in October, so 23.
    let hourly = timing("0 * * * *", "Australia/Lord_Howe");
    assert_eq!(fires_on(&hourly, "2026-04-05").len(), 24);
    assert_eq!(fires_on(&hourly, "2026-10-04").len(), 23);

    let quarter = timing("*/15 * * * *", "Australia/Lord_Howe");
    let autumn = fires_on(&quarter, "2026-04-05");
    assert_eq!(autumn.len(), 96 + 2);
    let repeated: Vec<_> = quarter
        .between(utc("2026-04-04T14:29:00Z"), utc("2026-04-04T15:30:00Z"))
        .collect();
    assert_eq!(
        repeated,
        instants(&[
            "2026-04-04T14:30:00Z", // 01:30 +11
            "2026-04-04T14:45:00Z", // 01:45 +11
            "2026-04-04T15:00:00Z", // 01:30 +10:30
            "2026-04-04T15:15:00Z", // 01:45 +10:30
            "2026-04-04T15:30:00Z", // 02:00 +10:30
        ])
    );
    assert_eq!(quarter.dst_note(repeated[1]), Some(DstNote::FirstPass));
    assert_eq!(quarter.dst_note(repeated[3]), Some(DstNote::SecondPass));
    let spring = fires_on(&quarter, "2026-10-04");
    assert_eq!(spring.len(), 96 - 2);
    assert_eq!(
        quarter.next_after(utc("2026-10-03T15:15:00Z")), // 01:45 +10:30
        Some(utc("2026-10-03T15:30:00Z"))                // 02:30 +11
    );

    let stats = hourly.calendar_stats(utc("2026-01-01T00:00:00Z"), 365);
    assert_eq!(stats.max_per_day, 24);
    // Around both changes the hourly fires are 90 minutes apart, never closer than an hour.
    assert_eq!(stats.min_gap, Some(Span::hours(1)));
    assert_eq!(
        hourly.next_after(utc("2026-04-04T14:00:00Z")), // 01:00 +11
        Some(utc("2026-04-04T15:30:00Z"))               // 02:00 +10:30
    );
}

#[test]
fn no_dst_zones_are_untouched_on_other_zones_transition_days() {
    for tz in ["Asia/Seoul", "Asia/Kathmandu"] {
        for day in [
            "2026-03-08",
            "2026-03-29",
            "2026-04-05",
            "2026-10-04",
            "2026-10-25",
            "2026-11-01",
        ] {
            let hourly = timing("0 * * * *", tz);
            let fires = fires_on(&hourly, day);
            assert_eq!(fires.len(), 24, "{tz} {day}");
            assert!(fires.windows(2).all(|w| w[1] - w[0] == Duration::hours(1)));
            assert!(fires.iter().all(|f| hourly.dst_note(*f).is_none()));
            let fixed = timing("30 2 * * *", tz);
            let fires = fires_on(&fixed, day);
            assert_eq!(fires.len(), 1);
            assert_eq!(fixed.dst_note(fires[0]), None);
        }
    }
    // +5:45: 02:30 local is 20:45Z the day before.
    assert_single_fire(
        "30 2 * * *",
        "Asia/Kathmandu",
        "2026-11-01",
        "2026-10-31T20:45:00Z",
        None,
    );
    assert_single_fire(
        "30 2 * * *",
        "Asia/Seoul",
        "2026-03-08",
        "2026-03-07T17:30:00Z",
        None,
    );
    let stats =
        timing("0 * * * *", "Asia/Kathmandu").calendar_stats(utc("2026-01-01T00:00:00Z"), 365);
    assert_eq!((stats.max_per_day, stats.typical_per_day), (24, 24));
    assert_eq!(stats.total, 365 * 24);
}

// ---------------------------------------------------------------- prev_before

/// Expressions and zones the consistency property runs over: DST and non-DST zones,
/// fixed-time, interval, calendar-restricted and rate expressions.
const EXPRESSIONS: &[&str] = &[
    "30 2 * * *",
    "30 1 * * *",
    "45 1 * * *",
    "0 * * * *",
    "*/15 * * * *",
    "*/7 * * * *",
    "0 9 * * 1-5",
    "0 0 L * *",
    "rate(90 minutes)",
];
const ZONES: &[&str] = &[
    "America/New_York",
    "Europe/Berlin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
];
/// Instants just around 2026's transitions, where the property is most likely to break.
const TRANSITIONS: &[&str] = &[
    "2026-03-08T07:00:00Z",
    "2026-11-01T06:00:00Z",
    "2026-03-29T01:00:00Z",
    "2026-10-25T01:00:00Z",
    "2026-04-04T16:00:00Z",
    "2026-10-03T16:00:00Z",
    "2026-04-04T15:00:00Z",
    "2026-10-03T15:30:00Z",
];

fn assert_prev_consistent(t: &Timing, at: DateTime<Utc>) {
    let p = t
        .prev_before(at)
        .unwrap_or_else(|| panic!("{t}: no occurrence before {at}"));
    assert!(p < at, "{t}: prev_before({at}) = {p} is not before it");
    let next = t.next_after(p).unwrap();
    assert!(
        next >= at,
        "{t}: {next} lies between prev_before({at}) = {p} and {at}"
    );
    assert_eq!(
        t.next_at_or_after(p),
        Some(p),
        "{t}: {p} is not itself an occurrence"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn prev_before_agrees_with_next_after(
        expr in 0..EXPRESSIONS.len(),
        tz in 0..ZONES.len(),
        near in 0..TRANSITIONS.len(),
        offset_secs in -2 * 86_400i64..2 * 86_400,
    ) {
        let t = timing(EXPRESSIONS[expr], ZONES[tz]);
        let at = utc(TRANSITIONS[near]) + Duration::seconds(offset_secs);
        assert_prev_consistent(&t, at);
        // Exactly at an occurrence, the previous one is strictly earlier.
        let on = t.next_at_or_after(at).unwrap();
        assert_prev_consistent(&t, on);
    }
}

#[test]
fn prev_before_on_the_second_pass_returns_the_first() {
    let t = timing("30 1 * * *", "America/New_York");
    // Just after the (unfired) second pass of 01:30.
    assert_eq!(
        t.prev_before(utc("2026-11-01T06:31:00Z")),
        Some(utc("2026-11-01T05:30:00Z"))
    );
    assert_eq!(
        t.prev_before(utc("2026-11-02T06:30:00Z")),
        Some(utc("2026-11-01T05:30:00Z"))
    );
    // After the gap-shifted fire.
    let gap = timing("30 2 * * *", "America/New_York");
    assert_eq!(
        gap.prev_before(utc("2026-03-08T07:00:01Z")),
        Some(utc("2026-03-08T07:00:00Z"))
    );
    assert_eq!(
        gap.prev_before(utc("2026-03-09T06:30:00Z")),
        Some(utc("2026-03-08T07:00:00Z"))
    );
}

// ---------------------------------------------------------------- EventBridge forms

#[test]
fn eventbridge_cron_forms() {
    // 2026-01-01 is a Thursday.
    let weekdays = timing("cron(0 9 ? * MON-FRI *)", "Asia/Seoul");
    assert_eq!(
        weekdays.next_n(utc("2025-12-31T23:00:00Z"), 3),
        instants(&[
            "2026-01-01T00:00:00Z",
            "2026-01-02T00:00:00Z",
            "2026-01-05T00:00:00Z"
        ])
    );
    // In EventBridge 1 is Sunday, so 2 is Monday.
    let monday = timing("cron(0 9 ? * 2 *)", "UTC");
    assert_eq!(
        monday.next_n(utc("2026-01-01T00:00:00Z"), 2),
        instants(&["2026-01-05T09:00:00Z", "2026-01-12T09:00:00Z"])
    );
    let sunday = timing("cron(0 9 ? * 1 *)", "UTC");
    assert_eq!(
        sunday.next_after(utc("2026-01-01T00:00:00Z")),
        Some(utc("2026-01-04T09:00:00Z"))
    );
    // Last day of each month of 2026 only; nothing after.
    let month_end = timing("cron(0 12 L * ? 2026)", "UTC");
    let fires = month_end.next_n(utc("2025-06-01T00:00:00Z"), 20);
    assert_eq!(fires.len(), 12);
    assert_eq!(fires[0], utc("2026-01-31T12:00:00Z"));
    assert_eq!(fires[1], utc("2026-02-28T12:00:00Z"));
    assert_eq!(fires[11], utc("2026-12-31T12:00:00Z"));
    assert_eq!(month_end.next_after(utc("2026-12-31T12:00:00Z")), None);
    // Lower-case and surrounding space are accepted.
    assert!(Timing::parse("  cron(0 9 ? * MON-FRI *) ", zone("UTC")).is_ok());
}

#[test]
fn eventbridge_cron_needs_exactly_one_question_mark() {
    for bad in [
        "cron(0 9 * * MON *)",
        "cron(0 9 ? * ? *)",
        "cron(0 9 * * ? )",
        "cron(0 9 ? * MON)",
    ] {
        let err = Timing::parse(bad, zone("UTC")).unwrap_err();
        assert_eq!(
            err.code,
            cronledger_core::Code::ScheduleInvalidCron,
            "{bad}"
        );
    }
    let err = Timing::parse("cron(0 9 * * MON *)", zone("UTC")).unwrap_err();
    assert!(err.message.contains('?'), "{}", err.message);
}

#[test]
fn eventbridge_rate_forms() {
    let five = timing("rate(5 minutes)", "America/New_York");
    assert_eq!(
        five.next_after(utc("2026-03-08T06:58:00Z")),
        Some(utc("2026-03-08T07:00:00Z"))
    );
    assert_eq!(
        five.next_after(utc("2026-03-08T07:00:00Z")),
        Some(utc("2026-03-08T07:05:00Z"))
    );
    // Elapsed time: DST changes nothing, the fall-back day has 25 hours of 12 runs.
    assert_eq!(fires_on(&five, "2026-11-01").len(), 25 * 12);
    assert!(fires_on(&five, "2026-11-01")
        .iter()
        .all(|f| five.dst_note(*f).is_none()));
    let hour = timing("rate(1 hour)", "UTC");
    assert_eq!(
        hour.next_after(utc("2026-01-01T10:00:00Z")),
        Some(utc("2026-01-01T11:00:00Z"))
    );
    assert_eq!(
        hour.prev_before(utc("2026-01-01T10:00:00Z")),
        Some(utc("2026-01-01T09:00:00Z"))
    );
    assert!(Timing::parse("rate(1 minute)", zone("UTC")).is_ok());
    // Anchored at the Unix epoch: 2026-01-01 is day 20454, an even day.
    let two_days = timing("rate(2 days)", "UTC");
    assert_eq!(
        two_days.next_n(utc("2025-12-31T12:00:00Z"), 2),
        instants(&["2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z"])
    );
    assert_eq!(
        two_days
            .calendar_stats(utc("2026-01-01T00:00:00Z"), 10)
            .min_gap,
        Some(Span::days(2))
    );
    for bad in [
        "rate(0 minutes)",
        "rate(5 seconds)",
        "rate(-5 minutes)",
        "rate(5)",
        "rate(five minutes)",
        "rate(1.5 hours)",
        "rate()",
    ] {
        let err = Timing::parse(bad, zone("UTC")).unwrap_err();
        assert_eq!(
            err.code,
            cronledger_core::Code::ScheduleInvalidCron,
            "{bad}"
        );
    }
}

// ---------------------------------------------------------------- POSIX cron

fn first_fires(expr: &str, after: &str, n: usize) -> Vec<DateTime<Utc>> {
    timing(expr, "UTC").next_n(utc(after), n)
}

#[test]
fn posix_weekdays_monday_is_one_sunday_is_zero_and_seven() {
    // 2026-01-01 is a Thursday; 2026-01-04 a Sunday, 2026-01-05 a Monday.
    assert_eq!(
        first_fires("0 0 * * 1", "2026-01-01T00:00:00Z", 1),
        instants(&["2026-01-05T00:00:00Z"])
    );
    assert_eq!(
        first_fires("0 0 * * 0", "2026-01-01T00:00:00Z", 1),
        instants(&["2026-01-04T00:00:00Z"])
    );
    assert_eq!(
        first_fires("0 0 * * 7", "2026-01-01T00:00:00Z", 1),
        instants(&["2026-01-04T00:00:00Z"])
    );
    assert_eq!(
        first_fires("0 0 * * SUN", "2026-01-01T00:00:00Z", 1),
        instants(&["2026-01-04T00:00:00Z"])
    );
    assert_eq!(
        first_fires("0 0 * * mon", "2026-01-01T00:00:00Z", 1),
        instants(&["2026-01-05T00:00:00Z"])
    );
}

#[test]
fn posix_names_ranges_steps_lists() {
    assert_eq!(
        first_fires("0 9 * FEB-MAR MON-WED", "2026-01-01T00:00:00Z", 4),
        instants(&[
            "2026-02-02T09:00:00Z",
            "2026-02-03T09:00:00Z",
            "2026-02-04T09:00:00Z",
            "2026-02-09T09:00:00Z"
        ])
    );
    assert_eq!(
        first_fires("5-20/5 8,17 * * *", "2026-01-01T00:00:00Z", 5),
        instants(&[
            "2026-01-01T08:05:00Z",
            "2026-01-01T08:10:00Z",
            "2026-01-01T08:15:00Z",
            "2026-01-01T08:20:00Z",
            "2026-01-01T17:05:00Z",
        ])
    );
    assert_eq!(
        first_fires("0 0 1 */4 *", "2026-01-01T00:00:00Z", 3),
        instants(&[
            "2026-05-01T00:00:00Z",
            "2026-09-01T00:00:00Z",
            "2027-01-01T00:00:00Z"
        ])
    );
}

#[test]
fn posix_last_nearest_weekday_and_nth() {
    assert_eq!(
        first_fires("0 0 L * *", "2026-01-31T00:00:00Z", 2),
        instants(&["2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z"])
    );
    // 2026-08-15 is a Saturday: the nearest weekday is Friday the 14th.
    assert_eq!(
        first_fires("0 0 15W * *", "2026-08-01T00:00:00Z", 1),
        instants(&["2026-08-14T00:00:00Z"])
    );
    // Second Monday of January 2026 is the 12th.
    assert_eq!(
        first_fires("0 0 * * 1#2", "2026-01-01T00:00:00Z", 1),
        instants(&["2026-01-12T00:00:00Z"])
    );
    // Last Friday of January 2026 is the 30th.
    assert_eq!(
        first_fires("0 0 * * 5L", "2026-01-01T00:00:00Z", 1),
        instants(&["2026-01-30T00:00:00Z"])
    );
}

#[test]
fn posix_macros() {
    let after = "2026-01-01T00:30:00Z"; // a Thursday
    assert_eq!(
        first_fires("@hourly", after, 1),
        instants(&["2026-01-01T01:00:00Z"])
    );
    assert_eq!(
        first_fires("@daily", after, 1),
        instants(&["2026-01-02T00:00:00Z"])
    );
    assert_eq!(
        first_fires("@weekly", after, 1),
        instants(&["2026-01-04T00:00:00Z"])
    );
    assert_eq!(
        first_fires("@monthly", after, 1),
        instants(&["2026-02-01T00:00:00Z"])
    );
    assert_eq!(
        first_fires("@yearly", after, 1),
        instants(&["2027-01-01T00:00:00Z"])
    );
    assert_eq!(
        first_fires("@annually", after, 1),
        instants(&["2027-01-01T00:00:00Z"])
    );
    assert!(Timing::parse("@reboot", zone("UTC")).is_err());
}

#[test]
fn posix_day_of_month_or_day_of_week() {
    // Vixie cron: both restricted means the 13th OR any Friday. April 2026: Fridays 3, 10,
    // 17, 24; the 13th is a Monday.
    assert_eq!(
        first_fires("0 0 13 * 5", "2026-04-01T00:00:00Z", 5),
        instants(&[
            "2026-04-03T00:00:00Z",
            "2026-04-10T00:00:00Z",
            "2026-04-13T00:00:00Z",
            "2026-04-17T00:00:00Z",
            "2026-04-24T00:00:00Z",
        ])
    );
    // One side a wildcard: only the other side restricts.
    assert_eq!(
        first_fires("0 0 13 * *", "2026-04-01T00:00:00Z", 1),
        instants(&["2026-04-13T00:00:00Z"])
    );
}

#[test]
fn six_fields_and_garbage_are_rejected_with_a_clear_message() {
    let err = Timing::parse("0 0 9 * * *", zone("UTC")).unwrap_err();
    assert_eq!(err.code, cronledger_core::Code::ScheduleInvalidCron);
    assert!(err.message.contains("5 fields"), "{}", err.message);
    assert!(err.message.contains("found 6"), "{}", err.message);
    for bad in [
        "",
        "* * * *",
        "61 * * * *",
        "* 24 * * *",
        "* * 32 * *",
        "* * * 13 *",
        "* * * * 8",
        "x * * * *",
        "cron(",
        "rate(5 minutes",
    ] {
        assert!(
            Timing::parse(bad, zone("UTC")).is_err(),
            "`{bad}` should be rejected"
        );
    }
}

#[test]
fn descriptions_name_the_zone() {
    assert_eq!(
        timing("0 9 * * 1-5", "Asia/Seoul").describe(),
        "weekdays at 09:00 (Asia/Seoul)"
    );
    assert_eq!(
        timing("30 2 * * *", "Europe/Berlin").describe(),
        "every day at 02:30 (Europe/Berlin)"
    );
    assert_eq!(
        timing("0 6 L * *", "UTC").describe(),
        "the last day of every month at 06:00 (UTC)"
    );
    assert!(timing("rate(5 minutes)", "UTC").describe().contains("5m"));
    assert!(timing("*/15 * * * *", "Asia/Kathmandu")
        .describe()
        .ends_with("(Asia/Kathmandu)"));
}

#[test]
fn sub_second_instants_search_strictly_after() {
    let every_minute = timing("* * * * *", "Europe/Berlin");
    let half_past = utc("2026-01-01T10:00:00.5Z");
    assert_eq!(
        every_minute.next_after(half_past),
        Some(utc("2026-01-01T10:01:00Z"))
    );
    assert_eq!(
        every_minute.next_at_or_after(half_past),
        Some(utc("2026-01-01T10:01:00Z"))
    );
    assert_eq!(
        every_minute.prev_before(half_past),
        Some(utc("2026-01-01T10:00:00Z"))
    );
    let just_before = utc("2026-01-01T09:59:59.999Z");
    assert_eq!(
        every_minute.next_after(just_before),
        Some(utc("2026-01-01T10:00:00Z"))
    );
    let rate = timing("rate(1 minute)", "UTC");
    assert_eq!(
        rate.next_after(half_past),
        Some(utc("2026-01-01T10:01:00Z"))
    );
    assert_eq!(
        rate.prev_before(half_past),
        Some(utc("2026-01-01T10:00:00Z"))
    );
}

#[test]
fn never_firing_expressions_have_no_next() {
    let feb_30 = timing("0 0 30 2 *", "UTC");
    assert_eq!(feb_30.next_after(utc("2026-01-01T00:00:00Z")), None);
    assert_eq!(feb_30.prev_before(utc("2026-01-01T00:00:00Z")), None);
    assert!(feb_30.next_n(utc("2026-01-01T00:00:00Z"), 3).is_empty());
    let stats = feb_30.calendar_stats(utc("2026-01-01T00:00:00Z"), 366);
    assert_eq!(
        (stats.total, stats.max_per_day, stats.min_gap),
        (0, 0, None)
    );
}

#[test]
fn eventbridge_cron_follows_the_same_dst_rules() {
    assert_single_fire(
        "cron(30 2 * * ? *)",
        "America/New_York",
        "2026-03-08",
        "2026-03-08T07:00:00Z",
        Some(DstNote::ShiftedPastGap),
    );
    assert_single_fire(
        "cron(30 1 * * ? *)",
        "America/New_York",
        "2026-11-01",
        "2026-11-01T05:30:00Z",
        Some(DstNote::FirstPass),
    );
    let hourly = timing("cron(0 * * * ? *)", "America/New_York");
    assert_eq!(fires_on(&hourly, "2026-03-08").len(), 23);
    assert_eq!(fires_on(&hourly, "2026-11-01").len(), 25);
}
