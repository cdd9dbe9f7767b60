//! A schedule's changes: create, and replace under the version it is based on (a HIGH-risk
//! change only when confirmed); pause, resume, archive, each with a note and, when the caller
//! names one, the version the change is based on (the api's `If-Match`).

use axum::http::StatusCode;
use cronledger_contract::{Note, ScheduleView};
use cronledger_core::risk::{assess_change, RiskLevel, RiskReport};
use serde_json::{json, Value};

use super::Operator;
use crate::api::schedules::{CONFIRM_HEADER, CONFIRM_QUERY, CONFIRM_VALUE};
use crate::api::{views, Actor, ApiError, ApiResult};

/// A replacement of a schedule's spec.
#[derive(Debug, Clone)]
pub struct ScheduleChange {
    /// The schedule document (its `id`, when given, must be the schedule's).
    pub document: Value,
    /// The version the change is based on.
    pub version: u64,
    /// The caller confirmed a HIGH-risk change.
    pub confirmed: bool,
    /// Why (the audit reason).
    pub note: String,
}

/// A HIGH-risk update (`runs per day x10` or more, or a window that would fire again) is
/// applied only when the request says it knows.
fn needs_confirmation(report: &RiskReport) -> bool {
    report.level == RiskLevel::High || report.refires_past_window
}

fn level_text(level: RiskLevel) -> &'static str {
    match level {
        RiskLevel::Low => "LOW",
        RiskLevel::Medium => "MEDIUM",
        RiskLevel::High => "HIGH",
    }
}

/// A change of a schedule's state.
#[derive(Clone, Copy)]
enum Lifecycle {
    Pause,
    Resume,
    Archive,
}

impl Operator {
    /// Creates a schedule from its document (validated with the core's codes), if the
    /// caller may use its job type and its upstreams exist.
    pub async fn create_schedule(
        &self,
        actor: &Actor,
        document: &Value,
        note: String,
    ) -> ApiResult<ScheduleView> {
        let spec = self.api.validate(document).await?;
        self.check_calendars(&spec).await?;
        self.api.check_job_type(actor, &spec)?;
        self.api.check_dependencies(&spec, &[]).await?;
        let meta = self.api.meta(actor, note);
        let stored = self.deps().store.create_schedule(spec, meta).await?;
        Ok(views::schedule(&stored))
    }

    /// Replaces a schedule's spec under the version the change is based on; a HIGH-risk
    /// change needs `confirmed` (else 428 SCHEDULE_CHANGE_NEEDS_CONFIRMATION with the
    /// findings). The audit entry records the risk.
    pub async fn update_schedule(
        &self,
        actor: &Actor,
        id: &str,
        change: ScheduleChange,
    ) -> ApiResult<ScheduleView> {
        let mut doc = change.document;
        match doc.get("id") {
            None => {
                if let Some(obj) = doc.as_object_mut() {
                    obj.insert("id".into(), json!(id));
                }
            }
            Some(Value::String(body_id)) if body_id == id => {}
            Some(other) => {
                return Err(ApiError::invalid(
                    "SCHEDULE_ID_MISMATCH",
                    format!("the body's id {other} is not the path's `{id}`"),
                ))
            }
        }
        let spec = self.api.validate(&doc).await?;
        self.check_calendars(&spec).await?;
        self.api.check_job_type(actor, &spec)?;
        let current = self.deps().store.get_schedule(id).await?;
        self.api.check_job_type(actor, &current.spec)?;
        self.api
            .check_dependencies(&spec, &current.downstream)
            .await?;
        let report = assess_change(&current.spec, &spec, self.now(), None, 0)
            .map_err(|i| ApiError::issues(&[i]))?;
        if needs_confirmation(&report) && !change.confirmed {
            return Err(ApiError::new(
                StatusCode::PRECONDITION_REQUIRED,
                "SCHEDULE_CHANGE_NEEDS_CONFIRMATION",
                format!(
                    "this change is {} risk; confirm it with ?{CONFIRM_QUERY}={CONFIRM_VALUE} or {CONFIRM_HEADER}: {CONFIRM_VALUE}",
                    level_text(report.level)
                ),
            )
            .with_details(json!({
                "risk": level_text(report.level),
                "findings": report.findings,
                "confirm": {"query": CONFIRM_QUERY, "header": CONFIRM_HEADER, "value": CONFIRM_VALUE},
            })));
        }
        let mut meta = self.api.meta(actor, change.note);
        meta.details = Some(json!({
            "risk": level_text(report.level),
            "findings": report.findings,
            "confirmed": change.confirmed,
        }));
        let stored = self
            .deps()
            .store
            .update_schedule(spec, change.version, meta)
            .await?;
        Ok(views::schedule(&stored))
    }

    /// Pauses a schedule: it fires no more until resumed.
    pub async fn pause(
        &self,
        actor: &Actor,
        schedule_id: &str,
        note: Note,
        expected_version: Option<u64>,
    ) -> ApiResult<ScheduleView> {
        self.lifecycle(Lifecycle::Pause, actor, schedule_id, note, expected_version)
            .await
    }

    /// Resumes a paused schedule.
    pub async fn resume(
        &self,
        actor: &Actor,
        schedule_id: &str,
        note: Note,
        expected_version: Option<u64>,
    ) -> ApiResult<ScheduleView> {
        self.lifecycle(
            Lifecycle::Resume,
            actor,
            schedule_id,
            note,
            expected_version,
        )
        .await
    }

    /// Archives a schedule (it never fires again; its runs stay), unless others still run
    /// after it.
    pub async fn archive(
        &self,
        actor: &Actor,
        schedule_id: &str,
        note: Note,
        expected_version: Option<u64>,
    ) -> ApiResult<ScheduleView> {
        self.lifecycle(
            Lifecycle::Archive,
            actor,
            schedule_id,
            note,
            expected_version,
        )
        .await
    }

    async fn lifecycle(
        &self,
        change: Lifecycle,
        actor: &Actor,
        id: &str,
        note: Note,
        version: Option<u64>,
    ) -> ApiResult<ScheduleView> {
        let store = &self.deps().store;
        let stored = match change {
            Lifecycle::Pause => {
                let meta = self.api.meta(actor, note.text("paused through the api"));
                store.pause_schedule(id, version, meta).await?
            }
            Lifecycle::Resume => {
                let meta = self.api.meta(actor, note.text("resumed through the api"));
                store.resume_schedule(id, version, meta).await?
            }
            Lifecycle::Archive => {
                self.api.check_no_dependents(id).await?;
                let meta = self.api.meta(actor, note.text("archived through the api"));
                store.archive_schedule(id, version, meta).await?
            }
        };
        Ok(views::schedule(&stored))
    }
}
