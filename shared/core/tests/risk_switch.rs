//! The change report's gap and overlap at the switch between two rules (issue 17, point 8):
//! checked against a brute-force count of how many runs' business windows cover each minute
//! around the edit.

mod common;

use chrono::{DateTime, Duration, DurationRound, Utc};
use common::{schedule_with, utc};
use cronledger_core::risk::{assess_change, switch_windows, RiskLevel, SwitchSpan};
use cronledger_core::{Span, Timing};
use proptest::prelude::*;
use serde_json::json;

fn report(old: &str, new: &str, now: &str) -> cronledger_core::risk::RiskReport {
    let spec = |cron: &str| schedule_with(cron, "UTC", json!({})).spec;
    assess_change(&spec(old), &spec(new), utc(now), None, 3).unwrap()
}

#[test]
fn hourly_made_five_minutely_at_00_26_leaves_a_gap() {
    let r = report("0 * * * *", "*/5 * * * *", "2026-01-01T00:26:00Z");
    assert_eq!(
        r.window_gap,
        Some(SwitchSpan {
            start: utc("2026-01-01T00:00:00Z"),
            end: utc("2026-01-01T00:25:00Z"),
            duration: Span::minutes(25),
        })
    );
    assert_eq!(r.window_overlap, None);
    assert_eq!(
        r.last_old_window.map(|w| (w.start, w.end)),
        Some((utc("2025-12-31T23:00:00Z"), utc("2026-01-01T00:00:00Z")))
    );
    assert_eq!(r.first_new_fire, Some(utc("2026-01-01T00:30:00Z")));
    assert!(
        r.findings.iter().any(|f| f.contains("no run covers")),
        "{:?}",
        r.findings
    );
}

#[test]
fn a_gap_is_medium_and_an_hour_of_it_is_high() {
    // Every 7 minutes to every 20 at 02:30: 02:28's window ends, the first new one starts
    // at 02:20: overlap, MEDIUM.
    let r = report("*/7 * * * *", "*/20 * * * *", "2026-01-01T02:30:00Z");
    assert!(r.window_gap.is_none());
    assert_eq!(r.level, RiskLevel::Medium);
    // Hourly to half-hourly at 02:45: [02:00, 02:30) is nobody's: MEDIUM (2x).
    let r = report("0 * * * *", "*/30 * * * *", "2026-01-01T02:45:00Z");
    assert_eq!(r.window_gap.map(|g| g.duration), Some(Span::minutes(30)));
    assert_eq!(r.level, RiskLevel::Medium);
    // Daily at 23:00 to daily at 02:00, edited at noon: [23:00, 02:00) is nobody's: HIGH.
    let r = report("0 23 * * *", "0 2 * * *", "2026-01-01T12:00:00Z");
    assert_eq!(
        r.window_gap.map(|g| (g.start, g.end)),
        Some((utc("2025-12-31T23:00:00Z"), utc("2026-01-01T02:00:00Z")))
    );
    assert_eq!(r.level, RiskLevel::High);
}

#[test]
fn an_edit_at_an_old_fire_instant_keeps_that_window_under_the_old_rule() {
    // At 02:30 exactly the old rule still owns its 02:30 window: the new one starts there.
    let r = report("*/5 * * * *", "* * * * *", "2026-01-01T02:30:00Z");
    assert_eq!(
        r.last_old_window.map(|w| w.end),
        Some(utc("2026-01-01T02:30:00Z"))
    );
    assert!(r.window_gap.is_none() && r.window_overlap.is_none());
}

const CRONS: &[&str] = &[
    "0 * * * *",
    "*/5 * * * *",
    "*/7 * * * *",
    "15 */2 * * *",
    "30 1 * * *",
    "0 9 * * 1-5",
    "0 0 * * *",
    "0,30 1-5 * * *",
    "rate(10 minutes)",
    "30 2 * * *",
];
const ZONES: &[&str] = &["UTC", "America/New_York", "Asia/Seoul"];

/// How many runs' windows cover each minute of `[from, from + minutes)`: the old rule's
/// runs (occurrences at or before `now`) and the new rule's (after it), each window from
/// the occurrence before it in a plain listing of the rule's occurrences.
fn coverage(
    old: &Timing,
    new: &Timing,
    now: DateTime<Utc>,
    from: DateTime<Utc>,
    minutes: i64,
) -> Vec<i32> {
    let listing_from = from - Duration::days(8);
    let until = from + Duration::minutes(minutes) + Duration::days(8);
    let mut delta = vec![0i32; minutes as usize + 1];
    let mut add = |start: DateTime<Utc>, end: DateTime<Utc>| {
        let index = |t: DateTime<Utc>| (t - from).num_minutes().clamp(0, minutes) as usize;
        delta[index(start)] += 1;
        delta[index(end)] -= 1;
    };
    for (timing, keep) in [
        (
            old,
            &(|at: DateTime<Utc>| at <= now) as &dyn Fn(DateTime<Utc>) -> bool,
        ),
        (new, &|at: DateTime<Utc>| at > now),
    ] {
        let fires: Vec<_> = timing.between(listing_from, until).collect();
        for pair in fires.windows(2) {
            if keep(pair[1]) {
                add(pair[0], pair[1]);
            }
        }
    }
    let mut count = 0;
    delta[..minutes as usize]
        .iter()
        .map(|d| {
            count += d;
            count
        })
        .collect()
}

fn inside(span: Option<SwitchSpan>, t: DateTime<Utc>) -> bool {
    span.is_some_and(|s| s.start <= t && t < s.end)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn the_reported_gap_and_overlap_match_a_brute_force_count(
        old in 0..CRONS.len(),
        new in 0..CRONS.len(),
        zone in 0..ZONES.len(),
        // Whole minutes half the time: edits at an occurrence's very instant.
        offset_secs in prop_oneof![0i64..3 * 86_400, (0i64..3 * 1440).prop_map(|m| m * 60)],
    ) {
        let tz = ZONES[zone].parse().unwrap();
        let old = Timing::parse(CRONS[old], tz).unwrap();
        let new = Timing::parse(CRONS[new], tz).unwrap();
        // Around New York's spring-forward night (2026-03-08).
        let now = utc("2026-03-06T12:00:00Z") + Duration::seconds(offset_secs);
        let switch = switch_windows(&old, &new, now, None);
        let from = now.duration_trunc(Duration::minutes(1)).unwrap() - Duration::days(3);
        let minutes = 6 * 24 * 60;
        for (i, covered) in coverage(&old, &new, now, from, minutes).into_iter().enumerate() {
            let t = from + Duration::minutes(i as i64);
            prop_assert_eq!(covered == 0, inside(switch.gap, t), "gap at {}: {} runs", t, covered);
            prop_assert_eq!(covered >= 2, inside(switch.overlap, t), "overlap at {}: {} runs", t, covered);
        }
    }
}
