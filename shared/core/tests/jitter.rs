//! `jitter`: a fixed per-schedule offset from the id alone, validated against the
//! schedule's interval, honoured by the planner and the late-start judgement; the herd
//! warning. And `retention`: validation and the TTL a run carries.

mod common;

use chrono::{DateTime, TimeDelta, Utc};
use common::{schedule_value, utc, valid_spec, validation_now};
use cronledger_core::jitter::{self, find_herd, HerdRule};
use cronledger_core::planner::PlannerConfig;
use cronledger_core::retention::{DEFAULT_RETENTION, KEPT_LONGER};
use cronledger_core::run::{Origin, Trigger};
use cronledger_core::spec::validate_schedule;
use cronledger_core::{
    late_start, plan, Code, Coverage, LateStart, PlanInput, Reason, RunStatus, Schedule, Span,
    ValidationRules,
};
use proptest::prelude::*;
use serde_json::{json, Value};

fn with(mut value: Value, fields: Value) -> Value {
    if let (Value::Object(base), Value::Object(extra)) = (&mut value, fields) {
        base.extend(extra);
    }
    value
}

fn issues_of(value: Value) -> Vec<(Code, String)> {
    match validate_schedule(&value, "s", &ValidationRules::default(), validation_now()) {
        Ok(_) => Vec::new(),
        Err(issues) => issues.into_iter().map(|i| (i.code, i.field)).collect(),
    }
}

fn jittered(id: &str, cron: &str, jitter: &str) -> Schedule {
    let value = with(schedule_value(id, cron, "UTC"), json!({ "jitter": jitter }));
    Schedule::new(valid_spec(value)).unwrap()
}

const CRONS: &[&str] = &[
    "0 * * * *",
    "*/15 * * * *",
    "30 2 * * *",
    "0 9 * * 1-5",
    "rate(2 hours)",
];
const ZONES: &[&str] = &["UTC", "Asia/Seoul", "America/New_York"];

proptest! {
    // Each case validates a schedule over the real calendar; a few dozen cover the fields.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_offset_is_inside_the_window(id in "[a-z0-9-]{1,64}", jitter in 1u64..=3600) {
        let offset = jitter::offset(&id, Span::seconds(jitter));
        prop_assert!(offset < Span::seconds(jitter));
    }

    /// Every edit but the id (and the jitter itself) leaves the offset where it was.
    #[test]
    fn the_offset_survives_every_edit_but_the_id(
        id in "[a-z0-9-]{1,64}",
        cron in prop::sample::select(CRONS),
        tz in prop::sample::select(ZONES),
        grace in 1u64..30,
        misfire in prop::sample::select(&["SKIP", "RUN_ONCE", "CATCH_UP_ALL", "MANUAL"][..]),
        name in "[a-z ]{0,20}",
        retention in 7u64..400,
    ) {
        let base = jittered(&id, "0 0 * * *", "5m").fire_offset();
        let edited = with(schedule_value(&id, cron, tz), json!({
            "jitter": "5m",
            "grace": format!("{grace}m"),
            "misfire": misfire,
            "name": name,
            "retention": format!("{retention}d"),
            "job": {"type": "noop", "payload": {"tenant": "kr"}},
        }));
        let edited = Schedule::new(valid_spec(edited)).unwrap();
        prop_assert_eq!(edited.fire_offset(), base);
        prop_assert!(base >= TimeDelta::zero() && base < TimeDelta::minutes(5));
    }
}

#[test]
fn different_ids_spread_over_the_window() {
    let offsets: std::collections::BTreeSet<TimeDelta> = (0..200)
        .map(|i| jittered(&format!("job-{i}"), "0 * * * *", "5m").fire_offset())
        .collect();
    // 200 ids over 300 seconds: a hash that spreads them takes well over a hundred seconds.
    assert!(
        offsets.len() > 120,
        "only {} distinct offsets",
        offsets.len()
    );
}

#[test]
fn jitter_must_be_positive_at_most_an_hour_and_shorter_than_the_interval() {
    let base = || schedule_value("j", "*/15 * * * *", "UTC");
    let jitter = |j: &str| issues_of(with(base(), json!({ "jitter": j })));
    let refused = vec![(Code::ScheduleInvalidJitter, "s.jitter".to_string())];
    assert_eq!(jitter("0s"), refused);
    assert_eq!(jitter("15m"), refused, "equal to the interval");
    assert_eq!(jitter("14m59s"), vec![]);
    let daily = |j: &str| {
        issues_of(with(
            schedule_value("j", "0 3 * * *", "UTC"),
            json!({ "jitter": j }),
        ))
    };
    assert_eq!(daily("1h"), vec![]);
    assert_eq!(daily("61m"), refused);
    assert_eq!(
        jitter("soon"),
        vec![(Code::ScheduleInvalidDuration, "s.jitter".to_string())]
    );
}

#[test]
fn retention_defaults_to_90_days_and_is_bounded() {
    let base = || schedule_value("r", "0 3 * * *", "UTC");
    assert_eq!(valid_spec(base()).retention, DEFAULT_RETENTION);
    assert_eq!(DEFAULT_RETENTION, Span::days(90));
    let retention = |r: &str| issues_of(with(base(), json!({ "retention": r })));
    let refused = vec![(Code::ScheduleInvalidRetention, "s.retention".to_string())];
    assert_eq!(retention("6d"), refused);
    assert_eq!(retention("401d"), refused);
    assert_eq!(retention("7d"), vec![]);
    assert_eq!(retention("400d"), vec![]);
    // Defaults stay out of a stored spec, so specs stored before the fields stay the same.
    let stored = serde_json::to_value(valid_spec(base())).unwrap();
    assert!(stored.get("retention").is_none() && stored.get("jitter").is_none());
    let spec = valid_spec(with(base(), json!({ "retention": "30d", "jitter": "10m" })));
    let again: cronledger_core::ScheduleSpec =
        serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
    assert_eq!(again, spec);
}

/// The fire time, the occurrence it stands for and the next fire after an instant agree.
#[test]
fn a_fire_time_is_the_occurrence_plus_the_offset_and_back() {
    let s = jittered("hourly-report", "0 * * * *", "5m");
    let offset = s.fire_offset();
    let at = utc("2026-03-01T10:00:00Z");
    assert_eq!(s.fire_time(at), at + offset);
    assert_eq!(s.occurrence_at(s.fire_time(at)), at);
    assert_eq!(
        s.next_fire_after(utc("2026-03-01T09:30:00Z")),
        Some(at + offset)
    );
    let plain = Schedule::new(valid_spec(schedule_value(
        "hourly-report",
        "0 * * * *",
        "UTC",
    )))
    .unwrap();
    assert_eq!(plain.fire_time(at), at);
}

/// A schedule whose offset is at least `min` (ids are tried until one is).
fn jittered_at_least(min: TimeDelta) -> Schedule {
    (0..)
        .map(|i| {
            let value = with(
                schedule_value(&format!("late-{i}"), "0 * * * *", "UTC"),
                json!({ "jitter": "30m", "grace": "2m", "misfire": "SKIP" }),
            );
            Schedule::new(valid_spec(value)).unwrap()
        })
        .find(|s| s.fire_offset() >= min)
        .unwrap()
}

fn plan_at(
    schedule: &Schedule,
    watermark: DateTime<Utc>,
    now: DateTime<Utc>,
) -> cronledger_core::Plan {
    plan(PlanInput {
        schedule,
        watermark,
        now,
        existing: &Coverage::new(),
        pauses: &[],
        config: PlannerConfig::default(),
    })
    .unwrap()
}

#[test]
fn a_window_is_not_missed_before_its_jittered_fire_time_and_grace() {
    let s = jittered_at_least(TimeDelta::minutes(10));
    let offset = s.fire_offset();
    let window = utc("2026-03-01T10:00:00Z");
    let watermark = utc("2026-03-01T09:30:00Z");
    // Past the nominal instant plus grace, but before the fire time: not judged yet.
    let early = plan_at(&s, watermark, window + TimeDelta::minutes(5));
    assert!(early.entries.is_empty(), "{:?}", early.entries);
    // Inside the grace after the fire time: still the ticker's.
    let at_grace = plan_at(&s, watermark, window + offset + TimeDelta::minutes(1));
    assert!(at_grace.entries.is_empty(), "{:?}", at_grace.entries);
    // Past it: missed, under its nominal instant and window.
    let late = plan_at(&s, watermark, window + offset + TimeDelta::minutes(3));
    assert_eq!(late.entries.len(), 1);
    assert_eq!(late.entries[0].scheduled_for, window);
    assert_eq!(late.entries[0].window.end, window);
}

#[test]
fn a_late_start_counts_its_lateness_from_the_fire_time() {
    let s = jittered_at_least(TimeDelta::minutes(10));
    let window = utc("2026-03-01T10:00:00Z");
    let fire = s.fire_time(window);
    assert_eq!(
        late_start(&s, window, window + TimeDelta::minutes(9)),
        LateStart::Run
    );
    assert_eq!(
        late_start(&s, window, fire + TimeDelta::minutes(2)),
        LateStart::Run
    );
    assert_eq!(
        late_start(&s, window, fire + TimeDelta::minutes(3)),
        LateStart::Skip {
            reason: Reason::GraceExpired
        }
    );
}

/// A schedule read straight from its stored form (no calendar checks: fleets are large).
fn stored(id: &str, cron: &str, jitter: Option<&str>) -> Schedule {
    let mut value = schedule_value(id, cron, "UTC");
    if let Some(j) = jitter {
        value = with(value, json!({ "jitter": j }));
    }
    Schedule::new(serde_json::from_value(value).unwrap()).unwrap()
}

#[test]
fn a_herd_is_ten_percent_of_the_fleet_and_fifty_schedules_on_one_minute() {
    let now = utc("2026-03-01T10:10:00Z");
    let fleet = |hourly: usize, jitter: Option<&str>, others: usize| -> Vec<Schedule> {
        let hourly = (0..hourly).map(|i| stored(&format!("h-{i}"), "0 * * * *", jitter));
        let spread = (0..others).map(|i| {
            let cron = format!("{} {} * * *", i % 60, (i / 60) % 24);
            stored(&format!("o-{i}"), &cron, None)
        });
        hourly.chain(spread).collect()
    };
    let rule = HerdRule::default();
    let herd = find_herd(&fleet(60, None, 0), now, &rule).expect("a herd");
    assert_eq!(herd.schedules, 60);
    assert_eq!(herd.minute, utc("2026-03-01T11:00:00Z"));
    assert_eq!(herd.warning().code, Code::Herd);
    // Spread by jitter: no herd.
    assert_eq!(find_herd(&fleet(60, Some("5m"), 0), now, &rule), None);
    // Fewer than 50 on the minute: no herd, however large a share.
    assert_eq!(find_herd(&fleet(49, None, 0), now, &rule), None);
    // 60 on one minute in a fleet of 1,000 spread ones: 6%, no herd.
    assert_eq!(find_herd(&fleet(60, None, 940), now, &rule), None);
    // Minutely schedules count on every minute.
    let mut minutely: Vec<Schedule> = (0..50)
        .map(|i| stored(&format!("m-{i}"), "* * * * *", None))
        .collect();
    assert_eq!(
        find_herd(&minutely, now, &rule).map(|h| h.schedules),
        Some(50)
    );
    minutely.truncate(49);
    assert_eq!(find_herd(&minutely, now, &rule), None);
}

#[test]
fn a_finished_run_expires_after_its_retention_and_a_failure_later() {
    let value = with(
        schedule_value("ttl", "0 3 * * *", "UTC"),
        json!({ "retention": "30d" }),
    );
    let s = Schedule::new(valid_spec(value)).unwrap();
    let at = utc("2026-03-01T03:00:00Z");
    let mut run = s.pending_run(
        at,
        s.window_for(at),
        Origin::Expected,
        Trigger::Scheduled,
        at,
        1,
    );
    assert_eq!(run.expires_at(), None, "a PENDING run never expires");
    let ended = utc("2026-03-01T03:05:00Z");
    run.completed_at = Some(ended);
    run.status = RunStatus::Success;
    assert_eq!(run.expires_at(), Some(ended + TimeDelta::days(30)));
    run.status = RunStatus::Failed;
    assert_eq!(run.expires_at(), Some(ended + KEPT_LONGER.as_delta()));
    run.status = RunStatus::Skipped;
    run.reason = Some(Reason::Missed);
    assert_eq!(run.expires_at(), Some(ended + KEPT_LONGER.as_delta()));
    run.status = RunStatus::ManualRequired;
    assert_eq!(run.expires_at(), None);
}
