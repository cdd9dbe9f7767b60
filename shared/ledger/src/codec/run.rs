//! Run items: one attribute per field, so condition expressions can test status, lease
//! epoch and the rest directly.

use cronledger_core::children::ChildCounts;
use cronledger_core::retention::DEFAULT_RETENTION;
use cronledger_core::run::{Lease, Origin, RunResult};
use cronledger_core::steps::StepCheckpoint;
use cronledger_core::{IdempotencyKey, Run, RunKey, RunStatus, Span, Window};

use crate::error::StoreError;
use crate::item::{Item, ItemReader, ItemWriter};
use crate::keys::{self, EXPIRES_AT, GSI2PK, GSI2SK, PK, SK};

pub const TYPE: &str = "type";
pub const RUN_TYPE: &str = "RUN";

pub const SCHEDULE_ID: &str = "schedule_id";
pub const SCHEDULED_FOR: &str = "scheduled_for";
pub const ORIGIN: &str = "origin";
pub const ORIGIN_ID: &str = "origin_id";
pub const TRIGGER: &str = "trigger";
pub const STATUS: &str = "status";
pub const REASON: &str = "reason";
pub const WINDOW_START: &str = "window_start";
pub const WINDOW_END: &str = "window_end";
pub const BUSINESS_DATE: &str = "business_date";
pub const IDEMPOTENCY_KEY: &str = "idempotency_key";
pub const REPLAY_GROUP_ID: &str = "replay_group_id";
pub const RANGE_END: &str = "range_end";
pub const COUNT: &str = "count";
pub const COALESCED_INTO: &str = "coalesced_into";
pub const LANE: &str = "lane";
pub const ATTEMPTS: &str = "attempts";
pub const LEASE_OWNER: &str = "lease_owner";
pub const LEASE_UNTIL: &str = "lease_until";
pub const LEASE_EPOCH: &str = "lease_epoch";
pub const CREATED_AT: &str = "created_at";
pub const UPDATED_AT: &str = "updated_at";
pub const QUEUED_AT: &str = "queued_at";
pub const STARTED_AT: &str = "started_at";
pub const COMPLETED_AT: &str = "completed_at";
pub const LAST_HEARTBEAT_AT: &str = "last_heartbeat_at";
pub const SCHEDULE_VERSION: &str = "schedule_version";
pub const CRON: &str = "cron";
pub const TIMEZONE: &str = "timezone";
pub const JOB_ID: &str = "job_id";
pub const RESULT_COUNT: &str = "result_count";
pub const RESULT_CHECKSUM: &str = "result_checksum";
pub const RESULT_ERROR_CODE: &str = "result_error_code";
pub const RESULT_MESSAGE: &str = "result_message";
pub const EXPECTED_COUNT: &str = "expected_count";
pub const EXPECTED_CHECKSUM: &str = "expected_checksum";
/// SUSPECT on a success outside its schedule's `expect` band (absent otherwise), and why.
pub const QUALITY: &str = "quality";
pub const QUALITY_REASON: &str = "quality_reason";
/// A `steps` job's checkpoints, as JSON (absent for a one-call job).
pub const STEPS: &str = "steps";
/// A run's children counters (see `cronledger_core::children`), absent without children.
pub const CHILDREN_TOTAL: &str = "children_total";
pub const CHILDREN_SUCCEEDED: &str = "children_succeeded";
pub const CHILDREN_FAILED: &str = "children_failed";
pub const CHILDREN_STEP: &str = "children_step";
/// A backfill's own verify source on its runs, as JSON (absent: the schedule's).
pub const VERIFY: &str = "verify";
/// Present (true) only on a cascading backfill's runs.
pub const CASCADE: &str = "cascade";
/// Present (true) only on runs an operator forced.
pub const FORCED: &str = "forced";
/// The run's retention in seconds: a terminal transition adds it to its end for the TTL.
pub const RETENTION_SECONDS: &str = "retention_seconds";

/// The full item for a new run; active runs carry the sparse `active` index keys.
pub fn encode(run: &Run, shards: u32) -> Item {
    let (origin, origin_id) = match &run.key.origin {
        Origin::Expected => ("EXPECTED", None),
        Origin::Manual(id) => ("MANUAL", Some(id.as_str())),
        Origin::Backfill(id) => ("BACKFILL", Some(id.as_str())),
    };
    let result = run.result.clone().unwrap_or_default();
    let mut w = ItemWriter::new()
        .s(PK, keys::schedule_pk(&run.key.schedule_id))
        .s(SK, keys::run_sk(&run.key))
        .s(TYPE, RUN_TYPE)
        .s(SCHEDULE_ID, &run.key.schedule_id)
        .time(SCHEDULED_FOR, run.key.scheduled_for)
        .s(ORIGIN, origin)
        .opt_s(ORIGIN_ID, origin_id)
        .s(TRIGGER, run.trigger.as_str())
        .s(STATUS, run.status.as_str())
        .opt_s(REASON, run.reason.map(|r| r.as_str()))
        .time(WINDOW_START, run.window.start)
        .time(WINDOW_END, run.window.end)
        .s(BUSINESS_DATE, run.business_date.to_string())
        .s(IDEMPOTENCY_KEY, run.idempotency_key.as_str())
        .opt_s(REPLAY_GROUP_ID, run.replay_group_id.as_deref())
        .opt_time(RANGE_END, run.range_end)
        .n(COUNT, run.count)
        .opt_time(COALESCED_INTO, run.coalesced_into)
        .opt_s(LANE, run.lane.map(|l| l.as_str()))
        .n(ATTEMPTS, run.attempts)
        .opt_s(LEASE_OWNER, run.lease.as_ref().map(|l| l.owner.as_str()))
        .opt_time(LEASE_UNTIL, run.lease.as_ref().map(|l| l.until))
        .n(LEASE_EPOCH, run.lease_epoch)
        .time(CREATED_AT, run.created_at)
        .time(UPDATED_AT, run.updated_at)
        .opt_time(QUEUED_AT, run.queued_at)
        .opt_time(STARTED_AT, run.started_at)
        .opt_time(COMPLETED_AT, run.completed_at)
        .opt_time(LAST_HEARTBEAT_AT, run.last_heartbeat_at)
        .n(SCHEDULE_VERSION, run.schedule_version)
        .s(CRON, &run.cron)
        .s(TIMEZONE, &run.timezone)
        .opt_s(JOB_ID, run.job_id.as_deref())
        .opt_n(RESULT_COUNT, result.count)
        .opt_s(RESULT_CHECKSUM, result.checksum)
        .opt_s(RESULT_ERROR_CODE, result.error_code)
        .opt_s(RESULT_MESSAGE, result.message)
        .opt_n(EXPECTED_COUNT, result.expected_count)
        .opt_s(EXPECTED_CHECKSUM, result.expected_checksum)
        .opt_s(QUALITY, result.quality.map(|q| q.as_str()))
        .opt_s(QUALITY_REASON, result.quality_reason.map(|q| q.as_str()))
        .n(RETENTION_SECONDS, run.retention.as_secs())
        .opt_n(EXPIRES_AT, run.expires_at().map(|t| t.timestamp()));
    if run.forced {
        w = w.bool(FORCED, true);
    }
    if run.cascade {
        w = w.bool(CASCADE, true);
    }
    if let Some(verify) = &run.verify {
        // Plain data with string keys: serialization cannot fail.
        w = w.s(VERIFY, serde_json::to_string(verify).unwrap_or_default());
    }
    if !run.steps.is_empty() {
        w = w.s(STEPS, steps_json(&run.steps));
    }
    if let Some(c) = &run.children {
        w = w
            .n(CHILDREN_TOTAL, c.total)
            .n(CHILDREN_SUCCEEDED, c.succeeded)
            .n(CHILDREN_FAILED, c.failed)
            .n(CHILDREN_STEP, c.step);
    }
    if run.status.is_active() {
        let shard = keys::shard_of(&run.key.schedule_id, shards);
        w = w
            .s(GSI2PK, keys::active_pk(shard))
            .s(GSI2SK, keys::active_sk(&run.key));
    }
    w.build()
}

pub fn decode(item: &Item) -> Result<Run, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, RUN_TYPE)?;
    let key = RunKey {
        schedule_id: r.s(SCHEDULE_ID)?.to_string(),
        scheduled_for: r.time(SCHEDULED_FOR)?,
        origin: decode_origin(&r)?,
    };
    if keys::run_sk(&key) != r.sk() {
        return Err(r.malformed(SK, format!("does not match the run's key `{key}`")));
    }
    let lease = match (r.opt_s(LEASE_OWNER)?, r.opt_time(LEASE_UNTIL)?) {
        (Some(owner), Some(until)) => Some(Lease {
            owner: owner.to_string(),
            until,
            epoch: r.n(LEASE_EPOCH)?,
        }),
        (None, None) => None,
        _ => return Err(r.malformed(LEASE_OWNER, "is set without lease_until, or the reverse")),
    };
    let result = RunResult {
        count: r.opt_n(RESULT_COUNT)?,
        checksum: r.opt_s(RESULT_CHECKSUM)?.map(str::to_string),
        error_code: r.opt_s(RESULT_ERROR_CODE)?.map(str::to_string),
        message: r.opt_s(RESULT_MESSAGE)?.map(str::to_string),
        expected_count: r.opt_n(EXPECTED_COUNT)?,
        expected_checksum: r.opt_s(EXPECTED_CHECKSUM)?.map(str::to_string),
        quality: r.opt_parsed(QUALITY)?,
        quality_reason: r.opt_parsed(QUALITY_REASON)?,
    };
    Ok(Run {
        key,
        trigger: r.parsed(TRIGGER)?,
        status: r.parsed::<RunStatus>(STATUS)?,
        reason: r.opt_parsed(REASON)?,
        window: Window::new(r.time(WINDOW_START)?, r.time(WINDOW_END)?),
        business_date: r.date(BUSINESS_DATE)?,
        idempotency_key: IdempotencyKey::from_stored(r.s(IDEMPOTENCY_KEY)?.to_string()),
        replay_group_id: r.opt_s(REPLAY_GROUP_ID)?.map(str::to_string),
        range_end: r.opt_time(RANGE_END)?,
        count: r.n(COUNT)?,
        coalesced_into: r.opt_time(COALESCED_INTO)?,
        lane: r.opt_parsed(LANE)?,
        attempts: r.n(ATTEMPTS)?,
        lease,
        lease_epoch: r.n(LEASE_EPOCH)?,
        created_at: r.time(CREATED_AT)?,
        updated_at: r.time(UPDATED_AT)?,
        queued_at: r.opt_time(QUEUED_AT)?,
        started_at: r.opt_time(STARTED_AT)?,
        completed_at: r.opt_time(COMPLETED_AT)?,
        last_heartbeat_at: r.opt_time(LAST_HEARTBEAT_AT)?,
        schedule_version: r.n(SCHEDULE_VERSION)?,
        cron: r.s(CRON)?.to_string(),
        timezone: r.s(TIMEZONE)?.to_string(),
        job_id: r.opt_s(JOB_ID)?.map(str::to_string),
        result: (result != RunResult::default()).then_some(result),
        forced: r.opt_bool(FORCED)?.unwrap_or(false),
        cascade: r.opt_bool(CASCADE)?.unwrap_or(false),
        verify: match r.opt_s(VERIFY)? {
            Some(text) => Some(
                serde_json::from_str(text)
                    .map_err(|e| r.malformed(VERIFY, format!("is not a target: {e}")))?,
            ),
            None => None,
        },
        retention: r
            .opt_n(RETENTION_SECONDS)?
            .map_or(DEFAULT_RETENTION, Span::seconds),
        steps: match r.opt_s(STEPS)? {
            Some(text) => serde_json::from_str(text).map_err(|e| {
                r.malformed(STEPS, format!("is not a list of step checkpoints: {e}"))
            })?,
            None => Vec::new(),
        },
        children: match r.opt_n::<u32>(CHILDREN_TOTAL)? {
            Some(total) => Some(ChildCounts {
                total,
                succeeded: r.opt_n(CHILDREN_SUCCEEDED)?.unwrap_or(0),
                failed: r.opt_n(CHILDREN_FAILED)?.unwrap_or(0),
                step: r.opt_n(CHILDREN_STEP)?.unwrap_or(0),
            }),
            None => None,
        },
    })
}

/// The `steps` attribute's text: plain data, so serialization cannot fail.
pub fn steps_json(steps: &[StepCheckpoint]) -> String {
    serde_json::to_string(steps).unwrap_or_else(|_| "[]".to_string())
}

fn decode_origin(r: &ItemReader<'_>) -> Result<Origin, StoreError> {
    let id = || r.s(ORIGIN_ID).map(str::to_string);
    match r.s(ORIGIN)? {
        "EXPECTED" => Ok(Origin::Expected),
        "MANUAL" => Ok(Origin::Manual(id()?)),
        "BACKFILL" => Ok(Origin::Backfill(id()?)),
        other => Err(r.malformed(
            ORIGIN,
            format!("`{other}` is not EXPECTED, MANUAL or BACKFILL"),
        )),
    }
}
