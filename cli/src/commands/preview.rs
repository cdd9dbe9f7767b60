use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use cronledger_core::{jitter, spec, Span, Timing, ValidationRules};
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
    /// With `--jitter`: when the ticker fires this occurrence (`at` plus the offset).
    #[serde(skip_serializing_if = "Option::is_none")]
    fire_at: Option<String>,
    /// With `--jitter`: the schedule's offset in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    offset_seconds: Option<u64>,
}

/// The schedule's jitter offset (`--jitter` with `--id`), validated as a manifest's would be.
fn offset_of(
    args: &PreviewArgs,
    timing: &Timing,
    after: DateTime<Utc>,
) -> Result<Option<Span>, CliError> {
    let (Some(jitter), Some(id)) = (&args.jitter, &args.id) else {
        return Ok(None);
    };
    let jitter: Span = jitter
        .parse()
        .map_err(|e| CliError::msg(format!("SCHEDULE_INVALID_DURATION: --jitter: {e}")))?;
    let min_gap = timing
        .calendar_stats(after, ValidationRules::default().horizon_days)
        .min_gap;
    if let Some(issue) = jitter::check(jitter, min_gap, "jitter") {
        return Err(CliError::msg(format!("{}: {}", issue.code, issue.message)));
    }
    Ok(Some(jitter::offset(id, jitter)))
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
    let offset = offset_of(&args, &timing, after)?;
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
            fire_at: offset.map(|o| (at + o.as_delta()).to_rfc3339_opts(SecondsFormat::Secs, true)),
            offset_seconds: offset.map(Span::as_secs),
        })
        .collect();
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&times).map_err(|e| CliError::msg(e.to_string()))?
        ),
        Format::Text | Format::Table => {
            println!("{}", timing.describe());
            if let (Some(offset), Some(id)) = (offset, &args.id) {
                println!(
                    "jitter: `{id}` fires {offset} after each occurrence (the run keeps the occurrence as its window and key)"
                );
            }
            // The jittered fire time gets its own column only when there is one.
            let mut header = vec!["#", "UTC", "local", "note"];
            if offset.is_some() {
                header.insert(3, "fires at (UTC)");
            }
            let mut table = Table::new(header);
            for (i, t) in times.iter().enumerate() {
                let mut row = vec![(i + 1).to_string(), t.at.clone(), t.local.clone()];
                row.extend(t.fire_at.clone());
                row.push(t.dst_note.unwrap_or("").to_string());
                table.row(row);
            }
            print!("{table}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
