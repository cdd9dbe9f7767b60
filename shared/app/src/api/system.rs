//! System routes: the kill switch (disable and enable the ticker's and the reconciler's
//! EventBridge Scheduler schedules at once, with a note and an audit entry), its status, the
//! system audit log, and "run at": a one-off MANUAL run at a future instant. The kill switch
//! and run at translate HTTP to the [`Operator`](crate::operator::Operator) and back; this
//! module keeps EventBridge Scheduler's side ([`SystemControl`]) and run at's event shape.
//!
//! Run at creates a one-time EventBridge Scheduler schedule, `at(...)` in UTC with
//! `ActionAfterCompletion: DELETE`, whose target is the api function itself with the input
//! `{"run_at": {...}}`. The api Lambda reads that event shape (not an HTTP request) and creates
//! the MANUAL run through the same code as "run now", with `runat:{request_id}` as its
//! idempotency key: Scheduler's at-least-once delivery still makes one run.

use async_trait::async_trait;
use aws_sdk_scheduler::types::{
    ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, ScheduleState, Target,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{ApiError, ApiResult};
use super::extract::{Actor, ApiJson, ApiPath, ApiQuery};
use super::paging::fitting;
use super::Api;
use crate::reconciler::signals::display;
use cronledger_contract::{
    KillSwitchRequest, Mode, RunAtOutcome, RunAtRequest, RunOutcome, SystemAudit, SystemStatus,
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
    /// `CRONLEDGER_TICKER_SCHEDULES` + `CRONLEDGER_RECONCILER_SCHEDULES` +
    /// `CRONLEDGER_AUDITOR_SCHEDULES` (comma-separated).
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

pub async fn status(State(api): State<Api>) -> ApiResult<Json<SystemStatus>> {
    Ok(Json(api.operator().status().await?))
}

/// Engages or releases the kill switch (see [`crate::operator::Operator::kill_switch`]).
pub async fn kill_switch(
    State(api): State<Api>,
    actor: Actor,
    ApiJson(req): ApiJson<KillSwitchRequest>,
) -> ApiResult<Json<SystemStatus>> {
    Ok(Json(api.operator().kill_switch(&actor, req).await?))
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
    let outcome = api.operator().run_at(&actor, &id, req).await?;
    Ok((StatusCode::CREATED, Json(outcome)))
}

impl Api {
    /// A one-off run's firing: the MANUAL run, once however often Scheduler delivers it.
    pub async fn fire_run_at(&self, event: &RunAtEvent) -> ApiResult<RunOutcome> {
        self.operator().fire_run_at(event).await
    }
}
