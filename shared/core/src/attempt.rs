//! Attempts: the execution tries of one run. A retry, automatic or by an operator, is a new
//! attempt of the same run, never a new run.
//!
//! An attempt is a lease epoch: START and RECLAIM open both together (the store bumps the
//! epoch and the attempt count in one write), so attempt `n` is the worker that held epoch
//! `n`, and only a write conditioned on that epoch can end it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::named_enum;
use crate::run::{Reason, RunEvent, RunStatus};

named_enum!(
    /// How an attempt ended.
    AttemptOutcome {
        Success => "SUCCESS",
        PartialSuccess => "PARTIAL_SUCCESS",
        /// Failed, and the run goes back for another attempt.
        FailedRetryable => "FAILED_RETRYABLE",
        /// Failed for good (a permanent error, or the last attempt).
        Failed => "FAILED",
        /// The reconciler found its heartbeat or runtime expired.
        Stalled => "STALLED",
        /// Its lease expired and another worker took the run over.
        LeaseTakenOver => "LEASE_TAKEN_OVER",
        /// A guarded job's dry run found more than `max_affected`: held for an operator.
        Held => "HELD",
    }
);

impl AttemptOutcome {
    /// The outcome an event from RUNNING gives the attempt it ends; `None` for events that
    /// do not end one (a heartbeat) or do not come from RUNNING.
    pub fn of(from: RunStatus, event: RunEvent) -> Option<AttemptOutcome> {
        if from != RunStatus::Running {
            return None;
        }
        match event {
            RunEvent::Succeed | RunEvent::AdvanceStep | RunEvent::AwaitChildren => {
                Some(AttemptOutcome::Success)
            }
            RunEvent::SucceedPartially => Some(AttemptOutcome::PartialSuccess),
            RunEvent::FailRetryable => Some(AttemptOutcome::FailedRetryable),
            RunEvent::Fail => Some(AttemptOutcome::Failed),
            RunEvent::Stall => Some(AttemptOutcome::Stalled),
            RunEvent::Reclaim => Some(AttemptOutcome::LeaseTakenOver),
            RunEvent::HoldForApproval => Some(AttemptOutcome::Held),
            _ => None,
        }
    }
}

/// The start of an attempt, as the write that opened it knew it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttemptStart {
    pub started_at: DateTime<Utc>,
    /// The lease owner (the worker).
    pub worker: String,
}

/// The end of an attempt, as the write that ended it knew it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttemptEnd {
    pub finished_at: DateTime<Utc>,
    pub outcome: AttemptOutcome,
    /// The status the run moved to.
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One attempt: its start and, once it ended, its end. Either half may be missing for an
/// attempt recorded before attempts were kept, or dropped past the history's bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Attempt {
    /// Attempt number = lease epoch (1 for the first).
    pub number: u64,
    pub start: Option<AttemptStart>,
    pub end: Option<AttemptEnd>,
}

impl Attempt {
    /// Milliseconds from start to end, when both are known.
    pub fn duration_ms(&self) -> Option<i64> {
        let start = self.start.as_ref()?.started_at;
        let end = self.end.as_ref()?.finished_at;
        Some((end - start).num_milliseconds())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_events_from_running_that_leave_the_attempt_end_it() {
        use RunEvent as E;
        assert_eq!(
            AttemptOutcome::of(RunStatus::Running, E::FailRetryable),
            Some(AttemptOutcome::FailedRetryable)
        );
        assert_eq!(
            AttemptOutcome::of(RunStatus::Running, E::Reclaim),
            Some(AttemptOutcome::LeaseTakenOver)
        );
        assert_eq!(AttemptOutcome::of(RunStatus::Running, E::Heartbeat), None);
        // RETRY_PENDING -> FAILED ends the run, not an attempt (that one already ended).
        assert_eq!(AttemptOutcome::of(RunStatus::RetryPending, E::Fail), None);
        assert_eq!(AttemptOutcome::of(RunStatus::Queued, E::Start), None);
    }

    #[test]
    fn duration_needs_both_ends() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let mut a = Attempt {
            number: 1,
            start: Some(AttemptStart {
                started_at: t("2026-03-01T00:00:00Z"),
                worker: "w".into(),
            }),
            end: None,
        };
        assert_eq!(a.duration_ms(), None);
        a.end = Some(AttemptEnd {
            finished_at: t("2026-03-01T00:00:02.5Z"),
            outcome: AttemptOutcome::Success,
            status: RunStatus::Success,
            reason: None,
            error_code: None,
            message: None,
        });
        assert_eq!(a.duration_ms(), Some(2500));
    }
}
