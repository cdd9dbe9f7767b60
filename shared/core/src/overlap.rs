//! The overlap decision: may a new run start while earlier runs of its schedule are active?

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::policy::OverlapPolicy;
use crate::run::{RunKey, RunStatus};

/// An active run of the same schedule, as the ticker or worker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveRun {
    pub key: RunKey,
    pub status: RunStatus,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OverlapDecision {
    /// Start it.
    Proceed,
    /// Record it SKIPPED (OVERLAP); `blocker` is the run still active.
    Skip { blocker: RunKey },
    /// Leave it PENDING until `blocker` ends; it is released in order.
    Queue { blocker: RunKey },
}

/// Decides for the run at `candidate`, given the schedule's other active runs.
///
/// QUEUE_NEW is strictly ordered: a run waits while any earlier run is active (waiting or
/// executing), and the earliest waiting run goes first.
///
/// SKIP_NEW guards against two executions at once, not against a queue: only an earlier run
/// that is executing (RUNNING: an attempt is open and its job may be acting; a lost lease
/// does not prove it stopped, so it counts until the reconciler stalls it) makes the
/// candidate SKIPPED (OVERLAP). An earlier run that only waits (PENDING, QUEUED,
/// RETRY_PENDING: a late or catch-up run in its lane, a retry backing off) or whose attempt
/// has ended (STALLED) never does: windows are independent under SKIP_NEW, so after an
/// outage the live windows run on time and the waiting run still runs when it is taken
/// (judged on its own lateness), unless a window is executing at that moment.
///
/// Runs scheduled after the candidate never block it, so two deciders cannot each wait on
/// the other.
pub fn decide_overlap(
    policy: OverlapPolicy,
    candidate: &RunKey,
    others: &[ActiveRun],
) -> OverlapDecision {
    let blocks = |status: RunStatus| match policy {
        OverlapPolicy::SkipNew => status == RunStatus::Running,
        OverlapPolicy::Allow | OverlapPolicy::QueueNew => status.is_active(),
    };
    let blocker = others
        .iter()
        .filter(|r| r.key != *candidate && blocks(r.status))
        .filter(|r| earlier(&r.key, candidate.scheduled_for, &candidate.key_tiebreak()))
        .min_by(|a, b| a.key.cmp(&b.key))
        .map(|r| r.key.clone());
    match (policy, blocker) {
        (OverlapPolicy::Allow, _) | (_, None) => OverlapDecision::Proceed,
        (OverlapPolicy::SkipNew, Some(blocker)) => OverlapDecision::Skip { blocker },
        (OverlapPolicy::QueueNew, Some(blocker)) => OverlapDecision::Queue { blocker },
    }
}

fn earlier(key: &RunKey, at: DateTime<Utc>, tiebreak: &str) -> bool {
    key.scheduled_for < at || (key.scheduled_for == at && key.key_tiebreak().as_str() < tiebreak)
}

impl RunKey {
    /// Orders runs at the same instant (an expected occurrence before operators' runs).
    fn key_tiebreak(&self) -> String {
        self.sort_key()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Origin;

    fn key(minute: u32) -> RunKey {
        RunKey::expected(
            "s",
            format!("2026-01-01T00:{minute:02}:00Z").parse().unwrap(),
        )
    }

    fn active(minute: u32, status: RunStatus) -> ActiveRun {
        ActiveRun {
            key: key(minute),
            status,
        }
    }

    #[test]
    fn allow_always_proceeds() {
        let others = [active(0, RunStatus::Running)];
        assert_eq!(
            decide_overlap(OverlapPolicy::Allow, &key(1), &others),
            OverlapDecision::Proceed
        );
    }

    #[test]
    fn skip_new_skips_behind_an_earlier_active_run() {
        let others = [active(0, RunStatus::Running)];
        assert_eq!(
            decide_overlap(OverlapPolicy::SkipNew, &key(1), &others),
            OverlapDecision::Skip { blocker: key(0) }
        );
    }

    #[test]
    fn finished_and_later_runs_do_not_block() {
        let others = [active(0, RunStatus::Success), active(2, RunStatus::Running)];
        for policy in [OverlapPolicy::SkipNew, OverlapPolicy::QueueNew] {
            assert_eq!(
                decide_overlap(policy, &key(1), &others),
                OverlapDecision::Proceed
            );
        }
    }

    #[test]
    fn queue_new_waits_on_the_earliest_blocker() {
        let others = [
            active(1, RunStatus::Pending),
            active(0, RunStatus::Running),
            active(2, RunStatus::Pending),
        ];
        assert_eq!(
            decide_overlap(OverlapPolicy::QueueNew, &key(2), &others),
            OverlapDecision::Queue { blocker: key(0) }
        );
    }

    #[test]
    fn operator_run_at_the_same_instant_orders_after_the_expected_one() {
        let manual = RunKey {
            origin: Origin::Manual("req-1".into()),
            ..key(0)
        };
        let others = [active(0, RunStatus::Running)];
        assert_eq!(
            decide_overlap(OverlapPolicy::QueueNew, &manual, &others),
            OverlapDecision::Queue { blocker: key(0) }
        );
    }
}
