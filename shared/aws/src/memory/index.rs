//! The two sparse indexes of the in-memory ledger, in one place: which items they hold and
//! in which order, as `codec::run::encode` and `codec::schedule::encode` key them.
//!
//! `active` (non-terminal runs by shard, then by `keys::active_sk`) is kept as a map beside
//! the runs, because answering it by scanning would cost every run ever written. `due`
//! (firing schedules by `next_run_at`) is answered by scanning the schedules: one pass over
//! the fleet per tick, and no second copy that every schedule write would have to keep.

use std::collections::BTreeMap;
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

/// The `active` index: shard, then index sort key, then the run it points at.
#[derive(Debug, Default)]
pub(crate) struct ActiveIndex {
    shards: BTreeMap<u32, BTreeMap<String, RunLocation>>,
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
            if let Some(entries) = self.shards.get_mut(&shard) {
                entries.remove(&sk);
            }
        }
        if let Some((shard, sk)) = new {
            self.shards.entry(shard).or_default().insert(
                sk,
                RunLocation {
                    schedule_id: key.schedule_id.clone(),
                    run_sk: keys::run_sk(key),
                },
            );
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
