use std::process::ExitCode;

use cronledger_core::{spec, Issue, ValidationRules};
use serde_json::json;

use super::{
    fleet_warnings, instant_or_now, issue_line, print_warnings, read_local_file, DEFAULT_LOCAL_URL,
};
use crate::args::{Format, ValidateArgs};
use crate::CliError;

pub fn run(args: ValidateArgs) -> Result<ExitCode, CliError> {
    let now = instant_or_now("now", args.now.as_deref())?;
    let rules = ValidationRules::local();
    let mut warnings = Vec::new();
    let outcome: Result<Vec<(String, String)>, Vec<Issue>> =
        match (&args.file, &args.cron, &args.tz) {
            (Some(path), _, _) => {
                let text = read_local_file(path, DEFAULT_LOCAL_URL)?;
                spec::parse_manifest(&text, &rules, now)
                    .map(|specs| {
                        warnings = fleet_warnings(&specs, now);
                        specs
                            .into_iter()
                            .map(|s| {
                                let described = cronledger_core::Schedule::new(s.clone())
                                    .map(|c| c.timing().describe())
                                    .unwrap_or_default();
                                (s.id, described)
                            })
                            .collect()
                    })
                    .map_err(|invalid| invalid.0)
            }
            (None, Some(cron), Some(tz)) => spec::validate_timing(cron, tz, &rules, now)
                .map(|timing| vec![(cron.clone(), timing.describe())]),
            _ => {
                return Err(CliError::msg(
                    "INVALID_ARGUMENT: give -f FILE, or --cron EXPR --tz ZONE",
                ))
            }
        };
    match (outcome, args.format) {
        (Ok(valid), Format::Json) => {
            let items: Vec<_> = valid
                .iter()
                .map(|(id, d)| json!({"id": id, "description": d}))
                .collect();
            println!(
                "{}",
                json!({"valid": true, "schedules": items, "issues": [], "warnings": warnings})
            );
            Ok(ExitCode::SUCCESS)
        }
        (Ok(valid), _) => {
            for (id, described) in valid {
                println!("OK {id}: {described}");
            }
            print_warnings(&warnings);
            Ok(ExitCode::SUCCESS)
        }
        (Err(issues), Format::Json) => {
            println!(
                "{}",
                json!({"valid": false, "schedules": [], "issues": issues})
            );
            Ok(ExitCode::from(1))
        }
        (Err(issues), _) => Err(CliError(issues.iter().map(issue_line).collect())),
    }
}
