//! The system's levers as the api shows them: the kill switch and automatic firing, the
//! system audit, and who the caller is.

use cronledger_ledger::ops::{KillSwitch, SystemAuditEntry};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether automatic firing is on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SystemStatus {
    /// The kill switch is released and every automatic schedule is enabled.
    pub automatic_firing: bool,
    pub kill_switch_engaged: bool,
    /// The stored flag every function checks; `null` when it was never set.
    pub kill_switch: Option<KillSwitch>,
    /// The ticker's and reconciler's EventBridge Scheduler schedules.
    pub schedules: Vec<AutomaticSchedule>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AutomaticSchedule {
    pub name: String,
    pub exists: bool,
    pub enabled: bool,
}

/// System-wide operator actions, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SystemAudit {
    pub entries: Vec<SystemAuditEntry>,
    /// Older entries were left off past the answer's size budget.
    pub truncated: bool,
}

/// The caller as the api sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhoAmI {
    pub principal: String,
    /// viewer, operator or admin.
    pub role: String,
    pub groups: Vec<String>,
}
