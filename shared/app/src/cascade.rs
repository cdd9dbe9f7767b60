//! A backfill that cascades (`cascade: true`): as each of its runs of a schedule ends, the
//! same window of every schedule that runs `after` it is re-run under the same backfill
//! (trigger BACKFILL, the backfill lane, forced past ALREADY_DONE: the point is to recompute
//! downstream), or recorded SKIPPED (UPSTREAM_NOT_SUCCEEDED) when the upstream's run did not
//! succeed. The cascaded runs carry `cascade` too, so the cascade goes on down the chain.
//!
//! An upstream of a join that the backfill does not cover counts by its own (expected) run
//! for the window. The create is conditional on the run's key, so racing workers record each
//! window once. The cascaded runs follow their upstreams' pace, not the backfill's rate.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cronledger_aws::{LaneQueue, LedgerStore, StoreError};
use cronledger_core::dependency::{readiness, Readiness};
use cronledger_core::run::Origin;
use cronledger_core::{Lane, Reason, Run, RunKey, RunStatus, Trigger};

use crate::dependents::{dependent_at, DependentError};
use crate::runs::new_run_with_origin;

/// The run of `schedule` for `at` under backfill `id`, else its expected run.
async fn outcome_for(
    store: &dyn LedgerStore,
    schedule: &str,
    at: DateTime<Utc>,
    backfill: &str,
) -> Result<Option<RunStatus>, StoreError> {
    let own = RunKey {
        schedule_id: schedule.to_string(),
        scheduled_for: at,
        origin: Origin::Backfill(backfill.to_string()),
    };
    for key in [own, RunKey::expected(schedule, at)] {
        match store.get_run(&key).await {
            Ok(run) => return Ok(Some(run.status)),
            Err(StoreError::RunNotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// After `ended` (a cascading backfill's run) ended: the same window of each schedule in
/// `downstream`, recorded and sent as the upstreams' outcomes say. Returns what it created.
pub async fn after_backfill_run(
    store: &dyn LedgerStore,
    lanes: &dyn LaneQueue,
    downstream: &[String],
    ended: &Run,
    now: DateTime<Utc>,
) -> Result<Vec<Run>, DependentError> {
    let mut created = Vec::new();
    let Origin::Backfill(backfill) = &ended.key.origin else {
        return Ok(created);
    };
    if !ended.cascade || !ended.status.is_terminal() {
        return Ok(created);
    }
    let at = ended.key.scheduled_for;
    for id in downstream {
        let Some((dependent, schedule)) = dependent_at(store, id, at).await? else {
            continue;
        };
        let mut outcomes = BTreeMap::new();
        for upstream in &dependent.spec.after {
            let status = if *upstream == ended.key.schedule_id {
                Some(ended.status)
            } else {
                outcome_for(store, upstream, at, backfill).await?
            };
            if let Some(status) = status {
                outcomes.insert(upstream.clone(), status);
            }
        }
        let mut run = new_run_with_origin(
            &schedule,
            dependent.version,
            at,
            Trigger::Backfill,
            Origin::Backfill(backfill.clone()),
            now,
        );
        run.lane = Some(Lane::Backfill);
        run.replay_group_id = ended.replay_group_id.clone();
        run.forced = true;
        run.cascade = true;
        match readiness(
            &dependent.spec.after,
            dependent.spec.accept_partial,
            &outcomes,
        ) {
            // A cascade reads statuses only (`readiness` never holds): the backfill that
            // recomputes downstream is the operator's decision already.
            Readiness::Waiting { .. } | Readiness::Hold { .. } => continue,
            Readiness::Ready => {}
            Readiness::Skip { .. } => {
                run.status = RunStatus::Skipped;
                run.reason = Some(Reason::UpstreamNotSucceeded);
            }
        }
        let made = store.create_run(&run).await?;
        if !made.is_new() {
            continue;
        }
        if run.status == RunStatus::Pending {
            crate::runs::claim_and_send::<DependentError>(store, lanes, &run, Lane::Backfill, now)
                .await?;
        }
        created.push(run);
    }
    Ok(created)
}
