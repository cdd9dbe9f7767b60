//! Building runs from schedules, and a cache of compiled schedules.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use cronledger_aws::{LaneError, LaneMessage, LaneQueue, LedgerStore, StoreError};
use cronledger_core::children::Child;
use cronledger_core::run::Origin;
use cronledger_core::{Issue, Lane, Reason, Run, RunKey, RunStatus, Schedule, Trigger};
use cronledger_ledger::ledger::{RunChange, StoredSchedule, Transition};

/// A fresh PENDING run of an expected occurrence (or an operator's, by `origin`), with its
/// business inputs fixed now (invariant 5).
pub fn new_run(
    schedule: &Schedule,
    schedule_version: u64,
    scheduled_for: DateTime<Utc>,
    trigger: Trigger,
    created_at: DateTime<Utc>,
) -> Run {
    new_run_with_origin(
        schedule,
        schedule_version,
        scheduled_for,
        trigger,
        Origin::Expected,
        created_at,
    )
}

pub fn new_run_with_origin(
    schedule: &Schedule,
    schedule_version: u64,
    scheduled_for: DateTime<Utc>,
    trigger: Trigger,
    origin: Origin,
    created_at: DateTime<Utc>,
) -> Run {
    let window = schedule.window_for(scheduled_for);
    schedule.pending_run(
        scheduled_for,
        window,
        origin,
        trigger,
        created_at,
        schedule_version,
    )
}

/// Compiled schedules by id and version: a warm Lambda parses each expression once.
#[derive(Default, Clone)]
pub struct ScheduleCache(Arc<Mutex<Compiled>>);

#[derive(Default)]
struct Compiled {
    by_version: HashMap<(String, u64), Arc<Schedule>>,
    /// The version seen last, per id: a hint for reads planned before the schedule is read.
    latest: HashMap<String, Arc<Schedule>>,
}

/// Past this many entries the cache starts over (schedules are small; this bounds memory
/// when versions churn).
const CACHE_LIMIT: usize = 50_000;

impl ScheduleCache {
    pub fn get(&self, stored: &StoredSchedule) -> Result<Arc<Schedule>, Issue> {
        let key = (stored.spec.id.clone(), stored.version);
        let mut cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = cache.by_version.get(&key) {
            return Ok(s.clone());
        }
        let compiled = Arc::new(stored.schedule()?);
        if cache.by_version.len() >= CACHE_LIMIT {
            cache.by_version.clear();
            cache.latest.clear();
        }
        cache.by_version.insert(key, compiled.clone());
        cache
            .latest
            .insert(stored.spec.id.clone(), compiled.clone());
        Ok(compiled)
    }

    /// The schedule as this process saw it last (any version), if it has.
    pub fn last_seen(&self, id: &str) -> Option<Arc<Schedule>> {
        let cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        cache.latest.get(id).cloned()
    }
}

/// Claims a PENDING run (PENDING -> QUEUED, conditioned on status and epoch, so racing
/// senders send it once), sends it, and records the message id. `false` when another writer
/// moved the run first. A crash after the claim leaves it QUEUED without a message, which
/// the reconciler's QUEUED-too-long rule sends again.
pub async fn claim_and_send<E: From<StoreError> + From<LaneError>>(
    store: &dyn LedgerStore,
    lanes: &dyn LaneQueue,
    run: &Run,
    lane: Lane,
    now: DateTime<Utc>,
) -> Result<bool, E> {
    if !claim(store, run, lane, now).await? {
        return Ok(false);
    }
    send_run(store, lanes, run, RunStatus::Queued, lane, now).await?;
    Ok(true)
}

/// The claim of [`claim_and_send`] alone: `true` when this caller moved the run to QUEUED
/// and must send it (with [`send_claimed`], many at once).
pub async fn claim(
    store: &dyn LedgerStore,
    run: &Run,
    lane: Lane,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let claiming = Transition::Enqueue {
        lane: Some(lane),
        lane_was: None,
        job_id: None,
        reason: kept_reason(run),
    };
    let claim = RunChange::new(RunStatus::Pending, run.lease_epoch, now, claiming);
    match store.transition_run(&run.key, &claim).await {
        Ok(_) => Ok(true),
        Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Sends the messages of claimed (QUEUED) runs in batches (`SendMessageBatch`, 10 a
/// request) and records each id, as [`send_run`] does one by one; one result per run. A
/// failed send leaves its run QUEUED without a message, for the QUEUED-too-long rule.
pub async fn send_claimed(
    store: &dyn LedgerStore,
    lanes: &dyn LaneQueue,
    runs: &[(Run, Lane)],
    now: DateTime<Utc>,
) -> Vec<Result<(), LaneError>> {
    let messages: Vec<(LaneMessage, std::time::Duration)> = runs
        .iter()
        .map(|(run, lane)| {
            let message = LaneMessage::next_attempt(run, *lane);
            (message, std::time::Duration::ZERO)
        })
        .collect();
    let sent = lanes.send_many(&messages).await;
    let recorded = runs.iter().zip(sent).map(|((run, lane), sent)| async move {
        let job_id = sent?;
        record_sent(store, run, RunStatus::Queued, *lane, job_id, now).await;
        Ok::<(), LaneError>(())
    });
    futures_util::future::join_all(recorded).await
}

/// Sends the run's message (same identity: run key, idempotency key, window) and records
/// its id with an ENQUEUE from `status` (best effort: a worker may have started it, so only
/// the send can fail).
pub async fn send_run(
    store: &dyn LedgerStore,
    lanes: &dyn LaneQueue,
    run: &Run,
    status: RunStatus,
    lane: Lane,
    now: DateTime<Utc>,
) -> Result<(), LaneError> {
    let message = LaneMessage::next_attempt(run, lane);
    let job_id = lanes.send(&message, std::time::Duration::ZERO).await?;
    record_sent(store, run, status, lane, job_id, now).await;
    Ok(())
}

/// Records a sent message's id on its run (best effort, see [`send_run`]).
async fn record_sent(
    store: &dyn LedgerStore,
    run: &Run,
    status: RunStatus,
    lane: Lane,
    job_id: String,
    now: DateTime<Utc>,
) {
    let sent = Transition::Enqueue {
        lane: Some(lane),
        lane_was: None,
        job_id: Some(job_id),
        reason: kept_reason(run),
    };
    let change = RunChange::new(status, run.lease_epoch, now, sent);
    if let Err(e) = store.transition_run(&run.key, &change).await {
        tracing::debug!(run = %run.key, error = %e, "message id not recorded");
    }
}

/// The reason a sent run keeps: QUEUED_BEHIND stays until the run starts, so the worker
/// knows it waited by policy (QUEUE_NEW) and does not judge its start as late.
fn kept_reason(run: &Run) -> Option<Reason> {
    run.reason.filter(|r| *r == Reason::QueuedBehind)
}

/// Every child one step of `parent` answered, by index, page after page.
pub async fn children_of_run(
    store: &dyn LedgerStore,
    parent: &RunKey,
    step: u32,
) -> Result<Vec<Child>, StoreError> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store
            .children_of(parent, step, CHILDREN_PAGE, cursor.as_deref())
            .await?;
        all.extend(page.items);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
}

/// Children read per Query page.
const CHILDREN_PAGE: u32 = 1000;

/// Children's messages handed to the lanes per call (sent ten a request).
const CHILDREN_SEND_CHUNK: usize = 100;

/// Sends the messages of `run`'s children `indexes` (of `step`) to `lane`; how many went.
/// A failed send is left for the reconciler, which sends lost children again.
pub async fn send_children(
    lanes: &dyn LaneQueue,
    run: &Run,
    lane: Lane,
    step: u32,
    indexes: &[u32],
) -> usize {
    let mut sent = 0;
    for chunk in indexes.chunks(CHILDREN_SEND_CHUNK) {
        let messages: Vec<(LaneMessage, std::time::Duration)> = chunk
            .iter()
            .map(|i| {
                let message = LaneMessage::for_child(run, lane, step, *i);
                (message, std::time::Duration::ZERO)
            })
            .collect();
        let results = lanes.send_many(&messages).await;
        let ok = results.iter().filter(|r| r.is_ok()).count();
        if ok < results.len() {
            tracing::warn!(
                failed = results.len() - ok,
                "children's sends failed; the reconciler will send them"
            );
        }
        sent += ok;
    }
    sent
}
