//! Replays: an operator's retry of every run matching a filter (see
//! [`cronledger_ledger::replays`]), as the single-run retry does it (the same RETRY
//! transition, kept on the run's own version), on the correction lane and at the backfill
//! throttle. [`ReplayReleaser::pass`] runs in the backfill release step of the reconciler's
//! pass: it takes the replay (a version-conditioned write, so two passes never release the
//! same replay at once), settles the retried runs still in flight, then retries the next
//! matched runs, at most `batch_size` a pass, no faster than `rate_per_minute`, never more
//! than `concurrency` in flight. Each retry is audited in its schedule's log with the
//! replay's id.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::{
    AuditAction, BackfillState, LaneQueue, LedgerStore, OperatorAction, OpsStore, Replay,
    ReplayEntry, ReplayFilter, ScheduleState, StoreError, StoredSchedule,
};
use cronledger_contract::{ReplayRun, ReplayView};
use cronledger_core::run::Origin;
use cronledger_core::{Lane, Run, RunKey, RunStatus};
use cronledger_ledger::ledger::{RunChange, Transition};
use serde::Serialize;
use serde_json::json;

use crate::api::views;
use crate::backfill::{allowance, BackfillError};
use crate::runs::{claim, send_claimed};

/// The statuses a retry reopens: the only ones a replay may filter on.
pub const RETRYABLE: [RunStatus; 2] = [RunStatus::Failed, RunStatus::Stalled];

/// Schedules read a page while matching an owner's.
const SCHEDULE_PAGE: u32 = 200;

/// Whether `run` is one the filter retries: scheduled in `[from, to)`, in one of its
/// statuses, and not a range record (those are approved, not retried).
pub fn matches(filter: &ReplayFilter, run: &Run) -> bool {
    let at = run.key.scheduled_for;
    filter.from <= at
        && at < filter.to
        && filter.statuses.contains(&run.status)
        && run.range_end.is_none()
}

/// The schedules a filter reads: its schedule, or every schedule (not archived) of its
/// owner, read through the schedule listing (never the runs).
pub async fn schedules_of(
    store: &dyn LedgerStore,
    filter: &ReplayFilter,
) -> Result<Vec<StoredSchedule>, StoreError> {
    let owned = |s: &StoredSchedule| {
        s.state != ScheduleState::Archived
            && filter
                .owner
                .as_ref()
                .is_none_or(|o| s.spec.owner.as_ref() == Some(o))
    };
    if let Some(id) = &filter.schedule {
        let stored = store.get_schedule(id).await?;
        return Ok(owned(&stored).then_some(stored).into_iter().collect());
    }
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store
            .list_schedules(SCHEDULE_PAGE, cursor.as_deref())
            .await?;
        out.extend(page.items.into_iter().filter(|s| owned(s)));
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(out),
        }
    }
}

/// The runs of `schedules` the filter matches, oldest window first, each with its
/// schedule's flags; `None` when there are more than `max`.
pub async fn matched_runs(
    store: &dyn LedgerStore,
    schedules: &[StoredSchedule],
    filter: &ReplayFilter,
    max: usize,
) -> Result<Option<Vec<ReplayEntry>>, StoreError> {
    let mut out = Vec::new();
    for s in schedules {
        let runs = store
            .runs_between(&s.spec.id, filter.from, filter.to)
            .await?;
        out.extend(
            runs.iter()
                .filter(|r| matches(filter, r))
                .map(|r| ReplayEntry {
                    key: r.key.clone(),
                    status: r.status,
                    idempotent: s.spec.idempotent,
                    side_effects: s.spec.side_effects,
                }),
        );
        if out.len() > max {
            return Ok(None);
        }
    }
    out.sort_by(|a, b| {
        (a.key.scheduled_for, &a.key.schedule_id).cmp(&(b.key.scheduled_for, &b.key.schedule_id))
    });
    Ok(Some(out))
}

pub fn run_view(e: &ReplayEntry) -> ReplayRun {
    ReplayRun {
        schedule: e.key.schedule_id.clone(),
        run: views::run_id(&e.key),
        scheduled_for: e.key.scheduled_for,
        status: e.status,
        idempotent: e.idempotent,
        side_effects: e.side_effects,
    }
}

/// What `held` says of a replay waiting for an admin.
pub fn held(r: &Replay) -> Option<String> {
    r.awaiting_approval().then(|| {
        let why: Vec<String> = r
            .approval_required
            .iter()
            .map(|a| {
                serde_json::to_value(a)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            })
            .collect();
        format!("APPROVAL_REQUIRED: {}", why.join(", "))
    })
}

/// A replay's progress, from the replay alone (its passes keep the tally).
pub fn progress(r: &Replay, now: DateTime<Utc>) -> ReplayView {
    let released = r.cursor.saturating_sub(r.tally.passed_over);
    let minutes = (now - r.created_at).num_seconds().max(1) as f64 / 60.0;
    let rate = released as f64 / minutes;
    let remaining = r.unreleased().len() as u64;
    let open = r.state == BackfillState::Running;
    let eta = (remaining > 0 && rate > 0.0 && open)
        .then(|| now + TimeDelta::seconds((remaining as f64 / rate * 60.0) as i64));
    ReplayView {
        id: r.id.clone(),
        state: r.state,
        held: held(r),
        approval_required: r.awaiting_approval(),
        approval_reasons: r.approval_required.clone(),
        approved_by: r.approved_by.clone(),
        approved_at: r.approved_at,
        schedule: r.filter.schedule.clone(),
        owner: r.filter.owner.clone(),
        status: r.filter.statuses.clone(),
        from: r.filter.from,
        to: r.filter.to,
        include_non_idempotent: r.filter.include_non_idempotent,
        cascade: r.cascade,
        limits: r.limits,
        total: r.runs.len() as u64,
        released,
        in_flight: r.in_flight.len() as u64,
        succeeded: r.tally.succeeded,
        failed: r.tally.failed,
        skipped: r.tally.passed_over + r.tally.other,
        remaining,
        rate_per_minute: (rate * 100.0).round() / 100.0,
        eta,
        runs: r.runs.iter().map(run_view).collect(),
        non_idempotent: r.non_idempotent.iter().map(run_view).collect(),
        created_at: r.created_at,
        created_by: r.created_by.clone(),
        note: r.note.clone(),
        version: r.version,
    }
}

/// What one release pass of the replays did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReplayPassReport {
    pub replays: u32,
    pub released: u32,
    pub finished: Vec<String>,
    pub errors: Vec<String>,
}

/// Releases the open replays' retries; see the module docs.
pub struct ReplayReleaser {
    pub store: Arc<dyn LedgerStore>,
    pub ops: Arc<dyn OpsStore>,
    pub lanes: Arc<dyn LaneQueue>,
}

impl ReplayReleaser {
    pub async fn pass(&self, now: DateTime<Utc>) -> ReplayPassReport {
        let mut report = ReplayPassReport::default();
        let open = match self.ops.open_replays().await {
            Ok(r) => r,
            Err(e) => {
                report.errors.push(format!("open replays: {e}"));
                return report;
            }
        };
        for r in open {
            report.replays += 1;
            let id = r.id.clone();
            if let Err(e) = self.release(r, now, &mut report).await {
                tracing::warn!(replay = %id, error = %e, "replay release failed");
                report.errors.push(format!("replay {id}: {e}"));
            }
        }
        report
    }

    /// Drops the retried runs that ended from `in_flight`, counting how they ended.
    async fn settle(&self, r: &mut Replay) -> Result<(), StoreError> {
        let mut still = Vec::new();
        for key in std::mem::take(&mut r.in_flight) {
            let status = match self.store.get_run(&key).await {
                Ok(run) => Some(run.status),
                Err(StoreError::RunNotFound(_)) => None,
                Err(e) => return Err(e),
            };
            match status {
                Some(s) if !s.is_terminal() => still.push(key),
                Some(s) if s.is_success() => r.tally.succeeded += 1,
                Some(RunStatus::Failed) => r.tally.failed += 1,
                _ => r.tally.other += 1,
            }
        }
        r.in_flight = still;
        Ok(())
    }

    /// Reopens one matched run as the single-run retry does, on the correction lane;
    /// `None` when it no longer has a status of the filter (someone retried it first).
    async fn retry(
        &self,
        r: &Replay,
        key: &RunKey,
        now: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        let run = match self.store.get_run(key).await {
            Ok(run) if matches(&r.filter, &run) => run,
            Ok(_) | Err(StoreError::RunNotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        // A backfill's run keeps its backfill's cascade, as a single retry does.
        let cascade = (!matches!(run.key.origin, Origin::Backfill(_))).then_some(r.cascade);
        let retry = Transition::Retry {
            reason: None,
            schedule_version: None,
            cascade,
        };
        let change = RunChange::new(run.status, run.lease_epoch, now, retry);
        let reopened = match self.store.transition_run(key, &change).await {
            Ok(reopened) => reopened,
            Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        if !claim(self.store.as_ref(), &reopened, Lane::Correction, now).await? {
            return Ok(None);
        }
        let entry = OperatorAction {
            schedule_id: key.schedule_id.clone(),
            action: AuditAction::RunRetry,
            actor: r
                .approved_by
                .clone()
                .unwrap_or_else(|| r.created_by.clone()),
            reason: r.note.clone(),
            at: now,
            details: json!({
                "run": views::run_id(key),
                "replay": r.id,
                "schedule_version": reopened.schedule_version,
                "cascade": r.cascade,
            }),
        };
        if let Err(e) = self.store.record_operator_action(&entry).await {
            tracing::warn!(replay = %r.id, run = %key, error = %e, "replayed retry not audited");
        }
        Ok(Some(reopened))
    }

    async fn release(
        &self,
        r: Replay,
        now: DateTime<Utc>,
        report: &mut ReplayPassReport,
    ) -> Result<(), BackfillError> {
        if r.state != BackfillState::Running {
            return Ok(());
        }
        // Take the replay for this pass: a racing releaser's write fails on the version.
        let mut taken = r.clone();
        taken.updated_at = now;
        let Some(mut r) = self.ops.put_replay(&taken).await? else {
            return Ok(());
        };
        self.settle(&mut r).await?;
        let mut room = allowance(&r.limits, r.last_release_at, r.in_flight.len() as u64, now);
        let mut to_send: Vec<(Run, Lane)> = Vec::new();
        while room > 0 {
            let Some(entry) = r.unreleased().first().cloned() else {
                break;
            };
            r.cursor += 1;
            match self.retry(&r, &entry.key, now).await? {
                Some(run) => {
                    r.in_flight.push(entry.key);
                    to_send.push((run, Lane::Correction));
                    room -= 1;
                }
                None => r.tally.passed_over += 1,
            }
        }
        // A failed send leaves its run QUEUED for the QUEUED-too-long rule.
        let sent = send_claimed(self.store.as_ref(), self.lanes.as_ref(), &to_send, now).await;
        sent.into_iter().collect::<Result<Vec<()>, _>>()?;
        if !to_send.is_empty() {
            r.last_release_at = Some(now);
        }
        if r.unreleased().is_empty() && r.in_flight.is_empty() {
            r.state = BackfillState::Done;
            report.finished.push(r.id.clone());
        }
        r.updated_at = now;
        report.released += to_send.len() as u32;
        if self.ops.put_replay(&r).await?.is_none() {
            tracing::warn!(replay = %r.id, "replay changed during the pass (an operator's cancel)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronledger_aws::BackfillLimits;
    use cronledger_core::run::Origin;
    use proptest::prelude::*;

    proptest! {
        /// Passes at any cadence, each releasing what `allowance` allows and ending any
        /// number of the runs in flight: never more than `concurrency` in flight, never more
        /// than a batch a pass, and never more than the rate allows since the first release.
        #[test]
        fn releases_never_pass_the_throttle(
            concurrency in 1u32..5,
            batch_size in 1u32..10,
            rate in 1u32..20,
            passes in proptest::collection::vec((0i64..180, 0u64..4), 1..40),
        ) {
            let limits = BackfillLimits {
                concurrency,
                batch_size,
                rate_per_minute: f64::from(rate),
            };
            let start = DateTime::<Utc>::UNIX_EPOCH;
            let (mut now, mut last, mut in_flight, mut after_first) = (start, None, 0u64, 0u64);
            let mut first: Option<DateTime<Utc>> = None;
            for (seconds, ended) in passes {
                now += TimeDelta::seconds(seconds);
                in_flight = in_flight.saturating_sub(ended);
                let released = allowance(&limits, last, in_flight, now);
                prop_assert!(released <= u64::from(batch_size));
                in_flight += released;
                prop_assert!(in_flight <= u64::from(concurrency));
                if released > 0 {
                    match first {
                        None => first = Some(now),
                        Some(_) => after_first += released,
                    }
                    last = Some(now);
                }
                if let Some(f) = first {
                    let minutes = (now - f).num_milliseconds() as f64 / 60_000.0;
                    prop_assert!(after_first as f64 <= f64::from(rate) * minutes + 1e-9);
                }
            }
        }
    }

    fn run_at(at: &str, status: RunStatus) -> Run {
        let t: DateTime<Utc> = at.parse().expect("instant");
        let spec: cronledger_core::ScheduleSpec = serde_json::from_value(json!({
            "id": "s", "cron": "0 * * * *", "timezone": "UTC", "job": {"type": "noop"}
        }))
        .expect("spec");
        let schedule = cronledger_core::Schedule::new(spec).expect("schedule");
        let mut run = crate::runs::new_run_with_origin(
            &schedule,
            1,
            t,
            cronledger_core::Trigger::Scheduled,
            Origin::Expected,
            t,
        );
        run.status = status;
        run
    }

    #[test]
    fn the_filter_takes_its_statuses_in_from_to() {
        let filter = ReplayFilter {
            schedule: Some("s".into()),
            owner: None,
            statuses: vec![RunStatus::Failed],
            from: "2026-03-10T00:00:00Z".parse().expect("from"),
            to: "2026-03-10T10:00:00Z".parse().expect("to"),
            include_non_idempotent: false,
        };
        assert!(matches(
            &filter,
            &run_at("2026-03-10T00:00:00Z", RunStatus::Failed)
        ));
        assert!(!matches(
            &filter,
            &run_at("2026-03-10T10:00:00Z", RunStatus::Failed)
        ));
        assert!(!matches(
            &filter,
            &run_at("2026-03-10T01:00:00Z", RunStatus::Stalled)
        ));
        let mut range = run_at("2026-03-10T02:00:00Z", RunStatus::Failed);
        range.range_end = Some("2026-03-10T05:00:00Z".parse().expect("end"));
        assert!(
            !matches(&filter, &range),
            "a range record is approved, not retried"
        );
    }
}
