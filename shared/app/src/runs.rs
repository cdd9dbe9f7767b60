//! Building runs from schedules, and a cache of compiled schedules.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use cronledger_aws::ledger::StoredSchedule;
use cronledger_core::run::Origin;
use cronledger_core::{Issue, Run, RunKey, RunStatus, Schedule, Trigger};

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
    Run {
        key: RunKey {
            schedule_id: schedule.id().to_string(),
            scheduled_for,
            origin,
        },
        trigger,
        status: RunStatus::Pending,
        reason: None,
        window,
        business_date: schedule.business_date(&window),
        idempotency_key: schedule.idempotency_key(&window),
        replay_group_id: None,
        range_end: None,
        count: 1,
        coalesced_into: None,
        lane: Some(schedule.spec.priority.live_lane()),
        attempts: 0,
        lease: None,
        lease_epoch: 0,
        created_at,
        queued_at: None,
        started_at: None,
        completed_at: None,
        last_heartbeat_at: None,
        schedule_version,
        cron: schedule.spec.cron.clone(),
        timezone: schedule.spec.timezone.name().to_string(),
        job_id: None,
        result: None,
        forced: false,
    }
}

/// Compiled schedules by id and version: a warm Lambda parses each expression once.
#[derive(Default, Clone)]
pub struct ScheduleCache(Arc<Mutex<CompiledById>>);

/// Compiled schedules keyed by `(id, version)`.
type CompiledById = HashMap<(String, u64), Arc<Schedule>>;

/// Past this many entries the cache starts over (schedules are small; this bounds memory
/// when versions churn).
const CACHE_LIMIT: usize = 50_000;

impl ScheduleCache {
    pub fn get(&self, stored: &StoredSchedule) -> Result<Arc<Schedule>, Issue> {
        let key = (stored.spec.id.clone(), stored.version);
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = map.get(&key) {
            return Ok(s.clone());
        }
        let compiled = Arc::new(Schedule::new(stored.spec.clone())?);
        if map.len() >= CACHE_LIMIT {
            map.clear();
        }
        map.insert(key, compiled.clone());
        Ok(compiled)
    }
}
