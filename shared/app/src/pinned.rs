//! Which job a run executes: the job (target and payload) of the schedule version the run
//! was created under, whatever the schedule says now (invariant 12). An edit between a
//! failure and its retry, or while a run waits in its lane, changes what later runs do,
//! never what an earlier one does: the window and business inputs are fixed when the run
//! is created (invariant 5), and so is the work done for them.
//!
//! Only the job is pinned. The policies (overlap, misfire, grace, max_attempts,
//! idempotent, ...) are the schedule's current ones: an operator who tightens a policy
//! wants it to hold at once, for the runs already in flight too.
//!
//! Cost: a live delivery has already read the schedule, so a run of the current version
//! needs nothing more. A run of an older version costs one GetItem on that version's
//! audit entry, once per process: versions never change, so the cache never goes stale.
//!
//! An operator may re-pin a run to the current version when retrying it (`definition:
//! current` on the retry route), which is the only way a run changes version.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use cronledger_aws::StoreError;
use cronledger_core::{JobSpec, Run};
use cronledger_ledger::ledger::StoredSchedule;
use cronledger_ledger::LedgerStore;

/// Versions a worker remembers by default: a few per schedule edited while runs were in
/// flight, far more than a lane's batch ever holds.
pub const PINNED_JOBS_CAPACITY: usize = 256;

/// The jobs of past schedule versions this process has read, keyed by (schedule id,
/// version), oldest forgotten first once `capacity` is reached.
#[derive(Debug)]
pub struct PinnedJobs {
    capacity: usize,
    cached: Mutex<Cached>,
}

#[derive(Debug, Default)]
struct Cached {
    jobs: HashMap<(String, u64), JobSpec>,
    /// Insertion order, for eviction.
    order: VecDeque<(String, u64)>,
}

impl PinnedJobs {
    /// A cache of at most `capacity` versions (at least one).
    pub fn new(capacity: usize) -> PinnedJobs {
        PinnedJobs {
            capacity: capacity.max(1),
            cached: Mutex::new(Cached::default()),
        }
    }

    /// The job of `version` of schedule `id`, if this process has read it.
    pub fn get(&self, id: &str, version: u64) -> Option<JobSpec> {
        self.lock().jobs.get(&(id.to_string(), version)).cloned()
    }

    /// How many versions are remembered.
    pub fn len(&self) -> usize {
        self.lock().jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn insert(&self, id: &str, version: u64, job: JobSpec) {
        let key = (id.to_string(), version);
        let mut cached = self.lock();
        if cached.jobs.insert(key.clone(), job).is_some() {
            // Two deliveries raced to read the same version: it was already counted.
            return;
        }
        cached.order.push_back(key);
        while cached.order.len() > self.capacity {
            if let Some(oldest) = cached.order.pop_front() {
                cached.jobs.remove(&oldest);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Cached> {
        // The map is consistent after every statement: a panic elsewhere leaves it usable.
        self.cached.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for PinnedJobs {
    fn default() -> PinnedJobs {
        PinnedJobs::new(PINNED_JOBS_CAPACITY)
    }
}

/// The job `run` executes, given its schedule as just read (`stored`): the stored job when
/// the run was created under the stored version (no read), else the job of the run's own
/// version, from the cache or from that version's audit entry (one read).
///
/// `SCHEDULE_VERSION_NOT_FOUND` when the schedule has no record of the run's version;
/// `STORE_INVALID_REQUEST` when `run` is not a run of `stored`.
pub async fn job_of_run(
    store: &dyn LedgerStore,
    stored: &StoredSchedule,
    run: &Run,
    cache: &PinnedJobs,
) -> Result<JobSpec, StoreError> {
    let id = run.key.schedule_id.as_str();
    if id != stored.id() {
        return Err(StoreError::InvalidRequest(format!(
            "run `{}` is not a run of schedule `{}`",
            run.key,
            stored.id()
        )));
    }
    let version = run.schedule_version;
    if version == stored.version {
        return Ok(stored.spec.job.clone());
    }
    if let Some(job) = cache.get(id, version) {
        return Ok(job);
    }
    let job = store.schedule_spec_at(id, version).await?.job;
    cache.insert(id, version, job.clone());
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn noop(tag: u32) -> JobSpec {
        JobSpec::Noop {
            duration: Default::default(),
            duration_ms: 0,
            fail_times: 0,
            fail_before: None,
            affected: None,
            guard: None,
            children: 0,
            fail_children: 0,
            count: None,
            count_sequence: Vec::new(),
            payload: json!({ "tag": tag }),
        }
    }

    #[test]
    fn remembers_each_version_of_each_schedule_apart() {
        let cache = PinnedJobs::new(8);
        cache.insert("a", 1, noop(1));
        cache.insert("a", 2, noop(2));
        cache.insert("b", 1, noop(3));
        assert_eq!(cache.get("a", 1), Some(noop(1)));
        assert_eq!(cache.get("a", 2), Some(noop(2)));
        assert_eq!(cache.get("b", 1), Some(noop(3)));
        assert_eq!(cache.get("b", 2), None);
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn stays_within_its_capacity_forgetting_the_oldest_first() {
        let cache = PinnedJobs::new(2);
        cache.insert("a", 1, noop(1));
        cache.insert("a", 2, noop(2));
        cache.insert("a", 3, noop(3));
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get("a", 1), None);
        assert_eq!(cache.get("a", 2), Some(noop(2)));
        assert_eq!(cache.get("a", 3), Some(noop(3)));
    }

    #[test]
    fn a_version_read_twice_is_kept_once() {
        let cache = PinnedJobs::new(2);
        cache.insert("a", 1, noop(1));
        cache.insert("a", 1, noop(1));
        cache.insert("a", 2, noop(2));
        // Had the repeat taken a slot, version 1 would be gone by now.
        assert_eq!(cache.get("a", 1), Some(noop(1)));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn a_zero_capacity_still_holds_one() {
        let cache = PinnedJobs::new(0);
        cache.insert("a", 1, noop(1));
        assert_eq!(cache.get("a", 1), Some(noop(1)));
    }
}
