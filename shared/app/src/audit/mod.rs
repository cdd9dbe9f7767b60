//! The completeness audit (invariant 23): every window each schedule's versions say it had in
//! a range, checked against the ledger by code that did not write it. It reads the ledger's
//! runs and each schedule's audit log, and recomputes the windows with the core's timing code
//! alone: nothing of the ticker's, the reconciler's or the worker's decisions
//! ([`expected`] is the pure part).
//!
//! Reads per schedule: its audit log (one query), its runs in the range (one query, by key
//! range), the attempts of the runs of a job not declared idempotent that started more than
//! one attempt (one read each), and, only when the range's first expected window has no
//! entry of its own, a look back for a range record begun before the range.
//!
//! A page lists every audited schedule with whole counts and whole `duplicates` and
//! `unexplained` lists; each `missing` list holds at most `max_missing` windows, and `next`
//! (an offset into every schedule's missing windows) resumes them.

pub mod expected;

use std::collections::HashSet;

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_contract::audit::{CompletenessReport, ScheduleAudit};
use cronledger_core::run::Origin;
use cronledger_core::{Run, RunKey};
use cronledger_ledger::ledger::StoredSchedule;
use cronledger_ledger::{LedgerStore, StoreError};
use futures_util::stream::{self, StreamExt, TryStreamExt};

use self::expected::{acted_again, audit, to_read, Findings, History};

/// The audited range `[from, to)`, of every schedule or of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRange {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub schedule: Option<String>,
}

/// How much of the `missing` lists one answer carries, and where it resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPage {
    /// Missing windows listed per schedule (the counts stay whole).
    pub max_missing: usize,
    /// The `next` of the previous answer.
    pub after: Option<String>,
}

impl Default for AuditPage {
    fn default() -> Self {
        Self {
            max_missing: 1000,
            after: None,
        }
    }
}

/// Schedules audited at once (their reads in flight together).
const SCHEDULES_AT_ONCE: usize = 8;
/// Attempt reads in flight at once for one schedule.
const READS_AT_ONCE: usize = 8;
/// Schedules read per listing page.
const LISTING_PAGE: u32 = 100;
/// The first look back for a range record begun before the range; each next one is
/// [`LOOK_BACK_GROWTH`] times longer, down to the schedule's creation.
const LOOK_BACK_FIRST: TimeDelta = TimeDelta::hours(1);
const LOOK_BACK_GROWTH: i32 = 4;

/// Audits `range`: for each schedule, its expected windows, the ones accounted for, missing,
/// duplicated, and the entries no version explains; the fleet's completeness. With a
/// schedule, that one (`SCHEDULE_NOT_FOUND` when there is none); without, every schedule
/// with a window or a finding in the range, by id. `to` before `from` is
/// `STORE_INVALID_REQUEST`; a `page.after` this function did not hand out is
/// `STORE_BAD_CURSOR`.
pub async fn completeness(
    store: &dyn LedgerStore,
    range: AuditRange,
    page: AuditPage,
) -> Result<CompletenessReport, StoreError> {
    if range.to < range.from {
        return Err(StoreError::InvalidRequest(format!(
            "the audited range ends ({}) before it starts ({})",
            range.to, range.from
        )));
    }
    let skip = match page.after.as_deref() {
        Some(text) => text.parse::<usize>().map_err(|_| StoreError::BadCursor)?,
        None => 0,
    };
    let limit = page.max_missing.max(1);
    let (schedules, fleet) = match &range.schedule {
        Some(id) => (vec![store.get_schedule(id).await?], false),
        None => (all_schedules(store).await?, true),
    };
    let audited: Vec<(String, Findings)> = stream::iter(schedules)
        .map(|stored| async {
            let findings = audit_schedule(store, &stored, range.from, range.to).await?;
            Ok::<_, StoreError>((stored.spec.id, findings))
        })
        .buffered(SCHEDULES_AT_ONCE)
        .try_collect()
        .await?;
    Ok(report(range, audited, fleet, skip, limit))
}

/// The report of `audited` (by id): its page of the missing lists from `skip`, `limit` each.
fn report(
    range: AuditRange,
    mut audited: Vec<(String, Findings)>,
    fleet: bool,
    skip: usize,
    limit: usize,
) -> CompletenessReport {
    audited.sort_by(|a, b| a.0.cmp(&b.0));
    let (mut expected, mut exactly_once) = (0u64, 0u64);
    let mut more = false;
    let mut schedules = Vec::new();
    for (id, found) in audited {
        expected += found.expected;
        exactly_once += found.exactly_once;
        if fleet && found.expected == 0 && !found.any() {
            continue;
        }
        let end = skip.saturating_add(limit);
        more |= found.missing.len() > end;
        let listed = found
            .missing
            .get(skip..found.missing.len().min(end))
            .unwrap_or_default()
            .to_vec();
        schedules.push(ScheduleAudit {
            schedule: id,
            expected: found.expected,
            accounted: found.accounted,
            missing: listed,
            missing_count: found.missing.len() as u64,
            duplicates: found.duplicates,
            unexplained: found.unexplained,
        });
    }
    CompletenessReport {
        from: range.from,
        to: range.to,
        schedules,
        completeness: ratio(exactly_once, expected),
        next: more.then(|| (skip + limit).to_string()),
    }
}

/// Windows accounted for exactly once over the expected ones (1 when none was expected).
pub fn ratio(exactly_once: u64, expected: u64) -> f64 {
    if expected == 0 {
        1.0
    } else {
        exactly_once as f64 / expected as f64
    }
}

/// Every stored schedule (archived ones too: their runs before the archive are audited).
async fn all_schedules(store: &dyn LedgerStore) -> Result<Vec<StoredSchedule>, StoreError> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store
            .list_schedules(LISTING_PAGE, cursor.as_deref())
            .await?;
        all.extend(page.items);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
}

/// One schedule's findings over `[from, to)`.
async fn audit_schedule(
    store: &dyn LedgerStore,
    stored: &StoredSchedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Findings, StoreError> {
    let id = stored.id();
    let log = store.audit_log(id).await?;
    let history = History::from_log(id, &log, stored.created_at)?;
    let mut runs = if to > from {
        store
            .runs_between(id, from, to - TimeDelta::nanoseconds(1))
            .await?
    } else {
        Vec::new()
    };
    let first_expected = history.expected(from, to).first().copied();
    if let Some(first) = first_expected.filter(|t| !has_entry(&runs, *t)) {
        if let Some(record) = range_record_before(store, id, from, stored.created_at).await? {
            if record.range_end.is_some_and(|end| end >= first) {
                runs.push(record);
            }
        }
    }
    let again = reexecuted(store, &history, &runs).await?;
    Ok(audit(&history, &runs, &again, from, to))
}

/// Whether an automatic entry of `runs` stands for window `t` (its own, or a range's).
fn has_entry(runs: &[Run], t: DateTime<Utc>) -> bool {
    runs.iter().any(|r| {
        r.key.origin == Origin::Expected
            && r.key.scheduled_for <= t
            && t <= r.range_end.unwrap_or(r.key.scheduled_for)
    })
}

/// The newest automatic entry before `from`, if it is a range record: reads back in growing
/// stretches until an automatic entry turns up or the schedule's creation is passed.
async fn range_record_before(
    store: &dyn LedgerStore,
    id: &str,
    from: DateTime<Utc>,
    created_at: DateTime<Utc>,
) -> Result<Option<Run>, StoreError> {
    let tick = TimeDelta::nanoseconds(1);
    let mut until = from - tick;
    let mut stretch = LOOK_BACK_FIRST;
    while until >= created_at {
        let since = (until - stretch).max(created_at);
        let newest = store
            .runs_between(id, since, until)
            .await?
            .into_iter()
            .filter(|r| r.key.origin == Origin::Expected)
            .max_by_key(|r| r.key.scheduled_for);
        if let Some(newest) = newest {
            return Ok(newest.range_end.is_some().then_some(newest));
        }
        until = since - tick;
        stretch = stretch * LOOK_BACK_GROWTH;
    }
    Ok(None)
}

/// The runs of `runs` that started an attempt again after one that may have acted (a job not
/// declared idempotent): their attempts read, a few at a time. A run gone since it was
/// listed (taken back) started nothing.
async fn reexecuted(
    store: &dyn LedgerStore,
    history: &History,
    runs: &[Run],
) -> Result<HashSet<RunKey>, StoreError> {
    let keys = to_read(history, runs);
    let found: Vec<Option<RunKey>> = stream::iter(keys)
        .map(|key| async move {
            match store.get_run_with_attempts(&key).await {
                Ok((run, attempts)) => Ok(acted_again(&run, &attempts).then_some(key)),
                Err(StoreError::RunNotFound(_)) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .buffered(READS_AT_ONCE)
        .try_collect()
        .await?;
    Ok(found.into_iter().flatten().collect())
}
