//! `cronledger simulate`: replays a time range against the real handlers on a virtual clock,
//! with outages and faults, and prints the ledger that results (JSON) or its summary (table).

use std::process::ExitCode;
use std::sync::Arc;

use chrono::Utc;
use cronledger_app::faults::CrashPoint;
use cronledger_app::simulate::{
    lane_settings, parse_instant, simulate, BackfillAt, Costing, Outage, ScheduleAt, SimQueues,
    SimulateError, SimulationConfig, SimulationEnv, SimulationReport,
};
use cronledger_aws::{AwsClients, AwsSettings, MemoryStore, RequestMeter};

use super::{instant, load_local, stack, CliError, DEFAULT_LOCAL_URL};
use crate::args::{Format, SimQueuesArg, SimStoreArg, SimulateArgs};

/// The ledger behind each store trait the simulation uses.
pub fn run(args: SimulateArgs) -> Result<ExitCode, CliError> {
    let mut config = config(&args)?;
    let manifest = load_local(&args.file, config.from, DEFAULT_LOCAL_URL)?;
    config.calendars = manifest.calendars;
    let specs = manifest.schedules;
    // Bad usage (a lever that cannot be pulled, a range or knob out of bounds) is refused
    // before any emulator starts, with exit 2.
    if let Err(e) = levers(&args, &mut config).and_then(|()| config.check(&specs)) {
        eprintln!("{e}");
        return Ok(ExitCode::from(2));
    }
    // The emulators only for what lives there: the default (ledger and lanes in this
    // process) needs none.
    let on_emulators = args.store == SimStoreArg::Dynamodb || args.queues == SimQueuesArg::Sqs;
    let _emulators = if on_emulators {
        stack::emulators("SIMULATE")?
    } else {
        None
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::msg(format!("SIMULATE_RUNTIME: {e}")))?;
    let report = runtime.block_on(async {
        let name = format!("cronledger-sim-{}", Utc::now().timestamp_millis());
        let clients = if on_emulators {
            Some(AwsClients::from_env(&AwsSettings::default()).await)
        } else {
            None
        };
        let meter = clients
            .as_ref()
            .map_or_else(RequestMeter::new, |c| c.meter.clone());
        // In-process queues need no SQS at all.
        let sqs = match (args.queues, &clients) {
            (SimQueuesArg::Sqs, Some(clients)) => {
                Some(stack::lanes_on("SIMULATE", clients, &name, lane_settings()).await?)
            }
            _ => None,
        };
        let queues = sqs.clone().map_or_else(SimQueues::memory, SimQueues::Sqs);
        let env = match args.store {
            SimStoreArg::Memory => SimulationEnv::on(
                Arc::new(MemoryStore::new(1, meter.clone())),
                queues,
                1,
                Some(meter),
            ),
            SimStoreArg::Dynamodb => {
                let stack = stack::create("SIMULATE", &name, 1).await?;
                SimulationEnv::on(stack.ledger, queues, 1, Some(meter))
            }
        };
        let report = simulate(&env, specs, &config)
            .await
            .map_err(|e| CliError::msg(e.to_string()));
        // The emulators may be someone else's: leave no table or queues behind.
        if let (SimStoreArg::Dynamodb, Some(clients)) = (args.store, &clients) {
            let _ = cronledger_aws::TableDefinition::delete(&clients.dynamodb, &name).await;
        }
        if let Some(lanes) = sqs {
            let _ = lanes.delete_all().await;
        }
        report
    })?;
    match args.format {
        Format::Json | Format::Text => {
            let text = serde_json::to_string_pretty(&serde_json::json!({
                "ledger": report.ledger,
                "summary": report.summary,
                "backfills": report.backfills,
                "alerts": report.alerts,
                "audit": report.audit,
                "stats": report.stats,
            }))
            .map_err(|e| CliError::msg(format!("SIMULATE_OUTPUT: {e}")))?;
            println!("{text}");
        }
        Format::Table => print_table(&report),
    }
    Ok(ExitCode::SUCCESS)
}

fn config(args: &SimulateArgs) -> Result<SimulationConfig, CliError> {
    let mut config = SimulationConfig::new(instant("from", &args.from)?, instant("to", &args.to)?);
    let outages = |texts: &[String]| {
        texts
            .iter()
            .map(|o| Outage::parse(o).map_err(|e| CliError::msg(e.to_string())))
            .collect::<Result<Vec<_>, _>>()
    };
    config.outages = outages(&args.outage)?;
    config.worker_outages = outages(&args.worker_outage)?;
    config.tickers = args.tickers;
    config.crashes = args
        .crash
        .iter()
        .map(|name| {
            CrashPoint::parse(name).ok_or_else(|| {
                let names: Vec<&str> = CrashPoint::EVERY.iter().map(|p| p.name()).collect();
                CliError::msg(format!(
                    "INVALID_ARGUMENT: --crash `{name}` is not a crash point; use one of {}",
                    names.join(", ")
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    config.crash_every = args.crash_every;
    config.duplicate_deliveries = args.duplicate_deliveries;
    Ok(config)
}

/// The operator's levers: `--kill-switch FROM..TO`, `--pause ID@T`, `--resume ID@T`,
/// `--approve-all-at T`, `--backfill ID@T=REQUEST`.
fn levers(args: &SimulateArgs, config: &mut SimulationConfig) -> Result<(), SimulateError> {
    config.kill_switches = args
        .kill_switch
        .iter()
        .map(|k| Outage::parse_as("kill switch", k))
        .collect::<Result<_, _>>()?;
    config.pauses = args
        .pause
        .iter()
        .map(|p| ScheduleAt::parse("pause", p))
        .collect::<Result<_, _>>()?;
    config.resumes = args
        .resume
        .iter()
        .map(|r| ScheduleAt::parse("resume", r))
        .collect::<Result<_, _>>()?;
    config.approve_all_at = args
        .approve_all_at
        .iter()
        .map(|t| parse_instant("approve-all-at", t))
        .collect::<Result<_, _>>()?;
    config.backfills = args
        .backfill
        .iter()
        .map(|b| BackfillAt::parse(b))
        .collect::<Result<_, _>>()?;
    Ok(())
}

fn print_table(report: &SimulationReport) {
    println!(
        "{:<28} {:>8} {:>6} {:>6} {:>7} {:>9} {:>6} {:>6} {:>10} {:>11} {:>10}",
        "schedule",
        "expected",
        "ran",
        "late",
        "skipped",
        "coalesced",
        "manual",
        "failed",
        "unfinished",
        "unaccounted",
        "duplicates"
    );
    for s in &report.summary {
        println!(
            "{:<28} {:>8} {:>6} {:>6} {:>7} {:>9} {:>6} {:>6} {:>10} {:>11} {:>10}",
            s.schedule,
            s.expected,
            s.ran,
            s.caught_up,
            s.skipped,
            s.coalesced,
            s.manual,
            s.failed,
            s.unfinished,
            s.unaccounted,
            s.duplicates
        );
    }
    for b in &report.backfills {
        println!(
            "backfill {} ({}): {}, {} windows {}..{}; {}",
            b.id,
            b.schedule_id,
            b.state,
            b.planned,
            b.from.to_rfc3339(),
            b.to.to_rfc3339(),
            b.note
        );
        if let Some(held) = &b.held {
            println!("  held: {held}");
        }
        if let Some(e) = &b.budget.estimate {
            println!("  estimate: {e}");
        }
        if let Some(s) = &b.budget.spent {
            println!("  spent: {s}");
        }
    }
    let audit = &report.audit;
    let count = |f: fn(&cronledger_contract::ScheduleAudit) -> u64| -> u64 {
        audit.schedules.iter().map(f).sum()
    };
    println!(
        "audit: completeness {:.4}% ({} windows expected, {} missing, {} duplicated, {} entries unexplained)",
        audit.completeness * 100.0,
        count(|s| s.expected),
        count(|s| s.missing_count),
        count(|s| s.duplicates.len() as u64),
        count(|s| s.unexplained.len() as u64)
    );
    let st = &report.stats;
    for lever in &st.levers {
        println!("lever {lever}");
    }
    println!(
        "\n{} ticks, {} reconciler passes, {} deliveries ({} redelivered), {} crashes injected; settled {}; {:.1}s wall",
        st.ticks,
        st.reconciler_passes,
        st.deliveries,
        st.redeliveries,
        st.crashes.len(),
        st.settled_at
            .map_or_else(|| "not within the settle limit".to_string(), |t| format!("at {t}")),
        st.wall_ms as f64 / 1000.0
    );
    if !st.calls.is_empty() {
        let total: u64 = st.calls.values().sum();
        let by_kind: Vec<String> = st.calls.iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!("{total} emulator calls: {}", by_kind.join(", "));
    }
    print_cost(&st.cost);
}

/// The cost block: what was consumed, and the bill per million runs by item.
fn print_cost(cost: &Costing) {
    let c = &cost.capacity;
    if c.runs == 0 {
        return;
    }
    println!(
        "\ncapacity: {} runs, {:.1} WRU, {:.1} RRU, {} SQS requests, {} Lambda invocations, \
         {:.2} GB-s, {} log bytes, {} custom metrics",
        c.runs,
        c.wru,
        c.rru,
        c.sqs_requests,
        c.lambda_invocations,
        c.lambda_gb_seconds,
        c.log_bytes,
        c.custom_metrics
    );
    let b = &cost.cost_per_million_runs;
    let items = [
        ("DynamoDB writes", b.dynamodb_writes),
        ("DynamoDB reads", b.dynamodb_reads),
        ("DynamoDB storage (30 days)", b.dynamodb_storage),
        ("SQS", b.sqs),
        ("Lambda requests", b.lambda_requests),
        ("Lambda compute (arm64)", b.lambda_compute),
        ("Logs ingestion", b.logs_ingestion),
        ("Logs storage", b.logs_storage),
    ];
    println!("cost per million runs (USD, us-east-1 on-demand prices):");
    for (item, usd) in items {
        println!("  {item:<28} {usd:>10.4}");
    }
    println!("  {:<28} {:>10.4}", "total", b.total);
    let p = &cost.cost_detail.provisioned;
    let provisioned = &cost.cost_per_million_runs_provisioned;
    println!(
        "provisioned instead: {:.2} WCU and {:.2} RCU over the table and its indexes \
         (busiest second {:.1} WCU, {:.1} RCU; 300 s of burst, 70% target utilisation): \
         DynamoDB writes {:.4}, reads {:.4}, total {:.4} per million runs",
        p.wcu,
        p.rcu,
        p.peak_wcu_per_s,
        p.peak_rcu_per_s,
        provisioned.dynamodb_writes,
        provisioned.dynamodb_reads,
        provisioned.total
    );
    let fixed = &cost.monthly_fixed_usd;
    println!(
        "fixed monthly cost (whatever runs): {:.2} USD (EventBridge Scheduler {:.2}, idle ticks \
         and passes {:.2}, idle lane polls {:.2}, alarms {:.2}, {} custom metrics {:.2})",
        fixed.total_usd,
        fixed.scheduler_usd,
        fixed.lambda_usd,
        fixed.sqs_polling_usd,
        fixed.alarms_usd,
        c.custom_metrics,
        fixed.custom_metrics_usd
    );
}
