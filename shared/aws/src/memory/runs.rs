//! Runs in memory, and the ticker's reads and writes: the same conditional transitions,
//! fires and index reads as `dynamo::runs` and `dynamo::schedules`, request for request.
//!
//! Every operation takes the one lock, checks all its conditions, then applies all its
//! writes. Runs are stored typed as `decode(encode(run))` would give them back; items are
//! encoded only to charge their capacity.

mod charges;
mod fire;

pub(super) use charges::RunItems;

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use cronledger_core::run::RunResult;
use cronledger_core::{Attempt, Run, RunKey, RunStatus, Trigger};

use super::capacity::Request;
use super::index::{self, ActiveIndex};
use super::{InMemoryStore, StoredRun, Tables};
use crate::codec::attempt as attempt_codec;
use crate::codec::run as run_codec;
use crate::codec::schedule as schedule_codec;
use crate::cursor;
use crate::error::StoreError;
use crate::expr::{eval, Expr};
use crate::fire_plan;
use crate::item::{key, s, Item};
use crate::keys::{self, GSI2PK, GSI2SK, SK};
use crate::ledger::{check_new_run, Created, Page, RecentRuns, RunChange, StoredSchedule};
use crate::run_plan;

/// Items one DynamoDB Query page reads at most (the store asks for no more).
const QUERY_PAGE: usize = 1000;

/// The `Limit` the DynamoDB store sends for `limit`.
fn page_limit(limit: u32) -> usize {
    limit.clamp(1, QUERY_PAGE as u32) as usize
}

impl InMemoryStore {
    pub(super) fn due_schedules_impl(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<StoredSchedule>, StoreError> {
        let tables = self.tables();
        let due = index::due_in(tables.schedules.values(), shard, until);
        // The DynamoDB store follows pages of at most `want` items until it has `limit`
        // or a page comes back short (a full page says there may be more).
        let limit = limit as usize;
        let mut taken = 0;
        while taken < limit {
            let page = (limit - taken).min(QUERY_PAGE);
            let read = page.min(due.len() - taken);
            let items: Vec<Item> = due[taken..taken + read]
                .iter()
                .filter_map(|schedule| schedule_codec::encode(schedule).ok())
                .collect();
            self.charge_call("Query");
            self.charge_read(
                "Query",
                Some(keys::DUE_INDEX),
                &items.iter().collect::<Vec<_>>(),
                false,
                Request::Standard,
            );
            taken += read;
            if read < page {
                break;
            }
        }
        Ok(due[..taken].iter().map(|s| (*s).clone()).collect())
    }

    pub(super) fn advance_next_run_impl(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        let plan = fire_plan::advance(id, expected, next, self.shards);
        self.update_schedule_item(&mut self.tables(), id, &plan)
    }

    /// One UpdateItem of schedule `id`'s item by `plan`, as DynamoDB applies it: `false`
    /// (and the item unchanged) when its condition fails.
    pub(super) fn update_schedule_item(
        &self,
        tables: &mut Tables,
        id: &str,
        plan: &Expr,
    ) -> Result<bool, StoreError> {
        self.charge_call("UpdateItem");
        let Some(schedule) = tables.schedules.get_mut(id) else {
            self.charge_write("UpdateItem", None, None, Request::Standard);
            return Ok(false);
        };
        let before = schedule_codec::encode(schedule)?;
        if !eval::all_hold(&plan.conditions, Some(&before)) {
            self.charge_write("UpdateItem", Some(&before), None, Request::Standard);
            return Ok(false);
        }
        let after = eval::apply(&plan.updates, &before)?;
        *schedule = schedule_codec::decode_after(&after, &before, schedule)?;
        self.charge_write("UpdateItem", Some(&before), Some(&after), Request::Standard);
        Ok(true)
    }

    pub(super) fn create_run_impl(&self, run: &Run) -> Result<Created, StoreError> {
        check_new_run(run)?;
        let mut tables = self.tables();
        self.charge_call("PutItem");
        if let Some(existing) = stored_run(&tables, &run.key) {
            // The existing item comes back with the failed condition: no second request.
            let item = self.stored_item(&tables.run_items, existing);
            self.charge_run_write(
                &tables.run_items,
                "PutItem",
                Some(item),
                None,
                Request::Standard,
            );
            return Ok(Created::Existing(existing.run.clone()));
        }
        let Tables {
            runs,
            active,
            run_items,
            ..
        } = &mut *tables;
        let stored = insert_run(runs, active, run, self.shards);
        self.charge_run_write(run_items, "PutItem", None, Some(stored), Request::Standard);
        Ok(Created::New(run.clone()))
    }

    pub(super) fn get_run_impl(&self, key: &RunKey) -> Result<Run, StoreError> {
        self.get_run_with_attempts_impl(key).map(|(run, _)| run)
    }

    pub(super) fn get_run_with_attempts_impl(
        &self,
        key: &RunKey,
    ) -> Result<(Run, Vec<Attempt>), StoreError> {
        let tables = self.tables();
        self.charge_call("GetItem");
        let found = stored_run(&tables, key);
        self.charge_run_reads(&tables.run_items, "GetItem", None, found.as_slice(), true);
        match found {
            Some(stored) => Ok((
                stored.run.clone(),
                // An `attempt_0_end` (an end under epoch 0) is on the item but not an attempt.
                stored
                    .attempts
                    .iter()
                    .filter(|a| a.number > 0)
                    .cloned()
                    .collect(),
            )),
            None => Err(StoreError::RunNotFound(key.to_string())),
        }
    }

    pub(super) fn transition_run_impl(
        &self,
        key: &RunKey,
        change: &RunChange,
    ) -> Result<Run, StoreError> {
        // Refused before any request, as the DynamoDB store refuses them.
        let to = change.target()?;
        let mut tables = self.tables();
        self.charge_call("UpdateItem");
        let Tables {
            runs,
            active,
            run_items,
            ..
        } = &mut *tables;
        let Some(stored) = runs
            .get_mut(&key.schedule_id)
            .and_then(|by_sk| by_sk.get_mut(&keys::run_sk(key)))
        else {
            // DynamoDB returns no item with the failure when there is none: the DynamoDB
            // store reads once more to tell a missing run from a conflict.
            self.charge_write("UpdateItem", None, None, Request::Standard);
            self.charge_call("GetItem");
            self.charge_read("GetItem", None, &[], true, Request::Standard);
            return Err(StoreError::RunNotFound(key.to_string()));
        };
        // The same write the DynamoDB store sends, evaluated on the stored item.
        let plan = run_plan::transition(key, change, to, self.shards)?;
        let before = self.stored_item(run_items, stored);
        if !eval::all_hold(&plan.conditions, Some(&before)) {
            self.charge_run_write(
                run_items,
                "UpdateItem",
                Some(before),
                None,
                Request::Standard,
            );
            return Err(run_plan::refusal(key, change, Some(stored.run.clone())));
        }
        let after = eval::apply(&plan.updates, &before)?;
        let written = StoredRun {
            run: run_codec::decode(&after)?,
            attempts: attempt_codec::decode(&after)?,
        };
        active.replace(
            key,
            Some(stored.run.status),
            Some(written.run.status),
            self.shards,
        );
        *stored = written;
        self.charge_run_write(
            run_items,
            "UpdateItem",
            Some(before),
            Some(stored),
            Request::Standard,
        );
        Ok(stored.run.clone())
    }

    pub(super) fn active_runs_impl(
        &self,
        shard: u32,
        status: Option<RunStatus>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError> {
        let after = decode_cursor(cursor, GSI2SK)?;
        let prefix = status.map(keys::active_status_prefix).unwrap_or_default();
        let tables = self.tables();
        let entries = tables.active.from(shard, &prefix, after.as_deref());
        let (read, last) = read_page(resolve(&tables, entries), page_limit(limit));
        self.charge_query_page(&tables.run_items, Some(keys::ACTIVE_INDEX), &read);
        // A waiting status shares its class's entries: the page keeps the wanted status.
        Ok(Page {
            items: read
                .iter()
                .map(|stored| &stored.run)
                .filter(|run| status.is_none_or(|wanted| run.status == wanted))
                .cloned()
                .collect(),
            next: last.map(|(sk, stored)| active_cursor(shard, sk, &stored.run.key)),
        })
    }

    pub(super) fn recent_runs_impl(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<RecentRuns, StoreError> {
        let tables = self.tables();
        let (read, last) = read_page(newest_first(&tables, schedule_id), page_limit(limit));
        self.charge_query_page(&tables.run_items, None, &read);
        Ok(recent_runs_of(&read, last.map(|(_, stored)| stored), at))
    }

    /// The schedule's item and its newest runs in one descending query: the schedule's
    /// sort key follows every run's, so it is read first and counts toward the limit.
    pub(super) fn schedule_with_recent_runs_impl(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<(StoredSchedule, RecentRuns), StoreError> {
        let tables = self.tables();
        let page = page_limit(limit.saturating_add(1));
        let schedule = tables.schedules.get(schedule_id);
        let runs_page = page - usize::from(schedule.is_some());
        let (read, last) = read_page(newest_first(&tables, schedule_id), runs_page);
        self.charge_call("Query");
        let schedule_item = schedule.and_then(|s| schedule_codec::encode(s).ok());
        let run_items: Vec<Arc<Item>> = read
            .iter()
            .map(|stored| self.stored_item(&tables.run_items, stored))
            .collect();
        let items: Vec<&Item> = schedule_item
            .iter()
            .chain(run_items.iter().map(Arc::as_ref))
            .collect();
        self.charge_read("Query", None, &items, true, Request::Standard);
        let Some(schedule) = schedule else {
            return Err(StoreError::ScheduleNotFound(schedule_id.to_string()));
        };
        // A page that ended on the schedule's own item (limit 0) looked at no run.
        let full_on_schedule = runs_page == 0;
        let mut recent = recent_runs_of(&read, last.map(|(_, stored)| stored), at);
        if full_on_schedule {
            recent.complete = false;
        }
        Ok((schedule.clone(), recent))
    }

    pub(super) fn running_before_impl(
        &self,
        schedule_id: &str,
        before: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError> {
        // The shard's RUNNING entries through `before`'s second, every page of them, kept
        // to this schedule's and to windows before `before`.
        let shard = keys::shard_of(schedule_id, self.shards);
        let low = keys::active_status_prefix(RunStatus::Running);
        let high = format!("{low}{}$", keys::index_time(before));
        let tables = self.tables();
        let read: Vec<&StoredRun> = resolve(&tables, tables.active.range(shard, &low, &high))
            .map(|(_, r)| r)
            .collect();
        self.charge_query_pages(&tables.run_items, Some(keys::ACTIVE_INDEX), &read);
        Ok(read
            .into_iter()
            .filter(|r| r.run.key.schedule_id == schedule_id && r.run.key.scheduled_for < before)
            .filter(|r| r.run.status == RunStatus::Running)
            .map(|r| r.run.clone())
            .collect())
    }

    pub(super) fn pending_live_runs_impl(
        &self,
        shard: u32,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Run>, StoreError> {
        // One page of the shard's PENDING entries with windows in range (whole seconds),
        // live triggers only: catch-up runs wait there for their release.
        let prefix = keys::active_status_prefix(RunStatus::Pending);
        let low = format!("{prefix}{}", keys::index_time(from));
        let high = format!("{prefix}{}$", keys::index_time(to));
        self.check_between(&low, &high)?;
        let tables = self.tables();
        let entries = tables.active.range(shard, &low, &high);
        let (read, _) = read_page(resolve(&tables, entries), page_limit(limit));
        self.charge_query_page(&tables.run_items, Some(keys::ACTIVE_INDEX), &read);
        Ok(read
            .into_iter()
            .map(|stored| &stored.run)
            .filter(|r| matches!(r.trigger, Trigger::Scheduled | Trigger::Manual))
            .filter(|r| r.status == RunStatus::Pending)
            .filter(|r| from <= r.key.scheduled_for && r.key.scheduled_for <= to)
            .cloned()
            .collect())
    }

    pub(super) fn run_history_impl(
        &self,
        schedule_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError> {
        let before = decode_cursor(cursor, SK)?;
        let tables = self.tables();
        let runs = tables.runs.get(schedule_id).into_iter().flat_map(|by_sk| {
            let upper = match &before {
                Some(sk) => Excluded(sk.as_str()),
                None => Unbounded,
            };
            by_sk.range::<str, _>((Unbounded, upper)).rev()
        });
        let (read, last) = read_page(runs, page_limit(limit));
        self.charge_query_page(&tables.run_items, None, &read);
        Ok(Page {
            items: read.iter().map(|stored| stored.run.clone()).collect(),
            next: last.map(|(sk, _)| {
                cursor::encode(Some(&key(keys::schedule_pk(schedule_id), sk.as_str())))
                    .unwrap_or_default()
            }),
        })
    }

    pub(super) fn runs_between_impl(
        &self,
        schedule_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError> {
        // Bounds on whole seconds without the `Z`, so every text form of an instant in
        // range (fractions, operator suffixes) sorts inside; exact bounds are applied after.
        let low = format!("{}{}", keys::RUN_PREFIX, keys::whole_second(from));
        let high = format!("{}{}~", keys::RUN_PREFIX, keys::whole_second(to));
        self.check_between(&low, &high)?;
        let tables = self.tables();
        let read: Vec<&StoredRun> = tables
            .runs
            .get(schedule_id)
            .into_iter()
            .flat_map(|by_sk| {
                by_sk.range::<str, _>((Included(low.as_str()), Included(high.as_str())))
            })
            .map(|(_, stored)| stored)
            .collect();
        self.charge_query_pages(&tables.run_items, None, &read);
        Ok(read
            .into_iter()
            .map(|stored| &stored.run)
            .filter(|r| from <= r.key.scheduled_for && r.key.scheduled_for <= to)
            .cloned()
            .collect())
    }
}

impl InMemoryStore {
    /// Writes a fire whose conditions held: the run, and the schedule moved on.
    /// DynamoDB refuses a BETWEEN whose bounds are the wrong way round.
    fn check_between(&self, low: &str, high: &str) -> Result<(), StoreError> {
        if low <= high {
            return Ok(());
        }
        self.charge_call("Query");
        Err(StoreError::Request {
            operation: "Query",
            message: "ValidationException: Invalid KeyConditionExpression: the BETWEEN \
                      operator requires upper bound to be greater than or equal to lower bound"
                .to_string(),
        })
    }
}

fn stored_run<'a>(tables: &'a Tables, key: &RunKey) -> Option<&'a StoredRun> {
    tables.runs.get(&key.schedule_id)?.get(&keys::run_sk(key))
}

/// What `codec::run::decode(codec::run::encode(run))` gives back: the lease under the run's
/// epoch, and no empty result.
fn as_stored(run: &Run) -> Run {
    let mut run = run.clone();
    if let Some(lease) = &mut run.lease {
        lease.epoch = run.lease_epoch;
    }
    if run.result.as_ref() == Some(&RunResult::default()) {
        run.result = None;
    }
    run
}

/// Stores a new run as a round trip through its item would give it back, and indexes it.
fn insert_run<'a>(
    runs: &'a mut BTreeMap<String, BTreeMap<String, StoredRun>>,
    active: &mut ActiveIndex,
    run: &Run,
    shards: u32,
) -> &'a StoredRun {
    let run = as_stored(run);
    active.replace(&run.key, None, Some(run.status), shards);
    let by_sk = runs.entry(run.key.schedule_id.clone()).or_default();
    let sk = keys::run_sk(&run.key);
    by_sk.entry(sk).or_insert(StoredRun {
        run,
        attempts: Vec::new(),
    })
}

/// A schedule's runs, newest first (a descending query on its partition).
fn newest_first<'a>(
    tables: &'a Tables,
    schedule_id: &str,
) -> impl Iterator<Item = (&'a String, &'a StoredRun)> {
    tables
        .runs
        .get(schedule_id)
        .into_iter()
        .flat_map(|by_sk: &BTreeMap<String, StoredRun>| by_sk.iter().rev())
}

/// The runs `active` index entries point at.
fn resolve<'a>(
    tables: &'a Tables,
    entries: impl Iterator<Item = (&'a String, &'a index::RunLocation)> + 'a,
) -> impl Iterator<Item = (&'a String, &'a StoredRun)> + 'a {
    entries.filter_map(move |(sk, at)| {
        let stored = tables.runs.get(&at.schedule_id)?.get(&at.run_sk)?;
        Some((sk, stored))
    })
}

/// One Query page: at most `limit` items read in order, and the last one's key when the
/// page is full (DynamoDB's `LastEvaluatedKey`: there may be more).
fn read_page<'a>(
    items: impl Iterator<Item = (&'a String, &'a StoredRun)>,
    limit: usize,
) -> (Vec<&'a StoredRun>, Option<(&'a String, &'a StoredRun)>) {
    let mut read = Vec::new();
    let mut last = None;
    for (sk, stored) in items.take(limit) {
        read.push(stored);
        last = Some((sk, stored));
    }
    let full = read.len() == limit;
    (read, last.filter(|_| full))
}

/// Of a newest-first page, the runs in flight and those in `at`'s second; `last` is where
/// the read stopped when the page was full.
fn recent_runs_of(
    read: &[&StoredRun],
    last: Option<&StoredRun>,
    at: Option<DateTime<Utc>>,
) -> RecentRuns {
    let in_second =
        |run: &Run| at.is_some_and(|at| run.key.scheduled_for.timestamp() == at.timestamp());
    RecentRuns {
        runs: read
            .iter()
            .map(|stored| &stored.run)
            .filter(|run| run.status.is_active() || in_second(run))
            .cloned()
            .collect(),
        complete: last.is_none(),
        oldest_read: last.map(|stored| stored.run.key.scheduled_for),
    }
}

/// The sort key a cursor of ours resumes after (`attribute`: the table's or the index's).
fn decode_cursor(cursor: Option<&str>, attribute: &str) -> Result<Option<String>, StoreError> {
    let Some(item) = cursor::decode(cursor)? else {
        return Ok(None);
    };
    match item.get(attribute).and_then(|v| v.as_s().ok()) {
        Some(sk) => Ok(Some(sk.clone())),
        None => Err(StoreError::BadCursor),
    }
}

/// The `active` index's `LastEvaluatedKey` for an entry, as the DynamoDB store's cursor.
fn active_cursor(shard: u32, index_sk: &str, run_key: &RunKey) -> String {
    let mut last = key(
        keys::schedule_pk(&run_key.schedule_id),
        keys::run_sk(run_key),
    );
    last.insert(GSI2PK.to_string(), s(keys::active_pk(shard)));
    last.insert(GSI2SK.to_string(), s(index_sk));
    cursor::encode(Some(&last)).unwrap_or_default()
}

#[cfg(test)]
#[path = "runs_tests.rs"]
mod tests;
