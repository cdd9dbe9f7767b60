//! Each schedule's outcome counters by day: what its health (success rate, freshness) is
//! computed from without reading its history. The worker adds a run's outcome where the run
//! ends; the reconciler adds the windows it records SKIPPED.

use async_trait::async_trait;
use chrono::NaiveDate;
pub use cronledger_core::health::DayTally;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// How one window ended, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// SUCCESS or PARTIAL_SUCCESS; `fresh`: finished within the schedule's `slo.within` of
    /// its `scheduled_for` (false when the schedule has no `slo`).
    Succeeded {
        fresh: bool,
    },
    Failed,
    /// SKIPPED or COALESCED: accounted, not run.
    Skipped,
}

/// How long a day's counters are kept (TTL): the longest health period is 30 days.
pub const TALLY_DAYS: i64 = 35;

#[async_trait]
pub trait HealthStore: Send + Sync {
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
