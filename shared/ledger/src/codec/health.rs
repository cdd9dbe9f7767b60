//! The outcome counters' items (see [`crate::health`]): one a schedule and UTC day,
//! `SCHED#{id}` / `HEALTH#{yyyy-mm-dd}`, numbers added with `ADD` (so concurrent workers
//! never lose a count) and a TTL `TALLY_DAYS` after the day. [`count`] is the one write
//! both stores apply; the item holds only the counters ever added to.

use chrono::{Days, NaiveDate};

use crate::error::StoreError;
use crate::expr::Expr;
use crate::health::{DayTally, Outcome, TALLY_DAYS};
use crate::item::{key, n, s, Item, ItemReader};
use crate::keys::{self, EXPIRES_AT, SK};

const TYPE: &str = "type";
const HEALTH_TYPE: &str = "HEALTH";
const SUCCEEDED: &str = "succeeded";
const FAILED: &str = "failed";
const SKIPPED: &str = "skipped";
const FRESH: &str = "fresh";

/// The counters one window with `outcome` adds to.
fn counters_of(outcome: Outcome) -> &'static [&'static str] {
    match outcome {
        Outcome::Succeeded { fresh: true } => &[SUCCEEDED, FRESH],
        Outcome::Succeeded { fresh: false } => &[SUCCEEDED],
        Outcome::Failed => &[FAILED],
        Outcome::Skipped => &[SKIPPED],
    }
}

/// Epoch seconds of the midnight `TALLY_DAYS` after `day`: when the item may go.
fn expires_at(day: NaiveDate) -> i64 {
    day.checked_add_days(Days::new(TALLY_DAYS.unsigned_abs()))
        .unwrap_or(day)
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc().timestamp())
        .unwrap_or_default()
}

/// The key of `schedule`'s counters for `day`.
pub fn key_of(schedule: &str, day: NaiveDate) -> Item {
    key(keys::schedule_pk(schedule), keys::health_sk(day))
}

/// The UpdateItem that adds `count` windows with `outcome` (the item made if absent).
pub fn count(outcome: Outcome, count: u64, day: NaiveDate) -> Expr {
    let mut expr = Expr::new();
    for counter in counters_of(outcome) {
        expr.increment(counter, count);
    }
    expr.set_if_absent(TYPE, s(HEALTH_TYPE))
        .set_if_absent(EXPIRES_AT, n(expires_at(day)));
    expr
}

pub fn decode(item: &Item) -> Result<DayTally, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, HEALTH_TYPE)?;
    let day = r
        .sk()
        .strip_prefix(keys::HEALTH_PREFIX)
        .and_then(|d| d.parse::<NaiveDate>().ok())
        .ok_or_else(|| r.malformed(SK, "not HEALTH#{yyyy-mm-dd}"))?;
    let counter = |name: &str| r.opt_n::<u64>(name).map(Option::unwrap_or_default);
    Ok(DayTally {
        day: Some(day),
        succeeded: counter(SUCCEEDED)?,
        failed: counter(FAILED)?,
        skipped: counter(SKIPPED)?,
        fresh: counter(FRESH)?,
    })
}
