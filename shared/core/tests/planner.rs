//! The misfire planner: every expected window accounted for exactly once, the DESIGN
//! catch-up table per policy and gap tier, caps, side effects, pauses, grace. (The change
//! risk report is `risk.rs`'s.)

mod common;

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use common::{schedule_with, utc};
use cronledger_core::planner::{Action, GapTier, Pause, Release};
use cronledger_core::{
    late_start, plan, plan_backlog, planned_with_its_gap, Code, Coverage, Lane, LateStart, Plan,
    PlanInput, PlannerConfig, Reason, RunKey, RunStatus, Schedule, Span, Trigger,
};
use proptest::prelude::*;
use serde_json::{json, Value};

struct Scenario<'a> {
    schedule: &'a Schedule,
    watermark: DateTime<Utc>,
    now: DateTime<Utc>,
    existing: Coverage,
    pauses: Vec<Pause>,
    config: PlannerConfig,
}

impl<'a> Scenario<'a> {
    fn new(schedule: &'a Schedule, watermark: &str, now: &str) -> Scenario<'a> {
        Scenario {
            schedule,
            watermark: utc(watermark),
            now: utc(now),
            existing: Coverage::new(),
            pauses: Vec::new(),
            config: PlannerConfig::default(),
        }
    }

    fn plan(&self) -> Plan {
        plan(PlanInput {
            schedule: self.schedule,
            watermark: self.watermark,
            now: self.now,
            existing: &self.existing,
            pauses: &self.pauses,
            config: self.config,
        })
        .unwrap()
    }
}

/// A schedule with catch-up knobs set; grace 1m so the hold-back equals the settle delay.
fn schedule(cron: &str, policy: &str, side_effects: bool, cap: u32) -> Schedule {
    schedule_with(
        cron,
        "UTC",
        json!({ "misfire": policy, "side_effects": side_effects, "max_auto_catch_up": cap, "grace": "1m" }),
    )
}

/// `(scheduled_for, count, action)` per entry.
fn summary(plan: &Plan) -> Vec<(DateTime<Utc>, u32, Action)> {
    plan.entries
        .iter()
        .map(|e| (e.scheduled_for, e.count, e.action))
        .collect()
}

fn minutes(from: &str, n: i64) -> Vec<DateTime<Utc>> {
    (0..n).map(|i| utc(from) + Duration::minutes(i)).collect()
}

const FIRE_NOW: Action = Action::Fire {
    lane: Lane::Correction,
    release: Release::Immediate,
};
const FIRE_SERIAL: Action = Action::Fire {
    lane: Lane::Correction,
    release: Release::Serial,
};
const FIRE_THROTTLED: Action = Action::Fire {
    lane: Lane::Backfill,
    release: Release::Throttled,
};
const MISSED: Action = Action::Skip {
    reason: Reason::Missed,
};
const POLICY_MANUAL: Action = Action::Hold {
    reason: Reason::PolicyManual,
};
const CAP: Action = Action::Hold {
    reason: Reason::CapExceeded,
};
const SIDE_EFFECTS: Action = Action::Hold {
    reason: Reason::SideEffects,
};
const TOO_LONG: Action = Action::Hold {
    reason: Reason::GapTooLong,
};

/// Every window of the minutely schedule between `first` and `last` as single entries.
fn singles(times: &[DateTime<Utc>], action: Action) -> Vec<(DateTime<Utc>, u32, Action)> {
    times.iter().map(|t| (*t, 1, action)).collect()
}

// ---------------------------------------------------------------- the catch-up table

// Gap tiers with a minutely schedule, watermark 10:00 and a 1m hold-back:
// now 10:05 -> 4 windows, gap 4m (immediate); now 10:09 -> 8 windows, gap 8m (serial);
// now 12:00 -> 119 windows, gap 1h59m (backfill); now next day 10:02 -> gap 24h01m (beyond).
const WATERMARK: &str = "2026-01-01T10:00:00Z";
const NOW_IMMEDIATE: &str = "2026-01-01T10:05:00Z";
const NOW_SERIAL: &str = "2026-01-01T10:09:00Z";
const NOW_BACKFILL: &str = "2026-01-01T12:00:00Z";
const NOW_BEYOND: &str = "2026-01-02T10:02:00Z";

fn tier_plan(policy: &str, side_effects: bool, cap: u32, now: &str) -> Plan {
    let s = schedule("* * * * *", policy, side_effects, cap);
    Scenario::new(&s, WATERMARK, now).plan()
}

#[test]
fn gap_tiers_and_their_boundaries() {
    let cases = [
        (NOW_IMMEDIATE, GapTier::Immediate, Span::minutes(4)),
        (NOW_SERIAL, GapTier::Serial, Span::minutes(8)),
        (NOW_BACKFILL, GapTier::Backfill, Span::minutes(119)),
        (NOW_BEYOND, GapTier::Beyond, Span::minutes(24 * 60 + 1)),
        // Exactly 5m, 1h and 24h stay in the lower tier.
        ("2026-01-01T10:06:00Z", GapTier::Immediate, Span::minutes(5)),
        ("2026-01-01T10:06:01Z", GapTier::Serial, Span::seconds(301)),
        ("2026-01-01T11:01:00Z", GapTier::Serial, Span::hours(1)),
        (
            "2026-01-01T11:01:01Z",
            GapTier::Backfill,
            Span::seconds(3601),
        ),
        ("2026-01-02T10:01:00Z", GapTier::Backfill, Span::hours(24)),
    ];
    for (now, tier, gap) in cases {
        let plan = tier_plan("SKIP", false, 5, now);
        assert_eq!((plan.tier, plan.gap), (Some(tier), Some(gap)), "now {now}");
    }
}

#[test]
fn skip_records_every_window_missed_in_every_tier() {
    for now in [NOW_IMMEDIATE, NOW_SERIAL, NOW_BACKFILL, NOW_BEYOND] {
        for side_effects in [false, true] {
            let plan = tier_plan("SKIP", side_effects, 5, now);
            assert!(plan.entries.iter().all(|e| e.action == MISSED), "{now}");
            assert_eq!(plan.totals.skipped, plan.totals.expected);
            assert_eq!(plan.totals.fire, 0);
            assert_eq!(plan.backfill, None);
        }
    }
    assert_eq!(
        summary(&tier_plan("SKIP", false, 5, NOW_IMMEDIATE)),
        singles(&minutes("2026-01-01T10:01:00Z", 4), MISSED)
    );
    // More than ten consecutive windows with one outcome become one range record.
    let plan = tier_plan("SKIP", false, 5, NOW_BACKFILL);
    assert_eq!(
        summary(&plan),
        vec![(utc("2026-01-01T10:01:00Z"), 119, MISSED)]
    );
    let range = &plan.entries[0];
    assert_eq!(range.range_end, Some(utc("2026-01-01T11:59:00Z")));
    assert_eq!(range.window.start, utc("2026-01-01T10:00:00Z"));
    assert_eq!(range.window.end, utc("2026-01-01T11:59:00Z"));
}

#[test]
fn manual_holds_every_window_in_every_tier() {
    for now in [NOW_IMMEDIATE, NOW_SERIAL, NOW_BACKFILL, NOW_BEYOND] {
        let plan = tier_plan("MANUAL", false, 5, now);
        assert!(
            plan.entries.iter().all(|e| e.action == POLICY_MANUAL),
            "{now}"
        );
        assert_eq!(plan.totals.manual, plan.totals.expected);
        assert!(!plan.alerts.is_empty(), "held work alerts the owner");
    }
}

#[test]
fn run_once_fires_the_latest_and_coalesces_the_rest() {
    for (now, latest, coalesced) in [
        (NOW_IMMEDIATE, "2026-01-01T10:04:00Z", 3),
        (NOW_SERIAL, "2026-01-01T10:08:00Z", 7),
    ] {
        let latest = utc(latest);
        let plan = tier_plan("RUN_ONCE", false, 5, now);
        let mut expected = singles(
            &minutes("2026-01-01T10:01:00Z", coalesced),
            Action::Coalesce { into: latest },
        );
        expected.push((latest, 1, FIRE_NOW));
        assert_eq!(summary(&plan), expected, "{now}");
        assert!(plan.alerts.is_empty());
    }

    // 1h-24h: the same, and the owner hears about it.
    let latest = utc("2026-01-01T11:59:00Z");
    let plan = tier_plan("RUN_ONCE", false, 5, NOW_BACKFILL);
    assert_eq!(
        summary(&plan),
        vec![
            (
                utc("2026-01-01T10:01:00Z"),
                118,
                Action::Coalesce { into: latest }
            ),
            (latest, 1, FIRE_NOW),
        ]
    );
    assert_eq!(plan.alerts.len(), 1);
    assert_eq!(plan.backfill, None);

    // Beyond 24h: the latest waits for approval, the rest coalesce into it.
    let latest = utc("2026-01-02T10:01:00Z");
    let plan = tier_plan("RUN_ONCE", false, 5, NOW_BEYOND);
    assert_eq!(
        summary(&plan),
        vec![
            (
                utc("2026-01-01T10:01:00Z"),
                1440,
                Action::Coalesce { into: latest }
            ),
            (latest, 1, TOO_LONG),
        ]
    );
    assert_eq!(plan.totals.fire, 0);
    assert_eq!(plan.alerts.len(), 1);
}

#[test]
fn run_once_with_side_effects_or_no_cap_needs_approval() {
    let latest_of = |plan: &Plan| plan.entries.last().unwrap().action;
    // Inside five minutes a side-effecting job still runs on its own.
    assert_eq!(
        latest_of(&tier_plan("RUN_ONCE", true, 5, NOW_IMMEDIATE)),
        FIRE_NOW
    );
    for now in [NOW_SERIAL, NOW_BACKFILL] {
        assert_eq!(
            latest_of(&tier_plan("RUN_ONCE", true, 5, now)),
            SIDE_EFFECTS,
            "{now}"
        );
    }
    assert_eq!(
        latest_of(&tier_plan("RUN_ONCE", true, 5, NOW_BEYOND)),
        TOO_LONG
    );
    for now in [NOW_IMMEDIATE, NOW_SERIAL, NOW_BACKFILL] {
        let plan = tier_plan("RUN_ONCE", false, 0, now);
        assert_eq!(latest_of(&plan), CAP, "{now}");
        assert_eq!(plan.totals.fire, 0);
    }
}

#[test]
fn catch_up_all_per_tier_with_the_cap() {
    let plan = tier_plan("CATCH_UP_ALL", false, 5, NOW_IMMEDIATE);
    assert_eq!(
        summary(&plan),
        singles(&minutes("2026-01-01T10:01:00Z", 4), FIRE_NOW)
    );
    assert_eq!(plan.backfill, None);

    // Oldest first up to the cap; the rest wait.
    let plan = tier_plan("CATCH_UP_ALL", false, 5, NOW_SERIAL);
    let mut expected = singles(&minutes("2026-01-01T10:01:00Z", 5), FIRE_SERIAL);
    expected.extend(singles(&minutes("2026-01-01T10:06:00Z", 3), CAP));
    assert_eq!(summary(&plan), expected);
    assert_eq!(plan.totals.fire, 5);

    let plan = tier_plan("CATCH_UP_ALL", false, 5, NOW_BACKFILL);
    let mut expected = singles(&minutes("2026-01-01T10:01:00Z", 5), FIRE_THROTTLED);
    expected.push((utc("2026-01-01T10:06:00Z"), 114, CAP));
    assert_eq!(summary(&plan), expected);
    let backfill = plan.backfill.clone().unwrap();
    assert_eq!(
        (backfill.first, backfill.last, backfill.windows),
        (
            utc("2026-01-01T10:01:00Z"),
            utc("2026-01-01T11:59:00Z"),
            119
        )
    );
    assert!(
        backfill.start_paused,
        "114 windows are over the cap: the backfill waits for approval"
    );
    assert_eq!(plan.alerts.len(), 1);
    // Within the cap the backfill starts on its own, throttled on the backfill lane.
    let plan = tier_plan("CATCH_UP_ALL", false, 200, NOW_BACKFILL);
    assert!(plan.entries.iter().all(|e| e.action == FIRE_THROTTLED));
    assert_eq!(plan.totals.fire, 119);
    assert!(!plan.backfill.unwrap().start_paused);

    let plan = tier_plan("CATCH_UP_ALL", false, 5, NOW_BEYOND);
    assert_eq!(
        summary(&plan),
        vec![(utc("2026-01-01T10:01:00Z"), 1441, TOO_LONG)]
    );
    assert!(plan.backfill.unwrap().start_paused);

    // With side effects nothing past five minutes starts on its own.
    assert!(tier_plan("CATCH_UP_ALL", true, 5, NOW_IMMEDIATE)
        .entries
        .iter()
        .all(|e| e.action == FIRE_NOW));
    for now in [NOW_SERIAL, NOW_BACKFILL] {
        let plan = tier_plan("CATCH_UP_ALL", true, 5, now);
        assert!(
            plan.entries.iter().all(|e| e.action == SIDE_EFFECTS),
            "{now}"
        );
        assert_eq!(plan.totals.fire, 0);
    }
    assert!(
        tier_plan("CATCH_UP_ALL", true, 5, NOW_BACKFILL)
            .backfill
            .unwrap()
            .start_paused
    );
    // A cap of zero holds everything, in every tier.
    for now in [NOW_IMMEDIATE, NOW_SERIAL, NOW_BACKFILL] {
        assert_eq!(
            tier_plan("CATCH_UP_ALL", false, 0, now).totals.fire,
            0,
            "{now}"
        );
    }
}

#[test]
fn windows_inside_grace_are_left_to_the_ticker() {
    let s = schedule_with(
        "* * * * *",
        "UTC",
        json!({ "grace": "10m", "misfire": "SKIP" }),
    );
    let plan = Scenario::new(&s, WATERMARK, "2026-01-01T10:30:00Z").plan();
    assert_eq!(plan.through, utc("2026-01-01T10:20:00Z"));
    assert_eq!(plan.totals.expected, 20);
    assert_eq!(
        plan.entries.last().unwrap().range_end,
        Some(utc("2026-01-01T10:20:00Z"))
    );
    // Nothing older than the grace period yet: an empty plan that keeps the watermark.
    let plan = Scenario::new(&s, WATERMARK, "2026-01-01T10:09:59Z").plan();
    assert!(plan.is_empty());
    assert_eq!(plan.through, utc(WATERMARK));
    // The settle delay holds back too when it is longer than the grace.
    let s = schedule_with(
        "* * * * *",
        "UTC",
        json!({ "grace": "30s", "misfire": "SKIP" }),
    );
    let mut scenario = Scenario::new(&s, WATERMARK, "2026-01-01T10:05:30Z");
    scenario.config.settle = Span::minutes(3);
    assert_eq!(scenario.plan().through, utc("2026-01-01T10:02:30Z"));
}

#[test]
fn paused_windows_are_skipped_paused_and_do_not_count_toward_the_gap() {
    let s = schedule("*/5 * * * *", "CATCH_UP_ALL", false, 5);
    let mut scenario = Scenario::new(&s, "2026-01-01T09:00:00Z", "2026-01-01T10:06:00Z");
    scenario.pauses = vec![
        Pause {
            from: utc("2026-01-01T09:02:00Z"),
            until: Some(utc("2026-01-01T09:58:00Z")),
            reason: Reason::Paused,
        },
        Pause {
            from: utc("2026-01-01T10:00:00Z"),
            until: Some(utc("2026-01-01T10:00:01Z")),
            reason: Reason::Disabled,
        },
    ];
    let plan = scenario.plan();
    let paused = Action::Skip {
        reason: Reason::Paused,
    };
    let disabled = Action::Skip {
        reason: Reason::Disabled,
    };
    assert_eq!(
        summary(&plan),
        vec![
            (utc("2026-01-01T09:05:00Z"), 11, paused),
            (utc("2026-01-01T10:00:00Z"), 1, disabled),
            (utc("2026-01-01T10:05:00Z"), 1, FIRE_NOW),
        ]
    );
    // The only missed live window is a minute old.
    assert_eq!(plan.tier, Some(GapTier::Immediate));
    // An open-ended pause covers everything after its start.
    scenario.pauses = vec![Pause {
        from: utc("2026-01-01T09:00:00Z"),
        until: None,
        reason: Reason::Paused,
    }];
    let plan = scenario.plan();
    assert!(plan.entries.iter().all(|e| e.action == paused));
    assert_eq!(plan.tier, None);
    assert_eq!(plan.totals.fire, 0);
}

#[test]
fn recorded_windows_are_left_alone_and_split_ranges() {
    let s = schedule("* * * * *", "SKIP", false, 5);
    let mut scenario = Scenario::new(&s, WATERMARK, NOW_BACKFILL);
    scenario.existing.add(utc("2026-01-01T10:30:00Z"));
    scenario
        .existing
        .add_range(utc("2026-01-01T11:00:00Z"), utc("2026-01-01T11:09:00Z"));
    let plan = scenario.plan();
    assert_eq!(plan.totals.recorded, 11);
    assert_eq!(
        summary(&plan),
        vec![
            (utc("2026-01-01T10:01:00Z"), 29, MISSED),
            (utc("2026-01-01T10:31:00Z"), 29, MISSED),
            (utc("2026-01-01T11:10:00Z"), 50, MISSED),
        ]
    );
    // Everything recorded: nothing to do, and the watermark still advances.
    let mut scenario = Scenario::new(&s, WATERMARK, NOW_SERIAL);
    scenario.existing.add_range(utc(WATERMARK), utc(NOW_SERIAL));
    let plan = scenario.plan();
    assert!(plan.is_empty());
    assert_eq!(
        (plan.totals.recorded, plan.through),
        (8, utc("2026-01-01T10:08:00Z"))
    );
    assert_eq!(plan.tier, None);
}

#[test]
fn range_threshold_is_configurable() {
    let s = schedule("* * * * *", "SKIP", false, 5);
    let mut scenario = Scenario::new(&s, WATERMARK, "2026-01-01T10:12:00Z"); // 11 windows
    assert_eq!(scenario.plan().entries.len(), 1);
    scenario.config.range_threshold = 11;
    assert_eq!(scenario.plan().entries.len(), 11);
    scenario.config.range_threshold = 0;
    let plan = scenario.plan();
    assert_eq!(
        summary(&plan),
        vec![(utc("2026-01-01T10:01:00Z"), 11, MISSED)]
    );
}

#[test]
fn planned_runs_carry_window_key_and_trigger() {
    // Seoul 02:00 and 14:00 are 17:00Z the day before and 05:00Z.
    let s = schedule_with(
        "0 2,14 * * *",
        "Asia/Seoul",
        json!({ "misfire": "RUN_ONCE", "side_effects": false, "job": { "type": "noop", "payload": { "tenant": "kr" } } }),
    );
    let plan = Scenario::new(&s, "2026-01-02T05:00:00Z", "2026-01-03T05:30:00Z").plan();
    assert_eq!(plan.tier, Some(GapTier::Backfill));
    let created = utc("2026-01-03T05:30:00Z");
    let runs: Vec<_> = plan
        .entries
        .iter()
        .map(|e| plan.to_run(&s, e, created, 7))
        .collect();
    assert_eq!(runs.len(), 2);
    let fired = &runs[1];
    assert_eq!(
        fired.key,
        RunKey::expected("job", utc("2026-01-03T05:00:00Z"))
    );
    assert_eq!(
        (fired.trigger, fired.status, fired.lane),
        (Trigger::CatchUp, RunStatus::Pending, Some(Lane::Correction))
    );
    assert_eq!((fired.schedule_version, fired.created_at), (7, created));
    assert_eq!(fired.window.start, utc("2026-01-02T17:00:00Z"));
    assert_eq!(fired.business_date.to_string(), "2026-01-03", "02:00 KST");
    assert_eq!(
        fired.idempotency_key.as_str(),
        "job:2026-01-02T17:00:00Z/2026-01-03T05:00:00Z:kr"
    );
    assert_eq!(
        fired.replay_group_id.as_deref(),
        Some("catchup:job:2026-01-02T17:00:00Z")
    );
    assert_eq!(
        runs[0].business_date.to_string(),
        "2026-01-02",
        "14:00 KST the day before"
    );
    let coalesced = runs[0].ledger_entry();
    assert_eq!(coalesced.status, RunStatus::Coalesced);
    assert_eq!(coalesced.reason, Some(Reason::Coalesced));
    assert_eq!(
        coalesced.coalesced_into.as_deref(),
        Some("2026-01-03T05:00:00Z")
    );
    assert_eq!(coalesced.window_start, "2026-01-02T05:00:00Z");
    let json: Value = serde_json::to_value(&coalesced).unwrap();
    for field in [
        "schedule",
        "scheduled_for",
        "trigger",
        "status",
        "reason",
        "attempts",
        "window_start",
        "window_end",
        "idempotency_key",
        "replay_group_id",
    ] {
        assert!(json.get(field).is_some(), "ledger entry lacks {field}");
    }
    // Status changes go through the table.
    let mut run = runs[1].clone();
    assert_eq!(
        run.apply(cronledger_core::RunEvent::Enqueue),
        Ok(RunStatus::Queued)
    );
    assert!(run.apply(cronledger_core::RunEvent::Approve).is_err());
    assert_eq!(
        run.status,
        RunStatus::Queued,
        "a refused event changes nothing"
    );
}

#[test]
fn range_records_print_range_end_and_count() {
    let s = schedule("* * * * *", "SKIP", false, 5);
    let plan = Scenario::new(&s, WATERMARK, NOW_BACKFILL).plan();
    let entry = plan
        .to_run(&s, &plan.entries[0], utc(NOW_BACKFILL), 1)
        .ledger_entry();
    assert_eq!(entry.range_end.as_deref(), Some("2026-01-01T11:59:00Z"));
    assert_eq!(entry.count, Some(119));
    let single = Scenario::new(&s, WATERMARK, NOW_IMMEDIATE).plan();
    let entry = single
        .to_run(&s, &single.entries[0], utc(NOW_IMMEDIATE), 1)
        .ledger_entry();
    assert_eq!((entry.range_end, entry.count), (None, None));
}

#[test]
fn now_before_the_watermark_is_refused() {
    let s = schedule("* * * * *", "SKIP", false, 5);
    let err = plan(PlanInput {
        schedule: &s,
        watermark: utc(NOW_SERIAL),
        now: utc(WATERMARK),
        existing: &Coverage::new(),
        pauses: &[],
        config: PlannerConfig::default(),
    })
    .unwrap_err();
    assert_eq!(err.code, Code::PlanInvalidInput);
}

#[test]
fn dst_fall_back_day_plans_both_passes_of_an_hourly_job() {
    let s = schedule_with(
        "0 * * * *",
        "America/New_York",
        json!({ "misfire": "SKIP" }),
    );
    let plan = Scenario::new(&s, "2026-11-01T04:00:00Z", "2026-11-02T04:10:00Z").plan();
    assert_eq!(
        plan.totals.expected, 24,
        "05:00Z .. 04:00Z next day: 25 local hours, minus the watermark"
    );
    let fixed = schedule_with(
        "30 1 * * *",
        "America/New_York",
        json!({ "misfire": "SKIP" }),
    );
    let plan = Scenario::new(&fixed, "2026-10-31T12:00:00Z", "2026-11-02T12:00:00Z").plan();
    assert_eq!(
        summary(&plan),
        vec![
            (utc("2026-11-01T05:30:00Z"), 1, MISSED),
            (utc("2026-11-02T06:30:00Z"), 1, MISSED)
        ]
    );
}

// ---------------------------------------------------------------- properties

const SHAPES: &[&str] = &[
    "*/5 * * * *",
    "0 * * * *",
    "*/20 * * * *",
    "30 2 * * *",
    "30 1 * * *",
    "0 9 * * 1-5",
    "rate(45 minutes)",
];
const PROP_ZONES: &[&str] = &[
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
];
/// Watermarks are drawn around these: 2026's transitions and an ordinary day.
const ANCHORS: &[&str] = &[
    "2026-03-07T20:00:00Z",
    "2026-10-31T20:00:00Z",
    "2026-03-28T20:00:00Z",
    "2026-10-03T10:00:00Z",
    "2026-04-04T10:00:00Z",
    "2026-06-15T00:00:00Z",
];
const POLICIES: &[&str] = &["SKIP", "RUN_ONCE", "CATCH_UP_ALL", "MANUAL"];

#[derive(Debug, Clone)]
struct Case {
    shape: usize,
    zone: usize,
    anchor: usize,
    offset_secs: i64,
    gap_secs: i64,
    policy: usize,
    side_effects: bool,
    cap: u32,
    grace_minutes: u64,
    /// One bit per expected window (cycled): set means the ledger already has it.
    recorded_bits: u64,
    /// An optional recorded range and an optional pause, as fractions of the gap.
    range: Option<(u8, u8)>,
    pause: Option<(u8, u8, bool)>,
    range_threshold: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (
            0..SHAPES.len(),
            0..PROP_ZONES.len(),
            0..ANCHORS.len(),
            0i64..86_400,
            0i64..3 * 86_400,
        ),
        (
            0..POLICIES.len(),
            any::<bool>(),
            0u32..6,
            prop::sample::select(vec![1u64, 2, 30, 90]),
        ),
        (
            prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()],
            prop::option::of((0u8..=100, 0u8..=100)),
            prop::option::of((0u8..=100, 0u8..=100, any::<bool>())),
            prop::sample::select(vec![0usize, 3, 10]),
        ),
    )
        .prop_map(
            |(
                (shape, zone, anchor, offset_secs, gap_secs),
                (policy, side_effects, cap, grace_minutes),
                (recorded_bits, range, pause, range_threshold),
            )| Case {
                shape,
                zone,
                anchor,
                offset_secs,
                gap_secs,
                policy,
                side_effects,
                cap,
                grace_minutes,
                recorded_bits,
                range,
                pause,
                range_threshold,
            },
        )
}

fn at_fraction(from: DateTime<Utc>, to: DateTime<Utc>, percent: u8) -> DateTime<Utc> {
    from + (to - from) * i32::from(percent) / 100
}

/// The set of windows an entry covers, found on the schedule's own calendar.
fn windows_of(s: &Schedule, entry: &cronledger_core::planner::PlannedEntry) -> Vec<DateTime<Utc>> {
    match entry.range_end {
        None => vec![entry.scheduled_for],
        Some(last) => s
            .timing()
            .between(entry.scheduled_for - Duration::seconds(1), last)
            .collect(),
    }
}

/// Adds what a plan writes to the ledger's coverage.
fn apply(coverage: &mut Coverage, plan: &Plan) {
    for entry in &plan.entries {
        match entry.range_end {
            None => coverage.add(entry.scheduled_for),
            Some(last) => coverage.add_range(entry.scheduled_for, last),
        }
    }
}

fn check_case(case: &Case) -> Result<(), TestCaseError> {
    let s = schedule_with(
        SHAPES[case.shape],
        PROP_ZONES[case.zone],
        json!({
            "misfire": POLICIES[case.policy],
            "side_effects": case.side_effects,
            "max_auto_catch_up": case.cap,
            "grace": format!("{}m", case.grace_minutes),
        }),
    );
    let timing = s.timing();
    let watermark = utc(ANCHORS[case.anchor]) + Duration::seconds(case.offset_secs);
    let now = watermark + Duration::seconds(case.gap_secs);
    let config = PlannerConfig {
        range_threshold: case.range_threshold,
        ..PlannerConfig::default()
    };
    let through = (now
        - Span::minutes(case.grace_minutes)
            .max(config.settle)
            .as_delta())
    .max(watermark);
    let expected: Vec<DateTime<Utc>> = timing.between(watermark, through).collect();

    let mut existing = Coverage::new();
    let mut recorded: BTreeSet<DateTime<Utc>> = BTreeSet::new();
    for (i, at) in expected.iter().enumerate() {
        if case.recorded_bits >> (i % 64) & 1 == 1 {
            existing.add(*at);
            recorded.insert(*at);
        }
    }
    if let Some((a, b)) = case.range {
        let (first, last) = (
            at_fraction(watermark, now, a.min(b)),
            at_fraction(watermark, now, a.max(b)),
        );
        existing.add_range(first, last);
        recorded.extend(expected.iter().filter(|t| **t >= first && **t <= last));
    }
    let pauses: Vec<Pause> = case
        .pause
        .map(|(a, b, open)| Pause {
            from: at_fraction(watermark, now, a.min(b)),
            until: (!open).then(|| at_fraction(watermark, now, a.max(b))),
            reason: Reason::Paused,
        })
        .into_iter()
        .collect();

    let input = PlanInput {
        schedule: &s,
        watermark,
        now,
        existing: &existing,
        pauses: &pauses,
        config,
    };
    let first = plan(input).unwrap();
    let plan = &first;
    prop_assert_eq!(plan.through, through);
    prop_assert_eq!(plan.totals.expected as usize, expected.len());
    prop_assert_eq!(plan.totals.recorded as usize, recorded.len());

    // Every expected window exactly once: recorded, or in exactly one entry.
    let mut planned: BTreeSet<DateTime<Utc>> = BTreeSet::new();
    let mut counted = 0u32;
    for entry in &plan.entries {
        let covered = windows_of(&s, entry);
        // Ranges only join contiguous windows: nothing recorded inside, count matches.
        prop_assert_eq!(covered.len(), entry.count as usize, "entry {:?}", entry);
        prop_assert!(
            entry.range_end.is_none() || entry.count as usize > case.range_threshold.max(1)
        );
        for at in &covered {
            prop_assert!(!recorded.contains(at), "{} planned although recorded", at);
            prop_assert!(planned.insert(*at), "{} in two entries", at);
        }
        counted += entry.count;
        // Windows are the business windows the schedule itself computes.
        prop_assert_eq!(entry.window.start, s.window_for(entry.scheduled_for).start);
        prop_assert_eq!(entry.window.end, *covered.last().unwrap());
        if pauses.iter().any(|p| {
            p.from <= entry.scheduled_for && p.until.is_none_or(|u| entry.scheduled_for < u)
        }) {
            prop_assert_eq!(
                entry.action,
                Action::Skip {
                    reason: Reason::Paused
                }
            );
        }
        if let Action::Coalesce { into } = entry.action {
            let target = plan
                .entries
                .iter()
                .find(|e| e.scheduled_for == into && e.range_end.is_none());
            let fires_or_waits = target
                .is_some_and(|t| matches!(t.action, Action::Fire { .. } | Action::Hold { .. }));
            prop_assert!(
                fires_or_waits,
                "coalesced into {} which neither fires nor waits",
                into
            );
        }
    }
    prop_assert_eq!(counted + plan.totals.recorded, plan.totals.expected);
    let all: BTreeSet<_> = planned.union(&recorded).copied().collect();
    prop_assert_eq!(all, expected.iter().copied().collect::<BTreeSet<_>>());

    // Never more automatic fires than the cap.
    let fires = plan
        .entries
        .iter()
        .filter(|e| matches!(e.action, Action::Fire { .. }))
        .count();
    prop_assert_eq!(fires as u32, plan.totals.fire);
    prop_assert!(plan.totals.fire <= case.cap);
    if case.side_effects && plan.tier.is_some_and(|t| t > GapTier::Immediate) {
        prop_assert_eq!(plan.totals.fire, 0);
    }
    // A backfill that starts on its own replays nothing beyond the cap either.
    if let Some(backfill) = &plan.backfill {
        prop_assert!(backfill.start_paused || backfill.windows <= case.cap);
    }
    let by_status =
        plan.totals.fire + plan.totals.skipped + plan.totals.coalesced + plan.totals.manual;
    prop_assert_eq!(by_status, counted);

    // Applying the plan leaves nothing to plan, from the new or the old watermark.
    let mut applied = existing.clone();
    apply(&mut applied, plan);
    let again = cronledger_core::plan(PlanInput {
        watermark: plan.through,
        existing: &applied,
        ..input
    })
    .unwrap();
    prop_assert!(again.is_empty(), "{:?}", again.entries);
    let replay = cronledger_core::plan(PlanInput {
        existing: &applied,
        ..input
    })
    .unwrap();
    prop_assert!(replay.is_empty(), "{:?}", replay.entries);
    prop_assert_eq!(replay.totals.recorded, plan.totals.expected);
    // A plan written only in part (a racing reconciler read the ledger mid-write, or a pass
    // stopped before its watermark moved) is finished by a re-plan that writes exactly the
    // rest, in the same gap: same tier, replay group, backfill and cap.
    let n = plan.entries.len();
    for written in [1, n / 2, n.saturating_sub(1)] {
        if written == 0 || written >= n {
            continue;
        }
        let mut partly = existing.clone();
        for entry in &plan.entries[..written] {
            partly.add_planned(
                entry.scheduled_for,
                entry.range_end.unwrap_or(entry.scheduled_for),
            );
        }
        let rest = cronledger_core::plan(PlanInput {
            existing: &partly,
            ..input
        })
        .unwrap();
        prop_assert_eq!(&rest.entries[..], &plan.entries[written..]);
        prop_assert_eq!(&rest.replay_group_id, &plan.replay_group_id);
        prop_assert_eq!(rest.tier, plan.tier);
        prop_assert_eq!(&rest.backfill, &plan.backfill);
    }
    // Planning later from the new watermark only sees windows after it.
    let later = cronledger_core::plan(PlanInput {
        watermark: plan.through,
        existing: &applied,
        now: now + Duration::hours(3),
        ..input
    })
    .unwrap();
    prop_assert!(later.entries.iter().all(|e| e.scheduled_for > plan.through));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_window_is_accounted_for_exactly_once(case in case()) {
        check_case(&case)?;
    }
}

#[test]
fn plan_until_judges_only_the_windows_up_to_an_edit_with_the_gap_aged_from_now() {
    // Hourly, missed since 00:00; an edit at 03:30 hands the windows after it to the new
    // expression: this one judges 01:00..03:00, and the gap's age still counts from now.
    let s = schedule("0 * * * *", "CATCH_UP_ALL", false, 10);
    let input = PlanInput {
        schedule: &s,
        watermark: utc("2026-03-01T00:00:00Z"),
        now: utc("2026-03-01T06:00:00Z"),
        existing: &Coverage::new(),
        pauses: &[],
        config: PlannerConfig::default(),
    };
    let plan = cronledger_core::plan_until(input, utc("2026-03-01T03:30:00Z")).unwrap();
    assert_eq!(plan.through, utc("2026-03-01T03:30:00Z"));
    let windows: Vec<_> = plan.entries.iter().map(|e| e.scheduled_for).collect();
    assert_eq!(
        windows,
        [
            utc("2026-03-01T01:00:00Z"),
            utc("2026-03-01T02:00:00Z"),
            utc("2026-03-01T03:00:00Z")
        ]
    );
    assert_eq!(
        plan.tier,
        Some(GapTier::Backfill),
        "five hours old at 06:00"
    );
    // An edit after the horizon changes nothing.
    let whole = plan_both(&s, "2026-03-01T09:00:00Z");
    assert_eq!(whole.0, whole.1);
}

fn plan_both(s: &Schedule, until: &str) -> (Plan, Plan) {
    let input = PlanInput {
        schedule: s,
        watermark: utc("2026-03-01T00:00:00Z"),
        now: utc("2026-03-01T06:00:00Z"),
        existing: &Coverage::new(),
        pauses: &[],
        config: PlannerConfig::default(),
    };
    (
        plan(input).unwrap(),
        cronledger_core::plan_until(input, utc(until)).unwrap(),
    )
}

// ---------------------------------------------------------------- late starts

fn with_policy(cron: &str, policy: &str, side_effects: bool, cap: u32, grace: &str) -> Schedule {
    schedule_with(
        cron,
        "UTC",
        json!({ "misfire": policy, "side_effects": side_effects, "max_auto_catch_up": cap, "grace": grace }),
    )
}

#[test]
fn a_late_first_start_gets_the_misfire_policy_of_the_gap_it_opens() {
    let at = utc("2026-03-01T03:00:00Z");
    // Monthly: no later window is due, the run is its gap's only window.
    let late = |policy: &str, side_effects: bool, cap: u32, by: Duration| {
        let schedule = with_policy("0 3 1 * *", policy, side_effects, cap, "2m");
        late_start(&schedule, at, at + by)
    };
    let two_min = Duration::minutes(2);
    for policy in ["SKIP", "RUN_ONCE", "CATCH_UP_ALL", "MANUAL"] {
        // Inside the grace period (inclusive) every policy starts the run.
        assert_eq!(late(policy, true, 5, two_min), LateStart::Run, "{policy}");
        assert_eq!(late(policy, false, 0, Duration::zero()), LateStart::Run);
    }
    let three_min = Duration::minutes(3);
    let skip = LateStart::Skip {
        reason: Reason::GraceExpired,
    };
    let hold = |reason| LateStart::Hold { reason };
    assert_eq!(late("SKIP", false, 5, three_min), skip);
    assert_eq!(
        late("MANUAL", false, 5, three_min),
        hold(Reason::PolicyManual)
    );
    assert_eq!(late("RUN_ONCE", false, 5, three_min), LateStart::Run);
    assert_eq!(late("CATCH_UP_ALL", false, 5, three_min), LateStart::Run);
    // Side effects: only the 5-minute tier starts on its own.
    assert_eq!(late("RUN_ONCE", true, 5, three_min), LateStart::Run);
    let half_hour = Duration::minutes(30);
    assert_eq!(
        late("RUN_ONCE", true, 5, half_hour),
        hold(Reason::SideEffects)
    );
    assert_eq!(
        late("CATCH_UP_ALL", true, 5, half_hour),
        hold(Reason::SideEffects)
    );
    assert_eq!(late("CATCH_UP_ALL", false, 5, half_hour), LateStart::Run);
    // A day and more: approval whatever the side effects; a zero cap: approval.
    let day = Duration::hours(25);
    assert_eq!(late("RUN_ONCE", false, 5, day), hold(Reason::GapTooLong));
    assert_eq!(
        late("CATCH_UP_ALL", false, 0, three_min),
        hold(Reason::CapExceeded)
    );

    // Every 10 minutes, six hours late: RUN_ONCE folds the run into the latest window past
    // its grace (a worker outage would otherwise replay every queued window).
    let ten = |policy: &str, side_effects: bool| {
        let schedule = with_policy("*/10 * * * *", policy, side_effects, 5, "2m");
        late_start(
            &schedule,
            at,
            at + Duration::hours(6) + Duration::minutes(5),
        )
    };
    let into = utc("2026-03-01T09:00:00Z");
    assert_eq!(ten("RUN_ONCE", false), LateStart::Coalesce { into });
    assert_eq!(ten("RUN_ONCE", true), LateStart::Coalesce { into });
    assert_eq!(ten("SKIP", false), skip);
    assert_eq!(ten("CATCH_UP_ALL", false), LateStart::Run);
    // The latest window itself, a little late, runs.
    let latest = with_policy("*/10 * * * *", "RUN_ONCE", false, 5, "2m");
    assert_eq!(
        late_start(&latest, into, into + Duration::minutes(5)),
        LateStart::Run
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A window's fate does not depend on who found it late: the worker's judgement of a
    /// late first start is the planner's action for the same window missed outright, the
    /// oldest of its gap.
    #[test]
    fn a_late_start_is_judged_as_the_planner_judges_the_missed_window(
        cron in prop::sample::select(vec!["*/10 * * * *", "0 * * * *", "0 3 * * *", "0 3 1 * *"]),
        policy in prop::sample::select(vec!["SKIP", "RUN_ONCE", "CATCH_UP_ALL", "MANUAL"]),
        side_effects in any::<bool>(),
        cap in 0u32..3,
        grace_min in 1i64..90,
        late_min in 0i64..(27 * 24 * 60),
    ) {
        let grace = format!("{grace_min}m");
        let schedule = with_policy(cron, policy, side_effects, cap, &grace);
        let at = utc("2026-03-01T03:00:00Z");
        let now = at + Duration::minutes(late_min);
        let judged = late_start(&schedule, at, now);
        if late_min <= grace_min {
            prop_assert_eq!(judged, LateStart::Run);
        } else {
            let planned = plan(PlanInput {
                schedule: &schedule,
                watermark: at - Duration::minutes(1),
                now,
                existing: &Coverage::new(),
                pauses: &[],
                config: PlannerConfig::default(),
            })
            .unwrap();
            let oldest = planned.entries.first().expect("the gap's first entry");
            prop_assert_eq!(oldest.scheduled_for, at);
            let expected = match oldest.action {
                Action::Fire { .. } => LateStart::Run,
                Action::Skip { .. } => LateStart::Skip { reason: Reason::GraceExpired },
                Action::Hold { reason } => LateStart::Hold { reason },
                Action::Coalesce { into } => LateStart::Coalesce { into },
            };
            prop_assert_eq!(judged, expected);
        }
    }
}

#[test]
fn catch_up_all_past_the_immediate_tier_is_planned_with_its_gap() {
    let at = utc("2026-03-01T03:00:00Z");
    let by = |policy: &str, side_effects: bool, late: Duration| {
        let schedule = with_policy("* * * * *", policy, side_effects, 5, "2m");
        planned_with_its_gap(&schedule, at, at + late)
    };
    // Inside the grace period, or the 5-minute tier: the run is judged alone (it runs).
    assert!(!by("CATCH_UP_ALL", false, Duration::minutes(2)));
    assert!(!by("CATCH_UP_ALL", false, Duration::minutes(5)));
    // Past it, with or without side effects (the gap's approvals and backfill proposal).
    assert!(by("CATCH_UP_ALL", false, Duration::minutes(6)));
    assert!(by("CATCH_UP_ALL", true, Duration::hours(6)));
    assert!(by("CATCH_UP_ALL", true, Duration::days(3)));
    // Other policies decide each late run alone.
    for policy in ["SKIP", "RUN_ONCE", "MANUAL"] {
        assert!(!by(policy, false, Duration::hours(6)), "{policy}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Runs a backlog left waiting late are planned as the same windows missed outright:
    /// the same action per window, tier, replay group, backfill proposal and alerts.
    #[test]
    fn a_backlog_is_planned_as_the_same_windows_missed(
        cron in prop::sample::select(vec!["* * * * *", "*/10 * * * *", "0 * * * *"]),
        policy in prop::sample::select(vec!["SKIP", "RUN_ONCE", "CATCH_UP_ALL", "MANUAL"]),
        side_effects in any::<bool>(),
        cap in 0u32..15,
        gap_min in 1i64..(26 * 60),
    ) {
        let schedule = with_policy(cron, policy, side_effects, cap, "2m");
        let watermark = utc("2026-03-01T02:00:00Z");
        let now = watermark + Duration::minutes(gap_min);
        let missed = plan(PlanInput {
            schedule: &schedule,
            watermark,
            now,
            existing: &Coverage::new(),
            pauses: &[],
            config: PlannerConfig { range_threshold: usize::MAX, ..PlannerConfig::default() },
        })
        .unwrap();
        let waiting: Vec<_> = missed.entries.iter().map(|e| (e.scheduled_for, e.window)).collect();
        let backlog = plan_backlog(&schedule, &waiting, now);
        let actions = |p: &Plan| p.entries.iter().map(|e| (e.scheduled_for, e.action)).collect::<Vec<_>>();
        prop_assert_eq!(actions(&backlog), actions(&missed));
        prop_assert_eq!(backlog.tier, missed.tier);
        prop_assert_eq!(&backlog.replay_group_id, &missed.replay_group_id);
        prop_assert_eq!(&backlog.backfill, &missed.backfill);
        prop_assert_eq!(&backlog.alerts, &missed.alerts);
        prop_assert_eq!(backlog.totals.fire, missed.totals.fire);
        prop_assert_eq!(backlog.totals.manual, missed.totals.manual);
        prop_assert!(backlog.entries.iter().all(|e| e.range_end.is_none() && e.count == 1));
    }
}

#[test]
fn a_watermark_is_carried_to_the_end_of_chained_ranges_that_cover_it() {
    let at = |m: u32| {
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 3, 5, 10, m, 0)
            .single()
            .expect("valid")
    };
    let mut coverage = Coverage::new();
    coverage.add_range(at(0), at(10));
    coverage.add_range(at(8), at(20));
    coverage.add_range(at(30), at(40));
    coverage.add(at(25));
    // Inside the first range: carried through the one overlapping it, not to the later one
    // (a range starting after the watermark is read by the next pass anyway).
    assert_eq!(coverage.extend_through(at(5)), at(20));
    // Exactly at a range's end, between ranges, and past them all: unchanged.
    assert_eq!(coverage.extend_through(at(20)), at(20));
    assert_eq!(coverage.extend_through(at(22)), at(22));
    assert_eq!(coverage.extend_through(at(45)), at(45));
}
