//! What a change of calendars does, for `diff` and `apply`: which calendars are created,
//! replaced or deleted, and for each schedule naming a changed one the windows of the next
//! [`HORIZON_DAYS`] days the change excludes or no longer excludes (each schedule's windows,
//! enumerated within its bounds, with the calendars before and after).

use std::collections::BTreeSet;

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_core::calendar::{CalendarSet, CalendarSpec};
use cronledger_core::window::utc_text;
use cronledger_core::{Issue, Schedule, ScheduleSpec};
use serde::Serialize;

/// How far ahead a calendar change's effect on windows is shown.
pub const HORIZON_DAYS: i64 = 30;

/// A window a calendar change excludes (`excluded: true`) or gives back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowChange {
    pub at: DateTime<Utc>,
    pub excluded: bool,
}

impl WindowChange {
    /// `+ 2026-12-25T02:00:00Z excluded` or `- ... no longer excluded`.
    pub fn line(&self) -> String {
        if self.excluded {
            format!("+ {} excluded", utc_text(self.at))
        } else {
            format!("- {} no longer excluded", utc_text(self.at))
        }
    }
}

/// One schedule's windows a change of calendars moves in or out of its exclusions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleWindows {
    pub schedule: String,
    pub windows: Vec<WindowChange>,
}

/// What happens to one calendar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CalendarEdit {
    Create,
    Update,
    Delete,
    Unchanged,
}

/// One calendar's change, with its effect on the schedules naming it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CalendarChange {
    pub calendar: String,
    pub action: CalendarEdit,
    pub before: Option<CalendarSpec>,
    pub after: Option<CalendarSpec>,
    /// The schedules naming it whose windows over the next days the change moves.
    pub schedules: Vec<ScheduleWindows>,
}

impl CalendarChange {
    /// The change for people: a line for the calendar, a line per window it moves.
    pub fn lines(&self) -> Vec<String> {
        let name = &self.calendar;
        let dates = |spec: &Option<CalendarSpec>| spec.as_ref().map_or(0, |s| s.exclude.len());
        let mut lines = vec![match self.action {
            CalendarEdit::Create => format!(
                "+ create calendar {name} ({} dates or ranges)",
                dates(&self.after)
            ),
            CalendarEdit::Update => format!(
                "~ update calendar {name} ({} -> {} dates or ranges)",
                dates(&self.before),
                dates(&self.after)
            ),
            CalendarEdit::Delete => format!("- delete calendar {name}"),
            CalendarEdit::Unchanged => format!("= unchanged calendar {name}"),
        }];
        for s in &self.schedules {
            lines.push(format!(
                "    {}: over the next {HORIZON_DAYS} days",
                s.schedule
            ));
            lines.extend(s.windows.iter().map(|w| format!("      {}", w.line())));
        }
        lines
    }
}

/// The windows of `spec` in `(from, from + HORIZON_DAYS]` excluded under one set of
/// calendars and not under the other, in order.
pub fn window_changes(
    spec: &ScheduleSpec,
    before: &CalendarSet,
    after: &CalendarSet,
    from: DateTime<Utc>,
) -> Result<Vec<WindowChange>, Issue> {
    let old = Schedule::new(spec.clone())?.with_calendars(before);
    let new = Schedule::new(spec.clone())?.with_calendars(after);
    let until = from + TimeDelta::days(HORIZON_DAYS);
    Ok(new
        .between(from, until)
        .filter_map(|at| {
            let (was, is) = (old.excluded(at), new.excluded(at));
            (was != is).then_some(WindowChange { at, excluded: is })
        })
        .collect())
}

/// Every calendar in `before` or `after` and what happens to it, by name; for each changed
/// one, the schedules of `specs` naming it whose windows move (none listed when none do).
pub fn calendar_changes(
    before: &CalendarSet,
    after: &CalendarSet,
    specs: &[ScheduleSpec],
    from: DateTime<Utc>,
) -> Result<Vec<CalendarChange>, Issue> {
    let names: BTreeSet<&String> = before.0.keys().chain(after.0.keys()).collect();
    let mut changes = Vec::new();
    for name in names {
        let (old, new) = (before.get(name), after.get(name));
        let action = match (old, new) {
            (None, Some(_)) => CalendarEdit::Create,
            (Some(_), None) => CalendarEdit::Delete,
            (Some(o), Some(n)) if o != n => CalendarEdit::Update,
            _ => CalendarEdit::Unchanged,
        };
        let mut schedules = Vec::new();
        if action != CalendarEdit::Unchanged {
            // This calendar's change alone: every other calendar as it will be.
            let mut only_this = after.clone();
            match old {
                Some(o) => only_this.0.insert(name.clone(), o.clone()),
                None => only_this.0.remove(name),
            };
            for spec in specs.iter().filter(|s| s.calendars.contains(name)) {
                let windows = window_changes(spec, &only_this, after, from)?;
                if !windows.is_empty() {
                    schedules.push(ScheduleWindows {
                        schedule: spec.id.clone(),
                        windows,
                    });
                }
            }
        }
        changes.push(CalendarChange {
            calendar: name.clone(),
            action,
            before: old.cloned(),
            after: new.cloned(),
            schedules,
        });
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str, calendars: &[&str]) -> ScheduleSpec {
        let doc = serde_json::json!({"id": id, "cron": "0 2 * * *", "timezone": "Asia/Seoul",
            "calendars": calendars, "job": {"type": "noop"}});
        let now: DateTime<Utc> = "2026-12-01T00:00:00Z".parse().expect("instant");
        cronledger_core::spec::validate_schedule(
            &doc,
            "",
            &cronledger_core::ValidationRules::default(),
            now,
        )
        .expect("valid")
    }

    fn set(entries: &[(&str, &[&str])]) -> CalendarSet {
        CalendarSet(
            entries
                .iter()
                .map(|(name, dates)| {
                    let exclude = dates.iter().map(|d| d.parse().expect("date")).collect();
                    (name.to_string(), CalendarSpec { exclude })
                })
                .collect(),
        )
    }

    #[test]
    fn a_changed_calendar_shows_the_windows_it_adds_and_gives_back_in_the_schedules_zone() {
        let from: DateTime<Utc> = "2026-12-01T00:00:00Z".parse().expect("instant");
        let before = set(&[("kr", &["2026-12-24"]), ("other", &[])]);
        let after = set(&[
            ("kr", &["2026-12-25..2026-12-26", "2027-06-01"]),
            ("new", &[]),
        ]);
        let specs = [spec("settle", &["kr"]), spec("unrelated", &[])];
        let changes = calendar_changes(&before, &after, &specs, from).expect("changes");
        let kinds: Vec<(&str, &CalendarEdit)> = changes
            .iter()
            .map(|c| (c.calendar.as_str(), &c.action))
            .collect();
        assert_eq!(
            kinds,
            [
                ("kr", &CalendarEdit::Update),
                ("new", &CalendarEdit::Create),
                ("other", &CalendarEdit::Delete)
            ]
        );
        // 02:00 in Seoul is 17:00 UTC the day before; 2027-06-01 is past the horizon.
        let kr = &changes[0];
        assert_eq!(kr.schedules.len(), 1, "{kr:?}");
        let lines: Vec<String> = kr.schedules[0]
            .windows
            .iter()
            .map(WindowChange::line)
            .collect();
        assert_eq!(
            lines,
            [
                "- 2026-12-23T17:00:00Z no longer excluded",
                "+ 2026-12-24T17:00:00Z excluded",
                "+ 2026-12-25T17:00:00Z excluded"
            ]
        );
        assert!(changes[1].schedules.is_empty() && changes[2].schedules.is_empty());
        let unchanged = calendar_changes(&after, &after, &specs, from).expect("none");
        assert!(unchanged
            .iter()
            .all(|c| c.action == CalendarEdit::Unchanged && c.schedules.is_empty()));
    }
}
