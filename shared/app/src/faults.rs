//! Named crash points, so tests and the simulator can stop a handler exactly where a real
//! process might die, and one fault a living process meets (its heartbeats failing).
//! Production code runs with none.

use cronledger_core::RunKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CrashPoint {
    /// The ticker wrote the run but died before sending it to its lane.
    AfterRunWrite,
    /// The ticker sent the message but died before marking the run QUEUED.
    AfterSend,
    /// The worker died while the job ran (no outcome written, lease left to expire).
    MidJob,
    /// The job finished but the worker died before writing the outcome.
    BeforeCompletionWrite,
    /// A step succeeded and its checkpoint was written, but the worker died before sending
    /// the next step's message (only `steps` jobs reach it, so it is not in [`Self::ALL`]).
    BetweenSteps,
    /// The worker is cut off from the ledger while the job runs: every heartbeat write of the
    /// attempt fails from its first beat on (lease and message visibility are no longer
    /// renewed), and the job goes on. Only jobs that run longer than a heartbeat period reach
    /// it, so it is not in [`Self::ALL`].
    Heartbeat,
}

impl CrashPoint {
    /// The points every job reaches.
    pub const ALL: [CrashPoint; 4] = [
        CrashPoint::AfterRunWrite,
        CrashPoint::AfterSend,
        CrashPoint::MidJob,
        CrashPoint::BeforeCompletionWrite,
    ];

    /// Every point, the ones only some jobs reach included.
    pub const EVERY: [CrashPoint; 6] = [
        CrashPoint::AfterRunWrite,
        CrashPoint::AfterSend,
        CrashPoint::MidJob,
        CrashPoint::BeforeCompletionWrite,
        CrashPoint::BetweenSteps,
        CrashPoint::Heartbeat,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::AfterRunWrite => "after-run-write",
            CrashPoint::AfterSend => "after-send",
            CrashPoint::MidJob => "mid-job",
            CrashPoint::BeforeCompletionWrite => "before-completion-write",
            CrashPoint::BetweenSteps => "between-steps",
            CrashPoint::Heartbeat => "heartbeat",
        }
    }

    pub fn parse(name: &str) -> Option<CrashPoint> {
        CrashPoint::EVERY.into_iter().find(|p| p.name() == name)
    }
}

/// Decides whether the handler "crashes" at a point for a run.
pub trait Faults: Send + Sync {
    fn crash_at(&self, point: CrashPoint, run: &RunKey, attempt: u32) -> bool;
}

/// The simulated crash: the handler stops as if the process died there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("INJECTED_CRASH: {}", .0.name())]
pub struct InjectedCrash(pub CrashPoint);
