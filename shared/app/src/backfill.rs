//! Backfills: an operator's replay of a schedule's history over a range, on the backfill
//! lane, throttled.
//!
//! Planning is pure over the ledger's runs of the range: the occurrences in `[from, to]`,
//! filtered by `reprocess` (`missing`: no run succeeded, is in flight or awaits approval;
//! `failed`: a run failed and none succeeded; `all`: every window, forced past ALREADY_DONE).
//! Runs are written lazily by [`BackfillReleaser::pass`], called from the reconciler's pass:
//! oldest window first, at most `batch_size` per pass, no faster than `rate_per_minute`, and
//! never more than `concurrency` of the backfill's runs in flight. A pass first takes the
//! backfill (a version-conditioned write), so two reconcilers never release for the same
//! backfill at once. Pause conditions (realtime backlog, CloudWatch alarms, the backfill's
//! own error rate) hold it without changing its state; an operator's pause changes it.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::{
    ApprovalReason, Backfill, BackfillLimits, BackfillState, LaneError, LaneQueue, LedgerStore,
    OpsStore, Reprocess, StoreError,
};
use cronledger_contract::{BackfillView, Problem, Reported, Verification};
use cronledger_core::admission::{decide, Ask, Candidate, Moment};
use cronledger_core::calendar::CalendarSet;
use cronledger_core::run::{Origin, RunResult};
use cronledger_core::{Lane, Reason, Run, RunKey, RunStatus, Schedule, Trigger};
use cronledger_ledger::ledger::{RunChange, Transition};
use serde::Serialize;
use serde_json::json;

use crate::alerting::Alerter;
use crate::reconciler::Signals;
use crate::runs::{claim, new_run_with_origin, send_claimed};

mod budget;

#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lane(#[from] LaneError),
    #[error("BACKFILL_TOO_LARGE: the range has more than {0} windows")]
    TooLarge(u64),
    #[error("BACKFILL_INVALID: {0}")]
    Invalid(String),
}

/// The windows a backfill would run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackfillPlan {
    pub total_windows: u64,
    pub selected: Vec<DateTime<Utc>>,
}

/// Occurrences in `[from, to]`, at most `max`.
pub fn occurrences(
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    max: u64,
) -> Result<Vec<DateTime<Utc>>, BackfillError> {
    let mut out = Vec::new();
    let mut next = schedule.next_at_or_after(from);
    while let Some(t) = next.filter(|t| *t <= to) {
        if out.len() as u64 >= max {
            return Err(BackfillError::TooLarge(max));
        }
        out.push(t);
        next = schedule.next_after(t);
    }
    Ok(out)
}

/// Why a backfill must wait for an admin before it runs: a schedule whose every run waits
/// for approval (`every_run`: the backfill is approved as a whole, once), a side-effecting
/// schedule's backfill of more than `limit` windows, or of windows scheduled before the
/// schedule was created (they were never expected to run). Empty: it starts at once.
pub fn approval_reasons(
    every_run: bool,
    side_effects: bool,
    selected: &[DateTime<Utc>],
    schedule_created_at: DateTime<Utc>,
    limit: u64,
) -> Vec<ApprovalReason> {
    let mut reasons = Vec::new();
    if every_run {
        reasons.push(ApprovalReason::EveryRun);
    }
    if !side_effects {
        return reasons;
    }
    if selected.len() as u64 > limit {
        reasons.push(ApprovalReason::OverLimit);
    }
    if selected.first().is_some_and(|t| *t < schedule_created_at) {
        reasons.push(ApprovalReason::BeforeScheduleCreated);
    }
    reasons
}

/// Whether a window needs the backfill, judged by the runs that cover it (other than the
/// backfill's own).
pub fn selects(reprocess: Reprocess, covering: &[&Run]) -> bool {
    let done_or_busy = covering.iter().any(|r| {
        r.status.is_success() || r.status.is_active() || r.status == RunStatus::ManualRequired
    });
    match reprocess {
        Reprocess::All => true,
        Reprocess::Missing => !done_or_busy,
        Reprocess::Failed => {
            !done_or_busy && covering.iter().any(|r| r.status == RunStatus::Failed)
        }
    }
}

/// The runs that cover window `t`: runs at `t`, and range records spanning it. With `except`,
/// not that backfill's own runs, nor the windows the reconciler held for approval in the gap
/// it proposed the backfill for (running it is their approval).
fn covering<'a>(runs: &'a [Run], t: DateTime<Utc>, except: Option<&Backfill>) -> Vec<&'a Run> {
    runs.iter()
        .filter(|r| match except {
            Some(b) => !is_own(r, &b.id) && !held_for(r, b),
            None => true,
        })
        .filter(|r| {
            r.key.scheduled_for == t
                || r.range_end
                    .is_some_and(|end| r.key.scheduled_for <= t && t <= end)
        })
        .collect()
}

/// A window of the proposal's gap that the reconciler held for an operator.
fn held_for(run: &Run, b: &Backfill) -> bool {
    in_group(run, b) && run.status == RunStatus::ManualRequired
}

/// A reconciler's catch-up entry of the gap the backfill was proposed for.
fn in_group(run: &Run, b: &Backfill) -> bool {
    run.trigger == Trigger::CatchUp
        && b.replay_group.is_some()
        && run.replay_group_id == b.replay_group
}

/// Plans a backfill from the ledger as it is now.
/// `ignore`: a run not to count (the range record whose approval this backfill is).
pub async fn plan(
    store: &dyn LedgerStore,
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    reprocess: Reprocess,
    max: u64,
    ignore: Option<&RunKey>,
) -> Result<BackfillPlan, BackfillError> {
    if to < from {
        return Err(BackfillError::Invalid("`to` is before `from`".into()));
    }
    let windows = occurrences(schedule, from, to, max)?;
    // Range records start before `from` too: look back far enough to see them.
    let mut runs = store
        .runs_between(schedule.id(), from - TimeDelta::days(31), to)
        .await?;
    runs.retain(|r| Some(&r.key) != ignore);
    let selected = windows
        .iter()
        .copied()
        .filter(|t| selects(reprocess, &covering(&runs, *t, None)))
        .collect();
    Ok(BackfillPlan {
        total_windows: windows.len() as u64,
        selected,
    })
}

/// Counts of a backfill's runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    pub queued: u64,
    pub running: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub skipped: u64,
    pub awaiting_approval: u64,
}

impl Counts {
    /// The backfill's runs: its own, and for a proposed one the gap's catch-up runs.
    pub fn of(runs: &[Run], b: &Backfill) -> Counts {
        let mut c = Counts::default();
        for r in runs.iter().filter(|r| is_own(r, &b.id) || in_group(r, b)) {
            match r.status {
                RunStatus::Pending | RunStatus::Queued => c.queued += 1,
                RunStatus::Running | RunStatus::RetryPending | RunStatus::Stalled => c.running += 1,
                RunStatus::Success | RunStatus::PartialSuccess => c.succeeded += 1,
                RunStatus::Failed => c.failed += 1,
                RunStatus::Skipped | RunStatus::Coalesced | RunStatus::Cancelled => c.skipped += 1,
                RunStatus::ManualRequired => c.awaiting_approval += 1,
            }
        }
        c
    }

    pub fn in_flight(&self) -> u64 {
        self.queued + self.running
    }

    pub fn finished(&self) -> u64 {
        self.succeeded + self.failed + self.skipped
    }
}

fn is_own(run: &Run, backfill_id: &str) -> bool {
    matches!(&run.key.origin, Origin::Backfill(id) if id == backfill_id)
}

/// Progress of a backfill: counts, rate and ETA.
pub async fn progress(
    store: &dyn LedgerStore,
    b: &Backfill,
    now: DateTime<Utc>,
) -> Result<BackfillView, BackfillError> {
    let runs = store.runs_between(&b.schedule_id, b.from, b.to).await?;
    let c = Counts::of(&runs, b);
    let not_selected = b.total_windows.saturating_sub(b.planned);
    let done = c.finished();
    let minutes = (now - b.created_at).num_seconds().max(1) as f64 / 60.0;
    let rate = done as f64 / minutes;
    let remaining = b.planned.saturating_sub(b.passed_over).saturating_sub(done);
    let eta = (remaining > 0 && rate > 0.0 && b.state.is_open())
        .then(|| now + TimeDelta::seconds((remaining as f64 / rate * 60.0) as i64));
    Ok(BackfillView {
        id: b.id.clone(),
        schedule: b.schedule_id.clone(),
        state: b.state,
        held: b.held.clone(),
        approval_required: b.awaiting_approval(),
        approval_reasons: b.approval_required.clone(),
        approved_by: b.approved_by.clone(),
        approved_at: b.approved_at,
        from: b.from,
        to: b.to,
        reprocess: b.reprocess,
        limits: b.limits,
        pause_when: b.pause_when.clone(),
        cursor: b.cursor,
        total_windows: b.total_windows,
        total: b.planned,
        written: b.written,
        queued: c.queued,
        running: c.running,
        succeeded: c.succeeded,
        failed: c.failed,
        skipped: c.skipped + b.passed_over + not_selected,
        awaiting_approval: c.awaiting_approval,
        remaining,
        rate_per_minute: (rate * 100.0).round() / 100.0,
        eta,
        created_at: b.created_at,
        created_by: b.created_by.clone(),
        note: b.note.clone(),
        source_record: b.source_record.clone(),
        replay_group: b.replay_group.clone(),
        budget: b.budget.caps,
        estimate: b.budget.estimate.clone(),
        spent: b.budget.spent.clone(),
        pause_reason: b.budget.pause_reason,
        version: b.version,
    })
}

/// How a succeeded window's reported results compare with what the backfill's or the
/// schedule's `verify` source expected: a count or checksum that differs, or that the job
/// did not report while the source answered it, is a mismatch.
fn results_problem(result: &RunResult) -> Option<&'static str> {
    let (count, checksum) = (&result.expected_count, &result.expected_checksum);
    if count.is_none() && checksum.is_none() {
        return Some("UNVERIFIED");
    }
    let differs = count.is_some_and(|c| result.count != Some(c))
        || checksum
            .as_ref()
            .is_some_and(|c| result.checksum.as_ref() != Some(c));
    differs.then_some("MISMATCH")
}

/// Expected windows of the backfill's range against the ledger (every run, whoever wrote
/// it), with the counts and checksums the succeeding runs reported.
pub async fn verify(
    store: &dyn LedgerStore,
    schedule: &Schedule,
    b: &Backfill,
    max: u64,
) -> Result<Verification, BackfillError> {
    let windows = occurrences(schedule, b.from, b.to, max)?;
    let runs = store
        .runs_between(schedule.id(), b.from - TimeDelta::days(31), b.to)
        .await?;
    let mut problems = Vec::new();
    let mut reported = Vec::new();
    let mut total_count: u64 = 0;
    for t in &windows {
        let cover = covering(&runs, *t, None);
        if let Some(ok) = cover.iter().find(|r| r.status.is_success()) {
            let result = ok.result.clone().unwrap_or_default();
            total_count += result.count.unwrap_or(0);
            // Checked when the backfill or the schedule has a source of expected results.
            let has_source = b.verify.is_some() || schedule.spec.verify.is_some();
            let verified = has_source.then(|| results_problem(&result));
            if let Some(Some(problem)) = verified {
                let mismatch = problem == "MISMATCH";
                problems.push(Problem {
                    scheduled_for: *t,
                    problem: problem.to_string(),
                    statuses: vec![ok.status],
                    expected: mismatch.then(|| {
                        json!({"count": result.expected_count, "checksum": result.expected_checksum})
                    }),
                    reported: mismatch
                        .then(|| json!({"count": result.count, "checksum": result.checksum})),
                });
                continue;
            }
            reported.push(Reported {
                scheduled_for: *t,
                status: ok.status,
                trigger: ok.trigger,
                count: result.count,
                checksum: result.checksum,
            });
            continue;
        }
        let problem = if cover.is_empty() {
            "MISSING"
        } else if cover.iter().any(|r| r.status.is_active()) {
            "IN_FLIGHT"
        } else if cover.iter().any(|r| r.status == RunStatus::Failed) {
            "FAILED"
        } else {
            "NOT_RUN"
        };
        problems.push(Problem {
            scheduled_for: *t,
            problem: problem.to_string(),
            statuses: cover.iter().map(|r| r.status).collect(),
            expected: None,
            reported: None,
        });
    }
    let count_of = |p: &str| problems.iter().filter(|x| x.problem == p).count() as u64;
    Ok(Verification {
        backfill: b.id.clone(),
        schedule: b.schedule_id.clone(),
        from: b.from,
        to: b.to,
        expected_windows: windows.len() as u64,
        succeeded: reported.len() as u64,
        missing: count_of("MISSING"),
        failed: count_of("FAILED"),
        not_run: count_of("NOT_RUN"),
        in_flight: count_of("IN_FLIGHT"),
        mismatched: count_of("MISMATCH"),
        unverified: count_of("UNVERIFIED"),
        complete: problems.is_empty(),
        reported_count_total: total_count,
        problems_total: problems.len() as u64,
        reported_total: reported.len() as u64,
        problems,
        reported,
        truncated: false,
        next_cursor: None,
    })
}

/// What one release pass did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BackfillPassReport {
    pub backfills: u32,
    pub released: u32,
    pub held: Vec<String>,
    pub finished: Vec<String>,
    /// Backfills paused because their measured spend reached a cap (BUDGET).
    pub budget_paused: Vec<String>,
    /// Open replays seen (their retries count in `released`, their ends in `finished`).
    pub replays: u32,
    pub errors: Vec<String>,
}

/// The backfill throttle (a replay's too): how many runs a pass may release now: at most a batch, no faster than the rate since the
/// last release, and never past the concurrency with `in_flight` already out.
pub fn allowance(
    limits: &BackfillLimits,
    last_release_at: Option<DateTime<Utc>>,
    in_flight: u64,
    now: DateTime<Utc>,
) -> u64 {
    let batch = u64::from(limits.batch_size);
    let by_rate = match last_release_at {
        Some(last) => {
            let minutes = (now - last).num_milliseconds().max(0) as f64 / 60_000.0;
            (limits.rate_per_minute * minutes).floor() as u64
        }
        None => batch,
    };
    batch
        .min(by_rate)
        .min(u64::from(limits.concurrency).saturating_sub(in_flight))
}

/// Windows a pass looks at per backfill at most (passed-over ones included).
const WALK_LIMIT: usize = 500;
/// Finished runs before the error-rate condition is judged.
const ERROR_SAMPLE: u64 = 4;

/// Releases the open backfills' runs; see the module docs.
pub struct BackfillReleaser {
    pub store: Arc<dyn LedgerStore>,
    pub ops: Arc<dyn OpsStore>,
    pub lanes: Arc<dyn LaneQueue>,
    pub signals: Option<Arc<dyn Signals>>,
    /// Raises BACKFILL_PAUSED when a budget pauses a backfill (`None`: only logged).
    pub alerter: Option<Arc<Alerter>>,
}

impl BackfillReleaser {
    pub async fn pass(&self, now: DateTime<Utc>) -> BackfillPassReport {
        let mut report = BackfillPassReport::default();
        let open = match self.ops.open_backfills().await {
            Ok(b) => b,
            Err(e) => {
                report.errors.push(format!("open backfills: {e}"));
                return report;
            }
        };
        for b in open {
            report.backfills += 1;
            let id = b.id.clone();
            if let Err(e) = self.release(b, now, &mut report).await {
                tracing::warn!(backfill = %id, error = %e, "backfill release failed");
                report.errors.push(format!("backfill {id}: {e}"));
            }
        }
        // Operators' replays are released in the same step, at the backfill throttle.
        let replays = crate::replay::ReplayReleaser {
            store: self.store.clone(),
            ops: self.ops.clone(),
            lanes: self.lanes.clone(),
        };
        let replayed = replays.pass(now).await;
        report.replays = replayed.replays;
        report.released += replayed.released;
        report.finished.extend(replayed.finished);
        report.errors.extend(replayed.errors);
        report
    }

    async fn hold_cause(&self, b: &Backfill, counts: &Counts) -> Option<String> {
        let mut causes = Vec::new();
        if let (Some(limit), Some(signals)) = (b.pause_when.realtime_backlog, &self.signals) {
            match signals.visible_backlog(Lane::Realtime).await {
                Ok(n) if n > limit => {
                    causes.push(format!("REALTIME_BACKLOG: {n} visible messages > {limit}"))
                }
                Ok(_) => {}
                Err(e) => causes.push(format!("SIGNAL_UNAVAILABLE: realtime backlog: {e}")),
            }
        }
        if let (false, Some(signals)) = (b.pause_when.alarms.is_empty(), &self.signals) {
            match signals.alarms_firing(&b.pause_when.alarms).await {
                Ok(firing) if !firing.is_empty() => {
                    causes.push(format!("ALARM: {}", firing.join(", ")))
                }
                Ok(_) => {}
                Err(e) => causes.push(format!("SIGNAL_UNAVAILABLE: alarms: {e}")),
            }
        }
        if let Some(limit) = b.pause_when.error_rate {
            let finished = counts.succeeded + counts.failed;
            if finished >= ERROR_SAMPLE {
                let rate = counts.failed as f64 / finished as f64;
                if rate > limit {
                    causes.push(format!(
                        "BACKFILL_ERROR_RATE: {} of {finished} finished runs failed > {:.0}%",
                        counts.failed,
                        limit * 100.0
                    ));
                }
            }
        }
        (!causes.is_empty()).then(|| causes.join("; "))
    }

    /// Before the backfill runs window `t` of its proposed gap, the reconciler's entry that
    /// holds it for approval is folded into the backfill (COALESCED), as approving a range
    /// record does, so the window is accounted for once.
    async fn fold_held(
        &self,
        runs: &[Run],
        t: DateTime<Utc>,
        b: &Backfill,
        folded: &mut BTreeSet<RunKey>,
        now: DateTime<Utc>,
    ) -> Result<(), BackfillError> {
        let holds: Vec<&Run> = covering(runs, t, None)
            .into_iter()
            .filter(|r| held_for(r, b) && !folded.contains(&r.key))
            .collect();
        for held in holds {
            let fold = Transition::Coalesce {
                reason: Some(Reason::Coalesced),
                into: None,
            };
            let change = RunChange::new(held.status, held.lease_epoch, now, fold);
            match self.store.transition_run(&held.key, &change).await {
                // Folded by us, or by a racing pass or an operator's approval first.
                Ok(_) | Err(StoreError::StatusConflict { .. } | StoreError::LeaseLost { .. }) => {
                    folded.insert(held.key.clone());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    async fn release(
        &self,
        b: Backfill,
        now: DateTime<Utc>,
        report: &mut BackfillPassReport,
    ) -> Result<(), BackfillError> {
        if b.state != BackfillState::Running {
            return Ok(());
        }
        let stored = self.store.get_schedule(&b.schedule_id).await?;
        let schedule = stored
            .schedule()
            .map_err(|i| BackfillError::Invalid(i.to_string()))?;
        let calendars = if stored.spec.calendars.is_empty() {
            CalendarSet::default()
        } else {
            self.store.calendars().await?
        };
        let runs = self
            .store
            .runs_between(&b.schedule_id, b.from - TimeDelta::days(31), b.to)
            .await?;
        let counts = Counts::of(&runs, &b);
        // A stopped schedule's backfill waits where it is and goes on after the resume.
        let held = match stored.stopped() {
            Some(reason) => Some(format!("SCHEDULE_STOPPED: schedule is {reason}")),
            None => self.hold_cause(&b, &counts).await,
        };
        let spent = budget::measure(&stored.spec, &runs, &b);
        let reached = budget::reached(&b, &spent);
        // Take the backfill for this pass: a racing releaser's write fails on the version.
        let mut taken = b.clone();
        taken.held = held.clone();
        taken.budget.spent = Some(spent.clone());
        taken.updated_at = now;
        let over = (!reached.is_empty()).then(|| budget::pause(&mut taken, &spent, &reached));
        let Some(mut b) = self.ops.put_backfill(&taken).await? else {
            return Ok(());
        };
        if let Some(cause) = over {
            tracing::warn!(backfill = %b.id, cause = %cause, "backfill paused: its budget is spent");
            report.budget_paused.push(b.id.clone());
            if let Some(alerter) = &self.alerter {
                let alert = budget::alert(&stored.spec, &b, &cause, now);
                alerter
                    .raise(&alert, stored.spec.alerts.topic.as_deref())
                    .await;
            }
            return Ok(());
        }
        if let Some(cause) = held {
            report.held.push(format!("{}: {cause}", b.id));
            return Ok(());
        }
        let mut allowance = allowance(&b.limits, b.last_release_at, counts.in_flight(), now)
            .min(budget::runs_left(&b, &stored.spec, &spent, &counts).unwrap_or(u64::MAX));
        let mut in_flight = counts.in_flight();
        let mut exhausted = false;
        let mut released = 0u64;
        let mut to_send: Vec<(Run, Lane)> = Vec::new();
        let mut folded: BTreeSet<RunKey> = BTreeSet::new();
        for _ in 0..WALK_LIMIT {
            let next = match b.cursor {
                None => schedule.next_at_or_after(b.from),
                Some(c) => schedule.next_after(c),
            };
            let Some(t) = next.filter(|t| *t <= b.to) else {
                exhausted = true;
                break;
            };
            if !selects(b.reprocess, &covering(&runs, t, Some(&b))) {
                b.passed_over += 1;
                b.cursor = Some(t);
                continue;
            }
            if allowance == 0 {
                break;
            }
            self.fold_held(&runs, t, &b, &mut folded, now).await?;
            let mut run = new_run_with_origin(
                &schedule,
                stored.version,
                t,
                Trigger::Backfill,
                Origin::Backfill(b.id.clone()),
                now,
            );
            run.lane = Some(Lane::Backfill);
            run.replay_group_id = Some(b.id.clone());
            run.forced = b.reprocess == Reprocess::All;
            run.cascade = b.cascade;
            run.verify = b.verify.clone();
            // The rule book at creation: a window on an excluded date is recorded SKIPPED
            // (EXCLUDED) and not sent (the backfill's stop and approval are judged above and
            // again by the worker at start).
            let send = decide(&Ask {
                moment: Moment::Create,
                spec: &schedule.spec,
                run: Candidate::of(&run),
                stopped: None,
                others: &[],
                excluded: schedule.excluded_by(&calendars, t),
                late: None,
                now,
            })
            .shape(&mut run);
            let created = self.store.create_run(&run).await?;
            if send
                && created.is_new()
                && claim(self.store.as_ref(), &run, Lane::Backfill, now).await?
            {
                to_send.push((run, Lane::Backfill));
                released += 1;
                in_flight += 1;
                allowance -= 1;
            }
            b.written += 1;
            b.cursor = Some(t);
        }
        // The released runs' messages, 10 a request. A failed send fails the pass as a single
        // one did (the cursor is not saved; the claimed run waits QUEUED for the
        // QUEUED-too-long rule).
        let sent = send_claimed(self.store.as_ref(), self.lanes.as_ref(), &to_send, now).await;
        sent.into_iter().collect::<Result<Vec<()>, _>>()?;
        if released > 0 {
            b.last_release_at = Some(now);
        }
        if exhausted && in_flight == 0 {
            b.state = BackfillState::Done;
            report.finished.push(b.id.clone());
        }
        b.updated_at = now;
        report.released += released as u32;
        if self.ops.put_backfill(&b).await?.is_none() {
            tracing::warn!(backfill = %b.id, "backfill changed during the pass (an operator's pause or cancel); its cursor is re-walked next pass");
        }
        Ok(())
    }
}
