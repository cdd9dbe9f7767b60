//! A schedule's DST choice (see [`crate::dst`]) applied around croner's search.
//!
//! croner's search is the default rule for the expression's kind. Every other choice differs
//! from it only at a clock change, by dropping some of croner's instants or adding others:
//!
//! | choice                     | differs from croner by                                             |
//! |----------------------------|--------------------------------------------------------------------|
//! | fixed-time, `gap: skip`    | dropping the instant croner carried past a gap                     |
//! | fixed-time, `fold: both`   | adding the second pass of the wall time croner fired on the first  |
//! | interval, `gap: next_valid`| adding the first instant after a gap that swallowed a slot         |
//! | interval, `fold: first`    | dropping the second pass of every repeated wall time               |
//!
//! So the occurrences are croner's, less the dropped, plus the added, and the next one is the
//! earlier of croner's next kept instant and the next added one. Wall times (local date and
//! time, no offset) are searched with croner on [`NaiveDateTime`], a clock without gaps or
//! repeats, then placed in the zone.

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::{GapInfo, Tz};
use croner::Cron;

use super::{DstNote, Kind, Timing};
use crate::dst::{DstChoice, FoldRule, GapRule};
use crate::error::{Code, Issue};

/// The DST choice's side of a timing: checking it, reading it, and applying it.
impl Timing {
    /// [`Timing::with_dst`], refusing a choice for `rate(...)`: elapsed time, which DST never
    /// moves, so a choice there is a mistake in the schedule.
    pub fn with_checked_dst(self, dst: DstChoice) -> Result<Timing, Issue> {
        if self.is_rate() && !dst.is_default() {
            return Err(Issue::new(
                Code::ScheduleInvalidDst,
                "dst",
                format!(
                    "`{}` is elapsed time, which DST does not move: `dst` applies to cron expressions only",
                    self.source
                ),
            ));
        }
        Ok(self.with_dst(dst))
    }

    /// The gap and fold rules this timing follows: its choice, else its kind's default.
    /// `None` for `rate(...)`, which DST does not touch.
    pub fn dst_rules(&self) -> Option<(GapRule, FoldRule)> {
        match self.kind {
            Kind::Cron { fixed_time, .. } => Some(self.dst.resolved(fixed_time)),
            Kind::Rate { .. } => None,
        }
    }

    /// The cron under a choice that departs from croner's default; `None` when croner's
    /// search is the rule as it is (the default choice, or a rate).
    pub(super) fn adjusted(&self) -> Option<Adjusted<'_>> {
        match &self.kind {
            Kind::Cron { cron, fixed_time } => Adjusted::new(cron, self.tz, self.dst, *fixed_time),
            Kind::Rate { .. } => None,
        }
    }

    /// `note` in words, naming the rule of this timing's DST choice that produced it, e.g.
    /// "DST overlap: this local time happens twice; second pass (dst.fold: both)".
    pub fn describe_dst_note(&self, note: DstNote) -> String {
        let Some((gap, fold)) = self.dst_rules() else {
            return note.describe().to_string();
        };
        let (rule, chosen) = match note {
            DstNote::ShiftedPastGap => (format!("dst.gap: {gap}"), self.dst.gap.is_some()),
            DstNote::FirstPass | DstNote::SecondPass => {
                (format!("dst.fold: {fold}"), self.dst.fold.is_some())
            }
        };
        let default = match (chosen, self.is_fixed_time()) {
            (true, _) => "",
            (false, true) => ", the default for a fixed-time expression",
            (false, false) => ", the default for an interval expression",
        };
        format!("{} ({rule}{default})", note.describe())
    }
}

/// How a choice departs from croner's default for an expression's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Departures {
    /// Fixed-time, `gap: skip`.
    drop_shifted: bool,
    /// Interval, `fold: first`.
    drop_second_pass: bool,
    /// Fixed-time, `fold: both`.
    add_second_pass: bool,
    /// Interval, `gap: next_valid`.
    add_gap_end: bool,
}

/// A cron expression in its zone under a choice that departs from croner's default.
pub(super) struct Adjusted<'a> {
    cron: &'a Cron,
    tz: Tz,
    departs: Departures,
}

impl<'a> Adjusted<'a> {
    /// `None` when `choice` resolves to the default for the kind: croner alone is the rule.
    pub(super) fn new(
        cron: &'a Cron,
        tz: Tz,
        choice: DstChoice,
        fixed_time: bool,
    ) -> Option<Adjusted<'a>> {
        let (gap, fold) = choice.resolved(fixed_time);
        let departs = Departures {
            drop_shifted: fixed_time && gap == GapRule::Skip,
            drop_second_pass: !fixed_time && fold == FoldRule::First,
            add_second_pass: fixed_time && fold == FoldRule::Both,
            add_gap_end: !fixed_time && gap == GapRule::NextValid,
        };
        let any = departs.drop_shifted
            || departs.drop_second_pass
            || departs.add_second_pass
            || departs.add_gap_end;
        any.then_some(Adjusted { cron, tz, departs })
    }

    /// The first occurrence strictly after `after`, if it is at or before `until`. The bound
    /// lets a caller with a range stop croner's search at its end.
    pub(super) fn next_within(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let added = [self.next_second_pass(after), self.next_gap_end(after)]
            .into_iter()
            .flatten()
            .min();
        self.next_kept(after, until)
            .into_iter()
            .chain(added)
            .min()
            .filter(|t| *t <= until)
    }

    /// The last occurrence strictly before `before`.
    ///
    /// croner's backward search knows nothing of the added instants, so this walks the
    /// matching wall times backward instead: for each, every occurrence from the wall's first
    /// instant up to `before` is enumerated forward (which sees added and dropped instants as
    /// [`Adjusted::next_within`] does), and the last one is the answer. A wall whose
    /// instants were all dropped yields nothing, and the walk steps to the one before it.
    pub(super) fn prev_before(&self, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let last_allowed = before - TimeDelta::nanoseconds(1);
        let mut wall = self.wall(before);
        // Ends: each round moves to an earlier wall, and croner's backward search gives up
        // at its earliest year.
        loop {
            let slot = self.cron.find_previous_occurrence(&wall, false).ok()?;
            let from = self.first_instant(slot);
            let mut last = None;
            let mut cursor = from - TimeDelta::nanoseconds(1);
            while let Some(t) = self.next_within(cursor, last_allowed) {
                last = Some(t);
                cursor = t;
            }
            if last.is_some() {
                return last;
            }
            wall = slot;
        }
    }

    /// croner's next instant after `after` that this choice keeps (at or before `until`).
    fn next_kept(&self, after: DateTime<Utc>, until: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut cursor = after;
        // Ends: croner's search moves strictly forward and gives up at its last year; `until`
        // usually stops it long before.
        loop {
            let t = self
                .cron
                .find_next_occurrence(&cursor.with_timezone(&self.tz), false)
                .ok()?
                .with_timezone(&Utc);
            if t > until {
                return None;
            }
            if self.departs.drop_shifted && self.shifted_past_gap(t) {
                cursor = t;
            } else if let Some(overlap) = self
                .departs
                .drop_second_pass
                .then(|| self.second_pass_overlap(t))
                .flatten()
            {
                // Everything croner finds before the second pass ends is a second pass too.
                cursor = overlap.end() - TimeDelta::nanoseconds(1);
            } else {
                return Some(t);
            }
        }
    }

    /// Fixed-time, `fold: both`: the second pass after `after` of a wall time whose first
    /// pass is at or before `after` (one whose first pass is later is found by croner first).
    /// Such a pair straddles `after`, so `after` itself is on the repeated stretch.
    fn next_second_pass(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if !self.departs.add_second_pass {
            return None;
        }
        let overlap = Overlap::at(self.tz, self.wall(after))?;
        let (start, end) = overlap.walls(self.tz);
        let mut cursor = start;
        let mut inclusive = true;
        // A fixed-time expression has one wall time a day: one or two rounds.
        loop {
            let slot = self.cron.find_next_occurrence(&cursor, inclusive).ok()?;
            if slot >= end {
                return None;
            }
            if let LocalResult::Ambiguous(_, second) = self.tz.from_local_datetime(&slot) {
                let second = second.with_timezone(&Utc);
                if second > after {
                    return Some(second);
                }
            }
            (cursor, inclusive) = (slot, false);
        }
    }

    /// Interval, `gap: next_valid`: the first instant after the next gap that swallowed a
    /// slot, when no existing slot comes before it.
    ///
    /// The wall times after `after`'s are walked in order. A slot in a gap gives the gap's
    /// end. A slot that exists is an instant croner fires on (an interval fires on every
    /// existing slot; only second passes are ever dropped, and the walk starts past any
    /// repeated stretch `after` is on), and it comes before any later gap: nothing added.
    fn next_gap_end(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if !self.departs.add_gap_end {
            return None;
        }
        let wall = self.wall(after);
        let mut cursor = match Overlap::at(self.tz, wall) {
            Some(overlap) => overlap.walls(self.tz).1 - TimeDelta::seconds(1),
            None => wall,
        };
        // Ends at the first existing slot, or croner's last year.
        loop {
            let slot = self.cron.find_next_occurrence(&cursor, false).ok()?;
            if !matches!(self.tz.from_local_datetime(&slot), LocalResult::None) {
                return None;
            }
            let end = GapInfo::new(&slot, &self.tz)?.end?.with_timezone(&Utc);
            if end > after {
                return Some(end);
            }
            cursor = slot;
        }
    }

    /// `t` is the instant croner carried past a gap: its wall time is not the expression's.
    fn shifted_past_gap(&self, t: DateTime<Utc>) -> bool {
        !self
            .cron
            .is_time_matching(&t.with_timezone(&self.tz))
            .unwrap_or(true)
    }

    /// The repeated stretch `t` is the second pass of, if it is one.
    fn second_pass_overlap(&self, t: DateTime<Utc>) -> Option<Overlap> {
        let wall = self.wall(t);
        match self.tz.from_local_datetime(&wall) {
            LocalResult::Ambiguous(_, second) if second.with_timezone(&Utc) == t => {
                Overlap::at(self.tz, wall)
            }
            _ => None,
        }
    }

    /// The earliest instant a wall time stands for: itself, its first pass, or the end of
    /// the gap it falls in. Every instant it gives (kept or added) is at or after this.
    fn first_instant(&self, wall: NaiveDateTime) -> DateTime<Utc> {
        match self.tz.from_local_datetime(&wall) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t.with_timezone(&Utc),
            LocalResult::None => match GapInfo::new(&wall, &self.tz).and_then(|gap| gap.end) {
                Some(end) => end.with_timezone(&Utc),
                // chrono-tz knows no end for a gap past its table; no zone is a day ahead
                // of UTC, so the wall read as UTC less a day is early enough.
                None => wall.and_utc() - TimeDelta::days(1),
            },
        }
    }

    fn wall(&self, t: DateTime<Utc>) -> NaiveDateTime {
        t.with_timezone(&self.tz).naive_local()
    }
}

/// A stretch of wall-clock time that happens twice (the clock goes back).
#[derive(Debug, Clone, Copy)]
struct Overlap {
    /// The first instant of the second pass: when the clock goes back.
    turn: DateTime<Utc>,
    /// How far it goes back: the length of each pass.
    len: TimeDelta,
}

impl Overlap {
    /// The repeated stretch `wall` is on, if any.
    fn at(tz: Tz, wall: NaiveDateTime) -> Option<Overlap> {
        let LocalResult::Ambiguous(first, second) = tz.from_local_datetime(&wall) else {
            return None;
        };
        let later_offset = second.offset().fix();
        let offset_at = |ts: i64| {
            DateTime::from_timestamp(ts, 0)
                .map(|t| tz.offset_from_utc_datetime(&t.naive_utc()).fix())
        };
        // The clock goes back once between the two passes of one wall time, on a whole
        // second: bisect for the first second on the later offset. The first pass (floored
        // to its second) is still on the earlier offset, the second pass is on the later.
        let (mut before, mut on) = (first.timestamp(), second.timestamp());
        while on - before > 1 {
            let middle = before + (on - before) / 2;
            if offset_at(middle)? == later_offset {
                on = middle;
            } else {
                before = middle;
            }
        }
        Some(Overlap {
            turn: DateTime::from_timestamp(on, 0)?,
            len: second.with_timezone(&Utc) - first.with_timezone(&Utc),
        })
    }

    /// The first instant after the second pass.
    fn end(self) -> DateTime<Utc> {
        self.turn + self.len
    }

    /// The repeated wall times: from the first (inclusive) to the end (exclusive).
    fn walls(self, tz: Tz) -> (NaiveDateTime, NaiveDateTime) {
        let start = self.turn.with_timezone(&tz).naive_local();
        (start, start + self.len)
    }
}
