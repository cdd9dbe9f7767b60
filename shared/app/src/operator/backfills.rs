//! Backfills: create (or plan, a dry run), approve one held for an admin, pause, resume,
//! cancel. The runs themselves are released by [`crate::backfill::BackfillReleaser`] in the
//! reconciler's pass.

use std::sync::PoisonError;

use cronledger_aws::{
    ApprovalReason, Backfill, BackfillLimits, BackfillState, Reprocess, StoreError,
};
use cronledger_contract::{
    BackfillPlan, BackfillRequest, BackfillView, Budget, BudgetCap, Estimate, Note,
};
use cronledger_core::run::Origin;
use cronledger_core::spec::validate_target;
use cronledger_core::window::utc_text;
use cronledger_core::{Reason, RunEvent, RunKey, RunStatus};
use cronledger_ledger::ledger::{AuditAction, RunChange, ScheduleState};
use cronledger_ledger::ops::{BackfillBudget, BackfillPauseReason};
use serde_json::json;

use super::Operator;
use crate::api::{new_id, Actor, ApiError, ApiResult};
use crate::{backfill, cost};

/// A backfill created, or (a dry run) its plan.
#[derive(Debug)]
pub enum BackfillStarted {
    Plan(Box<BackfillPlan>),
    Created(Box<BackfillView>),
}

fn limits(req: &BackfillRequest) -> ApiResult<BackfillLimits> {
    let d = BackfillLimits::default();
    let l = BackfillLimits {
        concurrency: req.concurrency.unwrap_or(d.concurrency),
        batch_size: req.batch_size.unwrap_or(d.batch_size),
        rate_per_minute: req.rate_per_minute.unwrap_or(d.rate_per_minute),
    };
    let bad = |field: &str, rule: &str| {
        Err(
            ApiError::invalid("BACKFILL_INVALID", format!("`{field}` must be {rule}"))
                .with_details(json!({"field": field})),
        )
    };
    if !(1..=100).contains(&l.concurrency) {
        return bad("concurrency", "from 1 to 100");
    }
    if !(1..=500).contains(&l.batch_size) {
        return bad("batch_size", "from 1 to 500");
    }
    if !(l.rate_per_minute.is_finite() && l.rate_per_minute > 0.0 && l.rate_per_minute <= 10_000.0)
    {
        return bad("rate_per_minute", "above 0 and at most 10000");
    }
    if let Some(rate) = req.pause_when.as_ref().and_then(|p| p.error_rate) {
        if !(0.0..=1.0).contains(&rate) {
            return bad("pause_when.error_rate", "a share from 0 to 1");
        }
    }
    Ok(l)
}

/// The request's caps (BACKFILL_INVALID when one is negative or not a number).
fn budget(req: &BackfillRequest) -> ApiResult<Budget> {
    if req
        .max_cost_usd
        .is_some_and(|usd| !(usd.is_finite() && usd >= 0.0))
    {
        return Err(ApiError::invalid(
            "BACKFILL_INVALID",
            "`max_cost_usd` must be a number of dollars, 0 or more",
        )
        .with_details(json!({"field": "max_cost_usd"})));
    }
    Ok(Budget {
        max_cost_usd: req.max_cost_usd,
        max_target_calls: req.max_target_calls,
    })
}

/// 422 BACKFILL_OVER_BUDGET: the estimate goes over `over` of the caps.
fn over_budget_error(estimate: &Estimate, caps: &Budget, over: &[BudgetCap]) -> ApiError {
    let named: Vec<&str> = over.iter().map(|c| c.as_str()).collect();
    ApiError::invalid(
        "BACKFILL_OVER_BUDGET",
        format!(
            "the backfill is estimated at ${:.4} and {} target calls, over {}",
            estimate.cost_usd,
            estimate.target_calls,
            named.join(" and ")
        ),
    )
    .with_details(json!({"over_budget": over, "estimate": estimate, "budget": caps}))
}

/// Resuming a backfill its budget paused lifts the budget (it would pause again at once
/// otherwise): the operator says why in a note (NOTE_REQUIRED), and the audit records the
/// caps lifted. `None`: not paused by its budget.
fn lift_budget(b: &mut Backfill, note: &Note) -> ApiResult<Option<Budget>> {
    if b.budget.pause_reason != Some(BackfillPauseReason::Budget) {
        return Ok(None);
    }
    if note.text("").is_empty() {
        return Err(ApiError::invalid(
            "NOTE_REQUIRED",
            format!(
                "backfill `{}` was paused by its budget: resuming it lifts the budget, and needs a note saying why",
                b.id
            ),
        )
        .with_details(json!({"pause_reason": "BUDGET", "budget": b.budget.caps})));
    }
    b.budget.pause_reason = None;
    Ok(Some(std::mem::take(&mut b.budget.caps)))
}

/// What `held` says of a backfill waiting for an admin (the CLI's progress line shows it).
fn approval_hold(reasons: &[ApprovalReason]) -> Option<String> {
    (!reasons.is_empty()).then(|| {
        let why: Vec<&str> = reasons.iter().map(|r| r.as_str()).collect();
        format!("APPROVAL_REQUIRED: {}", why.join(", "))
    })
}

impl Operator {
    /// Creates a backfill over `[from, to]` of `schedule_id`, or with `dry_run` answers its
    /// plan and size (nothing written, nothing audited). One that needs an admin's approval
    /// is created PAUSED and held.
    pub async fn create_backfill(
        &self,
        actor: &Actor,
        schedule_id: &str,
        req: BackfillRequest,
    ) -> ApiResult<BackfillStarted> {
        let started = self
            .start_backfill(schedule_id, &req, actor.name(), None)
            .await?;
        if let BackfillStarted::Created(created) = &started {
            let note = Note { note: req.note };
            let details = json!({
                "backfill": created.id, "from": utc_text(req.from), "to": utc_text(req.to),
                "approval_reasons": created.approval_reasons,
            });
            self.record_on(
                schedule_id,
                actor,
                AuditAction::BackfillCreate,
                &note,
                details,
            )
            .await;
        }
        Ok(started)
    }

    /// Creates a backfill (create, and the approval of a range record `source_record`).
    pub(super) async fn start_backfill(
        &self,
        schedule_id: &str,
        req: &BackfillRequest,
        actor: &str,
        source_record: Option<RunKey>,
    ) -> ApiResult<BackfillStarted> {
        let deps = self.deps();
        let limits = limits(req)?;
        let stored = deps.store.get_schedule(schedule_id).await?;
        if stored.state == ScheduleState::Archived {
            return Err(StoreError::ScheduleArchived(schedule_id.to_string()).into());
        }
        let schedule = stored.schedule().map_err(|i| ApiError::issues(&[i]))?;
        let now = self.now();
        if req.from > now {
            return Err(ApiError::invalid(
                "BACKFILL_INVALID",
                "a backfill replays history: `from` is in the future",
            ));
        }
        let to = req.to.min(now);
        let reprocess = req.reprocess.unwrap_or(Reprocess::Missing);
        let plan = backfill::plan(
            deps.store.as_ref(),
            &schedule,
            req.from,
            to,
            reprocess,
            deps.config.backfill_max_windows,
            source_record.as_ref(),
        )
        .await?;
        // A range record's windows were expected by the schedule and held for an operator:
        // the operator approving the record is their approval. The rule is for backfills
        // asked for.
        let asked_for = source_record.is_none();
        let approval = backfill::approval_reasons(
            asked_for && cronledger_core::admission::every_run_approval(&stored.spec),
            stored.spec.side_effects && asked_for,
            &plan.selected,
            stored.created_at,
            deps.config.backfill_approval_over,
        );
        let size = plan.selected.len() as u64;
        let estimate =
            cost::estimate::estimate_runs(deps.store.as_ref(), &stored.spec, size, &limits, now)
                .await?;
        let caps = budget(req)?;
        let over_budget = caps.exceeded_by(estimate.cost_usd, estimate.target_calls);
        if req.dry_run {
            return Ok(BackfillStarted::Plan(Box::new(BackfillPlan {
                dry_run: true,
                schedule: schedule_id.to_string(),
                from: req.from,
                to,
                reprocess,
                limits,
                total_windows: plan.total_windows,
                size,
                approval_required: !approval.is_empty(),
                approval_reasons: approval,
                approval_over: deps.config.backfill_approval_over,
                windows: plan.selected.iter().take(1000).copied().collect(),
                estimate,
                budget: caps,
                over_budget,
            })));
        }
        if !over_budget.is_empty() {
            return Err(over_budget_error(&estimate, &caps, &over_budget));
        }
        let verify = match &req.verify {
            Some(value) => Some(
                validate_target(value, "verify", &deps.config.rules)
                    .map_err(|issues| ApiError::issues(&issues))?,
            ),
            None => None,
        };
        let b = Backfill {
            id: new_id("bf"),
            schedule_id: schedule_id.to_string(),
            from: req.from,
            to,
            reprocess,
            limits,
            pause_when: req.pause_when.clone().unwrap_or_default(),
            state: if approval.is_empty() {
                BackfillState::Running
            } else {
                BackfillState::Paused
            },
            held: approval_hold(&approval),
            cursor: None,
            total_windows: plan.total_windows,
            planned: size,
            written: 0,
            passed_over: 0,
            created_at: now,
            created_by: actor.to_string(),
            note: Note {
                note: req.note.clone(),
            }
            .text("backfill through the api"),
            updated_at: now,
            last_release_at: None,
            source_record,
            replay_group: None,
            approval_required: approval,
            approved_by: None,
            approved_at: None,
            cascade: req.cascade,
            verify,
            budget: BackfillBudget {
                caps,
                estimate: Some(estimate),
                spent: None,
                pause_reason: None,
            },
            version: 0,
        };
        let stored = deps.ops.create_backfill(&b).await?;
        let view = backfill::progress(deps.store.as_ref(), &stored, now).await?;
        Ok(BackfillStarted::Created(Box::new(view)))
    }

    /// Moves a backfill between states under its version, re-reading when a releaser wrote.
    /// `also` checks (and changes) more of the backfill as read, before the write.
    async fn change_state(
        &self,
        id: &str,
        allowed_from: &[BackfillState],
        to: BackfillState,
        also: impl Fn(&mut Backfill) -> ApiResult<()>,
    ) -> ApiResult<Backfill> {
        let ops = &self.deps().ops;
        for _ in 0..5 {
            let mut b = ops.get_backfill(id).await?;
            if !allowed_from.contains(&b.state) {
                return Err(ApiError::conflict(
                    "BACKFILL_STATE_CONFLICT",
                    format!("backfill `{id}` is {}, cannot become {to}", b.state),
                )
                .with_details(json!({"state": b.state})));
            }
            also(&mut b)?;
            b.state = to;
            b.held = None;
            b.updated_at = self.now();
            if let Some(stored) = ops.put_backfill(&b).await? {
                return Ok(stored);
            }
        }
        Err(ApiError::conflict(
            "BACKFILL_CHANGED",
            format!("backfill `{id}` kept changing; try again"),
        ))
    }

    /// Audits an action on backfill `b` and answers with its progress.
    async fn backfill_changed(
        &self,
        actor: &Actor,
        b: &Backfill,
        action: AuditAction,
        note: &Note,
        details: serde_json::Value,
    ) -> ApiResult<BackfillView> {
        self.record_on(&b.schedule_id, actor, action, note, details)
            .await;
        Ok(backfill::progress(self.deps().store.as_ref(), b, self.now()).await?)
    }

    /// Pauses a running backfill.
    pub async fn pause_backfill(
        &self,
        actor: &Actor,
        id: &str,
        note: Note,
    ) -> ApiResult<BackfillView> {
        let pause = (BackfillState::Running, BackfillState::Paused);
        self.pause_or_resume(actor, id, note, pause, AuditAction::BackfillPause)
            .await
    }

    /// Resumes a paused backfill; one held for an admin's approval is refused (it is
    /// approved instead, [`Operator::approve_backfill`]).
    pub async fn resume_backfill(
        &self,
        actor: &Actor,
        id: &str,
        note: Note,
    ) -> ApiResult<BackfillView> {
        let resume = (BackfillState::Paused, BackfillState::Running);
        self.pause_or_resume(actor, id, note, resume, AuditAction::BackfillResume)
            .await
    }

    async fn pause_or_resume(
        &self,
        actor: &Actor,
        id: &str,
        note: Note,
        (from, to): (BackfillState, BackfillState),
        action: AuditAction,
    ) -> ApiResult<BackfillView> {
        let lifted = std::sync::Mutex::new(None);
        let b = self
            .change_state(id, &[from], to, |b| {
                if to == BackfillState::Running && b.awaiting_approval() {
                    return Err(ApiError::conflict(
                        "BACKFILL_APPROVAL_REQUIRED",
                        format!("backfill `{id}` waits for an admin's approval (POST .../approve), not a resume"),
                    )
                    .with_details(json!({"approval_reasons": b.approval_required})));
                }
                if to == BackfillState::Running {
                    *lifted.lock().unwrap_or_else(PoisonError::into_inner) = lift_budget(b, &note)?;
                }
                Ok(())
            })
            .await?;
        let lifted = *lifted.lock().unwrap_or_else(PoisonError::into_inner);
        let details = match lifted {
            Some(caps) => json!({"backfill": id, "budget_lifted": caps}),
            None => json!({"backfill": id}),
        };
        self.backfill_changed(actor, &b, action, &note, details)
            .await
    }

    /// Cancels a backfill: its runs not yet started end CANCELLED; running ones finish.
    pub async fn cancel_backfill(
        &self,
        actor: &Actor,
        id: &str,
        note: Note,
    ) -> ApiResult<BackfillView> {
        let b = self
            .change_state(
                id,
                &[BackfillState::Running, BackfillState::Paused],
                BackfillState::Cancelled,
                |_| Ok(()),
            )
            .await?;
        let deps = self.deps();
        let runs = deps
            .store
            .runs_between(&b.schedule_id, b.from, b.to)
            .await?;
        let now = self.now();
        for run in runs.iter().filter(|r| {
            matches!(&r.key.origin, Origin::Backfill(x) if *x == b.id)
                && matches!(r.status, RunStatus::Pending | RunStatus::Queued)
        }) {
            let change = RunChange::decide(
                RunEvent::Cancel,
                run.status,
                run.lease_epoch,
                now,
                Some(Reason::CancelledByOperator),
            );
            match deps.store.transition_run(&run.key, &change).await {
                Ok(cancelled) => {
                    crate::outcomes::ended(deps.health.as_deref(), &cancelled, None, now).await;
                }
                Err(e) => {
                    tracing::info!(run = %run.key, error = %e, "backfill run not cancelled (it moved on)")
                }
            }
        }
        let details = json!({"backfill": id});
        self.backfill_changed(actor, &b, AuditAction::BackfillCancel, &note, details)
            .await
    }

    /// An admin's approval of a backfill held for it: it starts (RUNNING) and the approval
    /// is audited with the admin's note (required) and the reasons it was held.
    pub async fn approve_backfill(
        &self,
        actor: &Actor,
        id: &str,
        note: Note,
    ) -> ApiResult<BackfillView> {
        if note.text("").is_empty() {
            return Err(ApiError::invalid(
                "NOTE_REQUIRED",
                "approving a backfill needs a note saying why",
            ));
        }
        let now = self.now();
        let b = self
            .change_state(id, &[BackfillState::Paused], BackfillState::Running, |b| {
                if !b.awaiting_approval() {
                    return Err(ApiError::conflict(
                        "BACKFILL_NOT_AWAITING_APPROVAL",
                        format!("backfill `{id}` is not waiting for an approval"),
                    )
                    .with_details(json!({"state": b.state, "approved_by": b.approved_by})));
                }
                b.approved_by = Some(actor.name().to_string());
                b.approved_at = Some(now);
                Ok(())
            })
            .await?;
        let details = json!({"backfill": id, "approval_reasons": b.approval_required});
        self.backfill_changed(actor, &b, AuditAction::BackfillApprove, &note, details)
            .await
    }
}
