pub mod calendars;
pub mod diff;
pub mod local;
pub mod plan;
pub mod preview;
pub mod schema;
pub mod simulate;
pub mod stack;
pub mod validate;

use std::path::Path;

use chrono::{DateTime, Utc};
use cronledger_core::jitter::{find_herd, HerdRule};
use cronledger_core::spec::Manifest;
use cronledger_core::{spec, Issue, Schedule, ScheduleSpec, ValidationRules};

pub use crate::CliError;

/// Parses an RFC3339 instant given on the command line.
pub fn instant(flag: &str, text: &str) -> Result<DateTime<Utc>, CliError> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            CliError::msg(format!(
                "INVALID_ARGUMENT: --{flag} `{text}` is not an RFC3339 instant like 2026-03-08T07:00:00Z ({e})"
            ))
        })
}

/// The given instant, or the wall clock: the CLI is the edge where "now" enters.
pub fn instant_or_now(flag: &str, text: Option<&str>) -> Result<DateTime<Utc>, CliError> {
    text.map_or_else(|| Ok(Utc::now()), |t| instant(flag, t))
}

pub fn read_file(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map_err(|e| CliError::msg(format!("FILE_UNREADABLE: {}: {e}", path.display())))
}

/// What `validate` and `apply` warn about in a whole manifest (never an error): a herd of
/// schedules firing on the same minute without `jitter` (see [`HerdRule`]).
pub fn fleet_warnings(specs: &[ScheduleSpec], now: DateTime<Utc>) -> Vec<Issue> {
    let fleet: Vec<Schedule> = specs
        .iter()
        .filter_map(|s| Schedule::new(s.clone()).ok())
        .collect();
    find_herd(&fleet, now, &HerdRule::default())
        .map(|herd| herd.warning())
        .into_iter()
        .collect()
}

/// One problem for people: its code, its message and, when it has one, the field it is in
/// (`schedules[nightly].grace`: the schedule named by its id, or by its position).
pub fn issue_line(issue: &Issue) -> String {
    if issue.field.is_empty() {
        format!("{}: {}", issue.code, issue.message)
    } else {
        format!("{}: {} ({})", issue.code, issue.message, issue.field)
    }
}

/// Warnings for people, on stderr so that stdout stays the command's answer.
pub fn print_warnings(warnings: &[Issue]) {
    for w in warnings {
        eprintln!("warning: {}: {}", w.code, w.message);
    }
}

/// Reads and validates a schedules file as written (what `apply` sends to the api); a
/// calendar the file names and does not define must be one `stored` has.
pub fn load_manifest(
    path: &Path,
    now: DateTime<Utc>,
    stored: &dyn Fn(&str) -> bool,
) -> Result<Manifest, CliError> {
    let text = read_file(path)?;
    Ok(spec::read_manifest(
        &text,
        &ValidationRules::local(),
        now,
        stored,
    )?)
}

/// What an `http` job's url may start with to reach the local runner whatever its `--port`:
/// `cronledger local` puts its own address there (`http://127.0.0.1:PORT`).
pub const LOCAL_URL_PLACEHOLDER: &str = "${CRONLEDGER_LOCAL_URL}";

/// The local runner's address on its default port, which the commands that never deploy
/// (validate, plan, diff, simulate) read the placeholder as.
pub const DEFAULT_LOCAL_URL: &str = "http://127.0.0.1:8089";

/// A schedules file's text with the local runner's placeholder filled in with `local_url`.
pub fn read_local_file(path: &Path, local_url: &str) -> Result<String, CliError> {
    Ok(read_file(path)?.replace(LOCAL_URL_PLACEHOLDER, local_url))
}

/// Reads and validates a schedules file for a command that runs nothing in AWS: the local
/// runner's placeholder reads as `local_url`, and a schedule may name only the file's own
/// calendars. `apply` uses [`load_manifest`] instead, so a placeholder never reaches a
/// deployed ledger (the api refuses it as a url).
pub fn load_local(path: &Path, now: DateTime<Utc>, local_url: &str) -> Result<Manifest, CliError> {
    let text = read_local_file(path, local_url)?;
    Ok(spec::read_manifest(
        &text,
        &ValidationRules::local(),
        now,
        &|_| false,
    )?)
}
