//! `cronledger local`: the whole system on one machine. Starts the AWS emulators (unless
//! `AWS_ENDPOINT_URL` points somewhere already), creates a fresh table and lanes, loads the
//! schedules, and runs the real handlers: the ticker on a minute clock, one poller per lane as
//! the SQS event source, the reconciler and the daily auditor, and a webhook receiver for
//! `http` jobs. Ctrl-C or SIGTERM stops it
//! cleanly: pollers stop, the summary prints, the emulators stop and their folder goes.

use std::io::{IsTerminal, Write as _};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DurationRound, TimeDelta, Utc};
use cronledger_app::api::{ApiConfig, AuthConfig, Caller};
use cronledger_app::auditor::AuditorConfig;
use cronledger_app::backfill::BackfillReleaser;
use cronledger_app::clock::SystemClock;
use cronledger_app::jobs::http_auth::{HttpAuthorizer, SecretCache, SecretsManagerSource};
use cronledger_app::jobs::{HttpJob, HttpOptions, JobTargets};
use cronledger_app::local::poller::{run_poller, PollerConfig};
use cronledger_app::local::receiver::{self, Executions, HookSigning};
use cronledger_app::local::summary::Summary;
use cronledger_app::logging::TextLine;
use cronledger_app::reconciler::{
    AwsSignals, ReconcileEvent, Reconciler, ReconcilerConfig, Signals,
};
use cronledger_app::ticker::{TickEvent, Ticker, TickerConfig};
use cronledger_app::worker::WorkerConfig;
use cronledger_aws::config::load_sdk_config;
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::ChangeMeta;
use cronledger_aws::notify::notifier_from_env;
use cronledger_aws::AwsSettings;
use cronledger_core::{Lane, Span, ValidationRules};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

use super::{load_local, stack, CliError};
use crate::args::LocalArgs;
use cronledger_aws::prelude::*;

pub fn run(args: LocalArgs) -> Result<ExitCode, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::msg(format!("LOCAL_RUNTIME: {e}")))?;
    runtime.block_on(run_local(args))
}

/// Bad usage: the message on stderr, exit 2.
fn usage_error(message: String) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(2)
}

async fn run_local(args: LocalArgs) -> Result<ExitCode, CliError> {
    init_console_logs();
    // Registered first, so a SIGTERM or Ctrl-C that arrives while the emulators start is
    // kept and answered with the same clean stop once they are up.
    let mut stop_signal = StopSignal::register()?;
    let now = Utc::now();
    // Everything that can be wrong with the command is checked before anything starts: the
    // emulators take seconds, and a second instance must not start any.
    let identity = std::env::var("CRONLEDGER_LOCAL_IDENTITY").unwrap_or_else(|_| "admin".into());
    let caller = Caller::local(&identity).ok_or_else(|| {
        CliError::msg(format!(
            "LOCAL_IDENTITY: CRONLEDGER_LOCAL_IDENTITY `{identity}` is not viewer, operator, admin or NAME:ROLE"
        ))
    })?;
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let local_url = format!("http://{addr}");
    let manifest = load_local(&args.file, now, &local_url)?;
    // Bound now and kept: the api and the webhook receiver serve on this very socket, so
    // no other process can take the port between this check and the serving.
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            return Ok(usage_error(format!(
                "LOCAL_PORT_IN_USE: port {} is in use (another cronledger local?); stop it or choose another with --port",
                args.port
            )))
        }
        Err(e) => {
            return Ok(usage_error(format!(
                "LOCAL_PORT_UNAVAILABLE: cannot listen on {addr}: {e}; choose another with --port"
            )))
        }
    };
    let _emulators = stack::emulators("LOCAL")?;
    // The pid too: two runners started in the same second on one emulator get a table each.
    let name = format!(
        "cronledger-local-{}-{}",
        now.timestamp(),
        std::process::id()
    );
    let stack = stack::create("LOCAL", &name, 1).await?;
    let lanes = stack::create_lanes("LOCAL", &stack, &name, LaneSettings::default()).await?;
    let ledger = stack.ledger;
    // Wired as deployed (kill switch, alerts, health, backfills). Alerts go to the topic
    // `infra/local/up` created on the emulator (its env file names it); without one they are
    // only logged.
    let components = cronledger_app::local::components(
        ledger.clone(),
        lanes.clone(),
        notifier_from_env(&stack.clients),
    );
    let failed =
        |what: &str, e: &dyn std::fmt::Display| CliError::msg(format!("LOCAL_SETUP: {what}: {e}"));
    let loaded = || ChangeMeta {
        actor: "local".into(),
        reason: format!("loaded from {}", args.file.display()),
        at: now,
        details: None,
    };
    // Calendars first, as `apply` puts them: the schedules naming them read them.
    for (name, calendar) in manifest.calendars.0 {
        ledger
            .put_calendar(&name, calendar, None, loaded())
            .await
            .map_err(|e| failed("put calendar", &e))?;
    }
    let sdk = load_sdk_config(&AwsSettings::default()).await;
    // The receiver's hooks that hmac jobs call check their signatures with the same secrets.
    let signing = HookSigning::for_jobs(
        manifest.schedules.iter().map(|spec| &spec.job),
        Arc::new(SecretCache::new(
            Arc::new(SecretsManagerSource::new(&sdk)),
            SecretCache::ttl_from_env(),
        )),
    );
    for spec in manifest.schedules {
        let id = spec.id.clone();
        let stored = ledger
            .create_schedule(spec, loaded())
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
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let api = components.api(
        None,
        None,
        AuthConfig::default(),
        ApiConfig {
            rules: ValidationRules::local(),
            ..ApiConfig::default()
        },
    );
    // The api on the receiver's port, every request as the configured local identity.
    let listener_router = receiver::router(executions.clone(), Some(signing))
        .merge(api.router().layer(axum::Extension(caller.clone())));
    // Every answer to a file, when a test asks (the console's contract check).
    let listener_router = cronledger_app::api::answer_log::from_env(listener_router);
    // The reconciler as in AWS (missed windows, stuck runs, throttled catch-up, backfills),
    // paused by the local lanes' backlog and DLQ; there are no CloudWatch alarms locally.
    let signals: Arc<dyn Signals> = Arc::new(AwsSignals::new(
        lanes.clone(),
        aws_sdk_cloudwatch::Client::new(&sdk),
    ));
    let backfills = components.backfill_releaser(Some(signals.clone()));
    // The kill switch holds here as in AWS: no tick, pass, release or start while it is on
    // (locally nothing disables schedules or event sources: each checks the stored flag).
    let reconciler = components.reconciler(signals, ReconcilerConfig::default());
    tasks.spawn(reconcile_every_minute(
        reconciler,
        backfills,
        stop_rx.clone(),
    ));
    // The auditor's daily pass (01:00 UTC: the previous UTC day), as EventBridge Scheduler
    // invokes it; `POST /v1/audit/runs` audits any range on demand.
    tasks.spawn(cronledger_app::local::auditor::audit_daily(
        components
            .auditor(AuditorConfig::default())
            .keeping_metrics(),
        Arc::new(SystemClock),
        stop_rx.clone(),
    ));
    tasks.spawn(async move {
        if let Err(e) = receiver::serve_on(listener, listener_router).await {
            tracing::error!(target: "local", error = %e, "webhook receiver stopped");
        }
    });

    let worker = Arc::new(
        components.worker(
            // The local receiver is on 127.0.0.1: loopback targets are allowed here only.
            JobTargets::new(
                HttpJob::with_options(HttpOptions {
                    authorizer: HttpAuthorizer::from_sdk(&sdk),
                    ..HttpOptions::local()
                })
                .map_err(|e| failed("http client", &e))?,
            ),
            WorkerConfig {
                owner: format!("local-{}", std::process::id()),
                ..WorkerConfig::default()
            },
        ),
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
    let ticker = components.ticker(TickerConfig::default());
    tasks.spawn(tick_every_minute(ticker, stop_rx.clone()));
    // Up: the first tick fires the current minute, whose window fell before this instant.
    let runner_started = Utc::now();

    println!(
        "cronledger local: table {name}, webhook receiver on {local_url}/hooks/{{name}}, api on {local_url}/v1 as `{}` (CRONLEDGER_LOCAL_IDENTITY), console on {local_url}/console; Ctrl-C or SIGTERM to stop",
        caller.principal
    );
    let until = args.run_for.map(|s| Duration::from_secs(s.as_secs()));
    tokio::select! {
        signal = stop_signal.received() => {
            tracing::info!(target: "local", signal, "stopping");
        }
        () = sleep_or_forever(until) => {}
    }
    let _ = stop_tx.send(true);
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    // Written, not `println!`: a reader that went away (a closed pipe) must not turn the
    // clean stop into a panic.
    let _ = match Summary::read(ledger.as_ref(), 1000, runner_started).await {
        Ok(summary) => writeln!(
            std::io::stdout(),
            "\nsummary: webhook executions {}; {summary}",
            executions.total()
        ),
        Err(e) => writeln!(std::io::stderr(), "summary unavailable: {e}"),
    };
    // The emulators stop and their folder goes when `_emulators` drops, on return.
    Ok(ExitCode::SUCCESS)
}

/// SIGINT (Ctrl-C) and SIGTERM (what `kill`, systemd and containers send): both stop the
/// runner the same clean way.
struct StopSignal {
    interrupt: Signal,
    terminate: Signal,
}

impl StopSignal {
    fn register() -> Result<StopSignal, CliError> {
        let listen = |kind: SignalKind| {
            signal(kind).map_err(|e| CliError::msg(format!("LOCAL_RUNTIME: signal handler: {e}")))
        };
        Ok(StopSignal {
            interrupt: listen(SignalKind::interrupt())?,
            terminate: listen(SignalKind::terminate())?,
        })
    }

    /// The name of the first signal received.
    async fn received(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }
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

fn init_console_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        // The batch span names the schedule and run of every worker line about a message.
        tracing_subscriber::EnvFilter::new(
            "warn,local=info,receiver=info,cronledger_app=info,cronledger_aws::lanes::batch=info",
        )
    });
    // Colour only for a person at a terminal: never in a file or a pipe, nor with NO_COLOR.
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    // The functions' text line: a worker's line starts with what happened, not its span's name.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .event_format(TextLine { time: true })
        .try_init();
}

/// `--for 90s`: how long to run before stopping on its own.
pub fn parse_run_for(text: &str) -> Result<Span, String> {
    text.parse::<Span>().map_err(|e| e.to_string())
}
