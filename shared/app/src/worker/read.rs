//! What the worker reads before deciding: the run, the other runs at its instant, and the
//! schedule (with its newest runs when the overlap check will want them), in as few requests
//! as the path allows.

use chrono::{DateTime, SubsecRound, Utc};
use cronledger_aws::lanes::HandlerFailure;
use cronledger_aws::StoreError;
use cronledger_core::{Lane, OverlapPolicy, Run, RunKey};
use cronledger_ledger::ledger::{RecentRuns, StoredSchedule};

use super::Worker;
use crate::overlap::RECENT_RUNS;

impl Worker {
    /// Whether the admission will want the schedule's newest runs (the overlap check): a
    /// live lane (catch-up lanes carry no live work) and a policy other than ALLOW as this
    /// process last saw the schedule (unknown: the default, SKIP_NEW). Only a hint: when it
    /// is wrong, the admission reads what it needs itself.
    pub(super) fn overlap_likely(&self, key: &RunKey, lane: Lane) -> bool {
        if matches!(lane, Lane::Correction | Lane::Backfill) {
            return false;
        }
        self.schedules
            .last_seen(&key.schedule_id)
            .is_none_or(|s| s.spec.overlap != OverlapPolicy::Allow)
    }

    /// The schedule and the run with what the admission checks need to know about its
    /// neighbours. `with_recent`: one query reads the schedule with its newest runs, which
    /// for a live run also hold its instant, and serves the run, ALREADY_DONE and the overlap
    /// check. Otherwise (or when that page does not reach the run, or holds an item that
    /// does not decode) the schedule and the run's instant are read side by side.
    pub(super) async fn look_with_schedule(
        &self,
        key: &RunKey,
        with_recent: bool,
    ) -> Result<(Sighting, StoredSchedule), HandlerFailure> {
        let unknown = |id: String| HandlerFailure::Permanent {
            code: "SCHEDULE_NOT_FOUND".into(),
            detail: format!("run {key} belongs to unknown schedule {id}"),
        };
        let retry = |e: StoreError| HandlerFailure::Retry(e.to_string());
        if with_recent {
            match self
                .store
                .schedule_with_recent_runs(&key.schedule_id, RECENT_RUNS, Some(key.scheduled_for))
                .await
            {
                Ok((stored, recent)) => {
                    let seen =
                        if holds_instant(recent.complete, recent.oldest_read, key.scheduled_for) {
                            let same_instant = recent
                                .runs
                                .iter()
                                .filter(|r| r.key.scheduled_for == key.scheduled_for)
                                .cloned()
                                .collect();
                            Sighting::of(key, same_instant, Some(recent))?
                        } else {
                            self.look(key).await?
                        };
                    return Ok((seen, stored));
                }
                Err(StoreError::ScheduleNotFound(id)) => return Err(unknown(id)),
                Err(e) if e.code() == "STORE_MALFORMED_ITEM" => {}
                Err(e) => return Err(retry(e)),
            }
        }
        let (seen, stored) =
            tokio::join!(self.look(key), self.store.get_schedule(&key.schedule_id));
        match stored {
            Ok(stored) => Ok((seen?, stored)),
            Err(StoreError::ScheduleNotFound(id)) => Err(unknown(id)),
            Err(e) => Err(retry(e)),
        }
    }

    /// Reads the run with the other runs at its instant (ALREADY_DONE looks at them) in one
    /// query.
    pub(super) async fn look(&self, key: &RunKey) -> Result<Sighting, HandlerFailure> {
        let retry = |e: StoreError| HandlerFailure::Retry(e.to_string());
        let at = key.scheduled_for;
        match self.store.runs_between(&key.schedule_id, at, at).await {
            Ok(same_instant) => Sighting::of(key, same_instant, None),
            // A neighbour that does not decode must not stop this run: read it alone.
            Err(e) if e.code() == "STORE_MALFORMED_ITEM" => Ok(Sighting {
                run: self.load_run(key).await?,
                same_instant: Vec::new(),
                recent: None,
            }),
            Err(e) => Err(retry(e)),
        }
    }

    pub(super) async fn load_run(&self, key: &RunKey) -> Result<Run, HandlerFailure> {
        match self.store.get_run(key).await {
            Ok(run) => Ok(run),
            Err(StoreError::RunNotFound(_)) => Err(run_not_found(key)),
            Err(e) if e.code() == "STORE_MALFORMED_ITEM" => Err(HandlerFailure::Permanent {
                code: e.code().into(),
                detail: e.to_string(),
            }),
            Err(e) => Err(HandlerFailure::Retry(e.to_string())),
        }
    }
}

/// What the worker read about a delivery's run before deciding whether it starts.
pub(super) struct Sighting {
    pub(super) run: Run,
    /// Every run at the run's instant, itself included: runs that can share its idempotency
    /// key share its `scheduled_for`.
    pub(super) same_instant: Vec<Run>,
    /// The schedule's newest runs still in flight (and those at the run's instant), when the
    /// read that found the run was that one.
    pub(super) recent: Option<RecentRuns>,
}

impl Sighting {
    pub(super) fn of(
        key: &RunKey,
        same_instant: Vec<Run>,
        recent: Option<RecentRuns>,
    ) -> Result<Sighting, HandlerFailure> {
        let run = same_instant
            .iter()
            .find(|r| r.key == *key)
            .cloned()
            .ok_or_else(|| run_not_found(key))?;
        Ok(Sighting {
            run,
            same_instant,
            recent,
        })
    }
}

pub(super) fn run_not_found(key: &RunKey) -> HandlerFailure {
    HandlerFailure::Permanent {
        code: "RUN_NOT_FOUND".into(),
        detail: format!("no run {key} for this message"),
    }
}

/// A newest-first read that is `complete`, or whose `oldest` run is in an earlier second than
/// `at`, holds every run at `at`. Sort keys are instants as text, and within one second text
/// order is not time order (`…:05.5Z` sorts before `…:05Z`), hence the whole second.
pub(super) fn holds_instant(
    complete: bool,
    oldest: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
) -> bool {
    complete || oldest.is_some_and(|oldest| oldest < at.trunc_subsecs(0))
}

#[cfg(test)]
mod tests {
    use super::holds_instant;
    use chrono::{DateTime, Utc};

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("instant")
    }

    #[test]
    fn a_page_holds_an_instant_only_when_it_reaches_an_earlier_second() {
        let at = t("2026-03-01T10:05:00Z");
        assert!(holds_instant(true, None, at));
        assert!(holds_instant(false, Some(t("2026-03-01T10:04:59Z")), at));
        // More runs at this very instant may be on the next page.
        assert!(!holds_instant(false, Some(at), at));
        assert!(!holds_instant(false, None, at));
        // Same second, earlier in time: `…:00.5Z` sorts before `…:00Z` as text.
        let fractional = t("2026-03-01T10:05:00.700Z");
        assert!(!holds_instant(
            false,
            Some(t("2026-03-01T10:05:00.500Z")),
            fractional
        ));
        assert!(holds_instant(
            false,
            Some(t("2026-03-01T10:04:59.900Z")),
            fractional
        ));
    }
}
