pub mod diff;
pub mod local;
pub mod plan;
pub mod preview;
pub mod simulate;
pub mod stack;
pub mod validate;

use std::path::Path;

use chrono::{DateTime, Utc};
use cronledger_core::{spec, ScheduleSpec, ValidationRules};

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

/// Reads and validates a schedules file.
pub fn load_manifest(path: &Path, now: DateTime<Utc>) -> Result<Vec<ScheduleSpec>, CliError> {
    let text = read_file(path)?;
    Ok(spec::parse_manifest(&text, &ValidationRules::local(), now)?)
}
