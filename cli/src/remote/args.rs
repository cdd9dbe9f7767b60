//! Arguments of the remote commands (the ones that call the api).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RemoteAuth {
    /// A token if one is given, SigV4 for an `*.amazonaws.com` endpoint, else nothing.
    Auto,
    None,
    Sigv4,
    Bearer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

/// Where the api is and how to call it.
#[derive(Debug, Clone, Args)]
pub struct RemoteArgs {
    /// The api's base URL (API Gateway stage URL, or http://127.0.0.1:8089 for `cronledger local`).
    #[arg(long = "api-url", env = "CRONLEDGER_API_URL", global = true)]
    pub api_url: Option<String>,
    #[arg(
        long,
        value_enum,
        env = "CRONLEDGER_API_AUTH_MODE",
        default_value = "auto",
        global = true
    )]
    pub auth: RemoteAuth,
    /// A JWT for an API Gateway JWT authorizer.
    #[arg(
        long,
        env = "CRONLEDGER_API_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// The region to sign for (default: the AWS environment's).
    #[arg(long, global = true)]
    pub region: Option<String>,
    /// Tables for people, JSON for scripts.
    #[arg(long, value_enum, default_value = "table", global = true)]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The schedules file.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Apply without asking.
    #[arg(long)]
    pub yes: bool,
    /// Also archive stored schedules the file no longer has.
    #[arg(long)]
    pub prune: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// One schedule (default: all).
    pub id: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct CalendarsArgs {
    #[command(subcommand)]
    pub command: CalendarsCommand,
}

#[derive(Debug, Subcommand)]
pub enum CalendarsCommand {
    /// Every calendar: its version, how many dates or ranges, its last change.
    List(CalendarsListArgs),
    /// One calendar with its excluded dates.
    Get(CalendarGetArgs),
}

#[derive(Debug, Args)]
pub struct CalendarsListArgs {
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct CalendarGetArgs {
    pub name: String,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Start of the range (RFC3339, included).
    #[arg(long)]
    pub from: String,
    /// End of the range (RFC3339, excluded): after --from, at most 31 days later, not in
    /// the future.
    #[arg(long)]
    pub to: String,
    /// One schedule (default: every schedule with a window or a finding in the range).
    #[arg(long)]
    pub schedule: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct RunsArgs {
    /// `runs replay ...`: retry every run matching a filter.
    #[command(subcommand)]
    pub command: Option<super::replay::RunsCommand>,
    pub schedule: Option<String>,
    /// One run (its id as the listing prints it): the run with its attempts.
    pub run: Option<String>,
    /// e.g. FAILED
    #[arg(long)]
    pub status: Option<String>,
    /// SCHEDULED, CATCH_UP, MANUAL or BACKFILL
    #[arg(long)]
    pub trigger: Option<String>,
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Run a schedule now (trigger MANUAL).
    Now(RunNowArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(subcommand)]
    pub command: RunCommand,
}

#[derive(Debug, Args)]
pub struct RunNowArgs {
    pub schedule: String,
    /// reuse: answer with the window's existing run; new: force another run.
    #[arg(long, default_value = "reuse")]
    pub mode: String,
    /// The occurrence whose window to run (RFC3339; a fire time of the schedule, else the api
    /// answers SCHEDULED_FOR_NOT_AN_OCCURRENCE; default the latest).
    #[arg(long = "scheduled-for")]
    pub scheduled_for: Option<String>,
    /// Same key, same run (default: a fresh key per invocation, so a retried call is safe).
    #[arg(long = "idempotency-key")]
    pub idempotency_key: Option<String>,
    #[arg(long)]
    pub note: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct RunActionArgs {
    pub schedule: String,
    /// The run id (as `runs` prints it).
    pub run: String,
    #[arg(long)]
    pub note: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct RetryArgs {
    #[command(flatten)]
    pub action: RunActionArgs,
    /// Run the schedule's current job (the run is re-pinned to the current version), not
    /// the job of the version the run was created under.
    #[arg(long = "current-definition")]
    pub current_definition: bool,
    /// Leave the dependents' windows skipped for this run (UPSTREAM_NOT_SUCCEEDED) when the
    /// retry succeeds; by default each is re-opened, down the chain.
    #[arg(long = "no-cascade")]
    pub no_cascade: bool,
}

#[derive(Debug, Args)]
pub struct NoteArgs {
    pub id: String,
    #[arg(long)]
    pub note: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct BackfillArgs {
    #[command(subcommand)]
    pub command: BackfillCommand,
}

#[derive(Debug, Subcommand)]
pub enum BackfillCommand {
    /// Backfill a schedule over a range (or --dry-run: the plan and its size).
    Create(BackfillCreateArgs),
    /// Progress; --watch redraws a progress bar until it ends.
    Status(BackfillStatusArgs),
    Pause(NoteArgs),
    Resume(NoteArgs),
    /// Approve a backfill held for an admin's approval (admin; --note required) and start it.
    Approve(NoteArgs),
    Cancel(NoteArgs),
    /// Expected windows against the ledger: every missing or failed window.
    Verify(NoteArgs),
}

#[derive(Debug, Args)]
pub struct BackfillCreateArgs {
    pub schedule: String,
    #[arg(long)]
    pub from: String,
    #[arg(long)]
    pub to: String,
    /// missing, failed or all
    #[arg(long, default_value = "missing")]
    pub reprocess: String,
    #[arg(long)]
    pub concurrency: Option<u32>,
    #[arg(long = "batch-size")]
    pub batch_size: Option<u32>,
    #[arg(long = "rate")]
    pub rate_per_minute: Option<f64>,
    /// Hold while the realtime lane has more visible messages than this.
    #[arg(long = "pause-backlog")]
    pub pause_backlog: Option<u64>,
    /// Hold while the backfill's failed share is above this (0-1).
    #[arg(long = "pause-error-rate")]
    pub pause_error_rate: Option<f64>,
    /// Hold while this CloudWatch alarm is in ALARM (repeatable).
    #[arg(long = "pause-alarm")]
    pub pause_alarms: Vec<String>,
    /// Refuse it when its estimate costs more than this (USD), pause it when its measured
    /// spend reaches it.
    #[arg(long = "max-cost-usd")]
    pub max_cost_usd: Option<f64>,
    /// Refuse it when it would call the target more than this, pause it when it has.
    #[arg(long = "max-target-calls")]
    pub max_target_calls: Option<u64>,
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Also re-run the same windows of the schedules that run after this one (`after`), and
    /// theirs, as each of the backfill's runs ends.
    #[arg(long)]
    pub cascade: bool,
    #[arg(long)]
    pub note: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct BackfillStatusArgs {
    pub id: String,
    #[arg(long)]
    pub watch: bool,
    /// Seconds between redraws with --watch.
    #[arg(long, default_value_t = 5)]
    pub every: u64,
    #[command(flatten)]
    pub remote: RemoteArgs,
}
