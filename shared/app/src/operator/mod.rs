//! The operator's levers as one service: run now, run at, retry, approve, reject and cancel a
//! run; create, replace, pause, resume and archive a schedule; the kill switch; create, approve, pause, resume
//! and cancel a backfill. Each takes a typed request of the contract (`cronledger_contract`)
//! and the caller's identity ([`Actor`]), does the validation, the store writes and the audit
//! record, and answers with a typed result of the contract.
//!
//! Two callers share it: the api's handlers, which only translate HTTP to it and back (path,
//! headers and body in; status, JSON and `ETag` out), and the simulator's levers, which call
//! it directly. A simulated approval is therefore the api's approval, without a router.
//!
//! Authorization stays with the caller: the api's route table admits a caller with the role a
//! route needs (the same table the OpenAPI document is built from), and the service records
//! the identity it is given in the audit log and the change metadata.
//!
//! Errors are the api's [`ApiError`]: it already carries what a refusal means to any caller
//! (a stable code, a message, details) along with its HTTP status, and the store's, lanes'
//! and core's errors already convert into it. A separate service error would repeat every
//! code and need a mapping back to the same statuses; the simulator reads the code and the
//! message only.

mod backfills;
mod calendars;
mod replays;
mod runs;
mod schedules;
mod system;

use chrono::{DateTime, Utc};
use cronledger_contract::Note;
use cronledger_ledger::ledger::{AuditAction, OperatorAction};
use serde_json::Value;

use crate::api::{Actor, Api, ApiDeps};

pub use backfills::BackfillStarted;
pub use calendars::{CalendarChange, CalendarPut};
pub use replays::ReplayStarted;
pub use runs::Made;
pub use schedules::ScheduleChange;

/// The operator's levers on one set of dependencies (see the module's documentation).
#[derive(Clone)]
pub struct Operator {
    api: Api,
}

impl Operator {
    pub fn new(deps: ApiDeps) -> Operator {
        Operator {
            api: Api::new(deps),
        }
    }

    /// The levers on an api's dependencies.
    pub fn of(api: &Api) -> Operator {
        Operator { api: api.clone() }
    }

    pub fn deps(&self) -> &ApiDeps {
        self.api.deps()
    }

    fn now(&self) -> DateTime<Utc> {
        self.api.now()
    }

    /// Records an operator's action on a schedule's runs or backfills, with its note, in that
    /// schedule's audit log (best effort, like the system log: the action stands).
    async fn record_on(
        &self,
        schedule_id: &str,
        actor: &Actor,
        action: AuditAction,
        note: &Note,
        details: Value,
    ) {
        let entry = OperatorAction {
            schedule_id: schedule_id.to_string(),
            action,
            actor: actor.name().to_string(),
            reason: note.text(""),
            at: self.now(),
            details,
        };
        if let Err(e) = self.deps().store.record_operator_action(&entry).await {
            tracing::warn!(schedule = schedule_id, action = %action, error = %e, "operator action not audited");
        }
    }
}
