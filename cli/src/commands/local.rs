//! `cronledger local`: the whole system on one machine. Starts the AWS emulators (unless
//! `AWS_ENDPOINT_URL` points somewhere already), creates a fresh table and lanes, loads the
//! schedules, and runs the real handlers: the ticker on a minute clock, one poller per lane as
//! the SQS event source, and a webhook receiver for `http` jobs. Ctrl-C stops it cleanly.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use cronledger_app::api::{Api, ApiConfig, ApiDeps, AuthConfig, Caller};
use cronledger_app::backfill::BackfillReleaser;
use cronledger_app::clock::SystemClock;
use cronledger_app::jobs::http_auth::HttpAuthorizer;
use cronledger_app::jobs::{HttpJob, HttpOptions, JobTargets};
use cronledger_app::kill_switch::KillSwitchCheck;
use cronledger_app::local::poller::{run_poller, PollerConfig};
use cronledger_app::local::receiver::{self, Executions};
use cronledger_app::reconciler::{AwsSignals, ReconcileEvent, Reconciler, ReconcilerConfig};
use cronledger_app::ticker::{TickEvent, Ticker, TickerConfig};
use cronledger_app::worker::{Worker, WorkerConfig};
use cronledger_aws::config::load_sdk_config;
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::ChangeMeta;
use cronledger_aws::{AwsSettings, LedgerStore};
use cronledger_core::{Lane, RunStatus, Span, ValidationRules};
use tokio::sync::watch;

use super::{load_manifest, stack, CliError};
use crate::args::LocalArgs;

pub fn run(args: LocalArgs) -> Result<ExitCode, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::msg(format!("LOCAL_RUNTIME: {e}")))?;
    runtime.block_on(run_local(args))
}

async fn run_local(args: LocalArgs) -> Result<ExitCode, CliError> {
    init_console_logs();
    let now = Utc::now();
    let specs = load_manifest(&args.file, now)?;
    let _emulators = stack::emulators("LOCAL")?;
    let name = format!("cronledger-local-{}", now.timestamp());
    let stack = stack::create("LOCAL", &name, 1).await?;
    let lanes = stack::create_lanes("LOCAL", &stack, &name, LaneSettings::default()).await?;
    let ledger = stack.ledger;
    let failed =
        |what: &str, e: &dyn std::fmt::Display| CliError::msg(format!("LOCAL_SETUP: {what}: {e}"));
    for spec in specs {
        let id = spec.id.clone();
        let meta = ChangeMeta {
            actor: "local".into(),
            reason: format!("loaded from {}", args.file.display()),
            at: now,
            details: None,
        };
        let stored = ledger
            .create_schedule(spec, meta)
            .await
            .map_err(|e| failed("create schedule", &e))?;
        tracing::info!(
            target: "local",
            schedule = %id,
            next_run_at = ?stored.next_run_at,
            "schedule loaded"
        );
    }

    let executions = Executions::default();
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let identity = std::env::var("CRONLEDGER_LOCAL_IDENTITY").unwrap_or_else(|_| "admin".into());
    let caller = Caller::local(&identity).ok_or_else(|| {
        CliError::msg(format!(
            "LOCAL_IDENTITY: CRONLEDGER_LOCAL_IDENTITY `{identity}` is not viewer, operator, admin or NAME:ROLE"
        ))
    })?;
    let api = Api::new(ApiDeps {
        store: ledger.clone(),
        ops: ledger.clone(),
        lanes: lanes.clone(),
        clock: Arc::new(SystemClock),
        system: None,
        signals: None,
        auth: AuthConfig::default(),
        config: ApiConfig {
            rules: ValidationRules::local(),
            ..ApiConfig::default()
        },
    });
    // The api on the receiver's port, every request as the configured local identity.
    let listener_router = receiver::router(executions.clone())
        .merge(api.router().layer(axum::Extension(caller.clone())));
    // The reconciler as in AWS (missed windows, stuck runs, throttled catch-up, backfills),
    // paused by the local lanes' backlog and DLQ; there are no CloudWatch alarms locally.
    let sdk = load_sdk_config(&AwsSettings::default()).await;
    let signals = Arc::new(AwsSignals::new(
        lanes.clone(),
        aws_sdk_cloudwatch::Client::new(&sdk),
    ));
    let backfills = BackfillReleaser {
        store: ledger.clone(),
        ops: ledger.clone(),
        lanes: lanes.clone(),
        signals: Some(signals.clone()),
    };
    // The kill switch holds here as in AWS: no tick, pass, release or start while it is on
    // (locally nothing disables schedules or event sources: each checks the stored flag).
    let kill_switch = Arc::new(KillSwitchCheck::new(ledger.clone()));
    let reconciler = Reconciler::new(
        ledger.clone(),
        ledger.clone(),
        lanes.clone(),
        signals,
        ReconcilerConfig::default(),
    )
    .with_kill_switch(kill_switch.clone());
    tasks.spawn(reconcile_every_minute(
        reconciler,
        backfills,
        stop_rx.clone(),
    ));
    tasks.spawn(async move {
        if let Err(e) = receiver::serve(addr, listener_router).await {
            tracing::error!(target: "local", error = %e, "webhook receiver stopped");
        }
    });

    let worker = Arc::new(
        Worker::new(
            ledger.clone(),
            lanes.clone(),
            // The local receiver is on 127.0.0.1: loopback targets are allowed here only.
            JobTargets::new(
                HttpJob::with_options(HttpOptions {
                    authorizer: HttpAuthorizer::from_sdk(&sdk),
                    ..HttpOptions::local()
                })
                .map_err(|e| failed("http client", &e))?,
            ),
            Arc::new(SystemClock),
            WorkerConfig {
                owner: format!("local-{}", std::process::id()),
                ..WorkerConfig::default()
            },
        )
        .with_kill_switch(kill_switch.clone()),
    );
    for &lane in Lane::ALL {
        tasks.spawn(run_poller(
            lanes.clone(),
            worker.clone(),
            lane,
            PollerConfig::default(),
            stop_rx.clone(),
        ));
    }
    let ticker = Ticker::new(ledger.clone(), lanes.clone(), TickerConfig::default())
        .with_kill_switch(kill_switch);
    tasks.spawn(tick_every_minute(ticker, stop_rx.clone()));

    println!(
        "cronledger local: table {name}, webhook receiver on http://{addr}/hooks/{{name}}, api on http://{addr}/v1 as `{}` (CRONLEDGER_LOCAL_IDENTITY); Ctrl-C to stop",
        caller.principal
    );
    let until = args.run_for.map(|s| Duration::from_secs(s.as_secs()));
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = sleep_or_forever(until) => {}
    }
    let _ = stop_tx.send(true);
    tasks.abort_all();
    summarize(ledger.as_ref(), &executions).await;
    Ok(ExitCode::SUCCESS)
}

/// A reconciler pass every minute (every five in AWS: locally the demo should show a missed
/// window being explained quickly), then the operators' backfills.
async fn reconcile_every_minute(
    reconciler: Reconciler,
    releaser: BackfillReleaser,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = stop.changed() => return,
        }
        let now = Utc::now();
        let report = reconciler.reconcile(&ReconcileEvent::at(now)).await;
        drop(reconciler.metrics().drain("reconciler", now));
        if report.kill_switch_engaged {
            tracing::warn!(target: "local", "kill switch engaged: no reconcile pass");
            continue;
        }
        let backfills = releaser.pass(now).await;
        tracing::info!(
            target: "local",
            missed = report.missed_windows,
            written = report.entries_written,
            released = report.released + backfills.released,
            errors = report.errors.len() + backfills.errors.len(),
            "reconcile"
        );
    }
}

async fn sleep_or_forever(limit: Option<Duration>) {
    match limit {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Ticks at every minute boundary with that boundary as the event time, the way EventBridge
/// Scheduler invokes the ticker.
async fn tick_every_minute(ticker: Ticker, mut stop: watch::Receiver<bool>) {
    let minute = TimeDelta::minutes(1);
    let mut next = Utc::now()
        .duration_trunc(minute)
        .unwrap_or_else(|_| Utc::now());
    loop {
        let wait = (next - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        let report = ticker
            .tick(&TickEvent {
                time: next,
                shards: None,
            })
            .await;
        // Locally nothing ships EMF lines to CloudWatch: drop them so a long session stays flat.
        drop(ticker.metrics().drain("ticker", next));
        tracing::info!(
            target: "local",
            time = %next,
            due = report.due_schedules,
            created = report.created,
            sent = report.sent,
            left_for_reconciler = report.left_for_reconciler,
            errors = report.errors.len(),
            "tick"
        );
        next += minute;
    }
}

/// Prints what ran: runs per status and start delay (started_at - scheduled_for).
async fn summarize(ledger: &dyn LedgerStore, executions: &Executions) {
    let mut delays_ms: Vec<i64> = Vec::new();
    let mut by_status: std::collections::BTreeMap<RunStatus, u32> = Default::default();
    let mut cursor: Option<String> = None;
    let schedules = loop {
        match ledger.list_schedules(100, cursor.as_deref()).await {
            Ok(page) => {
                if page.next.is_none() {
                    break page.items;
                }
                cursor = page.next;
            }
            Err(e) => {
                eprintln!("summary unavailable: {e}");
                return;
            }
        }
    };
    for schedule in &schedules {
        let Ok(history) = ledger.run_history(schedule.id(), 1000, None).await else {
            continue;
        };
        for run in history.items {
            *by_status.entry(run.status).or_default() += 1;
            if let Some(started) = run.started_at {
                delays_ms.push(start_delay_ms(run.key.scheduled_for, started));
            }
        }
    }
    println!(
        "\nsummary: runs by status {by_status:?}; webhook executions {}",
        executions.total()
    );
    if !delays_ms.is_empty() {
        delays_ms.sort_unstable();
        let pct = |p: f64| delays_ms[((delays_ms.len() - 1) as f64 * p).round() as usize];
        println!(
            "start delay (started_at - scheduled_for) over {} runs: p50 {} ms, p99 {} ms, max {} ms",
            delays_ms.len(),
            pct(0.50),
            pct(0.99),
            delays_ms[delays_ms.len() - 1]
        );
    }
}

fn start_delay_ms(scheduled_for: DateTime<Utc>, started: DateTime<Utc>) -> i64 {
    (started - scheduled_for).num_milliseconds()
}

fn init_console_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,local=info,receiver=info,cronledger_app=info")
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .compact()
        .with_target(false)
        .try_init();
}

/// `--for 90s`: how long to run before stopping on its own.
pub fn parse_run_for(text: &str) -> Result<Span, String> {
    text.parse::<Span>().map_err(|e| e.to_string())
}
