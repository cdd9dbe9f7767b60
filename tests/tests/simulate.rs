//! `cronledger simulate`'s engine against the emulator: the real ticker, worker and reconciler
//! on a virtual clock, with outages, racing tickers, crashes and duplicate deliveries.

use std::sync::Arc;

use cronledger_app::faults::CrashPoint;
use cronledger_app::simulate::{
    lane_settings, simulate, Outage, ScheduleSummary, SimulationConfig, SimulationEnv,
    SimulationReport,
};
use cronledger_aws::{DynamoLedger, LedgerStore, ReleaseStateStore};
use cronledger_core::ScheduleSpec;
use cronledger_tests::{spec_with, t, TestLanes, TestLedger};
use serde_json::json;

async fn run(specs: Vec<ScheduleSpec>, config: SimulationConfig) -> SimulationReport {
    let ledger = TestLedger::new().await;
    let lanes = TestLanes::with_clients(ledger.clients.clone(), lane_settings()).await;
    // One shard, as `cronledger simulate` runs it: one `due` query per tick.
    let one_shard = DynamoLedger::new(&ledger.clients, &ledger.table, 1);
    let store: Arc<dyn LedgerStore> = Arc::new(one_shard.clone());
    let control: Arc<dyn ReleaseStateStore> = Arc::new(one_shard);
    let env = SimulationEnv {
        store,
        control,
        lanes: Arc::new(lanes.lanes.clone()),
        shards: 1,
        meter: Some(ledger.clients.meter.clone()),
    };
    let report = simulate(&env, specs, &config).await.expect("simulation");
    println!(
        "{}",
        serde_json::to_string_pretty(&report.summary).unwrap_or_default()
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&report.stats).unwrap_or_default()
    );
    report
}

fn summary<'a>(report: &'a SimulationReport, id: &str) -> &'a ScheduleSummary {
    report
        .summary
        .iter()
        .find(|s| s.schedule == id)
        .unwrap_or_else(|| panic!("no summary for {id}"))
}

fn schedules() -> Vec<ScheduleSpec> {
    vec![
        spec_with("every-5-skip", "*/5 * * * *", json!({"misfire": "SKIP"})),
        // side_effects defaults to true: past the 5-minute tier the latest window awaits approval.
        spec_with(
            "every-10-once",
            "*/10 * * * *",
            json!({"misfire": "RUN_ONCE"}),
        ),
        spec_with(
            "hourly-catch-up",
            "0 * * * *",
            json!({"misfire": "CATCH_UP_ALL", "max_auto_catch_up": 10, "side_effects": false}),
        ),
        spec_with(
            "quarter-manual",
            "*/15 * * * *",
            json!({"misfire": "MANUAL"}),
        ),
        spec_with(
            "minutely-flaky",
            "* * * * *",
            json!({"misfire": "SKIP", "job": {"type": "noop", "fail_times": 1}}),
        ),
    ]
}

/// Windows strictly inside the outage: none of them can run on time.
fn inside(report: &SimulationReport, step_minutes: i64) -> u32 {
    let outage = report.stats.outages[0];
    let minutes = (outage.to - outage.from).num_minutes();
    (minutes / step_minutes - 1) as u32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_hour_outage_accounts_for_every_window_once() {
    let mut config = SimulationConfig::new(t("2026-03-01T01:00:00Z"), t("2026-03-01T08:30:00Z"));
    config.outages = vec![Outage::parse("2026-03-01T02:00:00Z..2026-03-01T08:00:00Z").unwrap()];
    let report = run(schedules(), config).await;
    for e in report
        .ledger
        .iter()
        .filter(|e| e.schedule == "hourly-catch-up")
    {
        println!("{}", serde_json::to_string(e).unwrap_or_default());
    }
    assert_all_accounted(&report);

    let skip = summary(&report, "every-5-skip");
    assert_eq!(skip.expected, 90);
    assert!(skip.skipped >= inside(&report, 5), "{skip:?}");
    assert_eq!((skip.coalesced, skip.manual, skip.caught_up), (0, 0, 0));

    let once = summary(&report, "every-10-once");
    assert_eq!(once.manual, 1, "{once:?}");
    assert_eq!(once.coalesced, inside(&report, 10) - 1, "{once:?}");
    assert_eq!(once.caught_up, 0);

    let manual = summary(&report, "quarter-manual");
    assert_eq!(manual.manual, inside(&report, 15), "{manual:?}");
    assert_eq!(manual.skipped + manual.coalesced, 0);

    let flaky = summary(&report, "minutely-flaky");
    assert_eq!(flaky.expected, 450);
    assert!(flaky.skipped >= inside(&report, 1));
    // Each window that ran failed its first attempt and succeeded on the retry.
    assert_eq!(flaky.executions, 2 * flaky.ran, "{flaky:?}");
    assert_eq!(flaky.failed, 0);
}

/// Every window has exactly one outcome, nothing is left in flight, nothing ran twice.
fn assert_all_accounted(report: &SimulationReport) {
    assert!(report.stats.settled_at.is_some(), "{:?}", report.stats);
    for s in &report.summary {
        assert_eq!(s.duplicates, 0, "{s:?}");
        assert_eq!(s.unaccounted, 0, "{s:?}");
        assert_eq!(s.unfinished, 0, "{s:?}");
        assert_eq!(
            s.ran + s.skipped + s.coalesced + s.manual + s.failed,
            s.expected,
            "{s:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_racing_tickers_and_duplicate_deliveries_run_nothing_twice() {
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T01:30:00Z"));
    config.outages = vec![Outage::parse("2026-03-01T00:30:00Z..2026-03-01T00:50:00Z").unwrap()];
    config.tickers = 3;
    config.crashes = CrashPoint::ALL.to_vec();
    config.crash_every = 4;
    config.duplicate_deliveries = true;
    let specs = vec![
        spec_with(
            "minutely-idempotent",
            "* * * * *",
            json!({"misfire": "RUN_ONCE", "idempotent": true, "side_effects": false}),
        ),
        spec_with(
            "minutely-catch-up",
            "* * * * *",
            json!({"misfire": "CATCH_UP_ALL", "max_auto_catch_up": 50, "side_effects": false,
                   "idempotent": true}),
        ),
        spec_with(
            "five-minutely-slow",
            "*/5 * * * *",
            json!({"misfire": "SKIP", "overlap": "SKIP_NEW",
                   "job": {"type": "noop", "duration": "7m"}}),
        ),
    ];
    let report = run(specs, config).await;
    for point in CrashPoint::ALL {
        assert!(
            report
                .stats
                .crashes
                .iter()
                .any(|c| c.starts_with(point.name())),
            "no {} crash: {:?}",
            point.name(),
            report.stats.crashes
        );
    }
    assert!(report.stats.duplicate_messages_sent > 0);
    assert_all_accounted(&report);
}
