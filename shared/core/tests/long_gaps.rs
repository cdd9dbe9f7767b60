//! Long gaps are planned as range records without walking every window: a century of a
//! minutely job is counted, and the counted plan is the plan a walk would give.

mod common;

use common::{schedule_with, timing, utc};
use cronledger_core::planner::{Action, Release};
use cronledger_core::{plan, Coverage, Lane, Plan, PlanInput, PlannerConfig, Reason, Schedule};
use serde_json::json;

fn planned(schedule: &Schedule, watermark: &str, now: &str, existing: &Coverage) -> Plan {
    plan(PlanInput {
        schedule,
        watermark: utc(watermark),
        now: utc(now),
        existing,
        pauses: &[],
        config: PlannerConfig::default(),
    })
    .unwrap()
}

#[test]
fn a_century_of_a_minutely_job_is_one_range_and_the_window_it_folds_into() {
    let schedule = schedule_with(
        "* * * * *",
        "Europe/Berlin",
        json!({ "misfire": "RUN_ONCE", "side_effects": false, "grace": "1m" }),
    );
    let plan = planned(
        &schedule,
        "1926-11-29T00:00:00Z",
        "2026-11-29T00:00:00Z",
        &Coverage::new(),
    );
    // 100 years of minutes (36,525 days) up to the hold-back.
    let expected = 36_525 * 1440 - 1;
    assert_eq!(plan.totals.expected, expected);
    assert_eq!(plan.entries.len(), 2, "{:?}", plan.entries);
    let (range, last) = (&plan.entries[0], &plan.entries[1]);
    assert_eq!(range.scheduled_for, utc("1926-11-29T00:01:00Z"));
    assert_eq!(range.range_end, Some(utc("2026-11-28T23:58:00Z")));
    assert_eq!(range.count, expected - 1);
    assert!(matches!(range.action, Action::Coalesce { .. }));
    assert_eq!(last.scheduled_for, utc("2026-11-28T23:59:00Z"));
    assert_eq!(last.count, 1);
    assert_eq!(
        last.action,
        Action::Hold {
            reason: Reason::GapTooLong
        }
    );
    assert_eq!(plan.totals.coalesced + plan.totals.manual, expected);
}

/// Over DST changes and a recorded window, the counted tail agrees with a walk: the cap's
/// fires one by one, then one range of the rest, whose count is every window walked.
#[test]
fn the_counted_tail_matches_the_walk_across_dst() {
    let schedule = schedule_with(
        "*/5 * * * *",
        "America/New_York",
        json!({
            "misfire": "CATCH_UP_ALL", "side_effects": false, "max_auto_catch_up": 3, "grace": "1m",
            // An 11-month gap still a throttled backfill: the cap decides, not approval.
            "catch_up": { "backfill": "400d" },
        }),
    );
    let (watermark, now) = ("2026-01-01T00:00:00Z", "2026-12-01T00:00:00Z");
    let mut existing = Coverage::new();
    existing.add(utc("2026-01-01T00:10:00Z"));
    let plan = planned(&schedule, watermark, now, &existing);
    let walked = timing("*/5 * * * *", "America/New_York")
        .between(utc(watermark), plan.through)
        .count() as u32;
    assert_eq!(plan.totals.expected, walked);
    assert_eq!(plan.totals.recorded, 1);
    let fires: Vec<_> = plan
        .entries
        .iter()
        .filter(|e| {
            e.action
                == Action::Fire {
                    lane: Lane::Backfill,
                    release: Release::Throttled,
                }
        })
        .map(|e| e.scheduled_for)
        .collect();
    assert_eq!(
        fires,
        [
            utc("2026-01-01T00:05:00Z"),
            utc("2026-01-01T00:15:00Z"),
            utc("2026-01-01T00:20:00Z")
        ]
    );
    let ranged: u32 = plan
        .entries
        .iter()
        .filter(|e| e.range_end.is_some())
        .map(|e| e.count)
        .sum();
    assert_eq!(ranged + 3 + 1, walked, "{:?}", plan.entries);
    assert_eq!(plan.totals.fire, 3);
    assert_eq!(plan.totals.manual, walked - 4);
}
