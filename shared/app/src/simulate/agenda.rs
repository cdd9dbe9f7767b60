//! When the scheduler's own functions run in virtual time: a tick at minute boundaries and a
//! reconciler pass every 5 minutes, as EventBridge Scheduler would invoke them. Ticks that
//! could find nothing due are skipped: after an empty tick the next one is the minute the
//! earliest `next_run_at` comes into the ticker's lookahead (nothing moves a `next_run_at`
//! earlier during a simulation: only tickers and the reconciler's fence move it, forward).
//!
//! An operator's levers are events of their own, at the instants the configuration names:
//! they happen before the tick and the pass of the same instant, as an operator's call
//! lands before the next invocation.

use std::collections::VecDeque;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use cronledger_aws::{LedgerStore, StoreError};

use super::config::SimulationConfig;

pub(super) const MINUTE: TimeDelta = TimeDelta::minutes(1);
pub(super) const PASS_EVERY: TimeDelta = TimeDelta::minutes(5);

/// An operator's lever, pulled at an instant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Lever {
    /// The global kill switch goes on (`true`) or off. First at its instant, so a tick at the
    /// end of a kill-switch window runs.
    KillSwitch(bool),
    Resume(String),
    Pause(String),
    ApproveAll,
}

pub(super) struct Agenda {
    pub next_tick: DateTime<Utc>,
    pub next_pass: DateTime<Utc>,
    /// The levers still to pull, in time order.
    levers: VecDeque<(DateTime<Utc>, Lever)>,
}

impl Agenda {
    pub fn new(config: &SimulationConfig) -> Agenda {
        let mut levers: Vec<(DateTime<Utc>, Lever)> = config
            .kill_switches
            .iter()
            .flat_map(|k| {
                [
                    (k.from, Lever::KillSwitch(true)),
                    (k.to, Lever::KillSwitch(false)),
                ]
            })
            .chain(
                config
                    .pauses
                    .iter()
                    .map(|p| (p.at, Lever::Pause(p.schedule.clone()))),
            )
            .chain(
                config
                    .resumes
                    .iter()
                    .map(|r| (r.at, Lever::Resume(r.schedule.clone()))),
            )
            .chain(
                config
                    .approve_all_at
                    .iter()
                    .map(|at| (*at, Lever::ApproveAll)),
            )
            .collect();
        levers.sort();
        Agenda {
            next_tick: ceil_to(config.from, MINUTE),
            next_pass: ceil_to(config.from, PASS_EVERY),
            levers: levers.into(),
        }
    }

    pub fn next(&self) -> DateTime<Utc> {
        let next = self.next_tick.min(self.next_pass);
        self.levers.front().map_or(next, |(at, _)| next.min(*at))
    }

    /// The levers due at or before `t`, in time order, taken off the agenda.
    pub fn levers_due(&mut self, t: DateTime<Utc>) -> Vec<Lever> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.levers.front() {
            if *at > t {
                break;
            }
            if let Some((_, lever)) = self.levers.pop_front() {
                due.push(lever);
            }
        }
        // A paused schedule leaves the `due` index, so idle ticks may have been skipped past
        // its resume: a resumed schedule is due again from the next minute.
        if due.iter().any(|l| matches!(l, Lever::Resume(_))) {
            self.next_tick = self.next_tick.min(ceil_to(t, MINUTE));
        }
        due
    }

    /// After a tick at `t` that found nothing due: the next tick is when the earliest
    /// schedule's `next_run_at` enters the lookahead (never later than `until`).
    pub async fn skip_idle_ticks(
        &mut self,
        store: &dyn LedgerStore,
        shards: u32,
        lookahead: TimeDelta,
        until: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut earliest: Option<DateTime<Utc>> = None;
        for shard in 0..shards {
            let first = store.due_schedules(shard, until, 1).await?;
            earliest = earliest
                .into_iter()
                .chain(first.iter().filter_map(|s| s.next_run_at))
                .min();
        }
        let at = earliest.map_or(until, |next| ceil_to(next - lookahead, MINUTE));
        self.next_tick = self.next_tick.max(at.min(until));
        Ok(())
    }
}

pub(super) fn ceil_to(t: DateTime<Utc>, step: TimeDelta) -> DateTime<Utc> {
    match t.duration_trunc(step) {
        Ok(floor) if floor == t => t,
        Ok(floor) => floor + step,
        Err(_) => t,
    }
}
