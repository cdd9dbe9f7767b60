//! `apply` against the api: the file's plan (calendars, then schedules upstreams first,
//! then archives with `--prune`), printed, confirmed and sent step by step.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use cronledger_contract::{ChangeDiff, Note, ScheduleView};
use cronledger_core::dependency::chain;
use cronledger_core::risk::{RiskLevel, RiskReport};
use cronledger_core::ScheduleSpec;
use cronledger_ledger::ledger::ScheduleState;
use reqwest::Method;
use serde_json::{json, Value};

use super::args::{ApplyArgs, OutputFormat};
use super::client::{segment, Client};
use super::{all_schedules, calendars, cell, Listing};
use crate::commands::{fleet_warnings, load_manifest, print_warnings, read_file};
use crate::output::Table;
use crate::CliError;

/// One step of an apply plan; the documents are sent as the file has them (the api
/// validates them with its own codes).
enum Step {
    Create {
        id: String,
        doc: Value,
    },
    Update {
        id: String,
        version: u64,
        doc: Value,
        risk: Box<RiskReport>,
    },
    Archive {
        id: String,
        version: u64,
    },
}

impl Step {
    /// What the plan shows of it: action, schedule, the version it changes and the risk.
    fn planned(&self) -> (&'static str, &str, Option<u64>, Option<&RiskReport>) {
        match self {
            Step::Create { id, .. } => ("create", id, None, None),
            Step::Update {
                id, version, risk, ..
            } => ("update", id, Some(*version), Some(risk)),
            Step::Archive { id, version } => ("archive", id, Some(*version), None),
        }
    }
}

pub(super) async fn apply(a: ApplyArgs) -> Result<ExitCode, CliError> {
    let now = chrono::Utc::now();
    // Validate locally first (same rules as the api), then read the file as plain documents;
    // the validated specs (defaults filled in) are what the api stores, so they compare. A
    // calendar the file names and does not define is looked for among the stored ones.
    load_manifest(&a.file, now, &|_| true)?;
    let client = Client::connect(&a.remote).await?;
    let stored_calendars = calendars::stored(&client).await?;
    let manifest = load_manifest(&a.file, now, &|name| stored_calendars.contains_key(name))?;
    let validated = manifest.schedules;
    // Upstreams first: the api checks a schedule's `after` against the stored schedules (and
    // a dependent without `cron` inherits its grid from them), and an upstream always has
    // fewer schedules upstream of it than its dependents.
    let upstream_count: BTreeMap<String, usize> = validated
        .iter()
        .map(|spec| (spec.id.clone(), chain(&validated, &spec.id).upstream.len()))
        .collect();
    let warnings = fleet_warnings(&validated, now);
    print_warnings(&warnings);
    let specs: BTreeMap<String, ScheduleSpec> = validated
        .into_iter()
        .map(|spec| (spec.id.clone(), spec))
        .collect();
    // The manifest's documents, keyed by id (the file is valid: each has one).
    let doc = cronledger_core::spec::parse_document(&read_file(&a.file)?)?;
    let wanted: BTreeMap<String, Value> = doc
        .get("schedules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| {
            d.get("id")
                .and_then(Value::as_str)
                .map(|id| (id.to_string(), d.clone()))
        })
        .collect();
    let stored: BTreeMap<String, ScheduleView> = all_schedules(&client, Listing::SpecsOnly)
        .await?
        .into_iter()
        .map(|s| (s.id.clone(), s))
        .collect();
    let mut in_order: Vec<(&String, &Value)> = wanted.iter().collect();
    in_order.sort_by_key(|(id, _)| upstream_count.get(*id).copied().unwrap_or(0));
    let mut steps = Vec::new();
    for (id, doc) in in_order {
        match stored.get(id) {
            None => steps.push(Step::Create {
                id: id.clone(),
                doc: doc.clone(),
            }),
            // An archived schedule never changes again.
            Some(current) if current.state == ScheduleState::Archived => {}
            Some(current) if specs.get(id) == Some(&current.spec) => {}
            Some(current) => {
                let diff: ChangeDiff = client
                    .send(
                        Method::POST,
                        &format!("/v1/schedules/{}/diff", segment(id)),
                        doc,
                        &[],
                    )
                    .await?;
                steps.push(Step::Update {
                    id: id.clone(),
                    version: current.version,
                    doc: doc.clone(),
                    risk: Box::new(diff.report),
                });
            }
        }
    }
    let gone: BTreeSet<&String> = stored
        .iter()
        .filter(|(id, s)| !wanted.contains_key(*id) && s.state != ScheduleState::Archived)
        .map(|(id, _)| id)
        .collect();
    if a.prune {
        for id in &gone {
            steps.push(Step::Archive {
                id: (*id).clone(),
                version: stored[*id].version,
            });
        }
    }
    // The schedules once applied, which the calendar changes are shown on: the file's, and
    // the stored ones it leaves in place.
    let fleet: Vec<ScheduleSpec> = specs
        .values()
        .cloned()
        .chain(
            stored
                .iter()
                .filter(|(id, s)| {
                    !specs.contains_key(*id)
                        && s.state != ScheduleState::Archived
                        && !(a.prune && gone.contains(id))
                })
                .map(|(_, s)| s.spec.clone()),
        )
        .collect();
    let calendar_plan =
        calendars::plan(&stored_calendars, &manifest.calendars, &fleet, a.prune, now)?;
    let plan: Vec<Value> = steps
        .iter()
        .map(|step| match step.planned() {
            (action, id, None, _) => json!({"action": action, "id": id}),
            (action, id, Some(version), None) => {
                json!({"action": action, "id": id, "version": version})
            }
            (action, id, Some(version), Some(risk)) => {
                json!({"action": action, "id": id, "version": version, "risk": risk})
            }
        })
        .collect();
    let out = json!({"plan": plan, "not_in_file": gone, "applied": false, "warnings": warnings,
        "calendars": calendar_plan.changes, "calendars_not_in_file": calendar_plan.kept});
    if a.remote.format == OutputFormat::Table {
        for line in calendar_plan.lines() {
            println!("{line}");
        }
        let mut t = Table::new(["ACTION", "SCHEDULE", "VERSION", "RISK", "FINDINGS"]);
        for (action, id, version, risk) in steps.iter().map(Step::planned) {
            t.row([
                action.to_string(),
                id.to_string(),
                cell(&version),
                cell(&risk.map(|r| r.level)),
                risk.map(|r| r.findings.join("; ")).unwrap_or_default(),
            ]);
        }
        print!("{t}");
        if !a.prune && !gone.is_empty() {
            println!(
                "not in the file (archived only with --prune): {}",
                gone.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if steps.is_empty() && calendar_plan.is_empty() {
        if a.remote.format == OutputFormat::Json {
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        } else {
            println!("nothing to change");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !a.yes && !confirm()? {
        if a.remote.format == OutputFormat::Json {
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
        eprintln!("not applied (confirm, or pass --yes)");
        return Ok(ExitCode::from(1));
    }
    let reason = format!("cronledger apply -f {}", a.file.display());
    // Calendars first: a schedule naming one is accepted only once it is stored.
    let calendars_put = calendars::put_all(&client, &calendar_plan, &reason).await?;
    if a.remote.format == OutputFormat::Table {
        for c in &calendars_put {
            println!("calendar {} at version {}", c.name, c.version);
        }
    }
    let mut results = Vec::new();
    for step in steps {
        let result: ScheduleView = match step {
            Step::Create { doc, .. } => {
                client
                    .send(
                        Method::POST,
                        "/v1/schedules",
                        &doc,
                        &[("Cronledger-Note", reason.clone())],
                    )
                    .await?
            }
            Step::Update {
                id,
                version,
                doc,
                risk,
            } => {
                let mut headers = vec![
                    ("If-Match", format!("\"{version}\"")),
                    ("Cronledger-Note", reason.clone()),
                ];
                // The plan showed this risk and the user (or --yes) accepted it: say so, as
                // the api refuses an unconfirmed HIGH-risk change.
                if risk.level == RiskLevel::High {
                    headers.push(("X-Cronledger-Confirm", "high-risk".to_string()));
                }
                client
                    .send(
                        Method::PUT,
                        &format!("/v1/schedules/{}", segment(&id)),
                        &doc,
                        &headers,
                    )
                    .await?
            }
            Step::Archive { id, version } => {
                client
                    .send(
                        Method::POST,
                        &format!("/v1/schedules/{}/archive", segment(&id)),
                        &Note::new(reason.clone()),
                        &[("If-Match", format!("\"{version}\""))],
                    )
                    .await?
            }
        };
        if a.remote.format == OutputFormat::Table {
            println!(
                "{} at version {} ({})",
                result.id,
                result.version,
                cell(&result.state)
            );
        }
        results.push(result);
    }
    // Deleted last: no schedule the file keeps names them, and the archives are done.
    let calendars_deleted = calendars::delete_all(&client, &calendar_plan, &reason).await?;
    if a.remote.format == OutputFormat::Table {
        for c in &calendars_deleted {
            println!("calendar {} deleted (version {})", c.name, c.version);
        }
    }
    if a.remote.format == OutputFormat::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"plan": plan, "applied": true,
                "results": results, "calendars": calendar_plan.changes,
                "calendar_results": calendars_put, "calendars_deleted": calendars_deleted}))
            .unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn confirm() -> Result<bool, CliError> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    print!("apply these changes? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError::msg(format!("REMOTE_STDIN: {e}")))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}
