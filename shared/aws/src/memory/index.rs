//! The two sparse indexes of the in-memory ledger, in one place: which items they hold and
//! in which order, as `codec::run::encode` and `codec::schedule::encode` key them.
//!
//! `active` (non-terminal runs by shard, then by `keys::active_sk`) is kept as a map beside
//! the runs, because answering it by scanning would cost every run ever written. `due`
//! (firing schedules by `next_run_at`) is answered by scanning the schedules: one pass over
//! the fleet per tick, and no second copy that every schedule write would have to keep.
//!
//! DynamoDB keeps a global secondary index eventually consistent with its table: an entry
//! appears, moves or leaves a little after the write. `active` can lag the same way
//! ([`IndexLag`]): each change becomes visible after that many more store operations, so a
//! reader that trusts an index read to be current fails here before it fails in AWS.
//! Readers resolve entries to the runs as stored now (as the DynamoDB store fetches the
//! items an index query names), so a lagging entry may name a run whose status moved on.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound::{Excluded, Included, Unbounded};

use chrono::{DateTime, Utc};
use cronledger_core::{RunKey, RunStatus};

use crate::keys;
use crate::ledger::StoredSchedule;

/// Where an `active` index entry's run is stored: schedule id, run sort key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunLocation {
    pub schedule_id: String,
    pub run_sk: String,
}

/// How far the in-memory `active` index trails its table: each entry's change becomes
/// visible to readers this many store operations after its write (0: at once, as the
/// conformance suite runs). A request count, not a duration, so a simulation on a virtual
/// clock lags the same on any machine; readers that poll (the ticker, the reconciler) see
/// every change after a few passes, as they would in AWS within about a second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexLag {
    pub operations: u64,
}

/// One change of an index entry, waiting to become visible.
#[derive(Debug)]
enum EntryChange {
    Remove(u32, String),
    Insert(u32, String, RunLocation),
}

/// The `active` index: shard, then index sort key, then the run it points at, as readers
/// see it (see [`IndexLag`]).
#[derive(Debug, Default)]
pub(crate) struct ActiveIndex {
    shards: BTreeMap<u32, BTreeMap<String, RunLocation>>,
    lag: IndexLag,
    /// Store operations so far.
    operations: u64,
    /// Changes not visible yet, with the request count at which they become visible.
    pending: VecDeque<(u64, EntryChange)>,
}

/// The `active` index key of a run in `status`, when it is in the index (non-terminal
/// runs only).
fn active_entry(key: &RunKey, status: RunStatus, shards: u32) -> Option<(u32, String)> {
    status.is_active().then(|| {
        (
            keys::shard_of(&key.schedule_id, shards),
            keys::active_sk(status, key),
        )
    })
}

impl ActiveIndex {
    pub fn lagging(lag: IndexLag) -> ActiveIndex {
        ActiveIndex {
            lag,
            ..ActiveIndex::default()
        }
    }

    /// One more store operation: the changes whose lag has passed become visible.
    pub fn tick(&mut self) {
        self.operations += 1;
        while self
            .pending
            .front()
            .is_some_and(|(visible_at, _)| *visible_at <= self.operations)
        {
            if let Some((_, change)) = self.pending.pop_front() {
                self.apply(change);
            }
        }
    }

    fn change(&mut self, change: EntryChange) {
        if self.lag.operations == 0 {
            self.apply(change);
        } else {
            self.pending
                .push_back((self.operations + self.lag.operations, change));
        }
    }

    fn apply(&mut self, change: EntryChange) {
        match change {
            EntryChange::Remove(shard, sk) => {
                if let Some(entries) = self.shards.get_mut(&shard) {
                    entries.remove(&sk);
                }
            }
            EntryChange::Insert(shard, sk, at) => {
                self.shards.entry(shard).or_default().insert(sk, at);
            }
        }
    }

    /// Moves a run's entry from where its status `before` put it to where `after` puts it
    /// (either may be absent: a new run, or a run leaving the index).
    pub fn replace(
        &mut self,
        key: &RunKey,
        before: Option<RunStatus>,
        after: Option<RunStatus>,
        shards: u32,
    ) {
        let old = before.and_then(|status| active_entry(key, status, shards));
        let new = after.and_then(|status| active_entry(key, status, shards));
        if old == new {
            return;
        }
        if let Some((shard, sk)) = old {
            self.change(EntryChange::Remove(shard, sk));
        }
        if let Some((shard, sk)) = new {
            let at = RunLocation {
                schedule_id: key.schedule_id.clone(),
                run_sk: keys::run_sk(key),
            };
            self.change(EntryChange::Insert(shard, sk, at));
        }
    }

    /// The shard's entries with sort keys between `low` and `high` (both included; `low`
    /// not above `high`), in index order.
    pub fn range<'a>(
        &'a self,
        shard: u32,
        low: &'a str,
        high: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a RunLocation)> + 'a {
        self.shards
            .get(&shard)
            .into_iter()
            .flat_map(move |entries| entries.range::<str, _>((Included(low), Included(high))))
    }

    /// The shard's entries after `after` (exclusive; from the start without it) whose sort
    /// keys begin with `prefix`, in index order.
    pub fn from<'a>(
        &'a self,
        shard: u32,
        prefix: &'a str,
        after: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a String, &'a RunLocation)> + 'a {
        // A cursor before the prefix (or none) starts at the prefix.
        let start = match after {
            Some(sk) if sk >= prefix => Excluded(sk),
            _ => Included(prefix),
        };
        self.shards
            .get(&shard)
            .into_iter()
            .flat_map(move |entries| entries.range::<str, _>((start, Unbounded)))
            .take_while(move |(sk, _)| sk.starts_with(prefix))
    }
}

/// The `due` index order of a firing schedule: `keys::due_sk`'s whole second, then the id.
/// `None` when the schedule is not in the index (`StoredSchedule::fires`).
pub(crate) fn due_order(schedule: &StoredSchedule) -> Option<(i64, &str)> {
    let next = schedule.next_run_at.filter(|_| schedule.fires())?;
    Some((next.timestamp(), schedule.id()))
}

/// The `due` index entries of `shard` at or before `until`'s second (`keys::due_sk_bound`),
/// in index order.
pub(crate) fn due_in<'a>(
    schedules: impl Iterator<Item = &'a StoredSchedule>,
    shard: u32,
    until: DateTime<Utc>,
) -> Vec<&'a StoredSchedule> {
    let bound = until.timestamp();
    let mut due: Vec<((i64, &str), &StoredSchedule)> = schedules
        .filter(|s| s.shard == shard)
        .filter_map(|s| due_order(s).map(|order| (order, s)))
        .filter(|((second, _), _)| *second <= bound)
        .collect();
    due.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    due.into_iter().map(|(_, s)| s).collect()
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn visible(index: &ActiveIndex, key: &RunKey) -> Vec<String> {
        let shard = keys::shard_of(&key.schedule_id, 1);
        index
            .from(shard, "", None)
            .map(|(sk, _)| sk.clone())
            .collect()
    }

    #[test]
    fn a_lagging_index_shows_each_change_that_many_operations_later() {
        let key = RunKey::expected("a", Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap());
        let mut index = ActiveIndex::lagging(IndexLag { operations: 2 });
        index.replace(&key, None, Some(RunStatus::Pending), 1);
        assert!(visible(&index, &key).is_empty(), "not yet");
        index.tick();
        assert!(visible(&index, &key).is_empty(), "one operation later");
        index.tick();
        let pending = visible(&index, &key);
        assert_eq!(pending.len(), 1, "two operations later");
        // A move: the old entry stays, and the new one is missing, until the lag passes.
        index.replace(&key, Some(RunStatus::Pending), Some(RunStatus::Running), 1);
        index.tick();
        assert_eq!(visible(&index, &key), pending);
        index.tick();
        let running = visible(&index, &key);
        assert_eq!(running.len(), 1);
        assert_ne!(running, pending);
        // No lag: at once.
        let mut current = ActiveIndex::default();
        current.replace(&key, None, Some(RunStatus::Pending), 1);
        assert_eq!(visible(&current, &key), pending);
    }
}
