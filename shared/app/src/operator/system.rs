//! The system as a whole: the kill switch, and its state.

use std::sync::Arc;

use axum::http::StatusCode;
use cronledger_aws::{KillSwitch, SystemAuditEntry};
use cronledger_contract::{AutomaticSchedule, KillSwitchRequest, Note, SystemStatus};
use serde_json::{json, Value};

use super::Operator;
use crate::api::system::ControlError;
use crate::api::{Actor, ApiError, ApiResult, SystemControl};

impl Operator {
    /// EventBridge Scheduler's control, where this deployment has it.
    pub(super) fn control(&self) -> ApiResult<Arc<dyn SystemControl>> {
        self.deps().system.clone().ok_or_else(|| {
            ApiError::conflict(
                "SYSTEM_CONTROL_UNAVAILABLE",
                "this deployment has no EventBridge Scheduler control (the local runner)",
            )
        })
    }

    /// The kill switch's state: the stored flag (the truth every function checks) and,
    /// where this deployment has EventBridge Scheduler, the automatic schedules it disables.
    pub async fn status(&self) -> ApiResult<SystemStatus> {
        let stored = self.deps().ops.kill_switch().await?;
        let engaged = stored.as_ref().is_some_and(|k| k.engaged);
        let mut schedules = Vec::new();
        let mut all_on = !engaged;
        if let Some(control) = &self.deps().system {
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

    /// Engages or releases the kill switch. The stored flag goes first: from then on no
    /// function fires, plans, releases or starts anything (each checks it). Then what AWS
    /// can disable for it: the ticker's and the reconciler's schedules and the workers' event
    /// source mappings, so messages stay in their lanes and nothing is even invoked. If any
    /// of those calls fails the flag still holds; the error says which failed.
    pub async fn kill_switch(
        &self,
        actor: &Actor,
        req: KillSwitchRequest,
    ) -> ApiResult<SystemStatus> {
        if req.note.trim().is_empty() {
            return Err(ApiError::invalid(
                "NOTE_REQUIRED",
                "the kill switch needs a note saying why",
            ));
        }
        let state = KillSwitch {
            engaged: req.engaged,
            since: self.now(),
            actor: actor.name().to_string(),
            note: req.note.clone(),
        };
        self.deps().ops.put_kill_switch(&state).await?;
        let mut failures = Vec::new();
        let mut automatic = Vec::new();
        let mut mappings = Vec::new();
        if let Some(control) = &self.deps().system {
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
            note: Some(req.note),
        };
        self.record(
            actor,
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
        self.status().await
    }

    /// Records a system-wide action (the kill switch) in the system audit log (best effort:
    /// the action stands). Actions on one schedule's runs and backfills go to that
    /// schedule's log instead.
    async fn record(&self, actor: &Actor, action: &str, note: &Note, details: Value) {
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
