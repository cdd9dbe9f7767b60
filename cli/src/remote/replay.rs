//! Replay by filter: `runs replay` (or --dry-run: the runs it would retry, the
//! non-idempotent ones it leaves out, the estimate) and `replays show|approve|cancel`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use cronledger_contract::{ReplayPlan, ReplayRequest, ReplayRun, ReplayView};
use cronledger_core::RunStatus;
use reqwest::Method;
use serde_json::Value;

use super::args::{NoteArgs, RemoteArgs};
use super::client::{segment, Client};
use super::{cell, note, print, would_wait};
use crate::commands::instant;
use crate::output::Table;
use crate::CliError;

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Retry every run matching a filter, on the correction lane at the backfill throttle
    /// (or --dry-run: the runs it would retry and its estimate).
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The schedule whose runs to retry.
    #[arg(long)]
    pub schedule: Option<String>,
    /// Every schedule of this owner (with --schedule: that schedule, if this owner's).
    #[arg(long)]
    pub owner: Option<String>,
    /// Statuses to retry, comma-separated: FAILED, STALLED.
    #[arg(long, value_delimiter = ',', required = true)]
    pub status: Vec<String>,
    /// Runs scheduled at or after this instant (RFC3339).
    #[arg(long)]
    pub from: String,
    /// ... and before this one.
    #[arg(long)]
    pub to: String,
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    #[arg(long)]
    pub note: Option<String>,
    /// Retry runs of schedules with `idempotent: false` too.
    #[arg(long = "include-non-idempotent")]
    pub include_non_idempotent: bool,
    /// Refuse it when its estimate costs more than this (USD).
    #[arg(long = "max-cost-usd")]
    pub max_cost_usd: Option<f64>,
    /// Leave the dependent windows skipped for a retried run skipped when it succeeds.
    #[arg(long = "no-cascade")]
    pub no_cascade: bool,
}

#[derive(Debug, Args)]
pub struct ReplaysArgs {
    #[command(subcommand)]
    pub command: ReplaysCommand,
}

#[derive(Debug, Subcommand)]
pub enum ReplaysCommand {
    /// A replay's progress and its runs.
    Show(NoteArgs),
    /// Approve a replay held for an admin's approval (admin; --note required) and start it.
    Approve(NoteArgs),
    /// Cancel a replay: the runs it has not retried stay as they are.
    Cancel(NoteArgs),
}

fn status(text: &str) -> Result<RunStatus, CliError> {
    serde_json::from_value(Value::String(text.trim().to_uppercase())).map_err(|_| {
        CliError::msg(format!(
            "INVALID_ARGUMENT: --status `{text}` is not a run status (FAILED, STALLED)"
        ))
    })
}

fn runs_table(title: &str, runs: &[ReplayRun]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let mut t = Table::new(["SCHEDULE", "RUN", "STATUS", "IDEMPOTENT", "SIDE EFFECTS"]);
    for r in runs {
        t.row([
            r.schedule.clone(),
            r.run.clone(),
            cell(&r.status),
            cell(&r.idempotent),
            cell(&r.side_effects),
        ]);
    }
    format!("{title}\n{t}")
}

fn plan_text(p: &ReplayPlan) -> String {
    let approval = would_wait(p.approval_required, &p.approval_reasons);
    let over = if p.over_budget.is_empty() {
        String::new()
    } else {
        "; OVER BUDGET: it would be refused (REPLAY_OVER_BUDGET)".to_string()
    };
    format!(
        "dry run: {} runs would be retried{approval}; nothing written\nestimate: {}{over}\n{}{}",
        p.size,
        p.estimate,
        runs_table("retried:", &p.runs),
        runs_table(
            "non-idempotent (retried only with --include-non-idempotent):",
            &p.non_idempotent
        ),
    )
}

fn replay_line(r: &ReplayView) -> String {
    format!(
        "{} {} {}/{} retried, in flight {} ok {} failed {} skipped {} remaining {} rate {}/min eta {}{}\n",
        r.id,
        cell(&r.state),
        r.released,
        r.total,
        r.in_flight,
        r.succeeded,
        r.failed,
        r.skipped,
        r.remaining,
        cell(&r.rate_per_minute),
        cell(&r.eta),
        r.held.as_ref().map(|h| format!(" held: {h}")).unwrap_or_default(),
    )
}

/// `runs replay`: create the replay, or print its plan.
pub(super) async fn replay(a: ReplayArgs, remote: &RemoteArgs) -> Result<ExitCode, CliError> {
    let client = Client::connect(remote).await?;
    let body = ReplayRequest {
        schedule: a.schedule,
        owner: a.owner,
        status: a
            .status
            .iter()
            .map(|s| status(s))
            .collect::<Result<_, _>>()?,
        from: instant("from", &a.from)?,
        to: instant("to", &a.to)?,
        note: a.note,
        dry_run: a.dry_run,
        include_non_idempotent: a.include_non_idempotent,
        max_cost_usd: a.max_cost_usd,
        cascade: !a.no_cascade,
    };
    // A dry run answers its plan (200), a replay its progress (201).
    if a.dry_run {
        let plan: ReplayPlan = client
            .send(Method::POST, "/v1/runs/replay", &body, &[])
            .await?;
        print(remote.format, &plan, plan_text);
    } else {
        let created: ReplayView = client
            .send(Method::POST, "/v1/runs/replay", &body, &[])
            .await?;
        print(remote.format, &created, replay_line);
    }
    Ok(ExitCode::SUCCESS)
}

/// `replays show|approve|cancel ID`.
pub(super) async fn replays(a: ReplaysArgs) -> Result<ExitCode, CliError> {
    let (n, action) = match a.command {
        ReplaysCommand::Show(n) => (n, None),
        ReplaysCommand::Approve(n) => (n, Some("approve")),
        ReplaysCommand::Cancel(n) => (n, Some("cancel")),
    };
    let client = Client::connect(&n.remote).await?;
    let path = format!("/v1/replays/{}", segment(&n.id));
    let r: ReplayView = match action {
        None => client.get(&path).await?,
        Some(action) => {
            let path = format!("{path}/{action}");
            client
                .send(Method::POST, &path, &note(&n.note), &[])
                .await?
        }
    };
    print(n.remote.format, &r, |r| {
        format!(
            "{}{}{}",
            replay_line(r),
            runs_table("runs:", &r.runs),
            runs_table("non-idempotent, left out:", &r.non_idempotent)
        )
    });
    Ok(ExitCode::SUCCESS)
}
