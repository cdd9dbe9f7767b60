//! The change-risk report: how much more often a schedule would run, a zone change and the
//! fires it previews, and that a change never refires a recorded window.

mod common;

use common::{schedule_with, utc};
use cronledger_core::risk::{assess_change, RiskLevel};
use serde_json::json;

fn spec_with(cron: &str, tz: &str) -> cronledger_core::ScheduleSpec {
    schedule_with(cron, tz, json!({})).spec
}

const RISK_NOW: &str = "2026-01-01T02:30:00Z";

fn risk(old: (&str, &str), new: (&str, &str)) -> cronledger_core::risk::RiskReport {
    assess_change(
        &spec_with(old.0, old.1),
        &spec_with(new.0, new.1),
        utc(RISK_NOW),
        None,
        3,
    )
    .unwrap()
}

#[test]
fn frequency_risk_levels() {
    let x5 = risk(("*/5 * * * *", "UTC"), ("* * * * *", "UTC"));
    assert_eq!(x5.level, RiskLevel::Medium);
    assert!((x5.frequency_ratio - 5.0).abs() < 1e-9);
    // x10 exactly is HIGH, even across DST days (both sides lose and gain the same hours).
    let x10 = risk(
        ("0 * * * *", "America/New_York"),
        ("*/6 * * * *", "America/New_York"),
    );
    assert!(
        (x10.frequency_ratio - 10.0).abs() < 1e-9,
        "{}",
        x10.frequency_ratio
    );
    assert_eq!(x10.level, RiskLevel::High);
    assert_eq!(x10.after.max_per_day, 250);
    let x9 = risk(("0 * * * *", "UTC"), ("*/7 * * * *", "UTC"));
    assert_eq!(x9.level, RiskLevel::Medium);
    let x12 = risk(("*/5 * * * *", "UTC"), ("*/5 * * * *", "UTC"));
    assert_eq!(x12.level, RiskLevel::Low);
    assert!(x12.findings.is_empty());
    let slower = risk(("* * * * *", "UTC"), ("0 * * * *", "UTC"));
    assert_eq!(slower.level, RiskLevel::Medium);
    let daily_to_minutely = risk(("0 9 * * *", "UTC"), ("* * * * *", "UTC"));
    assert_eq!(daily_to_minutely.level, RiskLevel::High);
    assert!(
        daily_to_minutely.findings[0].contains("1440.0x"),
        "{:?}",
        daily_to_minutely.findings
    );
}

#[test]
fn zone_change_and_previews() {
    let report = risk(("0 9 * * *", "Asia/Seoul"), ("0 9 * * *", "Europe/Berlin"));
    assert_eq!(report.level, RiskLevel::Medium);
    assert!(report
        .findings
        .iter()
        .any(|f| f.contains("Asia/Seoul -> Europe/Berlin")));
    let at = |v: &[cronledger_core::risk::FireTime]| v.iter().map(|f| f.at).collect::<Vec<_>>();
    assert_eq!(
        at(&report.next_before),
        vec![
            utc("2026-01-02T00:00:00Z"),
            utc("2026-01-03T00:00:00Z"),
            utc("2026-01-04T00:00:00Z")
        ]
    );
    assert_eq!(
        at(&report.next_after),
        vec![
            utc("2026-01-01T08:00:00Z"),
            utc("2026-01-02T08:00:00Z"),
            utc("2026-01-03T08:00:00Z")
        ]
    );
    assert_eq!(report.next_after[0].local, "2026-01-01T09:00:00+01:00");
    assert!(!report.refires_past_window);
}

#[test]
fn a_change_never_refires_a_recorded_window() {
    // Hourly to half-hourly at 02:30: the last recorded fire is 02:00; the new rule's first
    // fire is 03:00, whose window starts at 02:30: nothing recorded is covered twice.
    let finer = risk(("0 * * * *", "UTC"), ("*/30 * * * *", "UTC"));
    assert_eq!(finer.first_new_fire, Some(utc("2026-01-01T03:00:00Z")));
    assert!(!finer.overlaps_recorded);
    assert!(!finer.refires_past_window);
    // Daily 02:00 to 03:00: the first new window reaches back over the 02:00 run's data.
    let later = risk(("0 2 * * *", "UTC"), ("0 3 * * *", "UTC"));
    assert_eq!(later.first_new_fire, Some(utc("2026-01-01T03:00:00Z")));
    assert_eq!(
        later.first_new_window.unwrap().start,
        utc("2025-12-31T03:00:00Z")
    );
    assert!(later.overlaps_recorded);
    assert!(!later.refires_past_window);
    // A recorded fire later than now pushes the first new fire past it.
    let old = spec_with("0 * * * *", "UTC");
    let new = spec_with("*/30 * * * *", "UTC");
    let ahead = assess_change(
        &old,
        &new,
        utc(RISK_NOW),
        Some(utc("2026-01-01T04:00:00Z")),
        3,
    )
    .unwrap();
    assert_eq!(ahead.first_new_fire, Some(utc("2026-01-01T04:30:00Z")));
    assert!(!ahead.refires_past_window);
}
