//! A run's transition as one write, planned once: both stores apply [`transition`]'s
//! [`Expr`] (DynamoDB renders it, the memory store evaluates it on its item) and explain a
//! failed condition the same way ([`refusal`]).

use cronledger_core::retention::{self, DEFAULT_RETENTION, KEPT_LONGER};
use cronledger_core::{
    AttemptEnd, AttemptOutcome, AttemptStart, Run, RunEvent, RunKey, RunStatus, Trigger,
};

use crate::codec::attempt as attempts;
use crate::codec::run as codec;
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{n, s, time, Value};
use crate::keys::{self, EXPIRES_AT, GSI2PK, GSI2SK, PK};
use crate::ledger::RunChange;

/// The write of `change` to the run at `run_key`, whose target status is `to` (from
/// [`RunChange::target`]): its conditions (the run exists, at the status and lease epoch
/// read, on the lane read, not planned already) and its updates (status, reason, the
/// `active` index entry, the lease, the attempt history, the TTL, what the change carries).
pub fn transition(
    run_key: &RunKey,
    change: &RunChange,
    to: RunStatus,
    shards: u32,
) -> Result<Expr, StoreError> {
    let at = time(change.at);
    let mut e = Expr::new();
    e.set(codec::STATUS, s(to.as_str()))
        .set(codec::UPDATED_AT, at.clone());
    match change.transition.reason() {
        Some(reason) => e.set(codec::REASON, s(reason.as_str())),
        None => e.remove(codec::REASON),
    };
    if to.is_active() {
        let shard = keys::shard_of(&run_key.schedule_id, shards);
        e.set(GSI2PK, s(keys::active_pk(shard)))
            .set(GSI2SK, s(keys::active_sk(run_key)));
    } else {
        // Terminal (or waiting for an operator): out of the stuck-run scan.
        e.remove(GSI2PK).remove(GSI2SK);
    }
    if let Some(lease) = change.transition.lease() {
        e.set(codec::LEASE_OWNER, s(&lease.owner))
            .set(codec::LEASE_UNTIL, time(lease.until));
    }
    // The attempt history rides on the same write (see `codec::attempt`): the attempt
    // this change ends (epoch n), then the one it opens (n + 1).
    if let Some(outcome) = AttemptOutcome::of(change.from, change.event()) {
        let result = change.transition.result().cloned().unwrap_or_default();
        let end = AttemptEnd {
            finished_at: change.at,
            outcome,
            status: to,
            reason: change.transition.reason(),
            error_code: result.error_code,
            message: result.message,
        };
        e.set(
            &attempts::end_attribute(change.epoch),
            s(attempts::to_json(&end)?),
        );
    }
    if change.opens_epoch() {
        let opening = change.epoch + 1;
        e.set(codec::LEASE_EPOCH, n(opening))
            .add(codec::ATTEMPTS, 1)
            .set(codec::STARTED_AT, at.clone())
            .set(codec::LAST_HEARTBEAT_AT, at.clone());
        let start = AttemptStart {
            started_at: change.at,
            worker: change
                .transition
                .lease()
                .map(|l| l.owner.clone())
                .unwrap_or_default(),
        };
        e.set(
            &attempts::start_attribute(opening),
            s(attempts::to_json(&start)?),
        );
        if let Some(old) = attempts::dropped_by(opening) {
            e.remove(&attempts::start_attribute(old))
                .remove(&attempts::end_attribute(old));
        }
    }
    match change.event() {
        RunEvent::Heartbeat => {
            e.set(codec::LAST_HEARTBEAT_AT, at.clone());
        }
        RunEvent::Enqueue => {
            e.set(codec::QUEUED_AT, at.clone());
        }
        _ => {}
    }
    if to.is_terminal() {
        e.set(codec::COMPLETED_AT, at);
        // The TTL (see `cronledger_core::retention`): from the end, by the run's own
        // retention, or the longer horizon of what explains trouble.
        let ended = n(change.at.timestamp());
        if retention::kept_longer(to, change.transition.reason()) {
            e.set(
                EXPIRES_AT,
                n(change.at.timestamp() + KEPT_LONGER.as_delta().num_seconds()),
            );
        } else {
            e.set_sum(
                EXPIRES_AT,
                ended,
                codec::RETENTION_SECONDS,
                n(DEFAULT_RETENTION.as_secs()),
            );
        }
    } else {
        // Moving again (an operator's retry of a FAILED run): nothing may expire it.
        e.remove(EXPIRES_AT);
    }
    e.set_opt(
        codec::COALESCED_INTO,
        change.transition.coalesced_into().map(time),
    );
    // An operator's retry with the current definition: the next attempts execute that
    // version's job. The window and business inputs stay as created (invariant 5).
    e.set_opt(
        codec::SCHEDULE_VERSION,
        change.transition.schedule_version().map(n),
    );
    // An operator's retry says whether the run's success repairs its dependents.
    match change.transition.cascade() {
        Some(true) => {
            e.set(codec::CASCADE, Value::Bool(true));
        }
        Some(false) => {
            e.remove(codec::CASCADE);
        }
        None => {}
    }
    e.set_opt(codec::JOB_ID, change.transition.job_id().map(s))
        .set_opt(codec::LANE, change.transition.lane().map(|l| s(l.as_str())));
    if let Some(result) = change.transition.result() {
        e.set_opt(codec::RESULT_COUNT, result.count.map(n))
            .set_opt(codec::RESULT_CHECKSUM, result.checksum.as_deref().map(s))
            .set_opt(
                codec::RESULT_ERROR_CODE,
                result.error_code.as_deref().map(s),
            )
            .set_opt(codec::RESULT_MESSAGE, result.message.as_deref().map(s))
            .set_opt(codec::EXPECTED_COUNT, result.expected_count.map(n))
            .set_opt(
                codec::EXPECTED_CHECKSUM,
                result.expected_checksum.as_deref().map(s),
            )
            .set_opt(codec::QUALITY, result.quality.map(|q| s(q.as_str())))
            .set_opt(
                codec::QUALITY_REASON,
                result.quality_reason.map(|q| s(q.as_str())),
            );
    }
    if let Some(steps) = change.transition.steps() {
        e.set(codec::STEPS, s(codec::steps_json(steps)));
    }
    if let Some(c) = change.transition.children() {
        e.set(codec::CHILDREN_TOTAL, n(c.total))
            .set(codec::CHILDREN_SUCCEEDED, n(c.succeeded))
            .set(codec::CHILDREN_FAILED, n(c.failed))
            .set(codec::CHILDREN_STEP, n(c.step));
    }
    if let Some(lane) = change.transition.lane_was() {
        e.eq(codec::LANE, s(lane.as_str()));
    }
    if let Some(group) = change.transition.catch_up() {
        e.set(codec::TRIGGER, s(Trigger::CatchUp.as_str()))
            .set(codec::REPLAY_GROUP_ID, s(group))
            .eq(codec::TRIGGER, s(Trigger::Scheduled.as_str()));
    }
    e.exists(PK)
        .eq(codec::STATUS, s(change.from.as_str()))
        .eq(codec::LEASE_EPOCH, n(change.epoch));
    Ok(e)
}

/// Says which of the change's conditions the stored run broke.
pub fn refusal(run_key: &RunKey, change: &RunChange, stored: Option<Run>) -> StoreError {
    let key = run_key.to_string();
    match stored {
        None => StoreError::RunNotFound(key),
        Some(run) if run.lease_epoch != change.epoch => StoreError::LeaseLost {
            key,
            expected: change.epoch,
            actual: run.lease_epoch,
        },
        Some(run) => StoreError::StatusConflict {
            key,
            expected: change.from,
            actual: run.status,
        },
    }
}
