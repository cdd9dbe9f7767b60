use std::process::ExitCode;

use cronledger_core::risk::{assess_change, RiskReport};
use cronledger_core::window::utc_text;
use serde::Serialize;

use super::calendars::{calendar_changes, CalendarChange};
use super::{instant_or_now, load_local, DEFAULT_LOCAL_URL};
use crate::args::{DiffArgs, Format};
use crate::CliError;

#[derive(Serialize)]
#[serde(tag = "change", rename_all = "SCREAMING_SNAKE_CASE")]
enum Change {
    Create {
        id: String,
    },
    Archive {
        id: String,
    },
    Update {
        id: String,
        risk: Box<RiskReport>,
    },
    Unchanged {
        id: String,
    },
    /// A calendar created, replaced or deleted, with the windows it moves in the schedules
    /// naming it.
    Calendar(CalendarChange),
}

pub fn run(args: DiffArgs) -> Result<ExitCode, CliError> {
    let now = instant_or_now("now", args.now.as_deref())?;
    let old_manifest = load_local(&args.old, now, DEFAULT_LOCAL_URL)?;
    let new_manifest = load_local(&args.new, now, DEFAULT_LOCAL_URL)?;
    let (old, new) = (&old_manifest.schedules, &new_manifest.schedules);
    // Calendars first: the schedules naming them are judged with them in place.
    let mut changes: Vec<Change> =
        calendar_changes(&old_manifest.calendars, &new_manifest.calendars, new, now)?
            .into_iter()
            .map(Change::Calendar)
            .collect();
    for n in new {
        match old.iter().find(|o| o.id == n.id) {
            None => changes.push(Change::Create { id: n.id.clone() }),
            Some(o) if o == n => changes.push(Change::Unchanged { id: n.id.clone() }),
            Some(o) => changes.push(Change::Update {
                id: n.id.clone(),
                risk: Box::new(assess_change(o, n, now, None, args.count)?),
            }),
        }
    }
    for o in old.iter().filter(|o| !new.iter().any(|n| n.id == o.id)) {
        changes.push(Change::Archive { id: o.id.clone() });
    }
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&changes).map_err(|e| CliError::msg(e.to_string()))?
        ),
        Format::Text | Format::Table => changes.iter().for_each(print_change),
    }
    Ok(ExitCode::SUCCESS)
}

fn print_change(change: &Change) {
    match change {
        Change::Create { id } => println!("+ create {id}"),
        Change::Archive { id } => println!("- archive {id} (its runs stay readable)"),
        Change::Unchanged { id } => println!("= unchanged {id}"),
        Change::Calendar(c) => c.lines().iter().for_each(|line| println!("{line}")),
        Change::Update { id, risk } => {
            println!("~ update {id}: risk {:?}", risk.level);
            println!(
                "    runs/day {:.2} -> {:.2} (max {} -> {}), x{:.2}",
                risk.before.avg_per_day,
                risk.after.avg_per_day,
                risk.before.max_per_day,
                risk.after.max_per_day,
                risk.frequency_ratio
            );
            for finding in &risk.findings {
                println!("    - {finding}");
            }
            println!("    next fire times   before                      after");
            let rows = risk.next_before.len().max(risk.next_after.len());
            for i in 0..rows {
                let cell = |v: &[cronledger_core::risk::FireTime]| {
                    v.get(i).map(|t| t.local.clone()).unwrap_or_default()
                };
                println!(
                    "                      {:<27} {}",
                    cell(&risk.next_before),
                    cell(&risk.next_after)
                );
            }
            if let (Some(at), Some(w)) = (risk.first_new_fire, risk.first_new_window) {
                println!(
                    "    first new run {} covers [{}, {}){}",
                    utc_text(at),
                    utc_text(w.start),
                    utc_text(w.end),
                    if risk.overlaps_recorded {
                        "; it reaches back before the last recorded run"
                    } else {
                        ""
                    }
                );
            }
            let switch = [
                (
                    "data gap at the switch",
                    risk.window_gap,
                    "no run covers it",
                ),
                (
                    "data overlap at the switch",
                    risk.window_overlap,
                    "two runs cover it",
                ),
            ];
            for (what, span, meaning) in switch {
                match span {
                    Some(s) => println!(
                        "    {what}: [{}, {}) ({}): {meaning}",
                        utc_text(s.start),
                        utc_text(s.end),
                        s.duration
                    ),
                    None => println!("    {what}: none"),
                }
            }
            println!(
                "    already-past windows re-fired: {}",
                if risk.refires_past_window {
                    "YES"
                } else {
                    "none"
                }
            );
        }
    }
}
