use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;

use super::*;
use crate::run::Origin;
use crate::spec::parse_manifest;
use crate::{Schedule, Trigger, ValidationRules, Window};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn day(text: &str) -> NaiveDate {
    text.parse().unwrap()
}

const NOW: &str = "2026-12-01T12:00:00Z";

/// A run of `job` for the window ending at `scheduled_for`, in `status`.
fn run(scheduled_for: &str, status: RunStatus) -> Run {
    let specs = parse_manifest(
        "schedules:\n  - { id: job, cron: '* * * * *', timezone: UTC, job: { type: noop } }\n",
        &ValidationRules::default(),
        at(NOW),
    )
    .unwrap();
    let schedule = Schedule::new(specs[0].clone()).unwrap();
    let t = at(scheduled_for);
    let mut run = schedule.pending_run(
        t,
        Window::new(t - TimeDelta::minutes(1), t),
        Origin::Expected,
        Trigger::Scheduled,
        t,
        1,
    );
    run.status = status;
    run
}

fn tally(on: &str, succeeded: u64, failed: u64, skipped: u64, fresh: u64) -> DayTally {
    DayTally {
        day: Some(day(on)),
        succeeded,
        failed,
        skipped,
        fresh,
    }
}

fn slo(within_minutes: u64, target: f64) -> FreshnessSlo {
    FreshnessSlo {
        within: Span::minutes(within_minutes),
        target,
    }
}

fn input<'a>(tallies: &'a [DayTally], runs: &'a [Run]) -> HealthInput<'a> {
    HealthInput {
        priority: Priority::Normal,
        slo: None,
        tallies,
        newest_runs: runs,
        failure_streak: crate::alerts::failure_streak(runs.iter().rev().map(|r| r.status)),
        next_run_at: None,
        now: at(NOW),
    }
}

#[test]
fn rates_count_the_periods_days_and_report_skips_beside_them() {
    let tallies = [
        // Outside 30 days (today is 2026-12-01): ignored.
        tally("2026-11-01", 0, 50, 0, 0),
        tally("2026-11-02", 6, 2, 1, 0),
        // Outside 7 days, inside 30.
        tally("2026-11-24", 10, 0, 0, 0),
        tally("2026-11-25", 3, 1, 2, 0),
        tally("2026-12-01", 1, 0, 0, 0),
        // Ahead of today: not part of any period.
        tally("2026-12-02", 0, 9, 0, 0),
    ];
    let h = health(&input(&tallies, &[]));
    assert_eq!(
        h.counts_7d,
        Counts {
            succeeded: 4,
            failed: 1,
            skipped: 2
        }
    );
    assert_eq!(
        h.counts_30d,
        Counts {
            succeeded: 20,
            failed: 3,
            skipped: 3
        }
    );
    assert_eq!(h.success_rate_7d, Some(0.8));
    assert_eq!(h.success_rate_30d, Some(20.0 / 23.0));
    assert_eq!(h.freshness, None);
}

#[test]
fn without_ended_windows_the_rates_are_null_not_zero() {
    let skipped_only = [tally("2026-12-01", 0, 0, 4, 0)];
    let h = health(&input(&skipped_only, &[]));
    assert_eq!(h.success_rate_7d, None);
    assert_eq!(h.success_rate_30d, None);
    assert_eq!(h.counts_7d.skipped, 4);
    let json = serde_json::to_value(&h).unwrap();
    assert!(json["success_rate_7d"].is_null());
}

#[test]
fn freshness_counts_skipped_windows_against_the_objective() {
    let tallies = [tally("2026-11-30", 8, 1, 1, 8)];
    let mut i = input(&tallies, &[]);
    i.slo = Some(slo(30, 80.0));
    let f = health(&i).freshness.unwrap();
    assert_eq!(f.attainment_30d, Some(0.8));
    assert_eq!(f.target, 0.8);
    assert_eq!(f.met, Some(true));
    i.slo = Some(slo(30, 95.0));
    let missed = health(&i);
    assert_eq!(missed.freshness.unwrap().met, Some(false));
    assert!(missed.freshness_missed());
    i.tallies = &[];
    let unmeasured = health(&i);
    assert_eq!(unmeasured.freshness.unwrap().met, None);
    assert!(!unmeasured.freshness_missed());
}

#[test]
fn the_last_run_is_the_newest_that_ended_with_its_duration() {
    let mut ended = run("2026-12-01T11:00:00Z", RunStatus::Failed);
    ended.started_at = Some(at("2026-12-01T11:00:02Z"));
    ended.completed_at = Some(at("2026-12-01T11:00:04.500Z"));
    let in_flight = run("2026-12-01T11:01:00Z", RunStatus::Running);
    let h = health(&input(&[], &[in_flight, ended]));
    assert_eq!(
        h.last_run,
        Some(LastRun {
            status: RunStatus::Failed,
            scheduled_for: at("2026-12-01T11:00:00Z"),
            ended_at: at("2026-12-01T11:00:04.500Z"),
            duration_ms: Some(2500),
        })
    );
    let skipped = run("2026-12-01T11:02:00Z", RunStatus::Skipped);
    let h = health(&input(&[], std::slice::from_ref(&skipped)));
    let last = h.last_run.unwrap();
    assert_eq!(last.duration_ms, None);
    assert_eq!(last.ended_at, skipped.updated_at);
}

#[test]
fn durations_are_the_percentiles_of_the_successes_read() {
    // Newest first: successes of 1..=20 s, a failure of 10 minutes and one still running.
    let ended = |minute: u32, status: RunStatus, secs: i64| {
        let mut r = run(&format!("2026-12-01T10:{minute:02}:00Z"), status);
        let start = r.key.scheduled_for;
        r.started_at = Some(start);
        r.completed_at = Some(start + TimeDelta::seconds(secs));
        r
    };
    let mut runs: Vec<Run> = (1..=20)
        .map(|i| ended(i as u32, RunStatus::Success, i))
        .collect();
    runs.push(ended(30, RunStatus::Failed, 600));
    runs.push(run("2026-12-01T10:40:00Z", RunStatus::Running));
    let h = health(&input(&[], &runs));
    assert_eq!(h.duration_p50_ms, Some(10_000));
    assert_eq!(h.duration_p95_ms, Some(19_000));
    // Without a success there is nothing to measure: null, not zero.
    let h = health(&input(&[], &runs[20..]));
    assert_eq!((h.duration_p50_ms, h.duration_p95_ms), (None, None));
}

#[test]
fn failures_in_a_row_come_from_the_streak_and_approvals_from_the_newest_runs() {
    // Newest first: two failures, a skip (neither counts nor ends the streak), one more
    // failure, then a success.
    let runs = [
        run("2026-12-01T11:06:00Z", RunStatus::ManualRequired),
        run("2026-12-01T11:05:00Z", RunStatus::Failed),
        run("2026-12-01T11:04:00Z", RunStatus::Failed),
        run("2026-12-01T11:03:00Z", RunStatus::Skipped),
        run("2026-12-01T11:02:00Z", RunStatus::Failed),
        run("2026-12-01T11:01:00Z", RunStatus::Success),
        run("2026-12-01T11:00:00Z", RunStatus::ManualRequired),
    ];
    let h = health(&input(&[], &runs));
    assert_eq!(h.consecutive_failures, 3);
    assert_eq!(h.awaiting_approval, 2);
    // The stored streak is what counts: it reaches past the runs read.
    let long = HealthInput {
        failure_streak: 40,
        ..input(&[], &runs)
    };
    assert_eq!(health(&long).consecutive_failures, 40);
}

#[test]
fn health_serializes_with_the_documented_field_names() {
    let tallies = [tally("2026-12-01", 1, 0, 0, 1)];
    let mut i = input(&tallies, &[]);
    i.slo = Some(slo(30, 95.0));
    i.next_run_at = Some(at("2026-12-01T12:01:00Z"));
    let json = serde_json::to_value(health(&i)).unwrap();
    assert_eq!(json["next_run_at"], "2026-12-01T12:01:00Z");
    assert_eq!(json["success_rate_7d"], 1.0);
    assert_eq!(json["counts_30d"]["succeeded"], 1);
    assert_eq!(json["freshness"]["within"], "30m");
    assert_eq!(json["freshness"]["target"], 0.95);
    assert_eq!(json["freshness"]["attainment_30d"], 1.0);
    assert_eq!(json["freshness"]["met"], true);
    assert_eq!(json["priority"], "NORMAL");
    let back: Health = serde_json::from_value(json).unwrap();
    assert_eq!(back, health(&i));
}

fn counts() -> impl Strategy<Value = (u64, u64, u64, u64)> {
    (0..1000u64, 0..1000u64, 0..1000u64, 0..1000u64)
}

fn a_health() -> impl Strategy<Value = Health> {
    (
        0..5u32,
        0..3u32,
        prop::option::of(0..=4u32),
        prop::option::of(prop::bool::ANY),
        0..4usize,
    )
        .prop_map(|(failures, approvals, rate, met, priority)| Health {
            priority: [
                Priority::Critical,
                Priority::High,
                Priority::Normal,
                Priority::Low,
            ][priority],
            last_run: None,
            next_run_at: None,
            success_rate_7d: rate.map(|r| f64::from(r) / 4.0),
            success_rate_30d: None,
            counts_7d: Counts::default(),
            counts_30d: Counts::default(),
            freshness: met.map(|met| Freshness {
                within: Span::minutes(30),
                target: 0.95,
                attainment_30d: Some(if met { 1.0 } else { 0.5 }),
                met: Some(met),
            }),
            consecutive_failures: failures,
            awaiting_approval: approvals,
            duration_p50_ms: None,
            duration_p95_ms: None,
        })
}

fn ids() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_string)
}

proptest! {
    #[test]
    fn rates_stay_in_the_unit_interval_and_agree_with_the_counts(
        days in prop::collection::vec((0..40u64, counts()), 0..40),
        slo_target in 1..=100u32,
    ) {
        let tallies: Vec<DayTally> = days
            .iter()
            .map(|(back, (s, f, k, fresh))| DayTally {
                day: at(NOW).date_naive().checked_sub_days(Days::new(*back)),
                succeeded: *s,
                failed: *f,
                skipped: *k,
                fresh: *fresh,
            })
            .collect();
        let mut i = input(&tallies, &[]);
        i.slo = Some(slo(30, f64::from(slo_target)));
        let h = health(&i);
        for (rate, c) in [(h.success_rate_7d, h.counts_7d), (h.success_rate_30d, h.counts_30d)] {
            match rate {
                None => prop_assert_eq!(c.succeeded + c.failed, 0),
                Some(r) => {
                    prop_assert!((0.0..=1.0).contains(&r));
                    let expected = c.succeeded as f64 / (c.succeeded + c.failed) as f64;
                    prop_assert!((r - expected).abs() < 1e-12);
                }
            }
        }
        prop_assert!(h.counts_7d.succeeded <= h.counts_30d.succeeded);
        prop_assert!(h.counts_7d.failed <= h.counts_30d.failed);
        prop_assert!(h.counts_7d.skipped <= h.counts_30d.skipped);
        let f = h.freshness.unwrap();
        match f.attainment_30d {
            None => prop_assert_eq!(h.counts_30d.windows(), 0),
            Some(a) => {
                prop_assert!((0.0..=1.0).contains(&a));
                prop_assert_eq!(f.met, Some(a >= f.target));
            }
        }
    }

    #[test]
    fn worst_first_is_a_total_order(
        a in a_health(), b in a_health(), c in a_health(),
        ia in ids(), ib in ids(), ic in ids(),
    ) {
        let ab = worst_first(&ia, &a, &ib, &b);
        prop_assert_eq!(ab, worst_first(&ib, &b, &ia, &a).reverse());
        prop_assert_eq!(worst_first(&ia, &a, &ia, &a), Ordering::Equal);
        let bc = worst_first(&ib, &b, &ic, &c);
        if ab != Ordering::Greater && bc != Ordering::Greater {
            prop_assert_ne!(worst_first(&ia, &a, &ic, &c), Ordering::Greater);
        }
    }

    #[test]
    fn more_failures_in_a_row_never_sort_after_fewer(
        base in a_health(), extra in 1..5u32, ia in ids(), ib in ids(),
    ) {
        let worse = Health {
            consecutive_failures: base.consecutive_failures + extra,
            ..base.clone()
        };
        prop_assert_eq!(worst_first(&ia, &worse, &ib, &base), Ordering::Less);
    }
}
