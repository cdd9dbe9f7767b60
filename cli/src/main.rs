//! `cronledger`: validate, preview, plan and diff schedules.
//!
//! Exit codes: 0 success, 1 invalid input (a bad schedule, time or file), 2 bad usage.

mod args;
mod commands;
mod output;
mod remote;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

/// An error the CLI reports and exits 1 on. Never a panic.
#[derive(Debug)]
pub struct CliError(pub Vec<String>);

impl CliError {
    pub fn msg(text: impl Into<String>) -> CliError {
        CliError(vec![text.into()])
    }
}

impl From<cronledger_core::Invalid> for CliError {
    fn from(invalid: cronledger_core::Invalid) -> CliError {
        CliError(invalid.0.iter().map(commands::issue_line).collect())
    }
}

impl From<cronledger_core::Issue> for CliError {
    fn from(issue: cronledger_core::Issue) -> CliError {
        CliError(vec![format!("{}: {}", issue.code, issue.message)])
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with exit 0; usage errors exit 2.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Validate(a) => commands::validate::run(a),
        Command::Preview(a) => commands::preview::run(a),
        Command::Plan(a) => commands::plan::run(a),
        Command::Diff(a) => commands::diff::run(a),
        Command::Local(a) => commands::local::run(a),
        Command::Simulate(a) => commands::simulate::run(a),
        Command::Apply(a) => remote::run(remote::Remote::Apply(a)),
        Command::Get(a) => remote::run(remote::Remote::Get(a)),
        Command::Calendars(a) => remote::run(remote::Remote::Calendars(a)),
        Command::Runs(a) => remote::run(remote::Remote::Runs(a)),
        Command::Run(a) => remote::run(remote::Remote::Run(a)),
        Command::Retry(a) => remote::run(remote::Remote::Retry(a)),
        Command::Approve(a) => remote::run(remote::Remote::Approve(a)),
        Command::Reject(a) => remote::run(remote::Remote::Reject(a)),
        Command::Pause(a) => remote::run(remote::Remote::Pause(a)),
        Command::Resume(a) => remote::run(remote::Remote::Resume(a)),
        Command::Backfill(a) => remote::run(remote::Remote::Backfill(a)),
        Command::Replays(a) => remote::run(remote::Remote::Replays(a)),
        Command::Status(a) => remote::run(remote::Remote::Status(a)),
        Command::Audit(a) => remote::run(remote::Remote::Audit(a)),
        Command::Schema(a) => commands::schema::run(a),
    };
    match result {
        Ok(code) => code,
        Err(CliError(lines)) => {
            for line in lines {
                eprintln!("{line}");
            }
            ExitCode::from(1)
        }
    }
}
