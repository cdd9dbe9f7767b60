//! Calendars through the api: `cronledger calendars list|get NAME`, and `apply`'s part of a
//! manifest's calendars (planned against the stored ones, put before the schedules that
//! name them, deleted with `--prune` after the schedules are settled).

use std::collections::BTreeMap;
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use cronledger_contract::{CalendarDeleted, CalendarList, CalendarView};
use cronledger_core::calendar::CalendarSet;
use cronledger_core::window::utc_text;
use cronledger_core::ScheduleSpec;
use reqwest::Method;
use serde::Serialize;

use super::args::{CalendarsArgs, CalendarsCommand};
use super::client::{segment, Client};
use super::print;
use crate::commands::calendars::{calendar_changes, CalendarChange, CalendarEdit};
use crate::output::Table;
use crate::CliError;

pub async fn calendars(a: CalendarsArgs) -> Result<ExitCode, CliError> {
    match a.command {
        CalendarsCommand::List(args) => {
            let client = Client::connect(&args.remote).await?;
            let list: CalendarList = client.get("/v1/calendars").await?;
            print(args.remote.format, &list, |l| table(&l.items));
        }
        CalendarsCommand::Get(args) => {
            let client = Client::connect(&args.remote).await?;
            let path = format!("/v1/calendars/{}", segment(&args.name));
            let one: CalendarView = client.get(&path).await?;
            print(args.remote.format, &one, |c| {
                let mut out = table(std::slice::from_ref(c));
                out.extend(c.exclude.iter().map(|d| format!("  {d}\n")));
                out
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn table(items: &[CalendarView]) -> String {
    let mut t = Table::new(["CALENDAR", "VERSION", "DATES", "UPDATED", "BY"]);
    for c in items {
        t.row([
            c.name.clone(),
            c.version.to_string(),
            c.exclude.len().to_string(),
            utc_text(c.updated_at),
            c.updated_by.clone(),
        ]);
    }
    t.to_string()
}

/// Every stored calendar, by name.
pub async fn stored(client: &Client) -> Result<BTreeMap<String, CalendarView>, CliError> {
    let list: CalendarList = client.get("/v1/calendars").await?;
    Ok(list
        .items
        .into_iter()
        .map(|c| (c.name.clone(), c))
        .collect())
}

/// One calendar change `apply` makes, and the version it is based on.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedCalendar {
    #[serde(flatten)]
    pub change: CalendarChange,
    /// The stored version an update or delete is based on (its `If-Match`).
    pub version: Option<u64>,
}

/// What `apply` does to the calendars.
#[derive(Debug, Clone, Default)]
pub struct CalendarPlan {
    pub changes: Vec<PlannedCalendar>,
    /// Stored calendars the file does not have, left as they are (without `--prune`, or
    /// while a schedule still names them).
    pub kept: Vec<String>,
}

impl CalendarPlan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The plan for people: each change, with the windows it moves.
    pub fn lines(&self) -> Vec<String> {
        self.changes.iter().flat_map(|p| p.change.lines()).collect()
    }
}

/// The manifest's calendars against the stored ones: each one the file has and the store
/// has not, or has otherwise, is put; with `prune`, each stored one the file does not have
/// and no schedule of `fleet` (the schedules once applied) names is deleted. Each change
/// lists the windows it moves in `fleet`'s schedules over the next days.
pub fn plan(
    stored: &BTreeMap<String, CalendarView>,
    wanted: &CalendarSet,
    fleet: &[ScheduleSpec],
    prune: bool,
    now: DateTime<Utc>,
) -> Result<CalendarPlan, CliError> {
    let before = CalendarSet(stored.iter().map(|(n, c)| (n.clone(), c.spec())).collect());
    let mut after = before.clone();
    after.0.extend(wanted.0.clone());
    let mut kept = Vec::new();
    for name in stored.keys().filter(|n| !wanted.contains(n)) {
        let named = fleet.iter().any(|s| s.calendars.contains(name));
        if prune && !named {
            after.0.remove(name);
        } else {
            kept.push(name.clone());
        }
    }
    let changes = calendar_changes(&before, &after, fleet, now)?
        .into_iter()
        .filter(|c| c.action != CalendarEdit::Unchanged)
        .map(|change| PlannedCalendar {
            version: stored.get(&change.calendar).map(|c| c.version),
            change,
        })
        .collect();
    Ok(CalendarPlan { changes, kept })
}

/// A planned change's path and headers: the note, and the version it is based on.
fn request<'a>(p: &PlannedCalendar, note: &str) -> (String, Vec<(&'a str, String)>) {
    let mut headers = vec![("Cronledger-Note", note.to_string())];
    if let Some(version) = p.version {
        headers.push(("If-Match", format!("\"{version}\"")));
    }
    let path = format!("/v1/calendars/{}", segment(&p.change.calendar));
    (path, headers)
}

/// Puts the plan's created and replaced calendars, each under the version planned.
pub async fn put_all(
    client: &Client,
    plan: &CalendarPlan,
    note: &str,
) -> Result<Vec<CalendarView>, CliError> {
    let mut done = Vec::new();
    for p in &plan.changes {
        let Some(spec) = p.change.after.as_ref() else {
            continue;
        };
        let (path, headers) = request(p, note);
        done.push(client.send(Method::PUT, &path, spec, &headers).await?);
    }
    Ok(done)
}

/// Deletes the plan's deleted calendars, each under the version planned.
pub async fn delete_all(
    client: &Client,
    plan: &CalendarPlan,
    note: &str,
) -> Result<Vec<CalendarDeleted>, CliError> {
    let mut done = Vec::new();
    for p in plan.changes.iter().filter(|p| p.change.after.is_none()) {
        let (path, headers) = request(p, note);
        done.push(client.delete(&path, &headers).await?);
    }
    Ok(done)
}
