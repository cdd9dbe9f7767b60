//! When a schedule fires: cron (5-field POSIX, macros, EventBridge `cron(...)`) or
//! EventBridge `rate(...)`, evaluated in an IANA time zone.
//!
//! DST rules (see README "Daylight saving time"), by default:
//! - spring-forward gap: a fixed-time expression (one minute, one hour) fires once, at the
//!   first instant after the gap; interval expressions have no slots in the missing hour;
//! - fall-back overlap: a fixed-time expression fires once, on the first pass; interval
//!   expressions fire in both passes;
//! - the next occurrence is searched strictly after a UTC instant; results are UTC.
//!
//! A schedule may choose otherwise (`dst: {gap, fold}`, [`crate::dst`]); croner's search is
//! the default and [`dst`] applies any other choice around it.
//!
//! `rate(...)` is elapsed time, not wall-clock time: it ignores DST and is anchored at the
//! Unix epoch, so `rate(5 minutes)` fires at :00, :05, ... UTC whatever the zone.

use std::fmt;

use chrono::{DateTime, LocalResult, NaiveDate, NaiveTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::{Cron, JobType};
use serde::{Deserialize, Serialize};

use crate::dst::DstChoice;
use crate::error::{Code, Issue};
use crate::span::Span;

mod dst;

/// A parsed, compiled expression in its zone. Parse once, evaluate many times.
#[derive(Debug, Clone)]
pub struct Timing {
    source: String,
    tz: Tz,
    kind: Kind,
    /// The schedule's DST choice (see [`crate::dst`]); default: the documented rule.
    dst: DstChoice,
}

#[derive(Debug, Clone)]
enum Kind {
    Cron { cron: Box<Cron>, fixed_time: bool },
    Rate { every: Span },
}

/// Why the expression moved or repeated an occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DstNote {
    /// The wall-clock time did not exist (spring forward); this is the first instant after the gap.
    ShiftedPastGap,
    /// The wall-clock time happens twice (fall back); this occurrence is the first pass.
    FirstPass,
    /// The wall-clock time happens twice (fall back); this occurrence is the second pass.
    SecondPass,
}

impl DstNote {
    /// The note in words, without the rule that produced it (see
    /// [`Timing::describe_dst_note`]).
    pub fn describe(self) -> &'static str {
        match self {
            DstNote::ShiftedPastGap => {
                "DST gap: the scheduled local time does not exist; runs at the first instant after the gap"
            }
            DstNote::FirstPass => "DST overlap: this local time happens twice; first pass",
            DstNote::SecondPass => "DST overlap: this local time happens twice; second pass",
        }
    }
}

/// Facts about an expression over a stretch of the real calendar, DST days included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CalendarStats {
    /// Days examined (local dates in the schedule's zone).
    pub days: u32,
    /// Occurrences in those days.
    pub total: u64,
    /// The most occurrences on any one local date (an hourly job has 25 on a fall-back day).
    pub max_per_day: u32,
    /// The most common non-zero count per local date.
    pub typical_per_day: u32,
    /// Average occurrences per day over the whole stretch.
    pub avg_per_day: f64,
    /// The smallest gap between two consecutive occurrences, if there were two.
    pub min_gap: Option<Span>,
}

/// Longest an EventBridge `rate(...)` may be: far beyond any useful schedule.
const MAX_RATE: Span = Span::days(3650);

impl Timing {
    /// Parses `expr` for zone `tz`. Accepts 5-field cron, `@hourly`-style macros,
    /// EventBridge `cron(m h dom mon dow yr)` (weekday 1 = Sunday there) and
    /// `rate(N minute(s)|hour(s)|day(s))`.
    pub fn parse(expr: &str, tz: Tz) -> Result<Timing, Issue> {
        let source = expr.trim().to_string();
        let invalid = |msg: String| Issue::new(Code::ScheduleInvalidCron, "cron", msg);
        let kind = if let Some(inner) = strip_call(&source, "rate") {
            Kind::Rate {
                every: parse_rate(inner).map_err(invalid)?,
            }
        } else if let Some(inner) = strip_call(&source, "cron") {
            let cron = parse_eventbridge_cron(inner).map_err(invalid)?;
            let fixed_time = cron.determine_job_type() == JobType::FixedTime;
            Kind::Cron {
                cron: Box::new(cron),
                fixed_time,
            }
        } else {
            let cron = parse_posix_cron(&source).map_err(invalid)?;
            let fixed_time = cron.determine_job_type() == JobType::FixedTime;
            Kind::Cron {
                cron: Box::new(cron),
                fixed_time,
            }
        };
        Ok(Timing {
            source,
            tz,
            kind,
            dst: DstChoice::default(),
        })
    }

    /// The same expression under a schedule's DST choice.
    pub fn with_dst(mut self, dst: DstChoice) -> Timing {
        self.dst = dst;
        self
    }

    pub fn dst(&self) -> DstChoice {
        self.dst
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn tz(&self) -> Tz {
        self.tz
    }

    /// True for a single minute and a single hour: such jobs fire once on DST days.
    pub fn is_fixed_time(&self) -> bool {
        matches!(
            self.kind,
            Kind::Cron {
                fixed_time: true,
                ..
            }
        )
    }

    /// True for `rate(...)`: elapsed time, to which no DST choice applies.
    pub fn is_rate(&self) -> bool {
        matches!(self.kind, Kind::Rate { .. })
    }

    /// The first occurrence strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_within(after, DateTime::<Utc>::MAX_UTC)
    }

    /// The first occurrence strictly after `after`, if it is at or before `until`. A range's
    /// end bounds the search under a DST choice (which may drop croner's instants).
    fn next_within(&self, after: DateTime<Utc>, until: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if let Some(adjusted) = self.adjusted() {
            return adjusted.next_within(after, until);
        }
        let next = match &self.kind {
            Kind::Cron { cron, .. } => cron
                .find_next_occurrence(&after.with_timezone(&self.tz), false)
                .ok()
                .map(|t| t.with_timezone(&Utc)),
            Kind::Rate { every } => {
                let step = every.as_secs() as i64;
                let k = after.timestamp().div_euclid(step) + 1;
                DateTime::from_timestamp(k.checked_mul(step)?, 0)
            }
        };
        next.filter(|t| *t <= until)
    }

    /// Whether `t` is itself a fire time (what the ticker would fire), to the nanosecond.
    pub fn is_occurrence(&self, t: DateTime<Utc>) -> bool {
        self.next_at_or_after(t) == Some(t)
    }

    /// The first occurrence at or after `at`.
    pub fn next_at_or_after(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_after(at - TimeDelta::nanoseconds(1))
    }

    /// The last occurrence strictly before `before`, consistent with [`Timing::next_after`]:
    /// the result `p` satisfies `next_after(p) >= before` and `p` is itself an occurrence.
    pub fn prev_before(&self, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if let Some(adjusted) = self.adjusted() {
            return adjusted.prev_before(before);
        }
        match &self.kind {
            Kind::Rate { every } => {
                let step = every.as_secs() as i64;
                let last = before - TimeDelta::nanoseconds(1);
                let k = last.timestamp().div_euclid(step);
                DateTime::from_timestamp(k.checked_mul(step)?, 0)
            }
            Kind::Cron { cron, .. } => {
                // Croner's backward search walks the wall clock; on DST days it may land on an
                // instant the forward rules would not fire (the second pass of a fixed-time job).
                // Re-check every candidate against the forward rules, which are the definition.
                let mut cursor = before;
                for _ in 0..8 {
                    let candidate = cron
                        .find_previous_occurrence(&cursor.with_timezone(&self.tz), false)
                        .ok()?
                        .with_timezone(&Utc);
                    if self.next_at_or_after(candidate) == Some(candidate) {
                        // Walk forward to the last forward occurrence before `before`.
                        let mut last = candidate;
                        while let Some(next) = self.next_after(last) {
                            if next >= before {
                                break;
                            }
                            last = next;
                        }
                        return Some(last);
                    }
                    cursor = candidate;
                }
                None
            }
        }
    }

    /// Occurrences in `(after, until]`, in order.
    pub fn between(&self, after: DateTime<Utc>, until: DateTime<Utc>) -> Occurrences<'_> {
        Occurrences {
            timing: self,
            cursor: after,
            until,
        }
    }

    /// How many occurrences fall in `(after, until]`, without visiting each one on ordinary
    /// days: on a day whose UTC offset does not change, an expression fires at the same times
    /// of day on every day it matches (no field below the day depends on the date), so one
    /// search finds the day and the count of the first such day counts it. Days with a DST
    /// change, and the partial first and last days, are walked.
    pub fn count_between(&self, after: DateTime<Utc>, until: DateTime<Utc>) -> u64 {
        if let Kind::Rate { every } = &self.kind {
            let step = every.as_secs() as i64;
            let k = |t: DateTime<Utc>| t.timestamp().div_euclid(step);
            return (k(until) - k(after)).max(0) as u64;
        }
        let second = TimeDelta::seconds(1);
        let mut per_day: Option<u64> = None;
        let mut count = 0;
        let mut cursor = after;
        while let Some(first) = self.next_within(cursor, until) {
            let day = first.with_timezone(&self.tz).date_naive();
            let bounds = (
                self.local_midnight(day),
                day.succ_opt().and_then(|d| self.local_midnight(d)),
            );
            let whole = match bounds {
                (Some(start), Some(end)) if start > cursor && end <= until => {
                    self.tz.offset_from_utc_datetime(&start.naive_utc()).fix()
                        == self
                            .tz
                            .offset_from_utc_datetime(&(end - second).naive_utc())
                            .fix()
                }
                _ => false,
            };
            match (whole, per_day, bounds.1) {
                (true, Some(n), Some(end)) => {
                    count += n;
                    cursor = end - second;
                }
                (true, None, Some(end)) => {
                    let n = self.between(cursor, end - second).count() as u64;
                    per_day = Some(n);
                    count += n;
                    cursor = end - second;
                }
                _ => {
                    count += 1;
                    cursor = first;
                }
            }
        }
        count
    }

    /// The instant a local day starts (`None` when midnight does not exist that day).
    fn local_midnight(&self, day: NaiveDate) -> Option<DateTime<Utc>> {
        self.tz
            .from_local_datetime(&day.and_time(NaiveTime::MIN))
            .earliest()
            .map(|t| t.with_timezone(&Utc))
    }

    /// The next `n` occurrences strictly after `after`.
    pub fn next_n(&self, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::with_capacity(n.min(10_000));
        let mut cursor = after;
        while out.len() < n {
            match self.next_after(cursor) {
                Some(t) => {
                    out.push(t);
                    cursor = t;
                }
                None => break,
            }
        }
        out
    }

    /// What DST did to an occurrence, if anything: carried past a gap (by the `next_valid`
    /// rule), or on the first or second pass of a repeated local time.
    ///
    /// `rate(...)` counts elapsed time, so DST never moves or repeats its occurrences: it has
    /// no note even when an occurrence falls on a repeated local time.
    pub fn dst_note(&self, at: DateTime<Utc>) -> Option<DstNote> {
        let local = at.with_timezone(&self.tz);
        let Kind::Cron { cron, .. } = &self.kind else {
            return None;
        };
        if !cron.is_time_matching(&local).unwrap_or(true) {
            return Some(DstNote::ShiftedPastGap);
        }
        match self.tz.from_local_datetime(&local.naive_local()) {
            LocalResult::Ambiguous(first, _) if first == local => Some(DstNote::FirstPass),
            LocalResult::Ambiguous(_, _) => Some(DstNote::SecondPass),
            _ => None,
        }
    }

    /// Counts occurrences per local date over `days` days starting with the local date of
    /// `from`, using the real calendar (DST days included), and the smallest gap between two
    /// consecutive occurrences.
    ///
    /// Cost is about one search per matching day plus a full walk of the DST days only: a
    /// cron's set of times of day does not depend on the date, so every regular (24-hour) day
    /// that matches has the same count and spacing as the first one walked.
    pub fn calendar_stats(&self, from: DateTime<Utc>, days: u32) -> CalendarStats {
        let first_date = from.with_timezone(&self.tz).date_naive();
        let mut counts: Vec<u32> = Vec::with_capacity(days as usize);
        let mut min_gap: Option<TimeDelta> = None;
        let mut last_fire: Option<DateTime<Utc>> = None;
        let mut note_gap = |from: Option<DateTime<Utc>>, to: DateTime<Utc>| {
            if let Some(prev) = from {
                let gap = to - prev;
                if min_gap.is_none_or(|m| gap < m) {
                    min_gap = Some(gap);
                }
            }
        };
        // (count, offset of first fire from midnight, offset of last fire from midnight)
        let mut regular: Option<(u32, TimeDelta, TimeDelta)> = None;

        // The next occurrence not yet counted. Carried from day to day, so days without an
        // occurrence cost nothing and an expression that stops firing (a year field, Feb 30)
        // is searched once, not once per remaining day.
        let mut upcoming: Option<DateTime<Utc>> = None;
        for day in 0..days {
            let Some(date) = first_date.checked_add_days(chrono::Days::new(day.into())) else {
                break;
            };
            let (Some(start), Some(end)) = (
                self.local_day_start(date),
                date.succ_opt().and_then(|d| self.local_day_start(d)),
            ) else {
                break;
            };
            if day == 0 {
                upcoming = self.next_at_or_after(start);
            }
            let Some(first) = upcoming.filter(|t| *t < end) else {
                counts.push(0);
                continue;
            };
            let regular_day = end - start == TimeDelta::days(1);
            if let (true, Some((count, first_off, last_off))) = (regular_day, regular) {
                debug_assert_eq!(first - start, first_off);
                note_gap(last_fire, first);
                let last = start + last_off;
                last_fire = Some(last);
                counts.push(count);
                upcoming = self.next_after(last);
                continue;
            }
            // Walk the day: a DST day, or the first regular matching day.
            let mut count = 0u32;
            let mut cursor = Some(first);
            while let Some(t) = cursor.filter(|t| *t < end) {
                note_gap(last_fire, t);
                last_fire = Some(t);
                count += 1;
                cursor = self.next_after(t);
            }
            upcoming = cursor;
            if regular_day && matches!(self.kind, Kind::Cron { .. }) {
                if let Some(last) = last_fire {
                    regular = Some((count, first - start, last - start));
                }
            }
            counts.push(count);
        }

        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        let examined = counts.len() as u32;
        CalendarStats {
            days: examined,
            total,
            max_per_day: counts.iter().copied().max().unwrap_or(0),
            typical_per_day: mode_of_nonzero(&counts),
            avg_per_day: if examined == 0 {
                0.0
            } else {
                total as f64 / f64::from(examined)
            },
            min_gap: min_gap.map(Span::from_delta),
        }
    }

    /// The first instant of a local date (midnight, or the end of a gap that swallowed it).
    fn local_day_start(&self, date: NaiveDate) -> Option<DateTime<Utc>> {
        let mut wall = date.and_time(NaiveTime::MIN);
        // A gap is at most a few hours; a zone that skips a whole day (Samoa 2011) has no
        // instant on that date and yields the start of the next date's first valid minute.
        for _ in 0..(26 * 60) {
            match self.tz.from_local_datetime(&wall) {
                LocalResult::Single(t) => return Some(t.with_timezone(&Utc)),
                LocalResult::Ambiguous(first, _) => return Some(first.with_timezone(&Utc)),
                LocalResult::None => wall += TimeDelta::minutes(1),
            }
        }
        None
    }

    /// A short description for people, e.g. "weekdays at 09:00 (Asia/Seoul)".
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Rate { every } => format!("every {every} (elapsed time, UTC-anchored)"),
            Kind::Cron { cron, .. } => {
                let text = describe_common(&self.source).unwrap_or_else(|| cron.describe());
                // Only the rules the schedule chose: the defaults go without saying.
                let chosen: String = [
                    self.dst.gap.map(|g| format!(", dst.gap: {g}")),
                    self.dst.fold.map(|f| format!(", dst.fold: {f}")),
                ]
                .into_iter()
                .flatten()
                .collect();
                format!("{text} ({}{chosen})", self.tz.name())
            }
        }
    }
}

impl fmt::Display for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.source, self.tz.name())
    }
}

/// Iterator over occurrences in a half-open range `(after, until]`.
pub struct Occurrences<'a> {
    timing: &'a Timing,
    cursor: DateTime<Utc>,
    until: DateTime<Utc>,
}

impl Iterator for Occurrences<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self.timing.next_within(self.cursor, self.until)?;
        self.cursor = next;
        Some(next)
    }
}

fn mode_of_nonzero(counts: &[u32]) -> u32 {
    let mut freq: std::collections::BTreeMap<u32, u32> = std::collections::BTreeMap::new();
    for &c in counts.iter().filter(|&&c| c > 0) {
        *freq.entry(c).or_default() += 1;
    }
    freq.into_iter()
        .max_by_key(|&(count, seen)| (seen, count))
        .map(|(count, _)| count)
        .unwrap_or(0)
}

fn strip_call<'a>(source: &'a str, name: &str) -> Option<&'a str> {
    let lower = source.get(..name.len() + 1)?.to_ascii_lowercase();
    if lower == format!("{name}(") && source.ends_with(')') {
        source.get(name.len() + 1..source.len() - 1)
    } else {
        None
    }
}

fn parse_rate(inner: &str) -> Result<Span, String> {
    let mut parts = inner.split_whitespace();
    let (Some(n), Some(unit), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!(
            "rate({inner}) must be `rate(N minutes|hours|days)`"
        ));
    };
    let n: u64 = n
        .parse()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("rate value `{n}` must be a positive whole number"))?;
    let unit_secs = match unit.to_ascii_lowercase().as_str() {
        "minute" | "minutes" => 60,
        "hour" | "hours" => 3600,
        "day" | "days" => 86_400,
        other => {
            return Err(format!(
                "rate unit `{other}` must be minutes, hours or days"
            ))
        }
    };
    let every = n
        .checked_mul(unit_secs)
        .map(Span::seconds)
        .filter(|s| *s <= MAX_RATE)
        .ok_or_else(|| format!("rate({inner}) is longer than {MAX_RATE}"))?;
    Ok(every)
}

fn parse_posix_cron(source: &str) -> Result<Cron, String> {
    if !source.starts_with('@') {
        let fields = source.split_whitespace().count();
        if fields != 5 {
            return Err(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), found {fields}; \
                 seconds are not supported, and EventBridge expressions are written cron(...)"
            ));
        }
    }
    let parse = |pattern: &str| {
        CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(pattern)
    };
    parse(source).map_err(|e| {
        let fields: Vec<&str> = source.split_whitespace().collect();
        let culprit = culprit_field(&POSIX_FIELDS, &fields, |candidate| {
            parse(&candidate.join(" ")).is_err()
        });
        format!("`{source}`: {}", plain_cron_error(&e, culprit))
    })
}

/// A cron field's name and the values it takes, for messages.
type FieldRule = (&'static str, &'static str);

const POSIX_FIELDS: [FieldRule; 5] = [
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31, L, W"),
    ("month", "1-12 or JAN-DEC"),
    ("day-of-week", "0-7 or SUN-SAT (0 and 7 are Sunday), L, #"),
];

const EVENTBRIDGE_FIELDS: [FieldRule; 6] = [
    ("minutes", "0-59"),
    ("hours", "0-23"),
    ("day-of-month", "1-31, L, W or ?"),
    ("month", "1-12 or JAN-DEC"),
    ("day-of-week", "1-7 or SUN-SAT (1 is Sunday), L, # or ?"),
    ("year", "1970-2199"),
];

/// Which field croner refused: the first that still fails with every other field made
/// neutral (`fails` parses a candidate).
fn culprit_field<'a>(
    rules: &[FieldRule],
    fields: &[&'a str],
    fails: impl Fn(&[&'a str]) -> bool,
) -> Option<(FieldRule, &'a str)> {
    if fields.len() != rules.len() {
        return None;
    }
    (0..fields.len()).find_map(|i| {
        if matches!(fields[i], "*" | "?") {
            return None;
        }
        let candidate: Vec<&str> = (0..fields.len())
            .map(|j| neutral_field(rules, fields, i, j))
            .collect();
        fails(&candidate).then(|| (rules[i], fields[i]))
    })
}

/// Field `j` of a candidate that tests field `i` alone: `i` as written, the others `*`,
/// except that an EventBridge expression keeps exactly one `?` in its day fields (2 and 4).
fn neutral_field<'a>(rules: &[FieldRule], fields: &[&'a str], i: usize, j: usize) -> &'a str {
    let eventbridge = rules.len() == EVENTBRIDGE_FIELDS.len();
    match j {
        _ if i == j => fields[j],
        4 if eventbridge => "?",
        2 if eventbridge && i == 4 => "?",
        _ => "*",
    }
}

/// Croner's error in plain words, naming the field when it is known; never the library's
/// own category names ("Component error", "CronPattern").
fn plain_cron_error(e: &croner::errors::CronError, culprit: Option<(FieldRule, &str)>) -> String {
    use croner::errors::CronError as E;
    let detail = match e {
        E::ComponentError(m) | E::InvalidPattern(m) | E::IllegalCharacters(m) => {
            m.trim_end_matches('.').to_string()
        }
        E::EmptyPattern => "the expression is empty".into(),
        _ => "the expression cannot be evaluated".into(),
    };
    let mut chars = detail.chars();
    let detail: String = chars
        .next()
        .map(|c| c.to_lowercase().chain(chars).collect())
        .unwrap_or_default();
    match culprit {
        Some(((name, takes), value)) => {
            format!("the {name} field `{value}` is not valid ({detail}); {name} takes {takes}")
        }
        None => format!("not a valid expression ({detail})"),
    }
}

fn parse_eventbridge_cron(inner: &str) -> Result<Cron, String> {
    let fields: Vec<&str> = inner.split_whitespace().collect();
    if fields.len() != 6 {
        return Err(format!(
            "cron({inner}) must have 6 fields (minutes hours day-of-month month day-of-week year), found {}",
            fields.len()
        ));
    }
    // EventBridge requires `?` in exactly one of day-of-month and day-of-week.
    if (fields[2] == "?") == (fields[4] == "?") {
        return Err(format!(
            "cron({inner}): EventBridge needs `?` in exactly one of day-of-month and day-of-week"
        ));
    }
    // EventBridge numbers weekdays 1-7 from Sunday, as Quartz does. Croner only takes a
    // year after a seconds field, so pin the seconds to 0.
    let parse = |fields: &[&str]| {
        CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Required)
            .alternative_weekdays(true)
            .build()
            .parse(&format!("0 {}", fields.join(" ")))
    };
    parse(&fields).map_err(|e| {
        let culprit = culprit_field(&EVENTBRIDGE_FIELDS, &fields, |c| parse(c).is_err());
        format!("cron({inner}): {}", plain_cron_error(&e, culprit))
    })
}

/// Plain words for the shapes people write most; croner's own text for the rest.
fn describe_common(source: &str) -> Option<String> {
    let fields: Vec<&str> = source.split_whitespace().collect();
    let [minute, hour, dom, month, dow] = fields.as_slice() else {
        return None;
    };
    let (m, h) = (minute.parse::<u32>().ok()?, hour.parse::<u32>().ok()?);
    if m > 59 || h > 23 || *month != "*" {
        return None;
    }
    let at = format!("{h:02}:{m:02}");
    let days = match (*dom, dow.to_ascii_uppercase().as_str()) {
        ("*", "*") => "every day".to_string(),
        ("*", "1-5" | "MON-FRI") => "weekdays".to_string(),
        ("*", "0,6" | "6,0" | "SAT,SUN" | "SUN,SAT" | "6-7") => "weekends".to_string(),
        ("*", _) => return None,
        (d, "*") if d.parse::<u32>().is_ok() => format!("day {d} of every month"),
        ("L", "*") => "the last day of every month".to_string(),
        _ => return None,
    };
    Some(format!("{days} at {at}"))
}
