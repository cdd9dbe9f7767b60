//! Schedule health in the api's answers: the core's [`Health`] from two bounded reads a
//! schedule, run together: its newest [`HEALTH_RUNS`] runs (one Query page) and its outcome
//! counters of the last 30 days (one Query of at most 30 small items). No history scan.

use std::cmp::Ordering;

use cronledger_aws::StoreError;
use cronledger_core::health::{health, tally_days, worst_first, Health, HealthInput};
use cronledger_ledger::ledger::{ScheduleState, StoredSchedule};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::{next_run, Api};

/// The newest runs a schedule's health reads: its last run and the runs awaiting approval
/// (the failure streak is the schedule's own counter).
pub const HEALTH_RUNS: u32 = 25;

/// Schedules of a listing page whose health is read at once.
const HEALTH_CONCURRENCY: usize = 8;

/// What `cronledger status` reads of each `GET /v1/schedules` item (the api's items carry
/// more: the whole schedule).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleHealth {
    pub id: String,
    pub state: ScheduleState,
    /// `null` where the api has no counters (the simulator's levers).
    pub health: Option<Health>,
}

impl ScheduleHealth {
    /// `cronledger status`'s order: by [`worst_first`], schedules without health after
    /// those with it, archived ones (never to run again) last.
    pub fn worst_first(a: &ScheduleHealth, b: &ScheduleHealth) -> Ordering {
        let archived = |s: &ScheduleHealth| s.state == ScheduleState::Archived;
        archived(a)
            .cmp(&archived(b))
            .then_with(|| match (&a.health, &b.health) {
                (Some(x), Some(y)) => worst_first(&a.id, x, &b.id, y),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => a.id.cmp(&b.id),
            })
    }
}

impl Api {
    /// `schedule`'s health now; `None` without a counter store.
    pub(crate) async fn health_of(
        &self,
        schedule: &StoredSchedule,
    ) -> Result<Option<Health>, StoreError> {
        let Some(counters) = &self.deps().health else {
            return Ok(None);
        };
        let now = self.now();
        let (from, through) = tally_days(now);
        let id = schedule.id();
        let (runs, tallies) = futures_util::future::try_join(
            self.deps().store.run_history(id, HEALTH_RUNS, None),
            counters.outcome_days(id, from, through),
        )
        .await?;
        Ok(Some(health(&HealthInput {
            priority: schedule.spec.priority,
            slo: schedule.spec.slo,
            tallies: &tallies,
            newest_runs: &runs.items,
            failure_streak: schedule.failure_streak,
            next_run_at: next_run::next_run_at(schedule, &runs.items, now),
            now,
        })))
    }

    /// The health of each of `schedules`, in their order, [`HEALTH_CONCURRENCY`] at a time.
    ///
    /// Cost a page of N schedules: 2N Queries, N of the newest runs (strongly consistent:
    /// about HEALTH_RUNS x 1.5 KB / 4 KB, ~10 read units each) and N of the counters (one
    /// unit each), so ~11N read units on top of the listing itself; `?health=false` skips it.
    pub(crate) async fn health_of_all(
        &self,
        schedules: &[StoredSchedule],
    ) -> Result<Vec<Option<Health>>, StoreError> {
        // Built first: a stream over a closure's futures trips the handler's `Send` check.
        let reads: Vec<_> = schedules.iter().map(|s| self.health_of(s)).collect();
        stream::iter(reads)
            .buffered(HEALTH_CONCURRENCY)
            .try_collect()
            .await
    }
}

#[cfg(test)]
mod tests {
    use cronledger_core::health::Counts;
    use cronledger_core::Priority;

    use super::*;

    fn item(id: &str, state: ScheduleState, failures: Option<u32>) -> ScheduleHealth {
        ScheduleHealth {
            id: id.into(),
            state,
            health: failures.map(|consecutive_failures| Health {
                priority: Priority::Normal,
                last_run: None,
                next_run_at: None,
                success_rate_7d: None,
                success_rate_30d: None,
                counts_7d: Counts::default(),
                counts_30d: Counts::default(),
                freshness: None,
                consecutive_failures,
                awaiting_approval: 0,
                duration_p50_ms: None,
                duration_p95_ms: None,
            }),
        }
    }

    #[test]
    fn status_puts_the_worst_first_unknown_after_and_archived_last() {
        let mut items = [
            item("retired", ScheduleState::Archived, Some(9)),
            item("unknown", ScheduleState::Active, None),
            item("fine", ScheduleState::Active, Some(0)),
            item("failing", ScheduleState::Paused, Some(3)),
        ];
        items.sort_by(ScheduleHealth::worst_first);
        let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["failing", "fine", "unknown", "retired"]);
    }
}
