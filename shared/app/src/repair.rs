//! A repaired upstream repairs its dependents. When an upstream's window did not succeed,
//! each dependent's window for it was recorded SKIPPED (UPSTREAM_NOT_SUCCEEDED). When an
//! operator's retry (or a replay) later ends that upstream window SUCCESS, each such
//! dependent window is re-opened: the dependent gets its repair run of the window, decided
//! by the same rule book as any dependent's run (its pause, approval, overlap and lanes),
//! audited (RUN_REPAIR, naming the upstream run that repaired it), and carrying `cascade`
//! itself, so its own success repairs its dependents in turn, down the chain.
//!
//! How the ledger records it: the SKIPPED entry stays as it is (history: it was skipped,
//! and why), and the repair is an operator-origin run of the same window beside it, keyed
//! `RUN#{scheduled_for}#MANUAL#repair` (run id `{scheduled_for}~M~repair`), as an operator's
//! run of a window is. So the expected occurrence keeps its one entry (invariant 1), the
//! repair has the window's idempotency key (a window that already succeeded another way
//! ends ALREADY_DONE), and a window is repaired at most once: the create is conditional on
//! that key, whoever gets there first. A repair run that fails is retried like any run; the
//! completeness audit counts the window once (the skipped entry) and, as before, a window
//! two runs executed as a duplicate. A dependent reading its upstream's window reads the
//! repair's run where the expected entry was skipped (see
//! [`crate::dependents::upstream_entry`]).
//!
//! `cascade: false` on the retry opts out: the run's success then repairs nothing.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use cronledger_aws::{LaneQueue, LedgerStore, StoreError};
use cronledger_core::dependency::Readiness;
use cronledger_core::run::Origin;
use cronledger_core::window::utc_text;
use cronledger_core::{Reason, Run, RunKey, RunStatus};
use cronledger_ledger::ledger::{AuditAction, OperatorAction};
use serde_json::json;

use crate::api::views::run_id;
use crate::dependents::{admit_window, dependent_at, readiness_with, send_window, DependentError};

/// The origin id of a repair's run: one a window.
pub const REPAIR_ORIGIN: &str = "repair";

/// Who the audit names as re-opening a window: the scheduler, on behalf of the retry it
/// names.
pub const REPAIR_ACTOR: &str = "cronledger";

/// The key of `schedule`'s repair run of its window at `at`.
pub fn repair_key(schedule: &str, at: DateTime<Utc>) -> RunKey {
    RunKey {
        schedule_id: schedule.to_string(),
        scheduled_for: at,
        origin: Origin::Manual(REPAIR_ORIGIN.to_string()),
    }
}

/// Whether `ended`'s end can repair its dependents: it succeeded, and is not a backfill's
/// (a cascading backfill re-runs its downstream itself).
pub fn repairs(ended: &Run) -> bool {
    ended.status.is_success() && !matches!(ended.key.origin, Origin::Backfill(_))
}

/// The cascade decision, for whoever ends an upstream's window SUCCESS again: the worker,
/// with the ended run's `cascade` (set by an operator's retry, carried by a repair's run),
/// or a replay, with its own flag. When `cascade` is true and `ended` can repair (see
/// [`repairs`]), each schedule in `downstream` (the upstream's dependents) whose window at
/// `ended`'s instant was SKIPPED (UPSTREAM_NOT_SUCCEEDED) gets its repair run, decided
/// with `ended` standing for the upstream's window. A window another upstream still holds
/// back stays skipped (that upstream's repair re-opens it). Answers the runs it created
/// (sent when the rule book said so); each is audited on its schedule.
pub async fn repair_dependents(
    store: &dyn LedgerStore,
    lanes: &dyn LaneQueue,
    downstream: &[String],
    ended: &Run,
    cascade: bool,
    now: DateTime<Utc>,
) -> Result<Vec<Run>, DependentError> {
    let mut created = Vec::new();
    if !cascade || !repairs(ended) {
        return Ok(created);
    }
    // One level: each repair's run repairs the next level as it ends SUCCESS itself.
    let dependents: BTreeSet<&String> = downstream.iter().collect();
    for id in dependents {
        if let Some(run) = repair_window(store, lanes, id, ended, now).await? {
            created.push(run);
        }
    }
    Ok(created)
}

/// The repair of the dependent `id`'s window at `ended`'s instant, when it was skipped for
/// its upstreams and `ended` makes it ready (or held: an upstream SUSPECT).
async fn repair_window(
    store: &dyn LedgerStore,
    lanes: &dyn LaneQueue,
    id: &str,
    ended: &Run,
    now: DateTime<Utc>,
) -> Result<Option<Run>, DependentError> {
    let at = ended.key.scheduled_for;
    let Some((dependent, schedule)) = dependent_at(store, id, at).await? else {
        return Ok(None);
    };
    match store.get_run(&RunKey::expected(id, at)).await {
        Ok(skipped)
            if skipped.status == RunStatus::Skipped
                && skipped.reason == Some(Reason::UpstreamNotSucceeded) => {}
        // Not skipped for its upstreams (ran, held, or not decided yet: the usual path
        // decides it with the upstream's new outcome).
        Ok(_) | Err(StoreError::RunNotFound(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let (readiness, due) = readiness_with(store, &dependent.spec, at, Some(ended)).await?;
    if matches!(readiness, Readiness::Skip { .. }) {
        return Ok(None);
    }
    let origin = Origin::Manual(REPAIR_ORIGIN.to_string());
    let Some((mut run, send)) = admit_window(
        store,
        &dependent,
        &schedule,
        (at, origin),
        (&readiness, due),
        now,
    )
    .await?
    else {
        return Ok(None);
    };
    run.cascade = true;
    let made = store.create_run(&run).await?;
    if !made.is_new() {
        return Ok(None);
    }
    if send {
        send_window(store, lanes, &dependent, &run, now).await?;
    }
    tracing::info!(run = %run.key, upstream = %ended.key, status = %run.status,
        "dependent window re-opened: its upstream was repaired");
    audit(store, &run, ended, now).await;
    Ok(Some(run))
}

/// RUN_REPAIR on the dependent's schedule, naming its repair run and the upstream run whose
/// success re-opened it. Best effort, as an operator's action's audit: the run stands.
async fn audit(store: &dyn LedgerStore, run: &Run, upstream: &Run, now: DateTime<Utc>) {
    let entry = OperatorAction {
        schedule_id: run.key.schedule_id.clone(),
        action: AuditAction::RunRepair,
        actor: REPAIR_ACTOR.to_string(),
        reason: format!(
            "`{}` run {} succeeded again: the window skipped for it re-opens",
            upstream.key.schedule_id,
            run_id(&upstream.key)
        ),
        at: now,
        details: json!({
            "run": run_id(&run.key),
            "window": utc_text(run.key.scheduled_for),
            "status": run.status,
            "repaired_by": {
                "schedule": upstream.key.schedule_id,
                "run": run_id(&upstream.key),
                "attempts": upstream.attempts,
            },
        }),
    };
    if let Err(e) = store.record_operator_action(&entry).await {
        tracing::warn!(run = %run.key, error = %e, "repair not audited");
    }
}
