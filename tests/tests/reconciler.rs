//! The reconciler against the emulator, through its handler: outages under each misfire
//! policy with their exact ledgers, the gap tiers, the cap and side effects, a DST day inside
//! an outage, and the race with tickers and other reconcilers. Every test ends by checking
//! that each expected window is accounted for exactly once (range records expanded).

use cronledger_aws::ledger::{Ending, Opening};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use cronledger_app::backfill::{progress, BackfillReleaser};
use cronledger_app::reconciler::{proposed_backfill_id, QuietSignals, ReconcileEvent, Reconciler};
use cronledger_app::ticker::{TickEvent, Ticker};
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::RunChange;
use cronledger_aws::prelude::*;
use cronledger_aws::{BackfillState, DynamoLedger, LedgerStore, OpsStore, ReleaseStateStore};
use cronledger_core::run::Origin;
use cronledger_core::window::utc_text;
use cronledger_core::{Lane, Reason, Run, RunKey, RunStatus, Schedule, ScheduleSpec, Trigger};
use cronledger_tests::app::{ticker_config, AppEnv, LaneCall};
use cronledger_tests::reconcile::{
    assert_every_window_once, ledger, reconcile, reconciler, reconciler_config,
};
use cronledger_tests::{spec_with, t, SHARDS};
use serde_json::json;

fn quiet() -> Arc<QuietSignals> {
    Arc::new(QuietSignals)
}

fn compiled(spec: &ScheduleSpec) -> Schedule {
    Schedule::new(spec.clone()).expect("compiles")
}

/// `(scheduled_for, status, reason, range_end, count)` of each entry: the ledger's shape.
type Shape = (
    DateTime<Utc>,
    RunStatus,
    Option<Reason>,
    Option<DateTime<Utc>>,
    u32,
);

fn shape(runs: &[Run]) -> Vec<Shape> {
    runs.iter()
        .map(|r| {
            (
                r.key.scheduled_for,
                r.status,
                r.reason,
                r.range_end,
                r.count,
            )
        })
        .collect()
}

fn sends_to(env: &AppEnv) -> Vec<(RunKey, Lane)> {
    env.queue
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            LaneCall::Send { run, lane, .. } => Some((run, lane)),
            _ => None,
        })
        .collect()
}

/// A catch-up run carries its window's idempotency key and the plan's replay group.
fn assert_catch_up(run: &Run, schedule: &Schedule, first_missed: DateTime<Utc>) {
    assert_eq!(run.trigger, Trigger::CatchUp, "{}", run.key);
    let window = schedule.window_for(run.key.scheduled_for);
    if run.range_end.is_none() {
        assert_eq!(run.window, window, "{}", run.key);
        assert_eq!(run.idempotency_key, schedule.idempotency_key(&window));
    }
    assert_eq!(
        run.replay_group_id.as_deref(),
        Some(format!("catchup:{}:{}", schedule.id(), utc_text(first_missed)).as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_hour_outage_under_each_policy_leaves_its_exact_ledger() {
    let created = t("2026-03-02T00:59:00Z");
    let env = AppEnv::new(LaneSettings::default(), created).await;
    let fields = |misfire: &str| json!({"misfire": misfire, "grace": "5m", "side_effects": false, "overlap": "ALLOW", "max_auto_catch_up": 5});
    let ids = ["out-skip", "out-run-once", "out-catch-up", "out-manual"];
    let policies = ["SKIP", "RUN_ONCE", "CATCH_UP_ALL", "MANUAL"];
    let mut schedules = Vec::new();
    for (id, policy) in ids.iter().zip(policies) {
        let spec = spec_with(id, "*/10 * * * *", fields(policy));
        env.create(spec.clone(), created).await;
        schedules.push(compiled(&spec));
    }
    // Nothing ran from 01:00 to 07:00. The first pass after: horizon = 07:05 - grace 5m.
    let r = reconciler(&env, quiet(), reconciler_config());
    let report = reconcile(&r, t("2026-03-02T07:05:00Z")).await;
    let horizon = t("2026-03-02T07:00:00Z");
    let first = t("2026-03-02T01:00:00Z");
    assert_eq!(report.missed_windows, 4 * 37);
    assert_eq!(
        report.fenced, 4,
        "the tickers' next_run_at moved past the horizon"
    );
    assert_eq!(report.watermarks_advanced, 4);
    // SKIP, RUN_ONCE's coalesced stretch and MANUAL are one range record each.
    assert_eq!(report.entries_written, 1 + 2 + (5 + 1) + 1);

    use Reason as R;
    use RunStatus as S;
    let expected: [Vec<Shape>; 4] = [
        vec![(first, S::Skipped, Some(R::Missed), Some(horizon), 37)],
        vec![
            (
                first,
                S::Coalesced,
                Some(R::Coalesced),
                Some(t("2026-03-02T06:50:00Z")),
                36,
            ),
            // The latest window runs, on the correction lane, released at once.
            (horizon, S::Queued, None, None, 1),
        ],
        {
            // Backfill tier: the cap's 5 fire on the backfill lane, 2 in flight per
            // schedule; the rest wait for approval.
            let mut v: Vec<Shape> = (0..5)
                .map(|i| {
                    let at = first + chrono::Duration::minutes(10 * i);
                    let status = if i < 2 { S::Queued } else { S::Pending };
                    (at, status, None, None, 1)
                })
                .collect();
            v.push((
                t("2026-03-02T01:50:00Z"),
                S::ManualRequired,
                Some(R::CapExceeded),
                Some(horizon),
                32,
            ));
            v
        },
        vec![(
            first,
            S::ManualRequired,
            Some(R::PolicyManual),
            Some(horizon),
            37,
        )],
    ];
    for (schedule, want) in schedules.iter().zip(expected) {
        let runs = assert_every_window_once(env.store.as_ref(), schedule, created, horizon).await;
        assert_eq!(shape(&runs), want, "{}", schedule.id());
        for run in &runs {
            assert_catch_up(run, schedule, first);
        }
        let stored = env
            .store
            .get_schedule(schedule.id())
            .await
            .expect("schedule");
        assert_eq!(stored.reconciled_through, horizon);
    }
    // The shard's fire mark was fenced past the judged windows: no ticker that read it
    // before fires one of them.
    for shard in 0..cronledger_tests::SHARDS {
        let mark = env.store.fire_mark(shard).await.expect("mark");
        assert!(mark.fired_through >= Some(horizon), "{mark:?}");
    }
    let lanes: Vec<(RunKey, Lane)> = sends_to(&env);
    assert_eq!(
        lanes,
        vec![
            (RunKey::expected("out-run-once", horizon), Lane::Correction),
            (RunKey::expected("out-catch-up", first), Lane::Backfill),
            (
                RunKey::expected("out-catch-up", t("2026-03-02T01:10:00Z")),
                Lane::Backfill
            ),
        ],
        "catch-up never goes to the realtime lane"
    );
    let catch_up = ledger(env.store.as_ref(), "out-catch-up", first, horizon).await;
    assert!(catch_up[..5].iter().all(|r| r.lane == Some(Lane::Backfill)));

    // A second pass finds nothing new and releases nothing (two already in flight).
    let again = reconcile(&r, t("2026-03-02T07:06:00Z")).await;
    assert_eq!(
        (again.entries_written, again.released, again.missed_windows),
        (0, 0, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_in_each_tier_and_serial_release_one_at_a_time() {
    let now = t("2026-03-03T12:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), now).await;
    let fields = json!({"misfire": "CATCH_UP_ALL", "grace": "1m", "side_effects": false, "overlap": "ALLOW", "max_auto_catch_up": 1000});
    let cases = [
        ("tier-immediate", "* * * * *", "2026-03-03T11:55:30Z"),
        ("tier-serial", "* * * * *", "2026-03-03T11:29:30Z"),
        ("tier-backfill", "*/10 * * * *", "2026-03-03T08:55:00Z"),
        ("tier-beyond", "0 * * * *", "2026-03-02T09:30:00Z"),
    ];
    let mut schedules = Vec::new();
    for (id, cron, at) in cases {
        let spec = spec_with(id, cron, fields.clone());
        env.create(spec.clone(), t(at)).await;
        schedules.push((compiled(&spec), t(at)));
    }
    let r = reconciler(&env, quiet(), reconciler_config());
    reconcile(&r, now).await;
    let horizon = t("2026-03-03T11:59:00Z");
    let mut ledgers = Vec::new();
    for (schedule, created) in &schedules {
        ledgers
            .push(assert_every_window_once(env.store.as_ref(), schedule, *created, horizon).await);
    }
    let statuses = |runs: &[Run]| -> Vec<RunStatus> { runs.iter().map(|r| r.status).collect() };
    // <= 5 minutes: all at once on the correction lane.
    assert_eq!(statuses(&ledgers[0]), vec![RunStatus::Queued; 4]);
    assert!(ledgers[0].iter().all(|r| r.lane == Some(Lane::Correction)));
    // <= 1 hour: one at a time, oldest first, on the correction lane.
    let mut serial = vec![RunStatus::Pending; 30];
    serial[0] = RunStatus::Queued;
    assert_eq!(statuses(&ledgers[1]), serial);
    assert!(ledgers[1].iter().all(|r| r.lane == Some(Lane::Correction)));
    // <= 24 hours: the throttled backfill lane, two in flight for the schedule.
    let mut backfill = vec![RunStatus::Pending; 18];
    backfill[0] = RunStatus::Queued;
    backfill[1] = RunStatus::Queued;
    assert_eq!(statuses(&ledgers[2]), backfill);
    assert!(ledgers[2].iter().all(|r| r.lane == Some(Lane::Backfill)));
    // > 24 hours: nothing starts on its own.
    assert_eq!(
        shape(&ledgers[3]),
        vec![(
            t("2026-03-02T10:00:00Z"),
            RunStatus::ManualRequired,
            Some(Reason::GapTooLong),
            Some(t("2026-03-03T11:00:00Z")),
            26
        )]
    );

    // The serial run finishes (as a worker would record it); the next pass releases the
    // next window, and only that one. The ticker has fired the live 12:00 windows meanwhile.
    let done = &ledgers[1][0];
    let until = t("2026-03-03T12:01:00Z");
    let start = RunChange::open(Opening::Start, RunStatus::Queued, 0, now, "worker", until);
    env.store
        .transition_run(&done.key, &start)
        .await
        .expect("start");
    let finish = RunChange::end(Ending::Succeed, 1, now, Default::default());
    env.store
        .transition_run(&done.key, &finish)
        .await
        .expect("succeed");
    env.tick(t("2026-03-03T12:00:00Z")).await;
    let report = reconcile(&r, t("2026-03-03T12:01:00Z")).await;
    assert_eq!(
        report.missed_windows, 0,
        "the ticker fired the live windows"
    );
    let serial_now = ledger(
        env.store.as_ref(),
        "tier-serial",
        t("2026-03-03T11:30:00Z"),
        horizon,
    )
    .await;
    assert_eq!(serial_now[0].status, RunStatus::Success);
    assert_eq!(serial_now[1].status, RunStatus::Queued);
    assert!(serial_now[2..]
        .iter()
        .all(|r| r.status == RunStatus::Pending));
    for (schedule, created) in &schedules {
        assert_every_window_once(
            env.store.as_ref(),
            schedule,
            *created,
            t("2026-03-03T12:00:00Z"),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cap_and_side_effecting_jobs_wait_for_approval() {
    let now = t("2026-03-04T12:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), now).await;
    let base = |misfire: &str, side_effects: bool, cap: u32| json!({"misfire": misfire, "grace": "1m", "side_effects": side_effects, "overlap": "ALLOW", "max_auto_catch_up": cap});
    let half_hour = t("2026-03-04T11:29:30Z");
    let cases = [
        ("capped", base("CATCH_UP_ALL", false, 3), half_hour),
        ("effects-run-once", base("RUN_ONCE", true, 5), half_hour),
        ("effects-catch-up", base("CATCH_UP_ALL", true, 5), half_hour),
        (
            "effects-recent",
            base("RUN_ONCE", true, 5),
            t("2026-03-04T11:56:30Z"),
        ),
    ];
    let mut schedules = Vec::new();
    for (id, fields, at) in cases {
        let spec = spec_with(id, "* * * * *", fields);
        env.create(spec.clone(), at).await;
        schedules.push((compiled(&spec), at));
    }
    let r = reconciler(&env, quiet(), reconciler_config());
    reconcile(&r, now).await;
    let horizon = t("2026-03-04T11:59:00Z");
    let mut ledgers = Vec::new();
    for (schedule, created) in &schedules {
        ledgers
            .push(assert_every_window_once(env.store.as_ref(), schedule, *created, horizon).await);
    }
    use Reason as R;
    use RunStatus as S;
    let first = t("2026-03-04T11:30:00Z");
    // The cap: 3 start (serial tier: one released), the other 27 wait.
    assert_eq!(
        shape(&ledgers[0]),
        vec![
            (first, S::Queued, None, None, 1),
            (t("2026-03-04T11:31:00Z"), S::Pending, None, None, 1),
            (t("2026-03-04T11:32:00Z"), S::Pending, None, None, 1),
            (
                t("2026-03-04T11:33:00Z"),
                S::ManualRequired,
                Some(R::CapExceeded),
                Some(horizon),
                27
            ),
        ]
    );
    // Side effects past the 5-minute tier: nothing starts without approval.
    assert_eq!(
        shape(&ledgers[1]),
        vec![
            (
                first,
                S::Coalesced,
                Some(R::Coalesced),
                Some(t("2026-03-04T11:58:00Z")),
                29
            ),
            (horizon, S::ManualRequired, Some(R::SideEffects), None, 1),
        ]
    );
    assert_eq!(
        shape(&ledgers[2]),
        vec![(
            first,
            S::ManualRequired,
            Some(R::SideEffects),
            Some(horizon),
            30
        )]
    );
    // ... but a gap still "just now" replays on its own.
    assert_eq!(
        shape(&ledgers[3]),
        vec![
            (
                t("2026-03-04T11:57:00Z"),
                S::Coalesced,
                Some(R::Coalesced),
                None,
                1
            ),
            (
                t("2026-03-04T11:58:00Z"),
                S::Coalesced,
                Some(R::Coalesced),
                None,
                1
            ),
            (horizon, S::Queued, None, None, 1),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dst_day_inside_an_outage() {
    let env = AppEnv::new(LaneSettings::default(), t("2026-11-01T03:59:00Z")).await;
    let ny = |misfire: &str| json!({"timezone": "America/New_York", "misfire": misfire, "grace": "5m", "side_effects": false, "overlap": "ALLOW"});
    // Fall back (2026-11-01, 02:00 EDT -> 01:00 EST): an hourly job has 25 windows that day,
    // a fixed-time job at 01:30 runs once (the first pass).
    let autumn = t("2026-11-01T03:59:00Z"); // Oct 31, 23:59 EDT
    let hourly = spec_with("dst-hourly", "0 * * * *", ny("SKIP"));
    let daily = spec_with("dst-daily", "30 1 * * *", ny("RUN_ONCE"));
    // Spring forward (2026-03-08, 02:00 EST -> 03:00 EDT): 02:30 does not exist that day.
    let spring_created = t("2026-03-07T12:00:00Z");
    let spring = spec_with("dst-spring", "30 2 * * *", ny("MANUAL"));
    env.create(hourly.clone(), autumn).await;
    env.create(daily.clone(), autumn).await;
    env.create(spring.clone(), spring_created).await;

    let r = reconciler(&env, quiet(), reconciler_config());
    // Nothing ran from Mar 7 until Mar 9, 07:05 EDT.
    reconcile(&r, t("2026-03-09T11:05:00Z")).await;
    let spring_horizon = t("2026-03-09T11:00:00Z");
    let runs = assert_every_window_once(
        env.store.as_ref(),
        &compiled(&spring),
        spring_created,
        spring_horizon,
    )
    .await;
    // The gap day's 02:30 runs at the first instant after the gap, 03:00 EDT (07:00Z).
    assert_eq!(
        shape(&runs),
        vec![
            (
                t("2026-03-08T07:00:00Z"),
                RunStatus::ManualRequired,
                Some(Reason::PolicyManual),
                None,
                1
            ),
            (
                t("2026-03-09T06:30:00Z"),
                RunStatus::ManualRequired,
                Some(Reason::PolicyManual),
                None,
                1
            ),
        ]
    );

    // Nothing ran until Nov 2, 00:05 EST.
    reconcile(&r, t("2026-11-02T05:05:00Z")).await;
    let horizon = t("2026-11-02T05:00:00Z");
    let runs =
        assert_every_window_once(env.store.as_ref(), &compiled(&hourly), autumn, horizon).await;
    // 00:00 EDT Nov 1 through 00:00 EST Nov 2: 25 hours that day, plus the next midnight.
    assert_eq!(
        shape(&runs),
        vec![(
            t("2026-11-01T04:00:00Z"),
            RunStatus::Skipped,
            Some(Reason::Missed),
            Some(horizon),
            26
        )]
    );
    let runs =
        assert_every_window_once(env.store.as_ref(), &compiled(&daily), autumn, horizon).await;
    assert_eq!(
        shape(&runs),
        vec![(t("2026-11-01T05:30:00Z"), RunStatus::Queued, None, None, 1)]
    );
    // Its business window is the day before it (both ends in EDT).
    assert_eq!(runs[0].window.start, t("2026-10-31T05:30:00Z"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reconcilers_racing_tickers_and_each_other_account_for_each_window_once() {
    let created = t("2026-03-05T09:00:30Z");
    let env = AppEnv::new(LaneSettings::default(), created).await;
    let policies = ["SKIP", "RUN_ONCE", "MANUAL", "CATCH_UP_ALL"];
    let mut schedules = Vec::new();
    for i in 0..8 {
        let fields = json!({"misfire": policies[i % 4], "grace": "5m", "side_effects": false, "overlap": "ALLOW", "max_auto_catch_up": 5});
        let spec = spec_with(&format!("race-{i}"), "* * * * *", fields);
        env.create(spec.clone(), created).await;
        schedules.push(compiled(&spec));
    }
    // Live until 09:05, then an outage until 11:00.
    for m in 1..=5 {
        env.tick(t(&format!("2026-03-05T09:0{m}:00Z"))).await;
    }
    let own_store = || -> Arc<dyn LedgerStore> {
        Arc::new(DynamoLedger::new(
            &env.ledger.clients,
            &env.ledger.table,
            SHARDS,
        ))
    };
    let reconciler_at = |config| {
        let control: Arc<dyn ReleaseStateStore> = Arc::new(DynamoLedger::new(
            &env.ledger.clients,
            &env.ledger.table,
            SHARDS,
        ));
        Reconciler::new(own_store(), control, env.queue.clone(), quiet(), config)
    };
    let (ra, rb, rc) = (
        reconciler_at(reconciler_config()),
        reconciler_at(reconciler_config()),
        reconciler_at(reconciler_config()),
    );
    let live = Ticker::new(own_store(), env.queue.clone(), ticker_config());
    // A ticker delivering old events (retries of the outage's ticks): each fires the windows
    // within grace of its own event time, unless the reconcilers fenced it off first.
    let lagging = Ticker::new(own_store(), env.queue.clone(), ticker_config());
    let lag = async {
        for m in ["09:08", "09:12", "09:20", "09:40", "10:30", "10:57"] {
            lagging
                .tick(&TickEvent {
                    time: t(&format!("2026-03-05T{m}:00Z")),
                    shards: None,
                })
                .await;
        }
    };
    let (eleven, three_past) = (
        ReconcileEvent::at(t("2026-03-05T11:00:00Z")),
        ReconcileEvent::at(t("2026-03-05T11:03:00Z")),
    );
    let tick = TickEvent {
        time: eleven.time,
        shards: None,
    };
    let (_, a, b, c, _) = tokio::join!(
        lag,
        ra.reconcile(&eleven),
        rb.reconcile(&eleven),
        rc.reconcile(&three_past),
        live.tick(&tick),
    );
    for report in [&a, &b, &c] {
        // Losing a race is normal; a contended schedule is retried by the next pass.
        assert!(
            report
                .errors
                .iter()
                .all(|e| e.contains("RECONCILE_CONTENDED")),
            "{:?}",
            report.errors
        );
    }
    eprintln!(
        "written a={} b={} c={}, already recorded a={} b={} c={}, fenced {}",
        a.entries_written,
        b.entries_written,
        c.entries_written,
        a.already_recorded,
        b.already_recorded,
        c.already_recorded,
        a.fenced + b.fenced + c.fenced
    );
    // A later pass settles anything a contended one left.
    let last = reconciler_at(reconciler_config());
    reconcile(&last, t("2026-03-05T11:10:00Z")).await;
    let horizon = t("2026-03-05T11:05:00Z");
    for schedule in &schedules {
        assert_every_window_once(env.store.as_ref(), schedule, created, horizon).await;
        let stored = env
            .store
            .get_schedule(schedule.id())
            .await
            .expect("schedule");
        assert!(stored.reconciled_through >= horizon, "{}", schedule.id());
    }
}

/// The race above, made deterministic: a reconciler with a later horizon has recorded a range
/// reaching past this pass's horizon but has not moved the watermark yet. This pass must move
/// the watermark to the range's end, not stop inside it; otherwise the next pass reads from the
/// watermark, misses the range (keyed by its first window) and coalesces its tail again.
#[tokio::test]
async fn the_watermark_never_stops_inside_another_reconcilers_range() {
    let created = t("2026-03-05T09:00:30Z");
    let env = AppEnv::new(LaneSettings::default(), created).await;
    let fields =
        json!({"misfire": "RUN_ONCE", "grace": "5m", "side_effects": false, "overlap": "ALLOW"});
    let spec = spec_with("straddle", "* * * * *", fields);
    env.create(spec.clone(), created).await;
    let schedule = compiled(&spec);
    let config = reconciler_config();
    // What a reconciler at 11:03 (horizon 10:58) planned and wrote first.
    let later = cronledger_core::plan(cronledger_core::PlanInput {
        schedule: &schedule,
        watermark: created,
        now: t("2026-03-05T11:03:00Z"),
        existing: &cronledger_core::Coverage::new(),
        pauses: &[],
        config: config.planner,
    })
    .expect("plans");
    let range = later
        .entries
        .iter()
        .find(|e| e.range_end.is_some())
        .expect("a long gap is recorded as a range");
    let range_end = range.range_end.expect("range");
    assert!(range_end > t("2026-03-05T10:55:00Z"));
    let run = later.to_run(&schedule, range, t("2026-03-05T11:03:00Z"), 1);
    env.store.create_run(&run).await.expect("range written");

    let r = reconciler(&env, quiet(), config);
    reconcile(&r, t("2026-03-05T11:00:00Z")).await;
    let stored = env.store.get_schedule("straddle").await.expect("schedule");
    assert!(
        stored.reconciled_through >= range_end,
        "watermark {} stops inside the range ending {range_end}",
        stored.reconciled_through
    );
    reconcile(&r, t("2026-03-05T11:10:00Z")).await;
    assert_every_window_once(
        env.store.as_ref(),
        &schedule,
        created,
        t("2026-03-05T11:05:00Z"),
    )
    .await;
}

/// Another race made deterministic: a reconciler read the ledger while a racing one was
/// still writing its plan, so it saw the first catch-up runs of the gap already there. It
/// must finish that plan, not start a second gap after them: one replay group, one tier, and
/// the cap counted over the whole gap (planned as a new gap, the rest would get a fresh cap).
#[tokio::test]
async fn a_plan_written_in_part_is_finished_as_the_same_gap() {
    let created = t("2026-03-06T00:59:00Z");
    let env = AppEnv::new(LaneSettings::default(), created).await;
    let fields = json!({"misfire": "CATCH_UP_ALL", "grace": "5m", "side_effects": false,
        "overlap": "ALLOW", "max_auto_catch_up": 5});
    let spec = spec_with("half-written", "0 * * * *", fields);
    env.create(spec.clone(), created).await;
    let schedule = compiled(&spec);
    let config = reconciler_config();
    let now = t("2026-03-06T07:05:00Z");
    let full = cronledger_core::plan(cronledger_core::PlanInput {
        schedule: &schedule,
        watermark: created,
        now,
        existing: &cronledger_core::Coverage::new(),
        pauses: &[],
        config: config.planner,
    })
    .expect("plans");
    assert_eq!((full.totals.fire, full.totals.manual), (5, 2));
    // The racing reconciler got its first three entries in.
    for entry in &full.entries[..3] {
        let run = full.to_run(&schedule, entry, now, 1);
        env.store.create_run(&run).await.expect("written");
    }

    let r = reconciler(&env, quiet(), config);
    reconcile(&r, now).await;
    let runs = assert_every_window_once(
        env.store.as_ref(),
        &schedule,
        created,
        t("2026-03-06T07:00:00Z"),
    )
    .await;
    assert_eq!(runs.len(), 7);
    let fired = runs.iter().filter(|r| r.reason.is_none()).count();
    let held = runs
        .iter()
        .filter(|r| r.status == RunStatus::ManualRequired && r.reason == Some(Reason::CapExceeded))
        .count();
    assert_eq!((fired, held), (5, 2), "{:?}", shape(&runs));
    assert!(
        runs.iter()
            .all(|r| r.replay_group_id == full.replay_group_id && r.trigger == Trigger::CatchUp),
        "{runs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_gap_gets_one_proposed_backfill_however_many_reconcilers_plan_it() {
    let created = t("2026-03-06T00:59:00Z");
    let env = AppEnv::new(LaneSettings::default(), created).await;
    let fields = |cap: u32| json!({"misfire": "CATCH_UP_ALL", "grace": "5m", "side_effects": false, "overlap": "ALLOW", "max_auto_catch_up": cap});
    // 37 windows over 6 hours with a cap of 0: all await approval, the backfill starts PAUSED.
    let paused = spec_with("gap-paused", "*/10 * * * *", fields(0));
    // 7 hourly windows under a cap of 10: all fire, the backfill runs (throttled catch-up).
    let running = spec_with("gap-running", "0 * * * *", fields(10));
    for spec in [&paused, &running] {
        env.create(spec.clone(), created).await;
    }
    let ledger_of = || DynamoLedger::new(&env.ledger.clients, &env.ledger.table, SHARDS);
    let reconciler_at = || {
        let control: Arc<dyn ReleaseStateStore> = Arc::new(ledger_of());
        let ops: Arc<dyn OpsStore> = Arc::new(ledger_of());
        Reconciler::new(
            Arc::new(ledger_of()),
            control,
            env.queue.clone(),
            quiet(),
            reconciler_config(),
        )
        .with_backfills(ops)
    };
    // Two reconcilers plan the same gaps at once: one item per gap.
    let (ra, rb) = (reconciler_at(), reconciler_at());
    let now = t("2026-03-06T07:05:00Z");
    let pass = ReconcileEvent::at(now);
    let (a, b) = tokio::join!(ra.reconcile(&pass), rb.reconcile(&pass));
    assert!(a.errors.is_empty() && b.errors.is_empty(), "{a:?} {b:?}");
    let first = t("2026-03-06T01:00:00Z");
    let horizon = t("2026-03-06T07:00:00Z");
    let mut ids: Vec<String> = [a.backfills_proposed, b.backfills_proposed].concat();
    ids.sort();
    let (paused_id, running_id) = (
        proposed_backfill_id("gap-paused", first),
        proposed_backfill_id("gap-running", first),
    );
    assert_eq!(ids, vec![paused_id.clone(), running_id.clone()]);
    let ops = ledger_of();
    let open = ops.open_backfills().await.expect("open backfills");
    assert_eq!(open.len(), 2, "{open:?}");

    let p = ops.get_backfill(&paused_id).await.expect("paused backfill");
    assert_eq!(
        (p.state, p.from, p.to, p.total_windows, p.planned),
        (BackfillState::Paused, first, horizon, 37, 37)
    );
    assert!(p.held.is_some(), "{p:?}");
    assert_eq!(p.created_by, "reconciler");
    assert_eq!(
        p.replay_group.as_deref(),
        Some("catchup:gap-paused:2026-03-06T01:00:00Z")
    );
    let r = ops
        .get_backfill(&running_id)
        .await
        .expect("running backfill");
    assert_eq!(
        (r.state, r.from, r.to, r.total_windows, r.planned),
        (BackfillState::Running, first, horizon, 7, 7)
    );
    // Each proposal is priced (at the schedule's max_runtime: the gap left no history).
    let priced = |b: &cronledger_aws::Backfill| b.budget.estimate.as_ref().map(|e| e.runs);
    assert_eq!((priced(&p), priced(&r)), (Some(37), Some(7)));
    // The running one tracks the gap's 7 catch-up runs, PENDING or QUEUED for now.
    let view = progress(env.store.as_ref(), &r, now)
        .await
        .expect("progress");
    assert_eq!(view.queued, 7, "{view:?}");

    for spec in [&paused, &running] {
        assert_every_window_once(env.store.as_ref(), &compiled(spec), created, horizon).await;
    }
    // A later pass has nothing new to propose.
    let again = reconcile(&ra, t("2026-03-06T07:06:00Z")).await;
    assert!(again.backfills_proposed.is_empty());

    // An operator resumes the paused one: its first windows run as the backfill's, and the
    // range record that held them is folded into it (accounted for once).
    let mut resumed = p.clone();
    resumed.state = BackfillState::Running;
    resumed.held = None;
    ops.put_backfill(&resumed)
        .await
        .expect("resume")
        .expect("not raced");
    let releaser = BackfillReleaser {
        store: env.store.clone(),
        ops: Arc::new(ledger_of()),
        lanes: env.queue.clone(),
        signals: None,
        alerter: None,
    };
    let pass = releaser.pass(t("2026-03-06T07:10:00Z")).await;
    assert!(pass.errors.is_empty(), "{pass:?}");
    assert_eq!(pass.released, 2, "{pass:?}");
    let runs =
        assert_every_window_once(env.store.as_ref(), &compiled(&paused), created, horizon).await;
    assert_eq!(
        shape(&runs),
        vec![(
            first,
            RunStatus::Coalesced,
            Some(Reason::Coalesced),
            Some(horizon),
            37
        )]
    );
    let own: Vec<Run> = env
        .store
        .runs_between("gap-paused", first, horizon)
        .await
        .expect("runs")
        .into_iter()
        .filter(|r| r.key.origin != Origin::Expected)
        .collect();
    assert_eq!(own.len(), 2);
    assert!(own
        .iter()
        .all(|r| r.trigger == Trigger::Backfill && r.status == RunStatus::Queued));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_with_nothing_to_write_leaves_the_watermark_until_it_trails() {
    let env = AppEnv::new(LaneSettings::default(), t("2026-03-02T09:59:30Z")).await;
    let spec = spec_with("every-5", "*/5 * * * *", json!({"overlap": "ALLOW"}));
    env.create(spec, t("2026-03-02T09:59:30Z")).await;
    let r = reconciler(&env, quiet(), reconciler_config());
    let at = |hm: &str| t(&format!("2026-03-02T{hm}:00Z"));
    let watermark = || async {
        env.store
            .get_schedule("every-5")
            .await
            .expect("schedule")
            .reconciled_through
    };
    for hm in ["10:00", "10:05", "10:10"] {
        assert_eq!(env.tick(at(hm)).await.sent, 1);
    }
    // Every window recorded, the watermark 10 minutes behind: left where it is.
    let report = reconcile(&r, at("10:12")).await;
    assert_eq!(
        (report.watermarks_advanced, report.watermarks_deferred),
        (0, 1)
    );
    assert_eq!(watermark().await, t("2026-03-02T09:59:30Z"));
    // 10:15 never fires (the ticker was down for it). The next pass still judges it, writes,
    // and so moves the watermark.
    assert_eq!(env.tick(at("10:20")).await.sent, 1);
    let report = reconcile(&r, at("10:22")).await;
    assert_eq!(report.missed_windows, 1, "{report:?}");
    assert_eq!(report.watermarks_advanced, 1);
    assert_eq!(watermark().await, at("10:20"));
    // An hour (twelve recorded windows) behind: moved although nothing was written.
    for m in 0..12 {
        let tick = at("10:25") + chrono::Duration::minutes(5 * m);
        assert_eq!(env.tick(tick).await.sent, 1);
    }
    let report = reconcile(&r, at("11:22")).await;
    assert_eq!(
        (report.missed_windows, report.watermarks_advanced),
        (0, 1),
        "{report:?}"
    );
    assert_eq!(watermark().await, at("11:20"));
}
