//! A run's transition applied to its stored copy, with the conditions and the attempt
//! history `dynamo::runs`' update expression has.

use cronledger_core::run::{Lease, RunResult};
use cronledger_core::{
    Attempt, AttemptEnd, AttemptOutcome, AttemptStart, Run, RunEvent, RunKey, RunStatus, Trigger,
};

use super::super::StoredRun;
use crate::codec::attempt as attempts;
use crate::error::StoreError;
use crate::ledger::RunChange;

/// What `codec::run::decode(codec::run::encode(run))` gives back: the lease under the run's
/// epoch, and no empty result.
pub(super) fn as_stored(run: &Run) -> Run {
    let mut run = run.clone();
    if let Some(lease) = &mut run.lease {
        lease.epoch = run.lease_epoch;
    }
    if run.result.as_ref() == Some(&RunResult::default()) {
        run.result = None;
    }
    run
}

/// The error a transition's conditions give against the stored run, if one fails: the
/// epoch first (a lost lease), then status, lane and catch-up (all a status conflict).
pub(super) fn refusal(key: &RunKey, change: &RunChange, stored: &Run) -> Option<StoreError> {
    if stored.lease_epoch != change.epoch {
        return Some(StoreError::LeaseLost {
            key: key.to_string(),
            expected: change.epoch,
            actual: stored.lease_epoch,
        });
    }
    let lane_moved = change
        .lane_was
        .is_some_and(|lane| stored.lane != Some(lane));
    let planned_already = change.catch_up.is_some() && stored.trigger != Trigger::Scheduled;
    (stored.status != change.from || lane_moved || planned_already).then(|| {
        StoreError::StatusConflict {
            key: key.to_string(),
            expected: change.from,
            actual: stored.status,
        }
    })
}

/// Applies a transition whose conditions held, as `dynamo::runs`' update expression does.
pub(super) fn apply_change(stored: &mut StoredRun, change: &RunChange, to: RunStatus) {
    let at = change.at;
    let run = &mut stored.run;
    run.status = to;
    run.updated_at = at;
    run.reason = change.reason;
    if let Some(lease) = &change.lease {
        run.lease = Some(Lease {
            owner: lease.owner.clone(),
            until: lease.until,
            epoch: run.lease_epoch,
        });
    }
    if let Some(outcome) = AttemptOutcome::of(change.from, change.event) {
        let result = change.result.clone().unwrap_or_default();
        attempt_mut(&mut stored.attempts, change.epoch).end = Some(AttemptEnd {
            finished_at: at,
            outcome,
            status: to,
            reason: change.reason,
            error_code: result.error_code,
            message: result.message,
        });
    }
    if change.opens_epoch() {
        let opening = change.epoch + 1;
        run.lease_epoch = opening;
        run.attempts += 1;
        run.started_at = Some(at);
        run.last_heartbeat_at = Some(at);
        attempt_mut(&mut stored.attempts, opening).start = Some(AttemptStart {
            started_at: at,
            worker: change
                .lease
                .as_ref()
                .map(|l| l.owner.clone())
                .unwrap_or_default(),
        });
        if let Some(old) = attempts::dropped_by(opening) {
            stored.attempts.retain(|a| a.number != old);
        }
    }
    match change.event {
        RunEvent::Heartbeat => run.last_heartbeat_at = Some(at),
        RunEvent::Enqueue => run.queued_at = Some(at),
        _ => {}
    }
    if to.is_terminal() {
        run.completed_at = Some(at);
    }
    if let Some(lease) = &mut run.lease {
        lease.epoch = run.lease_epoch;
    }
    run.coalesced_into = change.coalesced_into.or(run.coalesced_into);
    run.schedule_version = change.schedule_version.unwrap_or(run.schedule_version);
    if let Some(job_id) = &change.job_id {
        run.job_id = Some(job_id.clone());
    }
    run.lane = change.lane.or(run.lane);
    if let Some(result) = &change.result {
        // Each field the change carries replaces the stored one; the others stay.
        let mut merged = run.result.take().unwrap_or_default();
        merged.count = result.count.or(merged.count);
        if result.checksum.is_some() {
            merged.checksum = result.checksum.clone();
        }
        if result.error_code.is_some() {
            merged.error_code = result.error_code.clone();
        }
        if result.message.is_some() {
            merged.message = result.message.clone();
        }
        merged.expected_count = result.expected_count.or(merged.expected_count);
        if result.expected_checksum.is_some() {
            merged.expected_checksum = result.expected_checksum.clone();
        }
        run.result = (merged != RunResult::default()).then_some(merged);
    }
    if let Some(steps) = &change.steps {
        run.steps = steps.clone();
    }
    if let Some(children) = change.children {
        run.children = Some(children);
    }
    if let Some(group) = &change.catch_up {
        run.trigger = Trigger::CatchUp;
        run.replay_group_id = Some(group.clone());
    }
}

/// Attempt `number` of the history (kept in order), added if absent.
fn attempt_mut(history: &mut Vec<Attempt>, number: u64) -> &mut Attempt {
    let at = match history.binary_search_by_key(&number, |a| a.number) {
        Ok(at) => at,
        Err(at) => {
            history.insert(
                at,
                Attempt {
                    number,
                    start: None,
                    end: None,
                },
            );
            at
        }
    };
    &mut history[at]
}
