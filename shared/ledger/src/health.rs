//! Each schedule's outcome counters by day: what its health (success rate, freshness) is
//! computed from without reading its history. The worker adds a run's outcome where the run
//! ends; the reconciler adds the windows it records SKIPPED.

use chrono::{DateTime, NaiveDate, Utc};
pub use cronledger_core::health::DayTally;
use cronledger_core::{RunStatus, Span};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::layer::store_trait;

/// How one window ended, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Outcome {
    /// SUCCESS or PARTIAL_SUCCESS; `fresh`: finished within the schedule's `slo.within` of
    /// its `scheduled_for` (false when the schedule has no `slo`).
    Succeeded {
        fresh: bool,
    },
    Failed,
    /// SKIPPED, COALESCED or CANCELLED: accounted, not run.
    Skipped,
}

/// How a run that ended in `status` counts, `None` while it has not ended. `fresh`: it
/// ended within `slo_within` of `scheduled_for` (never without an `slo`). CANCELLED (an
/// operator's cancel or rejection) counts as skipped: the window was accounted, not run.
pub fn outcome_of(
    status: RunStatus,
    scheduled_for: DateTime<Utc>,
    ended_at: DateTime<Utc>,
    slo_within: Option<Span>,
) -> Option<Outcome> {
    match status {
        RunStatus::Success | RunStatus::PartialSuccess => Some(Outcome::Succeeded {
            fresh: slo_within.is_some_and(|within| ended_at <= scheduled_for + within.as_delta()),
        }),
        RunStatus::Failed => Some(Outcome::Failed),
        RunStatus::Skipped | RunStatus::Coalesced | RunStatus::Cancelled => Some(Outcome::Skipped),
        RunStatus::Pending
        | RunStatus::Queued
        | RunStatus::Running
        | RunStatus::RetryPending
        | RunStatus::Stalled
        | RunStatus::ManualRequired => None,
    }
}

/// How long a day's counters are kept (TTL): the longest health period is 30 days.
pub const TALLY_DAYS: i64 = 35;

store_trait! {
    pub trait HealthStore {
    /// Adds `count` windows with `outcome` to `schedule`'s counters for `day` (one
    /// UpdateItem with ADD, so concurrent workers never lose a count).
    async fn count_outcome(
        &self,
        schedule: &str,
        day: NaiveDate,
        outcome: Outcome,
        count: u64,
    ) -> Result<(), StoreError>;

    /// The counters of `schedule` from `from` through `through` (UTC days), oldest first;
    /// days without outcomes are absent.
    async fn outcome_days(
        &self,
        schedule: &str,
        from: NaiveDate,
        through: NaiveDate,
    ) -> Result<Vec<DayTally>, StoreError>;
}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn a_success_is_fresh_only_within_the_slo() {
        let due = at("2026-12-01T09:00:00Z");
        let within = Some(Span::minutes(30));
        let on_time = at("2026-12-01T09:30:00Z");
        let late = at("2026-12-01T09:30:01Z");
        for status in [RunStatus::Success, RunStatus::PartialSuccess] {
            assert_eq!(
                outcome_of(status, due, on_time, within),
                Some(Outcome::Succeeded { fresh: true })
            );
            assert_eq!(
                outcome_of(status, due, late, within),
                Some(Outcome::Succeeded { fresh: false })
            );
            assert_eq!(
                outcome_of(status, due, due, None),
                Some(Outcome::Succeeded { fresh: false })
            );
        }
    }

    #[test]
    fn every_status_counts_once_it_ended_and_not_before() {
        let t = at("2026-12-01T09:00:00Z");
        for status in RunStatus::ALL {
            let outcome = outcome_of(*status, t, t, Some(Span::minutes(5)));
            assert_eq!(outcome.is_some(), status.is_terminal(), "{status}");
        }
        assert_eq!(
            outcome_of(RunStatus::Failed, t, t, None),
            Some(Outcome::Failed)
        );
        for status in [
            RunStatus::Skipped,
            RunStatus::Coalesced,
            RunStatus::Cancelled,
        ] {
            assert_eq!(outcome_of(status, t, t, None), Some(Outcome::Skipped));
        }
    }
}
