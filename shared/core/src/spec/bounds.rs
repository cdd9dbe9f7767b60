//! Reads a schedule's calendars, own excluded dates, bounds and DST choice (see
//! [`crate::calendar`] and [`crate::dst`]), each problem with its stable code.

use serde_json::{Map, Value};

use crate::calendar::{valid_calendar_name, Bound, DateSel, MAX_EXCLUDE_ENTRIES, MAX_RUNS_LIMIT};
use crate::dst::DstChoice;
use crate::error::{Code, Issue};

/// What the fields say, defaults where absent or unreadable (the issues say which).
#[derive(Debug, Default)]
pub(super) struct Read {
    pub calendars: Vec<String>,
    pub exclude: Vec<DateSel>,
    pub start_at: Option<Bound>,
    pub end_at: Option<Bound>,
    pub max_runs: Option<u32>,
    pub dst: DstChoice,
}

pub(super) fn read(
    obj: &Map<String, Value>,
    field: &dyn Fn(&str) -> String,
    issues: &mut Vec<Issue>,
) -> Read {
    let mut read = Read::default();
    match obj.get("calendars") {
        None | Some(Value::Null) => {}
        Some(Value::Array(names)) => {
            for (i, name) in names.iter().enumerate() {
                match name.as_str() {
                    Some(n) if valid_calendar_name(n) && !read.calendars.iter().any(|c| c == n) => {
                        read.calendars.push(n.to_string())
                    }
                    _ => issues.push(Issue::new(
                        Code::CalendarInvalid,
                        format!("{}[{i}]", field("calendars")),
                        format!("`calendars` lists distinct calendar names ([a-z0-9-]{{1,64}}), found {name}"),
                    )),
                }
            }
        }
        Some(other) => issues.push(Issue::new(
            Code::CalendarInvalid,
            field("calendars"),
            format!("`calendars` is a list of calendar names, found {other}"),
        )),
    }
    match obj.get("exclude") {
        None | Some(Value::Null) => {}
        Some(Value::Array(entries)) if entries.len() <= MAX_EXCLUDE_ENTRIES => {
            for (i, entry) in entries.iter().enumerate() {
                match entry.as_str().map(str::parse::<DateSel>) {
                    Some(Ok(sel)) => read.exclude.push(sel),
                    Some(Err(e)) => issues.push(Issue::new(
                        Code::ScheduleInvalidExclude,
                        format!("{}[{i}]", field("exclude")),
                        e,
                    )),
                    None => issues.push(Issue::new(
                        Code::ScheduleInvalidExclude,
                        format!("{}[{i}]", field("exclude")),
                        format!("an excluded date is a string like \"2026-12-25\" or \"2026-12-24..2026-12-26\", found {entry}"),
                    )),
                }
            }
        }
        Some(Value::Array(_)) => issues.push(Issue::new(
            Code::ScheduleInvalidExclude,
            field("exclude"),
            format!("at most {MAX_EXCLUDE_ENTRIES} entries"),
        )),
        Some(other) => issues.push(Issue::new(
            Code::ScheduleInvalidExclude,
            field("exclude"),
            format!("`exclude` is a list of dates or date ranges, found {other}"),
        )),
    }
    let mut bound = |name: &str| match obj.get(name) {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => match text.parse::<Bound>() {
            Ok(b) => Some(b),
            Err(e) => {
                issues.push(Issue::new(Code::ScheduleInvalidBounds, field(name), e));
                None
            }
        },
        Some(other) => {
            issues.push(Issue::new(
                Code::ScheduleInvalidBounds,
                field(name),
                format!("`{name}` is an RFC3339 instant or a date, found {other}"),
            ));
            None
        }
    };
    read.start_at = bound("start_at");
    read.end_at = bound("end_at");
    match obj.get("max_runs") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_u64() {
            Some(n) if (1..=u64::from(MAX_RUNS_LIMIT)).contains(&n) => {
                read.max_runs = Some(n as u32)
            }
            _ => issues.push(Issue::new(
                Code::ScheduleInvalidBounds,
                field("max_runs"),
                format!("`max_runs` is a whole number from 1 to {MAX_RUNS_LIMIT}, found {v}"),
            )),
        },
    }
    match obj.get("dst") {
        None | Some(Value::Null) => {}
        Some(v) => match serde_json::from_value::<DstChoice>(v.clone()) {
            Ok(choice) => read.dst = choice,
            Err(e) => issues.push(Issue::new(
                Code::ScheduleInvalidDst,
                field("dst"),
                format!("`dst` is `{{gap: next_valid | skip, fold: first | both}}`: {e}"),
            )),
        },
    }
    read
}

/// `end_at` before `start_at` (both resolved in the schedule's zone) can never hold a window.
pub(super) fn check_order(
    read: &Read,
    tz: chrono_tz::Tz,
    field: &dyn Fn(&str) -> String,
    issues: &mut Vec<Issue>,
) {
    if let (Some(start), Some(end)) = (read.start_at, read.end_at) {
        if end.resolve(tz) < start.resolve(tz) {
            issues.push(Issue::new(
                Code::ScheduleInvalidBounds,
                field("end_at"),
                format!("`end_at` ({end}) is before `start_at` ({start})"),
            ));
        }
    }
}
