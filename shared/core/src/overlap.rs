//! The other runs of a schedule that the overlap rule weighs (the rule itself is in
//! [`crate::admission`]).

use crate::run::{Reason, Run, RunKey, RunStatus, Trigger};

/// Another run of the same schedule still in flight or waiting, as the ticker or worker
/// sees it: what the overlap rule of [`crate::admission`] weighs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveRun {
    pub key: RunKey,
    pub status: RunStatus,
    pub reason: Option<Reason>,
    /// A live window (or an operator's run): under QUEUE_NEW a later window waits behind it
    /// while it waits for its first start.
    pub live: bool,
}

impl ActiveRun {
    pub fn of(run: &Run) -> ActiveRun {
        let live = match run.trigger {
            Trigger::Scheduled | Trigger::Manual => true,
            Trigger::Dependency => !run.lane.is_some_and(crate::admission::is_catch_up_lane),
            Trigger::CatchUp | Trigger::Backfill => false,
        };
        ActiveRun {
            key: run.key.clone(),
            status: run.status,
            reason: run.reason,
            live,
        }
    }

    /// Whether it counts at all: in flight or waiting, and not a late run parked for the
    /// reconciler's plan of its gap (catch-up work in waiting, holding nothing back).
    pub fn counts(run: &Run) -> bool {
        run.status.is_active() && run.reason != Some(Reason::LateAwaitingPlan)
    }
}
