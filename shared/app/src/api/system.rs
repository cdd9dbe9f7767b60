//! System routes: the kill switch (disable and enable the ticker's and the reconciler's
//! EventBridge Scheduler schedules at once, with a note and an audit entry), its status, the
//! system audit log, and "run at": a one-off MANUAL run at a future instant.
//!
//! Run at creates a one-time EventBridge Scheduler schedule, `at(...)` in UTC with
//! `ActionAfterCompletion: DELETE`, whose target is the api function itself with the input
//! `{"run_at": {...}}`. The api Lambda reads that event shape (not an HTTP request) and creates
//! the MANUAL run through the same code as "run now", with `runat:{request_id}` as its
//! idempotency key: Scheduler's at-least-once delivery still makes one run.

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_scheduler::types::{
    ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, ScheduleState, Target,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::{AuditAction, KillSwitch, SystemAuditEntry};
use cronledger_core::window::utc_text;
use cronledger_core::Schedule;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::extract::{Actor, ApiJson, ApiPath, ApiQuery};
use super::paging::fitting;
use super::runs::{check_occurrence, manual_run};
use super::{new_id, Api};
use crate::reconciler::signals::display;
use cronledger_contract::{
    AutomaticSchedule, KillSwitchRequest, Mode, Note, RunAtOutcome, RunAtRequest, RunNowRequest,
    RunOutcome, SystemAudit, SystemStatus,
};

/// A failed EventBridge Scheduler or Lambda call: which call (`UpdateSchedule
/// cronledger-ticker`), and its error text (for the log only, never an answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: {detail}")]
pub struct ControlError {
    pub call: String,
    pub detail: String,
}

impl ControlError {
    pub fn new(call: impl Into<String>, detail: impl Into<String>) -> ControlError {
        ControlError {
            call: call.into(),
            detail: detail.into(),
        }
    }
}

impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> ApiError {
        ApiError::upstream("SCHEDULER_UNAVAILABLE", &e.call, e.to_string())
    }
}

/// EventBridge Scheduler, as the api needs it.
#[async_trait]
pub trait SystemControl: Send + Sync {
    /// The schedules that fire automatically (ticker and reconciler): the kill switch's.
    fn automatic(&self) -> Vec<String>;
    /// `Some(enabled)`, or `None` for a schedule that does not exist.
    async fn enabled(&self, name: &str) -> Result<Option<bool>, ControlError>;
    async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), ControlError>;
    /// Enables or disables the workers' SQS event source mappings (messages stay in their
    /// lanes while disabled); the mappings changed, by id.
    async fn set_intake(&self, enabled: bool) -> Result<Vec<String>, ControlError> {
        let _ = enabled;
        Ok(Vec::new())
    }
    /// A one-time schedule at `at` delivering `input` to the api, deleted after it fires.
    async fn create_one_time(
        &self,
        name: &str,
        at: DateTime<Utc>,
        input: &Value,
    ) -> Result<(), ControlError>;
}

/// EventBridge Scheduler: `GetSchedule` + `UpdateSchedule` for the switch (an update replaces
/// the whole schedule, so it is read first and written back with only the state changed),
/// `CreateSchedule` for run-at.
pub struct SchedulerControl {
    pub client: aws_sdk_scheduler::Client,
    pub group: Option<String>,
    /// `CRONLEDGER_TICKER_SCHEDULES` + `CRONLEDGER_RECONCILER_SCHEDULES` (comma-separated).
    pub automatic: Vec<String>,
    /// The api function's ARN (`CRONLEDGER_API_FUNCTION_ARN`) and the role Scheduler assumes
    /// to invoke it (`CRONLEDGER_SCHEDULER_ROLE_ARN`).
    pub target_arn: Option<String>,
    pub role_arn: Option<String>,
    /// The worker function's event source mappings (the kill switch's intake), found by the
    /// function's name (`CRONLEDGER_WORKER_FUNCTION`).
    pub intake: Option<WorkerIntake>,
}

/// The worker function whose SQS event source mappings the kill switch disables:
/// `ListEventSourceMappings` by function, then `UpdateEventSourceMapping` on each.
pub struct WorkerIntake {
    pub client: aws_sdk_lambda::Client,
    pub function: String,
}

impl WorkerIntake {
    async fn set_enabled(&self, enabled: bool) -> Result<Vec<String>, ControlError> {
        let mut changed = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let page = self
                .client
                .list_event_source_mappings()
                .function_name(&self.function)
                .set_marker(marker.clone())
                .send()
                .await
                .map_err(|e| {
                    ControlError::new(
                        format!("ListEventSourceMappings {}", self.function),
                        display(&e),
                    )
                })?;
            for mapping in page.event_source_mappings() {
                let Some(uuid) = mapping.uuid() else { continue };
                self.client
                    .update_event_source_mapping()
                    .uuid(uuid)
                    .enabled(enabled)
                    .send()
                    .await
                    .map_err(|e| {
                        ControlError::new(format!("UpdateEventSourceMapping {uuid}"), display(&e))
                    })?;
                changed.push(uuid.to_string());
            }
            match page.next_marker() {
                Some(next) => marker = Some(next.to_string()),
                None => return Ok(changed),
            }
        }
    }
}

#[async_trait]
impl SystemControl for SchedulerControl {
    fn automatic(&self) -> Vec<String> {
        self.automatic.clone()
    }

    async fn enabled(&self, name: &str) -> Result<Option<bool>, ControlError> {
        match self
            .client
            .get_schedule()
            .name(name)
            .set_group_name(self.group.clone())
            .send()
            .await
        {
            Ok(out) => Ok(Some(out.state() == Some(&ScheduleState::Enabled))),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                Ok(None)
            }
            Err(e) => Err(ControlError::new(
                format!("GetSchedule {name}"),
                display(&e),
            )),
        }
    }

    async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), ControlError> {
        let current = self
            .client
            .get_schedule()
            .name(name)
            .set_group_name(self.group.clone())
            .send()
            .await
            .map_err(|e| ControlError::new(format!("GetSchedule {name}"), display(&e)))?;
        let state = if enabled {
            ScheduleState::Enabled
        } else {
            ScheduleState::Disabled
        };
        self.client
            .update_schedule()
            .name(name)
            .set_group_name(self.group.clone())
            .set_schedule_expression(current.schedule_expression().map(str::to_string))
            .set_schedule_expression_timezone(
                current.schedule_expression_timezone().map(str::to_string),
            )
            .set_flexible_time_window(current.flexible_time_window().cloned())
            .set_target(current.target().cloned())
            .set_description(current.description().map(str::to_string))
            .set_start_date(current.start_date().cloned())
            .set_end_date(current.end_date().cloned())
            .set_kms_key_arn(current.kms_key_arn().map(str::to_string))
            .set_action_after_completion(current.action_after_completion().cloned())
            .state(state)
            .send()
            .await
            .map_err(|e| ControlError::new(format!("UpdateSchedule {name}"), display(&e)))?;
        Ok(())
    }

    async fn set_intake(&self, enabled: bool) -> Result<Vec<String>, ControlError> {
        match &self.intake {
            Some(intake) => intake.set_enabled(enabled).await,
            None => Ok(Vec::new()),
        }
    }

    async fn create_one_time(
        &self,
        name: &str,
        at: DateTime<Utc>,
        input: &Value,
    ) -> Result<(), ControlError> {
        let (Some(arn), Some(role)) = (&self.target_arn, &self.role_arn) else {
            return Err(ControlError::new(
                format!("CreateSchedule {name}"),
                "CRONLEDGER_API_FUNCTION_ARN and CRONLEDGER_SCHEDULER_ROLE_ARN are not set",
            ));
        };
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|e| ControlError::new(format!("CreateSchedule {name}"), e.to_string()))?;
        let target = Target::builder()
            .arn(arn)
            .role_arn(role)
            .input(input.to_string())
            .build()
            .map_err(|e| ControlError::new(format!("CreateSchedule {name}"), e.to_string()))?;
        self.client
            .create_schedule()
            .name(name)
            .set_group_name(self.group.clone())
            .schedule_expression(format!("at({})", at.format("%Y-%m-%dT%H:%M:%S")))
            .schedule_expression_timezone("UTC")
            .flexible_time_window(window)
            .target(target)
            .action_after_completion(ActionAfterCompletion::Delete)
            .description("cronledger one-off manual run")
            .send()
            .await
            .map_err(|e| ControlError::new(format!("CreateSchedule {name}"), display(&e)))?;
        Ok(())
    }
}

fn control(api: &Api) -> ApiResult<Arc<dyn SystemControl>> {
    api.deps().system.clone().ok_or_else(|| {
        ApiError::conflict(
            "SYSTEM_CONTROL_UNAVAILABLE",
            "this deployment has no EventBridge Scheduler control (the local runner)",
        )
    })
}

/// The kill switch's state: the stored flag (the truth every function checks) and, where
/// this deployment has EventBridge Scheduler, the automatic schedules it disables.
async fn status_of(api: &Api) -> ApiResult<SystemStatus> {
    let stored = api.deps().ops.kill_switch().await?;
    let engaged = stored.as_ref().is_some_and(|k| k.engaged);
    let mut schedules = Vec::new();
    let mut all_on = !engaged;
    if let Some(control) = &api.deps().system {
        for name in control.automatic() {
            let enabled = control.enabled(&name).await?;
            all_on &= enabled == Some(true);
            schedules.push(AutomaticSchedule {
                name,
                exists: enabled.is_some(),
                enabled: enabled == Some(true),
            });
        }
    }
    Ok(SystemStatus {
        automatic_firing: all_on,
        kill_switch_engaged: engaged,
        kill_switch: stored,
        schedules,
    })
}

pub async fn status(State(api): State<Api>) -> ApiResult<Json<SystemStatus>> {
    Ok(Json(status_of(&api).await?))
}

/// Engages or releases the kill switch. The stored flag goes first: from then on no
/// function fires, plans, releases or starts anything (each checks it). Then what AWS can
/// disable for it: the ticker's and the reconciler's schedules and the workers' event
/// source mappings, so messages stay in their lanes and nothing is even invoked. If any of
/// those calls fails the flag still holds; the answer says which failed.
pub async fn kill_switch(
    State(api): State<Api>,
    actor: Actor,
    ApiJson(req): ApiJson<KillSwitchRequest>,
) -> ApiResult<Json<SystemStatus>> {
    if req.note.trim().is_empty() {
        return Err(ApiError::invalid(
            "NOTE_REQUIRED",
            "the kill switch needs a note saying why",
        ));
    }
    let state = KillSwitch {
        engaged: req.engaged,
        since: api.now(),
        actor: actor.name().to_string(),
        note: req.note.clone(),
    };
    api.deps().ops.put_kill_switch(&state).await?;
    let mut failures = Vec::new();
    let mut automatic = Vec::new();
    let mut mappings = Vec::new();
    if let Some(control) = &api.deps().system {
        automatic = control.automatic();
        for name in &automatic {
            if let Err(e) = control.set_enabled(name, !req.engaged).await {
                failures.push(e);
            }
        }
        match control.set_intake(!req.engaged).await {
            Ok(changed) => mappings = changed,
            Err(e) => failures.push(e),
        }
    }
    let action = if req.engaged {
        "KILL_SWITCH_ENGAGED"
    } else {
        "KILL_SWITCH_RELEASED"
    };
    let note = Note {
        note: Some(req.note.clone()),
    };
    api.record(
        &actor,
        action,
        &note,
        json!({"schedules": automatic, "event_source_mappings": mappings, "failures": failures.iter().map(|f| &f.call).collect::<Vec<_>>()}),
    )
    .await;
    if !failures.is_empty() {
        let calls: Vec<&str> = failures.iter().map(|f| f.call.as_str()).collect();
        let causes: Vec<String> = failures.iter().map(ControlError::to_string).collect();
        return Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "SCHEDULER_UNAVAILABLE",
            format!(
                "the kill switch is {} (every function checks it), but these calls failed: {}",
                if req.engaged { "engaged" } else { "released" },
                calls.join("; ")
            ),
        )
        .with_details(json!({"failed_calls": calls}))
        .logging(causes.join("; ")));
    }
    Ok(Json(status_of(&api).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    pub limit: Option<u32>,
}

pub async fn audit(
    State(api): State<Api>,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> ApiResult<Json<SystemAudit>> {
    let mut entries = api.deps().ops.system_audit(api.limit(q.limit)).await?;
    // Newest first: past the page's byte budget the oldest are left off.
    let fit = fitting(&entries);
    let truncated = fit < entries.len();
    entries.truncate(fit);
    Ok(Json(SystemAudit { entries, truncated }))
}

/// What a one-off run's firing carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunAtSpec {
    pub schedule_id: String,
    pub request_id: String,
    pub mode: Mode,
    #[serde(default)]
    pub scheduled_for: Option<DateTime<Utc>>,
    pub actor: String,
    #[serde(default)]
    pub note: Option<String>,
}

/// The event EventBridge Scheduler delivers to the api function: `{"run_at": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunAtEvent {
    pub run_at: RunAtSpec,
}

pub async fn run_at(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<RunAtRequest>,
) -> ApiResult<(StatusCode, Json<RunAtOutcome>)> {
    let control = control(&api)?;
    let now = api.now();
    if req.at <= now + TimeDelta::seconds(30) || req.at > now + TimeDelta::days(366) {
        return Err(ApiError::invalid(
            "RUN_AT_INVALID",
            "`at` must be at least 30 seconds and at most a year ahead",
        ));
    }
    let stored = api.deps().store.get_schedule(&id).await?;
    if let Some(scheduled_for) = req.scheduled_for {
        // Checked now, not when it fires hours later: the same rule as run now.
        let schedule = Schedule::new(stored.spec).map_err(|i| ApiError::issues(&[i]))?;
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
            schedule_id: id.clone(),
            request_id: request_id.clone(),
            mode: req.mode,
            scheduled_for: req.scheduled_for,
            actor: actor.name().to_string(),
            note: req.note.clone(),
        },
    };
    let input = serde_json::to_value(&event).unwrap_or(Value::Null);
    control.create_one_time(&name, req.at, &input).await?;
    let note = Note {
        note: req.note.clone(),
    };
    api.record_on(
        &id,
        &actor,
        AuditAction::RunAt,
        &note,
        json!({"at": utc_text(req.at), "scheduler_schedule": name}),
    )
    .await;
    Ok((
        StatusCode::CREATED,
        Json(RunAtOutcome {
            schedule: id,
            at: req.at,
            request_id,
            scheduler_schedule: name,
            event: input,
        }),
    ))
}

impl Api {
    /// A one-off run's firing: the MANUAL run, once however often Scheduler delivers it.
    pub async fn fire_run_at(&self, event: &RunAtEvent) -> ApiResult<RunOutcome> {
        let spec = &event.run_at;
        let req = RunNowRequest {
            mode: spec.mode,
            scheduled_for: spec.scheduled_for,
            note: spec.note.clone(),
        };
        let key = format!("runat:{}", spec.request_id);
        let (_, body) = manual_run(
            self,
            &spec.schedule_id,
            &req,
            Some(&key),
            Some(spec.request_id.clone()),
        )
        .await?;
        Ok(body)
    }

    /// Records a system-wide action (the kill switch) in the system audit log (best effort:
    /// the action stands). Actions on one schedule's runs and backfills go to that
    /// schedule's log instead ([`Api::record_on`]).
    pub(crate) async fn record(&self, actor: &Actor, action: &str, note: &Note, details: Value) {
        let entry = SystemAuditEntry {
            at: self.now(),
            actor: actor.name().to_string(),
            action: action.to_string(),
            note: note.text(""),
            details,
        };
        if let Err(e) = self.deps().ops.append_system_audit(&entry).await {
            tracing::warn!(action, error = %e, "operator action not audited");
        }
    }
}
