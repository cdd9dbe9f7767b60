//! The reconciler's typed errors, each with a stable code (logs and reports carry the code).

use cronledger_aws::{LaneError, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("RECONCILE_EVENT_INVALID: {0}")]
    Event(String),

    #[error("RECONCILE_CONFIG_INVALID: {name}={value}: {problem}")]
    Config {
        name: &'static str,
        value: String,
        problem: String,
    },

    #[error(transparent)]
    Store(#[from] StoreError),

    #[error(transparent)]
    Lane(#[from] LaneError),

    /// The core refused the planner input (a bug or a hand-edited item).
    #[error("RECONCILE_PLAN_FAILED: {0}")]
    Plan(String),

    /// A pause signal (queue depth, alarm) or the ticker schedule check could not be read.
    #[error("RECONCILE_SIGNAL_UNAVAILABLE: {0}")]
    Signal(String),

    /// Concurrent writers kept winning; the next pass tries again.
    #[error("RECONCILE_CONTENDED: {0}")]
    Contended(String),
}

impl ReconcileError {
    pub fn code(&self) -> &'static str {
        match self {
            ReconcileError::Event(_) => "RECONCILE_EVENT_INVALID",
            ReconcileError::Config { .. } => "RECONCILE_CONFIG_INVALID",
            ReconcileError::Store(e) => e.code(),
            ReconcileError::Lane(e) => e.code(),
            ReconcileError::Plan(_) => "RECONCILE_PLAN_FAILED",
            ReconcileError::Signal(_) => "RECONCILE_SIGNAL_UNAVAILABLE",
            ReconcileError::Contended(_) => "RECONCILE_CONTENDED",
        }
    }
}
