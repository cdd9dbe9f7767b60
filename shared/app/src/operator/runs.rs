//! A schedule's runs: run now (idempotent), run at (a one-off run's firing included), retry
//! (with the run's own job or the current one), approve, reject, cancel.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use cronledger_aws::{IdempotencyClaim, StoreError};
use cronledger_contract::{
    ApprovalOutcome, BackfillRequest, Definition, Mode, Note, RetryRequest, RunAtOutcome,
    RunAtRequest, RunNowRequest, RunOutcome, RunView,
};
use cronledger_core::run::Origin;
use cronledger_core::window::utc_text;
use cronledger_core::{Attempt, Lane, Reason, Run, RunEvent, RunKey, RunStatus, Schedule, Trigger};
use cronledger_ledger::ledger::{AuditAction, RunChange, ScheduleState, Transition};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{BackfillStarted, Operator};
use crate::api::system::{RunAtEvent, RunAtSpec};
use crate::api::{new_id, views, Actor, ApiError, ApiResult};
use crate::runs::{claim_and_send, new_run_with_origin};

/// Whether run now wrote a run, or answered with one that was there (the window's run it
/// reused, or the run of an earlier request with the same idempotency key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    Created,
    Existing,
}

fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(TimeDelta::seconds(1)).unwrap_or(t)
}

/// SHA-256 (hex) of a run request as parsed, re-serialized with sorted keys: key order,
/// spacing, defaults and time formats do not change it, any field's value does.
fn body_hash(req: &RunNowRequest) -> String {
    let canonical = serde_json::to_value(req)
        .map(|v| v.to_string())
        .unwrap_or_default();
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Refuses an instant that is not a fire time of the schedule: its window would overlap the
/// real occurrence's under another idempotency key, which then no longer stops a double run.
fn check_occurrence(schedule: &Schedule, t: DateTime<Utc>) -> ApiResult<()> {
    if schedule.is_occurrence(t) {
        return Ok(());
    }
    let timing = schedule.timing();
    Err(ApiError::invalid(
        "SCHEDULED_FOR_NOT_AN_OCCURRENCE",
        format!(
            "{} is not a fire time of `{}` ({}); name an occurrence",
            utc_text(t),
            schedule.id(),
            timing
        ),
    )
    .with_details(json!({
        "scheduled_for": utc_text(t),
        "previous": schedule.prev_before(t).map(utc_text),
        "next": schedule.next_after(t).map(utc_text),
    })))
}

/// A run is "the window's run" for reuse when it did or will do the window's work.
fn reusable(run: &Run) -> bool {
    run.status.is_success() || run.status.is_active()
}

fn outcome(created: bool, reused: bool, idempotent_replay: bool, run: &Run) -> RunOutcome {
    RunOutcome {
        created,
        reused,
        idempotent_replay,
        run: views::run(run),
    }
}

/// The lane a reopened run goes to: the rule book's (an operator's runs: the manual lane).
fn lane_of(run: &Run) -> Lane {
    cronledger_core::admission::lane_of(run.trigger, run.lane, Lane::Normal)
}

impl Operator {
    /// Run now: an operator's run of one window (by default the latest due), once per
    /// `idempotency_key` and request body. Audited when it wrote a run.
    pub async fn run_now(
        &self,
        actor: &Actor,
        schedule_id: &str,
        req: RunNowRequest,
        idempotency_key: Option<&str>,
    ) -> ApiResult<(Made, RunOutcome)> {
        let (made, body) = self
            .manual_run(schedule_id, &req, idempotency_key, None)
            .await?;
        if made == Made::Created {
            let note = Note { note: req.note };
            self.record_on(
                schedule_id,
                actor,
                AuditAction::RunNow,
                &note,
                json!({"run": body.run.run_id, "mode": req.mode}),
            )
            .await;
        }
        Ok((made, body))
    }

    /// A one-off run's firing: the MANUAL run, once however often Scheduler delivers it.
    pub async fn fire_run_at(&self, event: &RunAtEvent) -> ApiResult<RunOutcome> {
        let spec = &event.run_at;
        let req = RunNowRequest {
            mode: spec.mode,
            scheduled_for: spec.scheduled_for,
            note: spec.note.clone(),
        };
        let key = format!("runat:{}", spec.request_id);
        let (_, body) = self
            .manual_run(
                &spec.schedule_id,
                &req,
                Some(&key),
                Some(spec.request_id.clone()),
            )
            .await?;
        Ok(body)
    }

    /// Creates (or finds) an operator's run of one window: run now, and a one-off run's
    /// firing.
    async fn manual_run(
        &self,
        schedule_id: &str,
        req: &RunNowRequest,
        idempotency_key: Option<&str>,
        request_id: Option<String>,
    ) -> ApiResult<(Made, RunOutcome)> {
        let deps = self.deps();
        let stored = deps.store.get_schedule(schedule_id).await?;
        if stored.state == ScheduleState::Archived {
            return Err(StoreError::ScheduleArchived(schedule_id.to_string()).into());
        }
        let schedule = stored.schedule().map_err(|i| ApiError::issues(&[i]))?;
        let now = self.now();
        let scheduled_for = match req.scheduled_for {
            Some(t) if whole_second(t) > now => {
                return Err(ApiError::invalid(
                    "RUN_IN_FUTURE",
                    "scheduled_for is in the future: use run-at for a later run",
                ))
            }
            Some(t) => {
                check_occurrence(&schedule, t)?;
                t
            }
            None => schedule
                .prev_before(whole_second(now) + TimeDelta::seconds(1))
                .unwrap_or_else(|| whole_second(now)),
        };
        let mut chosen: Option<Run> = None;
        if req.mode == Mode::Reuse {
            let same = deps
                .store
                .runs_between(schedule_id, scheduled_for, scheduled_for)
                .await?;
            let key = schedule.idempotency_key(&schedule.window_for(scheduled_for));
            chosen = same
                .into_iter()
                .filter(|r| r.idempotency_key == key && reusable(r))
                .min_by_key(|r| r.key.origin != Origin::Expected);
        }
        let request_id = request_id.unwrap_or_else(|| new_id("rq"));
        let run_key = match &chosen {
            Some(run) => run.key.clone(),
            None => RunKey {
                schedule_id: schedule_id.to_string(),
                scheduled_for,
                origin: Origin::Manual(request_id),
            },
        };
        let mut replay = false;
        let run_key = match idempotency_key {
            None => run_key,
            Some(key) => {
                let claim = IdempotencyClaim {
                    key: format!("{schedule_id}:{key}"),
                    run: run_key.clone(),
                    body_hash: Some(body_hash(req)),
                    created_at: now,
                    expires_at: now + deps.config.idempotency_ttl.as_delta(),
                };
                match deps.ops.claim_idempotency(&claim).await? {
                    None => run_key,
                    Some(first)
                        if first.body_hash.is_some() && first.body_hash != claim.body_hash =>
                    {
                        return Err(ApiError::conflict(
                            "IDEMPOTENCY_KEY_REUSED",
                            "this Idempotency-Key was used with another request body; use a new key",
                        )
                        .with_details(json!({"run": views::run_id(&first.run)})));
                    }
                    Some(first) => {
                        replay = true;
                        first.run
                    }
                }
            }
        };
        if let Some(run) = chosen.filter(|r| r.key == run_key) {
            return Ok((Made::Existing, outcome(false, true, replay, &run)));
        }
        if replay {
            if let Ok(run) = deps.store.get_run(&run_key).await {
                return Ok((Made::Existing, outcome(false, false, true, &run)));
            }
            // The first request claimed the key and has not written its run (yet, or ever):
            // write that very run; whichever write lands first is the one run.
        }
        let mut run = new_run_with_origin(
            &schedule,
            stored.version,
            run_key.scheduled_for,
            Trigger::Manual,
            run_key.origin.clone(),
            now,
        );
        run.lane = Some(Lane::Manual);
        run.forced = req.mode == Mode::New;
        let created = deps.store.create_run(&run).await?;
        if !created.is_new() {
            return Ok((Made::Existing, outcome(false, false, replay, created.run())));
        }
        claim_and_send::<ApiError>(
            deps.store.as_ref(),
            deps.lanes.as_ref(),
            &run,
            Lane::Manual,
            now,
        )
        .await?;
        let run = deps.store.get_run(&run.key).await?;
        Ok((Made::Created, outcome(true, false, false, &run)))
    }

    /// Run at: a one-off MANUAL run at a future instant, as a one-time EventBridge Scheduler
    /// schedule whose firing comes back as [`Operator::fire_run_at`].
    pub async fn run_at(
        &self,
        actor: &Actor,
        schedule_id: &str,
        req: RunAtRequest,
    ) -> ApiResult<RunAtOutcome> {
        let control = self.control()?;
        let now = self.now();
        if req.at <= now + TimeDelta::seconds(30) || req.at > now + TimeDelta::days(366) {
            return Err(ApiError::invalid(
                "RUN_AT_INVALID",
                "`at` must be at least 30 seconds and at most a year ahead",
            ));
        }
        let stored = self.deps().store.get_schedule(schedule_id).await?;
        if let Some(scheduled_for) = req.scheduled_for {
            // Checked now, not when it fires hours later: the same rule as run now.
            let schedule = stored.schedule().map_err(|i| ApiError::issues(&[i]))?;
            check_occurrence(&schedule, scheduled_for)?;
            if scheduled_for > req.at {
                return Err(ApiError::invalid(
                    "RUN_IN_FUTURE",
                    "scheduled_for is after `at`: the run would name a window not yet due",
                ));
            }
        }
        let request_id = new_id("at");
        let name = format!("cronledger-runat-{request_id}");
        let event = RunAtEvent {
            run_at: RunAtSpec {
                schedule_id: schedule_id.to_string(),
                request_id: request_id.clone(),
                mode: req.mode,
                scheduled_for: req.scheduled_for,
                actor: actor.name().to_string(),
                note: req.note.clone(),
            },
        };
        let input = serde_json::to_value(&event).unwrap_or(Value::Null);
        control.create_one_time(&name, req.at, &input).await?;
        let note = Note { note: req.note };
        self.record_on(
            schedule_id,
            actor,
            AuditAction::RunAt,
            &note,
            json!({"at": utc_text(req.at), "scheduler_schedule": name}),
        )
        .await;
        Ok(RunAtOutcome {
            schedule: schedule_id.to_string(),
            at: req.at,
            request_id,
            scheduler_schedule: name,
            event: input,
        })
    }

    /// Applies an operator's event to a run, conditioned on the status read.
    async fn operate(
        &self,
        key: &RunKey,
        event: RunEvent,
        reason: Option<Reason>,
    ) -> ApiResult<Run> {
        let run = self.deps().store.get_run(key).await?;
        let operation = match event {
            // An approved run is on the manual lane in the same write: that is how the rule
            // book knows it was approved, whoever starts it next (see `Candidate::approved`).
            RunEvent::Approve => Transition::Approve { reason },
            _ => Transition::Decide { event, reason },
        };
        let change = RunChange::new(run.status, run.lease_epoch, self.now(), operation);
        Ok(self.deps().store.transition_run(key, &change).await?)
    }

    /// Sends a reopened run; answers with it and its attempts (one read either way).
    async fn send(&self, run: &Run, lane: Lane) -> ApiResult<(Run, Vec<Attempt>)> {
        let deps = self.deps();
        claim_and_send::<ApiError>(
            deps.store.as_ref(),
            deps.lanes.as_ref(),
            run,
            lane,
            self.now(),
        )
        .await?;
        Ok(deps.store.get_run_with_attempts(&run.key).await?)
    }

    /// Reopens a failed run (`run_id` as in the api's paths) as itself. With
    /// `definition: current` the same conditional write re-pins it to the schedule's current
    /// version (one more read: the schedule).
    pub async fn retry(
        &self,
        actor: &Actor,
        schedule_id: &str,
        run_id: &str,
        req: RetryRequest,
    ) -> ApiResult<RunView> {
        let key = views::parse_run_id(schedule_id, run_id)?;
        let store = &self.deps().store;
        let run = store.get_run(&key).await?;
        let schedule_version = if req.definition == Definition::Current {
            let current = store.get_schedule(schedule_id).await?.version;
            (current != run.schedule_version).then_some(current)
        } else {
            None
        };
        // A backfill's run keeps its backfill's cascade; any other run's success repairs its
        // dependents unless the retry says `cascade: false`.
        let cascade = (!matches!(run.key.origin, Origin::Backfill(_))).then_some(req.cascade);
        let retry = Transition::Retry {
            reason: None,
            schedule_version,
            cascade,
        };
        let change = RunChange::new(run.status, run.lease_epoch, self.now(), retry);
        let reopened = store.transition_run(&key, &change).await?;
        let (sent, attempts) = self.send(&reopened, lane_of(&reopened)).await?;
        let note = Note { note: req.note };
        self.record_on(
            schedule_id,
            actor,
            AuditAction::RunRetry,
            &note,
            json!({
                "run": run_id,
                "definition": req.definition,
                "schedule_version": reopened.schedule_version,
                "previous_schedule_version": run.schedule_version,
                "cascade": req.cascade,
            }),
        )
        .await;
        Ok(views::run_with_attempts(&sent, &attempts))
    }

    /// Approves a MANUAL_REQUIRED run: it goes to the manual lane; a range record's windows
    /// become a backfill instead, and the record is folded into it.
    pub async fn approve(
        &self,
        actor: &Actor,
        schedule_id: &str,
        run_id: &str,
        note: Note,
    ) -> ApiResult<ApprovalOutcome> {
        let key = views::parse_run_id(schedule_id, run_id)?;
        let run = self.deps().store.get_run(&key).await?;
        if run.status != RunStatus::ManualRequired {
            return Err(ApiError::conflict(
                "RUN_NOT_AWAITING_APPROVAL",
                format!("run `{run_id}` is {}, not MANUAL_REQUIRED", run.status),
            )
            .with_details(json!({"status": run.status})));
        }
        if let Some(range_end) = run.range_end.filter(|_| run.count > 1) {
            let req = BackfillRequest {
                from: run.key.scheduled_for,
                to: range_end,
                reprocess: Some(cronledger_aws::Reprocess::Missing),
                concurrency: None,
                batch_size: None,
                rate_per_minute: None,
                pause_when: None,
                dry_run: false,
                cascade: false,
                verify: None,
                max_cost_usd: None,
                max_target_calls: None,
                note: Some(note.text("approved range record")),
            };
            let started = self
                .start_backfill(schedule_id, &req, actor.name(), Some(run.key.clone()))
                .await?;
            let backfill = match started {
                BackfillStarted::Created(view) => *view,
                BackfillStarted::Plan(_) => {
                    return Err(ApiError::internal(
                        "a range record's backfill was planned, not created",
                    ))
                }
            };
            let folded = self
                .operate(&key, RunEvent::Coalesce, Some(Reason::Coalesced))
                .await?;
            self.record_on(
                schedule_id,
                actor,
                AuditAction::RunApprove,
                &note,
                json!({"run": run_id, "backfill": backfill.id}),
            )
            .await;
            return Ok(ApprovalOutcome {
                run: views::run(&folded),
                backfill: Some(backfill),
            });
        }
        let approved = self.operate(&key, RunEvent::Approve, None).await?;
        let (sent, _) = self.send(&approved, Lane::Manual).await?;
        self.record_on(
            schedule_id,
            actor,
            AuditAction::RunApprove,
            &note,
            json!({"run": run_id}),
        )
        .await;
        Ok(ApprovalOutcome {
            run: views::run(&sent),
            backfill: None,
        })
    }

    /// Rejects a MANUAL_REQUIRED run.
    pub async fn reject(
        &self,
        actor: &Actor,
        schedule_id: &str,
        run_id: &str,
        note: Note,
    ) -> ApiResult<RunView> {
        let closing = (RunEvent::Reject, Reason::Rejected, AuditAction::RunReject);
        self.close(actor, schedule_id, run_id, note, closing).await
    }

    /// Cancels a run that has not started.
    pub async fn cancel(
        &self,
        actor: &Actor,
        schedule_id: &str,
        run_id: &str,
        note: Note,
    ) -> ApiResult<RunView> {
        let closing = (
            RunEvent::Cancel,
            Reason::CancelledByOperator,
            AuditAction::RunCancel,
        );
        self.close(actor, schedule_id, run_id, note, closing).await
    }

    async fn close(
        &self,
        actor: &Actor,
        schedule_id: &str,
        run_id: &str,
        note: Note,
        (event, reason, action): (RunEvent, Reason, AuditAction),
    ) -> ApiResult<RunView> {
        let key = views::parse_run_id(schedule_id, run_id)?;
        let closed = self.operate(&key, event, Some(reason)).await?;
        crate::outcomes::ended(self.deps().health.as_deref(), &closed, None, self.now()).await;
        self.record_on(schedule_id, actor, action, &note, json!({"run": run_id}))
            .await;
        Ok(views::run(&closed))
    }
}
