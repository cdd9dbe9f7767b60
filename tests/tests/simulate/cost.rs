//! The cost model's figures from a small simulation: every pinned `stats.capacity` figure is
//! measured (non-zero), and DynamoDB's agree with the request meter.

use std::sync::Arc;

use cronledger_app::simulate::{simulate, SimQueues, SimulationConfig, SimulationEnv};
use cronledger_aws::DynamoLedger;
use cronledger_tests::{spec_with, t, TestLedger};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_simulation_reports_capacity_consistent_with_the_meter() {
    let ledger = TestLedger::new().await;
    let one_shard = DynamoLedger::new(&ledger.clients, &ledger.table, 1);
    let env = SimulationEnv::on(
        Arc::new(one_shard),
        SimQueues::memory(),
        1,
        Some(ledger.clients.meter.clone()),
    );
    let specs = vec![
        spec_with(
            "cost-minutely",
            "* * * * *",
            json!({"overlap": "SKIP_NEW", "job": {"type": "noop", "duration": "1s"}}),
        ),
        spec_with("cost-five", "*/5 * * * *", json!({})),
        spec_with("cost-hourly", "0 * * * *", json!({})),
    ];
    let before = ledger.clients.meter.snapshot();
    let config = SimulationConfig::new(t("2026-03-01T01:00:00Z"), t("2026-03-01T02:00:00Z"));
    let report = simulate(&env, specs, &config).await.expect("simulation");
    let after = ledger.clients.meter.snapshot();
    let stats = serde_json::to_value(&report.stats).expect("stats serialize");
    println!(
        "{}",
        serde_json::to_string_pretty(&stats["capacity"]).unwrap_or_default()
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&stats["cost_per_million_runs"]).unwrap_or_default()
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&stats["cost_detail"]).unwrap_or_default()
    );

    let capacity = &report.stats.cost.capacity;
    let executions: u32 = report.summary.iter().map(|s| s.executions).sum();
    // The range's 73 windows all ran; the simulation keeps running past `to` until they are
    // settled, and what runs then is priced too (its consumption is in the figures).
    assert_eq!(executions, 60 + 12 + 1);
    assert!(
        capacity.runs >= u64::from(executions),
        "every execution is priced: {} < {executions}",
        capacity.runs
    );
    assert!(capacity.wru > 0.0 && capacity.rru > 0.0);
    assert!(
        capacity.sqs_requests > capacity.runs,
        "a send per run, and the event source's receives and deletes on top"
    );
    assert!(
        capacity.lambda_invocations > capacity.runs,
        "a worker per run, ticks and passes"
    );
    assert!(
        capacity.lambda_gb_seconds >= 60.0 * 0.25,
        "the minutely job's second at 256 MB, at least"
    );
    assert!(capacity.log_bytes > 0 && capacity.custom_metrics > 0);

    // DynamoDB's figures are the meter's, plus the documented corrections, and nothing else:
    // the simulation's writes are everything metered after the schedules were loaded.
    let corrections = &report.stats.cost.cost_detail.corrections;
    let metered_writes = after.total().write_units
        - before.total().write_units
        - after.scope("create_schedule").write_units;
    assert!(
        (capacity.wru - corrections.added_wru - metered_writes).abs() < 1e-6,
        "{} - {} != {metered_writes}",
        capacity.wru,
        corrections.added_wru
    );
    let index_writes: f64 = report
        .stats
        .cost
        .cost_detail
        .index_units
        .values()
        .map(|u| u.write)
        .sum();
    assert!(index_writes > 0.0, "the meter keeps index units apart");

    // Priced, with the price table beside it.
    let bill = &report.stats.cost.cost_per_million_runs;
    assert!(bill.total > 0.0 && bill.dynamodb_writes > 0.0 && bill.sqs > 0.0);
    assert!(stats["prices"]["dynamodb_write_request_unit"]["usd"].as_f64() > Some(0.0));
    for name in [
        "wru",
        "rru",
        "sqs_requests",
        "lambda_invocations",
        "lambda_gb_seconds",
        "log_bytes",
        "custom_metrics",
        "runs",
        "peak_wcu_per_s",
        "peak_rcu_per_s",
    ] {
        assert!(
            stats["capacity"].get(name).is_some(),
            "stats.capacity.{name}"
        );
    }
    assert!(report.stats.cost.monthly_fixed_usd.total_usd > 0.0);

    // Provisioned capacity, sized from the same units second by second: the profile holds
    // every unit the meter recorded during the simulation (each target's mean over the
    // stretch's seconds), each target is provisioned at least at its mean over the target
    // utilisation and at most at its busiest second over it, and the provisioned bill swaps
    // only DynamoDB's request charges.
    let provisioned = &report.stats.cost.cost_detail.provisioned;
    let seconds = report.stats.cost.cost_detail.hours * 3600.0 + 1.0;
    let profiled: f64 = provisioned
        .targets
        .values()
        .map(|p| p.mean_wcu_per_s * seconds)
        .sum();
    let all_writes = after.total().write_units
        - before.total().write_units
        - after.scope("create_schedule").write_units;
    assert!(
        (profiled - all_writes).abs() < 1e-3 * all_writes.max(1.0),
        "{profiled} != {all_writes}"
    );
    for (target, p) in &provisioned.targets {
        assert!(p.wcu + 1e-9 >= p.mean_wcu_per_s / 0.7, "{target}: {p:?}");
        assert!(
            p.wcu <= (p.peak_wcu_per_s / 0.7).max(0.01) + 0.01,
            "{target}: {p:?}"
        );
    }
    assert!(capacity.peak_wcu_per_s >= provisioned.targets["table"].peak_wcu_per_s);
    let on_demand = &report.stats.cost.cost_per_million_runs;
    let on_provisioned = &report.stats.cost.cost_per_million_runs_provisioned;
    assert_eq!(on_provisioned.sqs, on_demand.sqs);
    assert!(
        (on_provisioned.total
            - on_provisioned.dynamodb_writes
            - on_provisioned.dynamodb_reads
            - (on_demand.total - on_demand.dynamodb_writes - on_demand.dynamodb_reads))
            .abs()
            < 1e-9
    );
}

/// A sparse fleet's reconciler passes cost what is due, not the fleet's size: a warm
/// reconciler lists the schedules again only when a shard's catalog moved (here: the pause
/// and the resume), and reads a schedule again only when its copy shows a window due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sparse_fleets_passes_list_the_schedules_only_when_the_catalog_moves() {
    let specs: Vec<_> = (0..20)
        .map(|i| spec_with(&format!("daily-{i}"), "0 3 * * *", json!({})))
        .collect();
    let mut config = SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-01T06:00:00Z"));
    config.pauses = vec![cronledger_app::simulate::ScheduleAt::parse(
        "--pause",
        "daily-0@2026-03-01T04:00:00Z",
    )
    .expect("pause")];
    config.resumes = vec![cronledger_app::simulate::ScheduleAt::parse(
        "--resume",
        "daily-0@2026-03-01T04:30:00Z",
    )
    .expect("resume")];
    let report = super::stores::on_memory(specs, &config).await;
    println!("{:?}", report.stats.calls);
    let calls = |operation: &str| report.stats.calls.get(operation).copied().unwrap_or(0);
    let passes = report.stats.reconciler_passes;
    assert!(passes >= 70, "six hours of passes: {passes}");
    // Three listings (the first pass, one after the pause, one after the resume), each a
    // query of the keys-only catalog index and one batch read of the items.
    assert!(
        calls("list_schedules") <= 6,
        "listed {} times in {passes} passes",
        calls("list_schedules")
    );
    // Each schedule is read again once, when its copy shows its 03:00 window due; the copy
    // then follows the pass's own watermark move.
    assert!(
        calls("get_schedule") <= 20 + 2,
        "{} schedule reads in {passes} passes",
        calls("get_schedule")
    );
    assert!(report
        .summary
        .iter()
        .all(|s| s.unaccounted == 0 && s.unfinished == 0));
}
