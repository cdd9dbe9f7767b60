//! What follows a run's terminal transition, whoever wrote it: the ticker (a window
//! recorded SKIPPED at its fire), the worker (an attempt's end, a run it skipped or gave
//! up), the reconciler (missed and dependent windows, approvals that timed out) and the
//! api (an operator's cancel or reject). Each of them calls [`ended`] with the run as
//! written, so a schedule's health counts every window once, however it ended. A held
//! window folded into a backfill (COALESCED by an approval) is not counted: the
//! backfill's run for the window counts it when it ends.
//!
//! A run that executed is also judged here against its schedule's history (one bounded
//! read of its newest runs): a success outside its `expect` band is SUSPECT
//! ([`judge_result`], before its end is written, so the end carries it) and raises
//! SUSPECT_RESULT; a run past twice the p95 of the recent successes' durations raises
//! SLOW_RUN ([`judged`], after).

use chrono::{DateTime, Utc};
use cronledger_aws::{HealthStore, LedgerStore, Outcome, StoreError};
use cronledger_core::alerts::{self, About, Alert, RunRef};
use cronledger_core::quality::{self, Quality};
use cronledger_core::run::RunResult;
use cronledger_core::{Run, RunKey, RunStatus, ScheduleSpec, Span};
use cronledger_ledger::health::outcome_of;

use crate::alerting::Alerter;

/// Counts `run` (just written terminal by the caller's conditional write, so once) on its
/// schedule's day counters: a range record counts each window it stands for. `slo`: the
/// schedule's `slo.within`, which decides whether a success was fresh. A failure to count
/// is logged: health is a view, never a reason to undo what was recorded.
pub async fn ended(
    health: Option<&dyn HealthStore>,
    run: &Run,
    slo: Option<Span>,
    now: DateTime<Utc>,
) {
    let Some(health) = health else {
        return;
    };
    let ended_at = run.completed_at.unwrap_or(now);
    let Some(outcome) = outcome_of(run.status, run.key.scheduled_for, ended_at, slo) else {
        return;
    };
    // A range record (SKIPPED or COALESCED) stands for `count` windows; a run for one.
    let windows = match outcome {
        Outcome::Skipped => u64::from(run.count.max(1)),
        _ => 1,
    };
    let day = run.key.scheduled_for.date_naive();
    if let Err(e) = health
        .count_outcome(&run.key.schedule_id, day, outcome, windows)
        .await
    {
        tracing::warn!(run = %run.key, error = %e, "could not count the run's end for its schedule's health");
    }
}

/// How many of a schedule's newest runs its history reads (one page): enough for
/// [`quality::HISTORY_RUNS`] successes among failures and skips, and bounded.
pub const HISTORY_PAGE: u32 = 60;

/// What a schedule's last successes say, newest first: the counts a learned band is
/// computed from (SUSPECT ones left out, so a bad run does not move the band) and the
/// durations a slow run is judged against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    pub counts: Vec<u64>,
    pub durations_ms: Vec<u64>,
}

impl History {
    /// From `runs` (newest first), without the run `except` itself; at most
    /// [`quality::HISTORY_RUNS`] of each.
    pub fn of(runs: &[Run], except: &RunKey) -> History {
        let mut history = History::default();
        let successes = runs
            .iter()
            .filter(|r| r.status == RunStatus::Success && r.key != *except);
        for run in successes {
            let result = run.result.as_ref();
            let suspect = result.and_then(|r| r.quality) == Some(Quality::Suspect);
            if let (Some(count), false) = (result.and_then(|r| r.count), suspect) {
                if history.counts.len() < quality::HISTORY_RUNS {
                    history.counts.push(count);
                }
            }
            if let Some(ms) = quality::duration_ms(run) {
                if history.durations_ms.len() < quality::HISTORY_RUNS {
                    history.durations_ms.push(ms);
                }
            }
        }
        history
    }
}

/// The history of `run`'s schedule before it: one bounded read, its newest
/// [`HISTORY_PAGE`] runs, of which those scheduled before the run count.
pub async fn history(store: &dyn LedgerStore, run: &Run) -> Result<History, StoreError> {
    let page = store
        .run_history(&run.key.schedule_id, HISTORY_PAGE, None)
        .await?;
    let before: Vec<Run> = page
        .items
        .into_iter()
        .filter(|r| r.key.scheduled_for < run.key.scheduled_for)
        .collect();
    Ok(History::of(&before, &run.key))
}

/// Judges a success's result against the schedule's `expect` (see [`quality::judge`]):
/// `result` gets `quality: SUSPECT` and its reason when the count is outside the band.
pub fn judge_result(spec: &ScheduleSpec, result: &mut RunResult, history: &History) {
    let Some(expect) = &spec.expect else {
        return;
    };
    if let Some(reason) = quality::judge(expect, result.count, &history.counts) {
        result.quality = Some(Quality::Suspect);
        result.quality_reason = Some(reason);
    }
}

/// What an executed run's end says beyond its status, raised once per run (the alert's
/// subject is the run): SUSPECT_RESULT for a success outside its band, SLOW_RUN for a run
/// past twice the p95 of the schedule's recent successes' durations.
pub fn judged_alerts(
    spec: &ScheduleSpec,
    run: &Run,
    history: &History,
    now: DateTime<Utc>,
) -> Vec<Alert> {
    let about = About::of(spec);
    let key = run.key.to_string();
    let at = RunRef {
        key: &key,
        window: run.window,
    };
    let mut raised = Vec::new();
    let result = run.result.as_ref();
    if let (Some(Quality::Suspect), Some(reason)) = (
        result.and_then(|r| r.quality),
        result.and_then(|r| r.quality_reason),
    ) {
        let count = result.and_then(|r| r.count);
        raised.push(alerts::suspect_result(&about, &at, count, reason, now));
    }
    let executed = matches!(
        run.status,
        RunStatus::Success | RunStatus::PartialSuccess | RunStatus::Failed
    );
    if let (true, Some(start), Some(end)) = (executed, run.started_at, run.completed_at) {
        let ms = u64::try_from((end - start).num_milliseconds().max(0)).unwrap_or(0);
        if let Some(threshold) = quality::slow(ms, &history.durations_ms) {
            raised.push(alerts::slow_run(&about, &at, ms, threshold, now));
        }
    }
    raised
}

/// Raises [`judged_alerts`] for `run` through the alerts pipeline (each recorded once by
/// its key before it is published). Best effort, as every alert.
pub async fn judged(
    alerter: Option<&Alerter>,
    spec: &ScheduleSpec,
    run: &Run,
    history: &History,
    now: DateTime<Utc>,
) {
    let Some(alerter) = alerter else {
        return;
    };
    for alert in judged_alerts(spec, run, history, now) {
        alerter.raise(&alert, spec.alerts.topic.as_deref()).await;
    }
}
