use std::process::ExitCode;

use chrono::SecondsFormat;
use cronledger_core::{spec, ValidationRules};
use serde::Serialize;

use super::instant_or_now;
use crate::args::{Format, PreviewArgs};
use crate::output::Table;
use crate::CliError;

/// Previews are for people and scripts; a huge count is a typo, not a request.
const MAX_COUNT: usize = 10_000;

#[derive(Serialize)]
struct FireTime {
    at: String,
    local: String,
    /// The api's name for the DST note (`POST /v1/preview`), the one to rely on.
    #[serde(skip_serializing_if = "Option::is_none")]
    dst_note: Option<&'static str>,
    /// The same text under the CLI's first name, kept for the scripts that read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'static str>,
}

pub fn run(args: PreviewArgs) -> Result<ExitCode, CliError> {
    let after = instant_or_now("after", args.after.as_deref())?;
    if args.count > MAX_COUNT {
        return Err(CliError::msg(format!(
            "INVALID_ARGUMENT: --count {} is above the limit of {MAX_COUNT}",
            args.count
        )));
    }
    let timing = spec::validate_timing(&args.expr, &args.tz, &ValidationRules::default(), after)
        .map_err(|issues| {
            CliError(
                issues
                    .iter()
                    .map(|i| format!("{}: {}", i.code, i.message))
                    .collect(),
            )
        })?;
    let times: Vec<FireTime> = timing
        .next_n(after, args.count)
        .into_iter()
        .map(|at| FireTime {
            at: at.to_rfc3339_opts(SecondsFormat::Secs, true),
            local: at
                .with_timezone(&timing.tz())
                .to_rfc3339_opts(SecondsFormat::Secs, false),
            dst_note: timing.dst_note(at).map(|n| n.describe()),
            note: timing.dst_note(at).map(|n| n.describe()),
        })
        .collect();
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&times).map_err(|e| CliError::msg(e.to_string()))?
        ),
        Format::Text | Format::Table => {
            println!("{}", timing.describe());
            let mut table = Table::new(["#", "UTC", "local", "note"]);
            for (i, t) in times.iter().enumerate() {
                table.row([
                    (i + 1).to_string(),
                    t.at.clone(),
                    t.local.clone(),
                    t.dst_note.unwrap_or("").to_string(),
                ]);
            }
            print!("{table}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
