//! Replays: create (or plan, a dry run), approve one held for an admin, cancel. The retries
//! themselves are released by [`crate::replay::ReplayReleaser`] in the reconciler's pass.
//! A replay may span schedules (an owner's), so its own actions go to the system audit log;
//! each retry it makes is audited in its schedule's log with the replay's id.

use std::collections::BTreeMap;

use chrono::TimeDelta;
use cronledger_aws::{
    BackfillLimits, BackfillState, Replay, ReplayApprovalReason, ReplayEntry, ReplayFilter,
    ReplayTally, StoredSchedule, SystemAuditEntry, REPLAY_MAX_RUNS,
};
use cronledger_contract::{Note, ReplayPlan, ReplayRequest, ReplayView};
use cronledger_core::estimate::{Budget, Estimate};
use serde_json::json;

use super::Operator;
use crate::api::{new_id, Actor, ApiError, ApiResult};
use crate::cost;
use crate::replay::{self, RETRYABLE};

/// A replay created, or (a dry run) its plan.
#[derive(Debug)]
pub enum ReplayStarted {
    Plan(Box<ReplayPlan>),
    Created(Box<ReplayView>),
}

fn invalid(message: impl Into<String>, field: &str) -> ApiError {
    ApiError::invalid("REPLAY_INVALID", message).with_details(json!({"field": field}))
}

/// The request's filter, checked.
fn filter_of(req: &ReplayRequest) -> ApiResult<ReplayFilter> {
    if req.schedule.is_none() && req.owner.is_none() {
        return Err(invalid("name a `schedule` or an `owner`", "schedule"));
    }
    if req.status.is_empty() || req.status.iter().any(|s| !RETRYABLE.contains(s)) {
        return Err(invalid(
            "`status` lists the statuses to retry: FAILED, STALLED",
            "status",
        ));
    }
    if req.to <= req.from {
        return Err(invalid("`to` must be after `from`", "to"));
    }
    if req
        .max_cost_usd
        .is_some_and(|usd| !(usd.is_finite() && usd >= 0.0))
    {
        return Err(invalid(
            "`max_cost_usd` must be a number of dollars, 0 or more",
            "max_cost_usd",
        ));
    }
    Ok(ReplayFilter {
        schedule: req.schedule.clone(),
        owner: req.owner.clone(),
        statuses: req.status.clone(),
        from: req.from,
        to: req.to,
        include_non_idempotent: req.include_non_idempotent,
    })
}

/// Why the retried runs need an admin: a side-effecting schedule's, or an `every_run`
/// schedule's (approved once, as a whole, as a backfill is).
fn approval_reasons(
    runs: &[ReplayEntry],
    schedules: &BTreeMap<&str, &StoredSchedule>,
) -> Vec<ReplayApprovalReason> {
    let mut reasons = Vec::new();
    if runs.iter().any(|e| e.side_effects) {
        reasons.push(ReplayApprovalReason::SideEffects);
    }
    let every_run = runs.iter().any(|e| {
        schedules
            .get(e.key.schedule_id.as_str())
            .is_some_and(|s| cronledger_core::admission::every_run_approval(&s.spec))
    });
    if every_run {
        reasons.push(ReplayApprovalReason::EveryRun);
    }
    reasons
}

impl Operator {
    /// What the retries would cost: each schedule's runs priced from its own durations,
    /// summed; they share one throttle, so their release spans add up.
    async fn estimate_replay(
        &self,
        runs: &[ReplayEntry],
        schedules: &BTreeMap<&str, &StoredSchedule>,
        limits: &BackfillLimits,
    ) -> ApiResult<Estimate> {
        let now = self.now();
        let mut per_schedule: BTreeMap<&str, u64> = BTreeMap::new();
        for e in runs {
            *per_schedule.entry(e.key.schedule_id.as_str()).or_default() += 1;
        }
        let mut total = Estimate {
            runs: 0,
            target_calls: 0,
            lambda_gb_seconds: 0.0,
            cost_usd: 0.0,
            finishes_at: now,
        };
        for (id, n) in per_schedule {
            let Some(stored) = schedules.get(id) else {
                continue;
            };
            let store = self.deps().store.as_ref();
            let e = cost::estimate::estimate_runs(store, &stored.spec, n, limits, now).await?;
            total.runs += e.runs;
            total.target_calls += e.target_calls;
            total.lambda_gb_seconds += e.lambda_gb_seconds;
            total.cost_usd += e.cost_usd;
            total.finishes_at += (e.finishes_at - now).max(TimeDelta::zero());
        }
        Ok(total)
    }

    /// Creates a replay of every run the request's filter matches, or with `dry_run`
    /// answers its plan (nothing written, nothing audited). One that holds side-effecting
    /// runs is created PAUSED for an admin's approval.
    pub async fn create_replay(
        &self,
        actor: &Actor,
        req: ReplayRequest,
    ) -> ApiResult<ReplayStarted> {
        let filter = filter_of(&req)?;
        let deps = self.deps();
        let store = deps.store.as_ref();
        let schedules = replay::schedules_of(store, &filter).await?;
        let Some(matched) =
            replay::matched_runs(store, &schedules, &filter, REPLAY_MAX_RUNS).await?
        else {
            return Err(ApiError::invalid(
                "REPLAY_TOO_LARGE",
                format!("the filter matches more than {REPLAY_MAX_RUNS} runs; narrow it"),
            )
            .with_details(json!({"max_runs": REPLAY_MAX_RUNS})));
        };
        let by_id: BTreeMap<&str, &StoredSchedule> =
            schedules.iter().map(|s| (s.spec.id.as_str(), s)).collect();
        // Non-idempotent runs are listed either way; retried only when asked.
        let include = filter.include_non_idempotent;
        let non_idempotent: Vec<ReplayEntry> =
            matched.iter().filter(|e| !e.idempotent).cloned().collect();
        let runs: Vec<ReplayEntry> = matched
            .into_iter()
            .filter(|e| e.idempotent || include)
            .collect();
        let limits = BackfillLimits::default();
        let approval = approval_reasons(&runs, &by_id);
        let estimate = self.estimate_replay(&runs, &by_id, &limits).await?;
        let budget = Budget {
            max_cost_usd: req.max_cost_usd,
            max_target_calls: None,
        };
        let over_budget = budget.exceeded_by(estimate.cost_usd, estimate.target_calls);
        if req.dry_run {
            return Ok(ReplayStarted::Plan(Box::new(ReplayPlan {
                dry_run: true,
                schedule: filter.schedule,
                owner: filter.owner,
                status: filter.statuses,
                from: filter.from,
                to: filter.to,
                size: runs.len() as u64,
                runs: runs.iter().map(replay::run_view).collect(),
                non_idempotent: non_idempotent.iter().map(replay::run_view).collect(),
                approval_required: !approval.is_empty(),
                approval_reasons: approval,
                limits,
                cascade: req.cascade,
                estimate,
                budget,
                over_budget,
            })));
        }
        if !over_budget.is_empty() {
            return Err(ApiError::invalid(
                "REPLAY_OVER_BUDGET",
                format!(
                    "the replay is estimated at ${:.4} and {} target calls, over max_cost_usd",
                    estimate.cost_usd, estimate.target_calls
                ),
            )
            .with_details(
                json!({"over_budget": over_budget, "estimate": estimate, "budget": budget}),
            ));
        }
        if runs.is_empty() {
            return Err(ApiError::invalid(
                "REPLAY_EMPTY",
                "no run to retry matches the filter (non-idempotent ones need include_non_idempotent: true)",
            )
            .with_details(json!({"non_idempotent": non_idempotent.len()})));
        }
        let now = self.now();
        let r = Replay {
            id: new_id("rp"),
            filter,
            runs,
            non_idempotent,
            cursor: 0,
            in_flight: Vec::new(),
            tally: ReplayTally::default(),
            limits,
            state: if approval.is_empty() {
                BackfillState::Running
            } else {
                BackfillState::Paused
            },
            approval_required: approval,
            approved_by: None,
            approved_at: None,
            cascade: req.cascade,
            created_at: now,
            created_by: actor.name().to_string(),
            note: Note {
                note: req.note.clone(),
            }
            .text("replay through the api"),
            updated_at: now,
            last_release_at: None,
            version: 0,
        };
        let stored = deps.ops.create_replay(&r).await?;
        let details = json!({
            "replay": stored.id, "runs": stored.runs.len(),
            "approval_reasons": stored.approval_required,
        });
        self.record_replay(actor, "REPLAY_CREATE", &stored.note, details)
            .await;
        Ok(ReplayStarted::Created(Box::new(replay::progress(
            &stored, now,
        ))))
    }

    /// Moves a replay between states under its version, re-reading when a releaser wrote.
    async fn change_replay(
        &self,
        id: &str,
        allowed_from: &[BackfillState],
        to: BackfillState,
        also: impl Fn(&mut Replay) -> ApiResult<()>,
    ) -> ApiResult<Replay> {
        let ops = &self.deps().ops;
        for _ in 0..5 {
            let mut r = ops.get_replay(id).await?;
            if !allowed_from.contains(&r.state) {
                return Err(ApiError::conflict(
                    "REPLAY_STATE_CONFLICT",
                    format!("replay `{id}` is {}, cannot become {to}", r.state),
                )
                .with_details(json!({"state": r.state})));
            }
            also(&mut r)?;
            r.state = to;
            r.updated_at = self.now();
            if let Some(stored) = ops.put_replay(&r).await? {
                return Ok(stored);
            }
        }
        Err(ApiError::conflict(
            "REPLAY_CHANGED",
            format!("replay `{id}` kept changing; try again"),
        ))
    }

    /// Cancels a replay: the runs it has not retried yet stay as they are; the retried ones
    /// still in flight finish.
    pub async fn cancel_replay(
        &self,
        actor: &Actor,
        id: &str,
        note: Note,
    ) -> ApiResult<ReplayView> {
        let open = [BackfillState::Running, BackfillState::Paused];
        let r = self
            .change_replay(id, &open, BackfillState::Cancelled, |_| Ok(()))
            .await?;
        let details = json!({"replay": id, "not_retried": r.unreleased().len()});
        self.record_replay(actor, "REPLAY_CANCEL", &note.text(""), details)
            .await;
        Ok(replay::progress(&r, self.now()))
    }

    /// An admin's approval of a replay held for it: it starts (RUNNING), audited with the
    /// admin's note (required) and the reasons it was held.
    pub async fn approve_replay(
        &self,
        actor: &Actor,
        id: &str,
        note: Note,
    ) -> ApiResult<ReplayView> {
        if note.text("").is_empty() {
            return Err(ApiError::invalid(
                "NOTE_REQUIRED",
                "approving a replay needs a note saying why",
            ));
        }
        let now = self.now();
        let paused = [BackfillState::Paused];
        let r = self
            .change_replay(id, &paused, BackfillState::Running, |r| {
                if !r.awaiting_approval() {
                    return Err(ApiError::conflict(
                        "REPLAY_NOT_AWAITING_APPROVAL",
                        format!("replay `{id}` is not waiting for an approval"),
                    )
                    .with_details(json!({"state": r.state, "approved_by": r.approved_by})));
                }
                r.approved_by = Some(actor.name().to_string());
                r.approved_at = Some(now);
                Ok(())
            })
            .await?;
        let details = json!({"replay": id, "approval_reasons": r.approval_required});
        self.record_replay(actor, "REPLAY_APPROVE", &note.text(""), details)
            .await;
        Ok(replay::progress(&r, now))
    }

    /// Records an action on a replay in the system audit log (best effort: it stands).
    async fn record_replay(
        &self,
        actor: &Actor,
        action: &str,
        note: &str,
        details: serde_json::Value,
    ) {
        let entry = SystemAuditEntry {
            at: self.now(),
            actor: actor.name().to_string(),
            action: action.to_string(),
            note: note.to_string(),
            details,
        };
        if let Err(e) = self.deps().ops.append_system_audit(&entry).await {
            tracing::warn!(action, error = %e, "replay action not audited");
        }
    }
}
