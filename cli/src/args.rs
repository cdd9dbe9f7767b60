//! Command-line arguments. Times and durations are parsed by the commands, so a bad value is
//! reported as invalid input (exit 1) with the core's wording.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "cronledger",
    version,
    about = "A ledger for scheduled jobs: validate, preview, plan and diff schedules"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a schedules file, or one expression and zone; print every problem.
    Validate(ValidateArgs),
    /// Show the next fire times of an expression, with DST notes.
    Preview(PreviewArgs),
    /// Dry-run the misfire planner: what would happen to the windows missed since a watermark.
    Plan(PlanArgs),
    /// Compare two versions of a schedule: frequency, fire times, risk.
    Diff(DiffArgs),
    /// Run the whole system on this machine: emulators, ticker, workers, webhook receiver.
    Local(LocalArgs),
    /// Replay a time range against the real handlers on a virtual clock, with outages and
    /// faults, and print the resulting ledger.
    Simulate(SimulateArgs),
    /// (api) Show the plan for a schedules file (create, update with risk, archive) and apply it.
    Apply(crate::remote::args::ApplyArgs),
    /// (api) Show stored schedules.
    Get(crate::remote::args::GetArgs),
    /// (api) Show stored calendars: `calendars list`, `calendars get NAME`.
    Calendars(crate::remote::args::CalendarsArgs),
    /// (api) Every schedule's health, worst first: last result, next run, 7-day success,
    /// freshness against its slo, failures in a row, runs awaiting approval.
    Status(crate::remote::args::StatusArgs),
    /// (api) A schedule's run history, or one run (`runs SCHEDULE RUN`) with its attempts.
    Runs(crate::remote::args::RunsArgs),
    /// (api) Operator runs: `run now SCHEDULE`.
    Run(crate::remote::args::RunArgs),
    /// (api) Retry a failed run: a new attempt of the same run, with its own version's job.
    Retry(crate::remote::args::RetryArgs),
    /// (api) Approve a MANUAL_REQUIRED run.
    Approve(crate::remote::args::RunActionArgs),
    /// (api) Reject a MANUAL_REQUIRED run.
    Reject(crate::remote::args::RunActionArgs),
    /// (api) Pause a schedule with a note.
    Pause(crate::remote::args::NoteArgs),
    /// (api) Resume a paused schedule with a note.
    Resume(crate::remote::args::NoteArgs),
    /// (api) Backfills: create, status [--watch], pause, resume, cancel, verify.
    Backfill(crate::remote::args::BackfillArgs),
    /// (api) Replays (`runs replay` creates one): show, approve, cancel.
    Replays(crate::remote::replay::ReplaysArgs),
    /// (api) The completeness audit of [--from, --to): each schedule's expected windows
    /// against the ledger (missing, duplicated, unexplained) and the fleet's completeness;
    /// exits 1 when the completeness is below 1.
    Audit(crate::remote::args::AuditArgs),
    /// Print a schema generated from the types: the manifest's JSON Schema (editors validate
    /// and complete manifests with it) or the api's OpenAPI document.
    Schema(SchemaArgs),
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which document.
    #[arg(value_enum)]
    pub which: SchemaKind,
    /// Write it to this file instead of standard output.
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaKind {
    /// The manifest's JSON Schema (schema/manifest.schema.json in the repository).
    Manifest,
    /// The api's OpenAPI 3.1 document (what `GET /openapi.json` serves).
    Openapi,
}

#[derive(Debug, Args)]
pub struct LocalArgs {
    /// The schedules to load.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Port of the local webhook receiver (`http://127.0.0.1:PORT/hooks/{name}`).
    #[arg(long, default_value_t = 8089)]
    pub port: u16,
    /// Stop on its own after this long (e.g. `5m`); default: until Ctrl-C.
    #[arg(long = "for", value_parser = crate::commands::local::parse_run_for)]
    pub run_for: Option<cronledger_core::Span>,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The schedules file (jobs other than `noop` run as an instant, successful noop).
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Start of the range (RFC3339); the schedules are loaded at this instant.
    #[arg(long)]
    pub from: String,
    /// End of the range (RFC3339); windows in (from, to] are reported.
    #[arg(long)]
    pub to: String,
    /// A scheduler outage FROM..TO (RFC3339): no ticker, reconciler or worker runs. Repeatable.
    #[arg(long)]
    pub outage: Vec<String>,
    /// A worker outage FROM..TO (RFC3339): tickers and the reconciler run, no worker takes a
    /// message, so the lanes fill up. Repeatable.
    #[arg(long)]
    pub worker_outage: Vec<String>,
    /// The global kill switch on in FROM..TO (RFC3339): no tick, reconciler pass or delivery;
    /// messages stay in their lanes and the windows due meanwhile are judged after it.
    /// Repeatable.
    #[arg(long, value_name = "FROM..TO")]
    pub kill_switch: Vec<String>,
    /// Pause schedule ID at instant T (RFC3339), as `cronledger pause` does. Repeatable.
    #[arg(long, value_name = "ID@T")]
    pub pause: Vec<String>,
    /// Resume schedule ID at instant T (RFC3339), after a --pause of it. Repeatable.
    #[arg(long, value_name = "ID@T")]
    pub resume: Vec<String>,
    /// At instant T (RFC3339), approve every MANUAL_REQUIRED run and resume every paused
    /// backfill, as an operator would through the api. Repeatable.
    #[arg(long, value_name = "T")]
    pub approve_all_at: Vec<String>,
    /// At instant T (RFC3339), an operator asks for a backfill of schedule ID, REQUEST being
    /// the api's request body (`{"from": ..., "to": ..., "max_cost_usd": 0.01}`). Repeatable.
    #[arg(long, value_name = "ID@T=REQUEST")]
    pub backfill: Vec<String>,
    /// Tickers invoked at once on every tick.
    #[arg(long, default_value_t = 1)]
    pub tickers: u32,
    /// Crash at a point: after-run-write, after-send, mid-job, before-completion-write, between-steps (steps jobs only),
    /// heartbeat (the attempt's heartbeat writes fail; jobs longer than a heartbeat period).
    /// Repeatable. Each point crashes the first run reaching it, then every --crash-every-th.
    #[arg(long)]
    pub crash: Vec<String>,
    #[arg(long, default_value_t = 10)]
    pub crash_every: u32,
    /// Send every message twice.
    #[arg(long)]
    pub duplicate_deliveries: bool,
    /// Where the lanes keep their messages: in this process (the default: SQS's part of a
    /// simulation without a round trip per call) or in the emulator's SQS queues.
    #[arg(long, value_enum, default_value = "memory")]
    pub queues: SimQueuesArg,
    /// Where the ledger lives: in this process (the default: the same conditions and
    /// capacity accounting as DynamoDB, no emulator, a fleet's day in seconds) or in a fresh
    /// table of the emulator's DynamoDB.
    #[arg(long, value_enum, default_value = "memory")]
    pub store: SimStoreArg,
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SimStoreArg {
    Memory,
    Dynamodb,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SimQueuesArg {
    Memory,
    Sqs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Table,
    Json,
}

#[derive(Debug, Args)]
// A file or an expression is required: without either it is bad usage (exit 2).
#[command(group(clap::ArgGroup::new("input").required(true).args(["file", "cron"])))]
pub struct ValidateArgs {
    /// A schedules file (YAML or JSON, `schedules:` and a list).
    #[arg(short = 'f', long = "file", conflicts_with_all = ["cron", "tz"])]
    pub file: Option<PathBuf>,
    /// A single expression: 5-field cron, a macro, cron(...) or rate(...).
    #[arg(long, requires = "tz")]
    pub cron: Option<String>,
    /// IANA time zone for --cron.
    #[arg(long)]
    pub tz: Option<String>,
    /// Judge "can it still fire" from this instant (RFC3339; default now).
    #[arg(long)]
    pub now: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct PreviewArgs {
    /// The expression.
    pub expr: String,
    /// IANA time zone.
    #[arg(long)]
    pub tz: String,
    /// List fire times strictly after this instant (RFC3339; default now).
    #[arg(long)]
    pub after: Option<String>,
    #[arg(long, default_value_t = 10)]
    pub count: usize,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// The schedule's `jitter` (e.g. 5m): shows its offset and jittered fire times.
    #[arg(long, requires = "id")]
    pub jitter: Option<String>,
    /// The schedule's id, which the jitter offset is derived from.
    #[arg(long, requires = "jitter")]
    pub id: Option<String>,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The schedules file.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Plan only this schedule id (default: every schedule in the file).
    #[arg(long)]
    pub schedule: Option<String>,
    /// Every window at or before this instant is already accounted for (RFC3339).
    #[arg(long)]
    pub watermark: String,
    /// The planner's "now" (RFC3339).
    #[arg(long)]
    pub now: String,
    /// Runs already in the ledger: a JSON list of RFC3339 instants or ledger entries.
    #[arg(long)]
    pub existing: Option<PathBuf>,
    /// How long after a window the planner waits before judging it.
    #[arg(long, default_value = "1m")]
    pub settle: String,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The current schedules file.
    pub old: PathBuf,
    /// The proposed schedules file.
    pub new: PathBuf,
    /// Assess as of this instant (RFC3339; default now).
    #[arg(long)]
    pub now: Option<String>,
    /// How many fire times to show before and after.
    #[arg(long, default_value_t = 5)]
    pub count: usize,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}
