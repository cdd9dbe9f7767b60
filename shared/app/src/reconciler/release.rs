//! Throttled release of catch-up runs, and the pause conditions that stop it.
//!
//! Catch-up runs are written PENDING (trigger CATCH_UP, lane correction or backfill) and sent
//! here, oldest first, within budgets: at most `per_lane` catch-up runs in flight per lane,
//! at most `per_schedule` per schedule (one in the correction lane: serial release, oldest
//! first), at most `batch` per lane per pass, and no faster than `rate_per_minute`. The
//! windows of a gap still in the immediate tier are sent at once when written (unless the
//! correction lane is paused; then they wait here like serial ones).
//!
//! A lane's release pauses while any pause condition holds: the realtime lane's visible
//! backlog above its limit, the lane's DLQ grown since the last pass, the catch-up error rate
//! above its limit, a named CloudWatch alarm in ALARM, or a signal that cannot be read (fail
//! closed: catch-up can wait, live work must not be crowded out). Each change between paused
//! and released is stored in the lane's release state with its cause, logged, and counted.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use cronledger_aws::ReleaseState;
use cronledger_core::{Lane, Reason, Run, RunKey, RunStatus, Trigger};
use serde::Serialize;

use super::missed::CATCH_UP_LANES;
use super::{lane_of, InFlight, ReconcileError, ReconcileReport, Reconciler};
use crate::metrics::Metric;

/// A catch-up lane's release decision for this pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaneGate {
    pub lane: Lane,
    pub paused: bool,
    /// Every pause condition that holds, `; `-separated.
    pub cause: Option<String>,
    /// Runs released on this lane this pass.
    pub released: u32,
    /// The stored state (written back at the end of the pass when it changed).
    #[serde(skip)]
    state: ReleaseState,
    #[serde(skip)]
    dirty: bool,
}

impl Reconciler {
    /// Evaluates the pause conditions of each catch-up lane and records changes.
    pub(super) async fn gates(
        &self,
        now: DateTime<Utc>,
        active: &[Run],
        report: &mut ReconcileReport,
    ) -> BTreeMap<Lane, LaneGate> {
        let pause = &self.config.pause;
        let mut shared = Vec::new();
        match self.signals.visible_backlog(Lane::Realtime).await {
            Ok(n) if n > pause.realtime_backlog => shared.push(format!(
                "REALTIME_BACKLOG: {n} visible messages > {}",
                pause.realtime_backlog
            )),
            Ok(_) => {}
            Err(e) => shared.push(format!("SIGNAL_UNAVAILABLE: realtime backlog: {e}")),
        }
        if !pause.alarms.is_empty() {
            match self.signals.alarms_firing(&pause.alarms).await {
                Ok(firing) if !firing.is_empty() => {
                    shared.push(format!("ALARM: {}", firing.join(", ")))
                }
                Ok(_) => {}
                Err(e) => shared.push(format!("SIGNAL_UNAVAILABLE: alarms: {e}")),
            }
        }
        let mut gates = BTreeMap::new();
        for lane in CATCH_UP_LANES {
            let mut state = match self.control.release_state(lane).await {
                Ok(s) => s.unwrap_or_else(|| ReleaseState::initial(lane, now)),
                Err(e) => {
                    report.error(&format!("release state of {lane}"), &e.into());
                    ReleaseState::initial(lane, now)
                }
            };
            let mut causes = shared.clone();
            let mut dirty = state.version == 0;
            match self.signals.dlq_depth(lane).await {
                Ok(depth) => {
                    if let Some(before) = state.dlq_depth {
                        if depth > before + pause.dlq_growth {
                            causes.push(format!("DLQ_GROWTH: {lane} DLQ {before} -> {depth}"));
                        }
                    }
                    dirty |= state.dlq_depth != Some(depth);
                    state.dlq_depth = Some(depth);
                }
                Err(e) => causes.push(format!("SIGNAL_UNAVAILABLE: {lane} DLQ: {e}")),
            }
            if let Some(cause) = error_rate_cause(lane, active, pause) {
                causes.push(cause);
            }
            let paused = !causes.is_empty();
            let cause = (!causes.is_empty()).then(|| causes.join("; "));
            if paused != state.paused || (paused && cause != state.cause) {
                if paused != state.paused {
                    state.since = now;
                    if paused {
                        tracing::warn!(%lane, cause = cause.as_deref().unwrap_or(""), "catch-up release paused");
                        report.to_raise.push((
                            super::alerts::release_paused(lane, cause.as_deref(), now),
                            None,
                        ));
                        self.metrics.count(Metric::CatchUpReleasePaused, 1);
                    } else {
                        tracing::info!(%lane, was = state.cause.as_deref().unwrap_or(""), "catch-up release resumed");
                        self.metrics.count(Metric::CatchUpReleaseResumed, 1);
                    }
                }
                state.paused = paused;
                if paused {
                    state.cause = cause.clone();
                }
                dirty = true;
            }
            gates.insert(
                lane,
                LaneGate {
                    lane,
                    paused,
                    cause,
                    released: 0,
                    state,
                    dirty,
                },
            );
        }
        gates
    }

    /// Sends PENDING catch-up runs within the budgets, then stores the lanes' states. Runs
    /// of `stopped` schedules (paused, archived, disabled) are not sent: they wait for the
    /// resume, and count against no budget meanwhile.
    pub(super) async fn release(
        &self,
        now: DateTime<Utc>,
        active: &[Run],
        created: Vec<Run>,
        stopped: &BTreeSet<String>,
        gates: &mut BTreeMap<Lane, LaneGate>,
        report: &mut ReconcileReport,
    ) {
        let budget = &self.config.release;
        let mut in_flight = InFlight::default();
        let mut seen: BTreeSet<RunKey> = BTreeSet::new();
        let mut waiting: Vec<Run> = Vec::new();
        for run in active.iter().chain(created.iter()) {
            if !throttled(run) || !seen.insert(run.key.clone()) {
                continue;
            }
            let lane = lane_of(run);
            match run.status {
                RunStatus::Pending if stopped.contains(&run.key.schedule_id) => {}
                // Released already, and waiting for its turn behind a running run of its
                // schedule: the run that ends sends it, not the throttle.
                RunStatus::Pending if run.reason == Some(Reason::QueuedBehind) => {}
                RunStatus::Pending => waiting.push(run.clone()),
                _ => in_flight.add(lane, &run.key.schedule_id),
            }
        }
        // Oldest window first, across schedules.
        waiting.sort_by(|a, b| (a.key.scheduled_for, &a.key).cmp(&(b.key.scheduled_for, &b.key)));
        let mut released: Vec<(Run, Lane)> = Vec::new();
        for lane in CATCH_UP_LANES {
            let Some(gate) = gates.get_mut(&lane) else {
                continue;
            };
            if gate.paused {
                continue;
            }
            let by_rate = match gate.state.last_release_at {
                Some(last) => {
                    let minutes = (now - last).num_milliseconds().max(0) as f64 / 60_000.0;
                    (budget.rate_per_minute * minutes).floor() as usize
                }
                None => budget.batch,
            };
            let mut allowance = budget
                .batch
                .min(by_rate)
                .min(budget.per_lane.saturating_sub(in_flight.lane(lane)));
            let per_schedule = if lane == Lane::Correction {
                1
            } else {
                budget.per_schedule.max(1)
            };
            for run in waiting.iter().filter(|r| lane_of(r) == lane) {
                if allowance == 0 {
                    break;
                }
                if in_flight.schedule(lane, &run.key.schedule_id) >= per_schedule {
                    continue;
                }
                match crate::runs::claim(self.store.as_ref(), run, lane, now).await {
                    Ok(claimed) => {
                        // Taken by someone else or by us: either way it is in flight now.
                        in_flight.add(lane, &run.key.schedule_id);
                        if claimed {
                            allowance -= 1;
                            gate.released += 1;
                            report.released += 1;
                            tracing::info!(run = %run.key, %lane, "catch-up released");
                            released.push((run.clone(), lane));
                        }
                    }
                    Err(e) => {
                        report.error(&format!("release {}", run.key), &ReconcileError::from(e))
                    }
                }
            }
            if gate.released > 0 {
                gate.state.last_release_at = Some(now);
                gate.dirty = true;
            }
        }
        // The claimed runs' messages, 10 a request; a failed send leaves its run QUEUED for
        // the QUEUED-too-long rule, as a failed single send did.
        let sent =
            crate::runs::send_claimed(self.store.as_ref(), self.lanes.as_ref(), &released, now)
                .await;
        for ((run, _), sent) in released.iter().zip(sent) {
            if let Err(e) = sent {
                report.error(&format!("release {}", run.key), &ReconcileError::from(e));
            }
        }
        for gate in gates.values_mut() {
            if !gate.dirty {
                continue;
            }
            match self.control.put_release_state(&gate.state).await {
                Ok(true) => gate.state.version += 1,
                // Another reconciler recorded its view first; ours is one pass old anyway.
                Ok(false) => {}
                Err(e) => report.error(
                    &format!("release state of {}", gate.lane),
                    &ReconcileError::from(e),
                ),
            }
        }
    }
}

/// Work the throttled release paces: catch-up runs, and dependents' windows created past
/// their grace (the rule book sends those to the correction lane, never a live one).
fn throttled(run: &Run) -> bool {
    match run.trigger {
        Trigger::CatchUp => true,
        Trigger::Dependency => run
            .lane
            .is_some_and(cronledger_core::admission::is_catch_up_lane),
        _ => false,
    }
}

/// Catch-up runs of the lane that have started at least once: the share that failed an
/// attempt (waiting to retry, or stalled).
fn error_rate_cause(lane: Lane, active: &[Run], pause: &super::PauseConfig) -> Option<String> {
    let started: Vec<&Run> = active
        .iter()
        .filter(|r| r.trigger == Trigger::CatchUp && lane_of(r) == lane && r.attempts > 0)
        .collect();
    if started.len() < pause.error_min_sample.max(1) {
        return None;
    }
    let failing = started
        .iter()
        .filter(|r| matches!(r.status, RunStatus::RetryPending | RunStatus::Stalled))
        .count();
    let rate = failing as f64 / started.len() as f64;
    (rate > pause.error_rate).then(|| {
        format!(
            "CATCH_UP_ERROR_RATE: {failing} of {} in-flight {lane} catch-up runs failing > {:.0}%",
            started.len(),
            pause.error_rate * 100.0
        )
    })
}
