//! Calendars and bounds: the days a schedule does not run, and the instants it starts and
//! ends.
//!
//! An excluded window is accounted, not missing: the paths that create runs record it
//! SKIPPED (EXCLUDED) through the rule book, so the ledger says why nothing ran. Bounds are
//! different: a window outside `start_at`..`end_at` is not a window of the schedule at all
//! (nothing is recorded; the auditor expects nothing there).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDate, NaiveTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Code, Issue};

/// One excluded local date, or an inclusive range of them (`"2026-12-24..2026-12-26"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateSel {
    pub first: NaiveDate,
    pub last: NaiveDate,
}

impl DateSel {
    pub fn day(date: NaiveDate) -> DateSel {
        DateSel {
            first: date,
            last: date,
        }
    }

    pub fn contains(&self, date: NaiveDate) -> bool {
        self.first <= date && date <= self.last
    }

    /// Days the selection covers.
    pub fn days(&self) -> i64 {
        (self.last - self.first).num_days() + 1
    }
}

/// Longest range one entry may name: a decade, beyond any holiday list.
const MAX_RANGE_DAYS: i64 = 3660;

impl FromStr for DateSel {
    type Err = String;

    fn from_str(s: &str) -> Result<DateSel, String> {
        let date = |t: &str| {
            NaiveDate::parse_from_str(t.trim(), "%Y-%m-%d")
                .map_err(|_| format!("`{t}` is not a date like 2026-12-25"))
        };
        let sel = match s.split_once("..") {
            Some((a, b)) => DateSel {
                first: date(a)?,
                last: date(b)?,
            },
            None => DateSel::day(date(s)?),
        };
        if sel.last < sel.first {
            return Err(format!("`{s}` ends before it starts"));
        }
        if sel.days() > MAX_RANGE_DAYS {
            return Err(format!("`{s}` spans more than {MAX_RANGE_DAYS} days"));
        }
        Ok(sel)
    }
}

impl fmt::Display for DateSel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first.format("%Y-%m-%d"))
        } else {
            write!(
                f,
                "{}..{}",
                self.first.format("%Y-%m-%d"),
                self.last.format("%Y-%m-%d")
            )
        }
    }
}

impl Serialize for DateSel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DateSel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DateSel, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for DateSel {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DateSel".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A local date (`2026-12-25`) or an inclusive range (`2026-12-24..2026-12-26`), in the schedule's time zone.",
            "pattern": "^\\d{4}-\\d{2}-\\d{2}(\\.\\.\\d{4}-\\d{2}-\\d{2})?$"
        })
    }
}

/// A named calendar: the local dates schedules that use it do not run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarSpec {
    #[serde(default)]
    pub exclude: Vec<DateSel>,
}

impl CalendarSpec {
    pub fn excludes(&self, date: NaiveDate) -> bool {
        self.exclude.iter().any(|sel| sel.contains(date))
    }
}

/// Most entries one calendar (or one schedule's own `exclude`) may list.
pub const MAX_EXCLUDE_ENTRIES: usize = 1000;

/// Calendar names: as schedule ids.
pub fn valid_calendar_name(name: &str) -> bool {
    crate::spec::valid_id(name)
}

/// Checks a calendar as written (`field` names it in messages).
pub fn check_calendar(name: &str, spec: &CalendarSpec, field: &str) -> Vec<Issue> {
    let mut issues = Vec::new();
    if !valid_calendar_name(name) {
        issues.push(Issue::new(
            Code::CalendarInvalid,
            field,
            format!("calendar name `{name}` must match [a-z0-9-]{{1,64}}"),
        ));
    }
    if spec.exclude.len() > MAX_EXCLUDE_ENTRIES {
        issues.push(Issue::new(
            Code::CalendarInvalid,
            format!("{field}.exclude"),
            format!("at most {MAX_EXCLUDE_ENTRIES} entries"),
        ));
    }
    issues
}

/// Reads a calendar from its document (`{exclude: [...]}`), with stable codes.
pub fn read_calendar(
    name: &str,
    value: &serde_json::Value,
    field: &str,
) -> Result<CalendarSpec, Vec<Issue>> {
    let spec = serde_json::from_value::<CalendarSpec>(value.clone()).map_err(|e| {
        vec![Issue::new(
            Code::CalendarInvalid,
            field,
            format!("a calendar is `{{exclude: [DATE | \"DATE..DATE\"]}}`: {e}"),
        )]
    })?;
    let issues = check_calendar(name, &spec, field);
    if issues.is_empty() {
        Ok(spec)
    } else {
        Err(issues)
    }
}

/// The calendars in force, by name: what the paths that create runs consult.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct CalendarSet(pub BTreeMap<String, CalendarSpec>);

impl CalendarSet {
    pub fn get(&self, name: &str) -> Option<&CalendarSpec> {
        self.0.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// Which of `names` (a schedule's) are not defined here.
    pub fn unknown<'a>(&self, names: &'a [String]) -> Vec<&'a str> {
        names
            .iter()
            .filter(|n| !self.contains(n))
            .map(String::as_str)
            .collect()
    }
}

/// A CALENDAR_UNKNOWN issue for each of a schedule's `calendars` that `known` does not
/// define, naming its field (`calendars[0]`, under `prefix` when the schedule is one of a
/// manifest's: `schedules[nightly].calendars[0]`).
pub fn unknown_calendars(
    calendars: &[String],
    known: &dyn Fn(&str) -> bool,
    prefix: &str,
) -> Vec<Issue> {
    let field = if prefix.is_empty() {
        "calendars".to_string()
    } else {
        format!("{prefix}.calendars")
    };
    calendars
        .iter()
        .enumerate()
        .filter(|(_, name)| !known(name))
        .map(|(i, name)| {
            Issue::new(
                Code::CalendarUnknown,
                format!("{field}[{i}]"),
                format!("calendar `{name}` is not defined (define it under `calendars:` or PUT /v1/calendars/{name})"),
            )
        })
        .collect()
}

/// Where a schedule's window may start or end: an RFC3339 instant, or a date meaning
/// midnight in the schedule's zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Instant(DateTime<Utc>),
    Date(NaiveDate),
}

impl Bound {
    /// The instant in `tz`: a date is its local midnight (the first instant of the date when
    /// a DST gap swallows midnight).
    pub fn resolve(self, tz: Tz) -> DateTime<Utc> {
        match self {
            Bound::Instant(t) => t,
            Bound::Date(d) => local_day_start(d, tz),
        }
    }
}

/// The first instant of a local date (midnight, or the end of the gap that swallowed it).
pub fn local_day_start(date: NaiveDate, tz: Tz) -> DateTime<Utc> {
    let mut wall = date.and_time(NaiveTime::MIN);
    for _ in 0..(26 * 60) {
        match tz.from_local_datetime(&wall) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => return t.with_timezone(&Utc),
            LocalResult::None => wall += TimeDelta::minutes(1),
        }
    }
    // A zone that skipped the whole date (Samoa, 2011): the next date's start.
    date.succ_opt()
        .map_or(DateTime::<Utc>::MAX_UTC, |next| local_day_start(next, tz))
}

impl FromStr for Bound {
    type Err = String;

    fn from_str(s: &str) -> Result<Bound, String> {
        if let Ok(t) = DateTime::parse_from_rfc3339(s.trim()) {
            return Ok(Bound::Instant(t.with_timezone(&Utc)));
        }
        NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
            .map(Bound::Date)
            .map_err(|_| {
                format!("`{s}` is neither an RFC3339 instant (2027-01-01T00:00:00Z) nor a date (2027-01-01)")
            })
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Instant(t) => write!(
                f,
                "{}",
                t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
            ),
            Bound::Date(d) => write!(f, "{}", d.format("%Y-%m-%d")),
        }
    }
}

impl Serialize for Bound {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Bound {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bound, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Bound {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Bound".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "An RFC3339 instant, or a date (`2027-01-01`) meaning midnight in the schedule's time zone.",
        })
    }
}

/// Most windows `max_runs` may allow: the end is found by walking them once.
pub const MAX_RUNS_LIMIT: u32 = 100_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_selection_reads_one_day_or_an_inclusive_range() {
        let day: DateSel = "2026-12-25".parse().unwrap();
        assert_eq!(day.days(), 1);
        let range: DateSel = "2026-12-24..2026-12-26".parse().unwrap();
        assert_eq!(range.days(), 3);
        assert!(range.contains(NaiveDate::from_ymd_opt(2026, 12, 26).unwrap()));
        assert!(!range.contains(NaiveDate::from_ymd_opt(2026, 12, 27).unwrap()));
        assert_eq!(range.to_string(), "2026-12-24..2026-12-26");
        assert!("2026-12-26..2026-12-24".parse::<DateSel>().is_err());
        assert!("2026-13-01".parse::<DateSel>().is_err());
        assert!("christmas".parse::<DateSel>().is_err());
    }

    #[test]
    fn each_unknown_calendar_is_named_by_its_position() {
        let known = |name: &str| name == "holidays";
        let names = ["holidays".to_string(), "closures".to_string()];
        let issues = unknown_calendars(&names, &known, "");
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].code, Code::CalendarUnknown);
        assert_eq!(issues[0].field, "calendars[1]");
        let issues = unknown_calendars(&names, &|_| false, "schedules[nightly]");
        let fields: Vec<&str> = issues.iter().map(|i| i.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "schedules[nightly].calendars[0]",
                "schedules[nightly].calendars[1]"
            ]
        );
    }

    #[test]
    fn a_date_bound_is_local_midnight_and_an_instant_is_itself() {
        let seoul: Tz = "Asia/Seoul".parse().unwrap();
        let date: Bound = "2027-01-01".parse().unwrap();
        assert_eq!(
            date.resolve(seoul).to_rfc3339(),
            "2026-12-31T15:00:00+00:00"
        );
        let instant: Bound = "2027-01-01T09:30:00+09:00".parse().unwrap();
        assert_eq!(
            instant.resolve(seoul).to_rfc3339(),
            "2027-01-01T00:30:00+00:00"
        );
        assert!("soon".parse::<Bound>().is_err());
    }

    #[test]
    fn a_date_bound_on_a_day_whose_midnight_does_not_exist_is_the_first_instant_after_the_gap() {
        // Santiago springs forward at 00:00 local (to 01:00) on 2026-09-06.
        let santiago: Tz = "America/Santiago".parse().unwrap();
        let start = Bound::Date(NaiveDate::from_ymd_opt(2026, 9, 6).unwrap()).resolve(santiago);
        assert_eq!(start.to_rfc3339(), "2026-09-06T04:00:00+00:00");
    }
}
