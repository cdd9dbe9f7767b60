//! Backfills the misfire planner proposes for a long gap of a CATCH_UP_ALL schedule (its
//! backfill tier and beyond), made real: the reconciler stores the `BACKFILL#` item the
//! operators' api lists, RUNNING when every window of the gap fires on its own (the item then
//! tracks the gap's throttled catch-up runs), PAUSED when some await approval (resuming it
//! releases them; see [`crate::backfill`]).
//!
//! Exactly one item per gap, however many reconcilers plan it: the id is derived from the
//! schedule and the gap's first window, and the put is conditional on the id being free. The
//! item is stored before the plan's entries, so a reconciler that stops in between leaves the
//! gap unplanned (the watermark moves last) and the next pass finds the item already there.

use chrono::{DateTime, Utc};
use cronledger_aws::{Backfill, BackfillLimits, BackfillState, Reprocess, StoreError};
use cronledger_core::estimate::{self, Estimate};
use cronledger_core::planner::BackfillProposal;
use cronledger_core::window::utc_text;
use cronledger_core::{quality, Plan, Run, Schedule, ScheduleSpec, Trigger};
use cronledger_ledger::ledger::StoredSchedule;
use cronledger_ledger::ops::BackfillBudget;

use super::{ReconcileError, ReconcileReport, Reconciler};
use crate::cost;
use crate::metrics::Metric;

/// The id of the backfill proposed for the gap of `schedule_id` starting at `first`.
pub fn proposed_backfill_id(schedule_id: &str, first: DateTime<Utc>) -> String {
    format!("gap-{schedule_id}-{}", first.format("%Y%m%dT%H%M%SZ"))
}

impl Reconciler {
    /// Stores the backfill `plan` proposes, unless the gap already has one. `runs` are the
    /// schedule's runs since `watermark` as the plan read them: another reconciler planning
    /// the same gap may have written its first entries already, and the gap starts at the
    /// earliest of them.
    pub(super) async fn propose_backfill(
        &self,
        stored: &StoredSchedule,
        schedule: &Schedule,
        plan: &Plan,
        runs: &[Run],
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) -> Result<(), ReconcileError> {
        let (Some(ops), Some(proposal)) = (&self.backfills, &plan.backfill) else {
            return Ok(());
        };
        let backfill = proposed(stored, schedule, plan, proposal, runs, now);
        match ops.create_backfill(&backfill).await {
            Ok(created) => {
                tracing::warn!(
                    schedule = stored.id(),
                    backfill = %created.id,
                    state = %created.state,
                    from = %created.from,
                    to = %created.to,
                    windows = created.planned,
                    "long gap: backfill created"
                );
                self.metrics
                    .count_for(stored.id(), Metric::BackfillsProposed, 1);
                report.backfills_proposed.push(created.id);
                Ok(())
            }
            // Another reconciler (or an earlier pass that stopped before its watermark) did.
            Err(StoreError::BackfillAlreadyExists(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

fn proposed(
    stored: &StoredSchedule,
    schedule: &Schedule,
    plan: &Plan,
    proposal: &BackfillProposal,
    runs: &[Run],
    now: DateTime<Utc>,
) -> Backfill {
    // Catch-up entries of this gap another reconciler wrote first (it writes oldest first).
    let theirs = runs
        .iter()
        .filter(|r| r.trigger == Trigger::CatchUp && r.key.scheduled_for > plan.from);
    let first = theirs
        .clone()
        .map(|r| r.key.scheduled_for)
        .fold(proposal.first, DateTime::min);
    let last = theirs
        .map(|r| r.range_end.unwrap_or(r.key.scheduled_for))
        .fold(proposal.last, DateTime::max);
    let total = 1 + schedule.between(first, last).count() as u64;
    let planned = u64::from(proposal.windows).min(total);
    let (state, held, what) = if proposal.start_paused {
        (
            BackfillState::Paused,
            Some("AWAITING_APPROVAL: proposed for a long gap; resume it to run the windows held for approval".to_string()),
            "paused until an operator resumes it",
        )
    } else {
        (
            BackfillState::Running,
            None,
            "released throttled on the backfill lane",
        )
    };
    Backfill {
        id: proposed_backfill_id(stored.id(), first),
        schedule_id: stored.id().to_string(),
        from: first,
        to: last,
        reprocess: Reprocess::Missing,
        limits: BackfillLimits::default(),
        pause_when: Default::default(),
        state,
        held,
        cursor: None,
        total_windows: total,
        planned,
        written: 0,
        passed_over: 0,
        created_at: now,
        created_by: "reconciler".to_string(),
        note: format!(
            "proposed by the reconciler: {} missed window(s) from {} to {} ({} tier); {what}",
            proposal.windows,
            utc_text(first),
            utc_text(last),
            plan.tier.map_or_else(
                || "unknown".to_string(),
                |t| format!("{t:?}").to_lowercase()
            )
        ),
        updated_at: now,
        last_release_at: None,
        source_record: None,
        replay_group: plan.replay_group_id.clone(),
        // Its own hold (PAUSED for side effects) is lifted by an operator's resume.
        approval_required: Vec::new(),
        approved_by: None,
        approved_at: None,
        cascade: false,
        verify: None,
        budget: BackfillBudget {
            estimate: Some(priced(&stored.spec, runs, planned, now)),
            ..BackfillBudget::default()
        },
        version: 0,
    }
}

/// What the proposal's `planned` windows would cost on the default limits, priced at the
/// successes among the runs the pass read (no read of its own: a gap's runs are few, so
/// usually at the schedule's `max_runtime`).
fn priced(spec: &ScheduleSpec, runs: &[Run], planned: u64, now: DateTime<Utc>) -> Estimate {
    let mut newest_first: Vec<Run> = runs.to_vec();
    newest_first.sort_by_key(|r| std::cmp::Reverse(r.key.scheduled_for));
    let recent = quality::success_durations(&newest_first);
    let job = cost::estimate::job_cost(spec, &recent);
    let throttle = cost::estimate::throttle(&BackfillLimits::default());
    estimate::estimate(planned, &job, &cost::estimate::pricing(), &throttle, now)
}
