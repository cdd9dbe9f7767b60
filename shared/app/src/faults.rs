//! Named crash points, so tests and the simulator can stop a handler exactly where a real
//! process might die. Production code runs with none.

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
}

impl CrashPoint {
    pub const ALL: [CrashPoint; 4] = [
        CrashPoint::AfterRunWrite,
        CrashPoint::AfterSend,
        CrashPoint::MidJob,
        CrashPoint::BeforeCompletionWrite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::AfterRunWrite => "after-run-write",
            CrashPoint::AfterSend => "after-send",
            CrashPoint::MidJob => "mid-job",
            CrashPoint::BeforeCompletionWrite => "before-completion-write",
            CrashPoint::BetweenSteps => "between-steps",
        }
    }

    pub fn parse(name: &str) -> Option<CrashPoint> {
        CrashPoint::ALL
            .into_iter()
            .chain([CrashPoint::BetweenSteps])
            .find(|p| p.name() == name)
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
