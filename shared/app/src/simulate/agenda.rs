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
    /// The `n`-th of the configuration's backfills is asked for.
    Backfill(usize),
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
            .chain(
                config
                    .backfills
                    .iter()
                    .enumerate()
                    .map(|(n, b)| (b.at, Lever::Backfill(n))),
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

    /// After a tick that found nothing due: skips the ticks before the one whose lookahead
    /// reaches `next_fire_at` (the tickers' first fire time after their range; `None`:
    /// nothing fires before `until`), or the one at `resend_at` (runs whose send is in doubt)
    /// if that comes first.
    pub fn skip_idle_ticks(
        &mut self,
        next_fire_at: Option<DateTime<Utc>>,
        resend_at: Option<DateTime<Utc>>,
        lookahead: TimeDelta,
        until: DateTime<Utc>,
    ) {
        let fire = next_fire_at.map_or(until, |next| ceil_to(next - lookahead, MINUTE));
        let at = resend_at.map_or(fire, |resend| fire.min(ceil_to(resend, MINUTE)));
        self.next_tick = self.next_tick.max(at.min(until));
    }
}

pub(super) fn ceil_to(t: DateTime<Utc>, step: TimeDelta) -> DateTime<Utc> {
    match t.duration_trunc(step) {
        Ok(floor) if floor == t => t,
        Ok(floor) => floor + step,
        Err(_) => t,
    }
}
