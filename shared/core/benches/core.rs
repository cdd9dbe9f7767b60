//! Core benchmarks (results and how to read them: BENCHMARKS.md).
//!
//! Run: `cargo bench -p cronledger-core --bench core`

use std::hint::black_box;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cronledger_core::spec::{JobSpec, ScheduleSpec};
use cronledger_core::{
    plan, Coverage, MisfirePolicy, OverlapPolicy, PlanInput, PlannerConfig, Priority, Schedule,
    Span, Timing,
};

const EXPRESSIONS: &[&str] = &[
    "* * * * *",
    "*/5 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0 9 * * 1-5",
    "15 */6 * * *",
    "0 0 L * *",
    "0 12 * * 5#2",
    "cron(0 9 ? * MON-FRI *)",
    "rate(15 minutes)",
];
const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Sydney",
    "Asia/Seoul",
    "Asia/Kathmandu",
];

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("benchmark instants are valid")
}

fn spec(id: String, cron: &str, misfire: MisfirePolicy) -> ScheduleSpec {
    ScheduleSpec {
        id,
        name: None,
        cron: cron.to_string(),
        timezone: "Europe/Berlin".parse().expect("known zone"),
        enabled: true,
        misfire,
        overlap: OverlapPolicy::SkipNew,
        grace: Span::minutes(2),
        max_auto_catch_up: 5,
        max_runtime: Span::minutes(15),
        priority: Priority::Normal,
        side_effects: false,
        idempotent: true,
        max_attempts: 3,
        owner: None,
        catch_up: Default::default(),
        approval: Default::default(),
        approval_timeout: cronledger_core::spec::defaults::approval_timeout(),
        jitter: None,
        retention: cronledger_core::spec::defaults::retention(),
        alerts: Default::default(),
        deadline: None,
        slo: None,
        after: Vec::new(),
        accept_partial: false,
        accept_suspect: false,
        expect: None,
        verify: None,
        max_failed_children: None,
        batch_lane: None,
        calendars: Vec::new(),
        exclude: Vec::new(),
        start_at: None,
        end_at: None,
        max_runs: None,
        dst: Default::default(),
        job: JobSpec::Noop {
            duration: Span::ZERO,
            duration_ms: 0,
            fail_times: 0,
            fail_before: None,
            payload: serde_json::Value::Null,
            affected: None,
            guard: None,
            children: 0,
            fail_children: 0,
            count: None,
            count_sequence: Vec::new(),
        },
    }
}

fn next_fire_for_100k_schedules(c: &mut Criterion) {
    let timings: Vec<Timing> = (0..100_000)
        .map(|i| {
            let expr = EXPRESSIONS[i % EXPRESSIONS.len()];
            let zone = ZONES[(i / EXPRESSIONS.len()) % ZONES.len()];
            Timing::parse(expr, zone.parse().expect("known zone")).expect("valid expression")
        })
        .collect();
    let now = at("2026-11-29T12:34:56Z");
    let mut group = c.benchmark_group("next_fire");
    group.sample_size(10);
    group.throughput(Throughput::Elements(timings.len() as u64));
    group.bench_function("100k_preparsed_schedules", |b| {
        b.iter(|| {
            for t in &timings {
                black_box(t.next_after(black_box(now)));
            }
        })
    });
    group.finish();
}

fn every_minute_for_a_year(c: &mut Criterion) {
    let timing = Timing::parse("* * * * *", "America/New_York".parse().expect("known zone"))
        .expect("valid expression");
    let (from, to) = (at("2026-01-01T05:00:00Z"), at("2027-01-01T05:00:00Z"));
    let mut group = c.benchmark_group("occurrences");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(525_600));
    group.bench_function("every_minute_one_year_new_york", |b| {
        b.iter(|| {
            let n = timing.between(from, to).count();
            assert_eq!(n, 525_600);
        })
    });
    group.bench_function("calendar_stats_every_minute_366_days", |b| {
        b.iter(|| black_box(timing.calendar_stats(from, 366)))
    });
    group.finish();
}

fn plan_outage(schedules: &[Schedule], watermark: DateTime<Utc>, gap: TimeDelta) -> usize {
    let existing = Coverage::new();
    let now = watermark + gap;
    schedules
        .iter()
        .map(|s| {
            plan(PlanInput {
                schedule: s,
                watermark,
                now,
                existing: &existing,
                pauses: &[],
                config: PlannerConfig::default(),
            })
            .map(|p| p.entries.len())
            .unwrap_or(0)
        })
        .sum()
}

fn minutely_schedules(n: usize) -> Vec<Schedule> {
    let policies = [
        MisfirePolicy::Skip,
        MisfirePolicy::RunOnce,
        MisfirePolicy::CatchUpAll,
        MisfirePolicy::Manual,
    ];
    (0..n)
        .map(|i| {
            Schedule::new(spec(format!("s-{i}"), "* * * * *", policies[i % 4]))
                .expect("valid schedule")
        })
        .collect()
}

fn planner_six_hour_outage(c: &mut Criterion) {
    let schedules = minutely_schedules(10_000);
    let watermark = at("2026-11-29T00:00:00Z");
    let mut group = c.benchmark_group("planner");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(schedules.len() as u64));
    group.bench_function("6h_outage_10k_minutely_schedules", |b| {
        b.iter(|| black_box(plan_outage(&schedules, watermark, TimeDelta::hours(6))))
    });
    group.finish();
}

fn planner_growth_with_gap(c: &mut Criterion) {
    let schedules = minutely_schedules(100);
    let watermark = at("2026-11-29T00:00:00Z");
    let mut group = c.benchmark_group("planner_gap_growth_100_minutely");
    group.sample_size(10);
    for hours in [1i64, 6, 24, 72] {
        group.throughput(Throughput::Elements((hours * 60) as u64 * 100));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{hours}h")),
            &hours,
            |b, &h| b.iter(|| black_box(plan_outage(&schedules, watermark, TimeDelta::hours(h)))),
        );
    }
    group.finish();
}

criterion_group!(
    benches,
    next_fire_for_100k_schedules,
    every_minute_for_a_year,
    planner_six_hour_outage,
    planner_growth_with_gap
);
criterion_main!(benches);
