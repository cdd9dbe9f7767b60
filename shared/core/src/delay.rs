//! How long a run waited before its attempt started, measured from what it waited for.
//!
//! A live scheduled run waits for its `scheduled_for`: the gap to the start is the
//! scheduler's latency. Catch-up, backfill and operators' runs (and a scheduled run that was
//! held, approved or moved to another lane) start long after their `scheduled_for` by
//! design; measured from it they would report years of "delay". Their figure starts when
//! they were released to a lane.

use chrono::{DateTime, Utc};

use crate::run::{Origin, Run, Trigger};
use crate::Lane;

/// Which figure a start belongs to, and its value in milliseconds (never negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartWait {
    /// A live scheduled run in a live lane: `started - scheduled_for`.
    Scheduled { ms: i64 },
    /// Any other run: `started - released`, the last time it was sent to a lane (its
    /// creation when it never was).
    Released { ms: i64 },
}

impl StartWait {
    /// The wait of `run` whose attempt started at `started`.
    pub fn of(run: &Run, started: DateTime<Utc>) -> StartWait {
        let live_lane = matches!(run.lane, None | Some(Lane::Realtime | Lane::Normal));
        let live = run.trigger == Trigger::Scheduled && run.key.origin == Origin::Expected;
        if live && live_lane {
            StartWait::Scheduled {
                ms: millis_between(run.key.scheduled_for, started),
            }
        } else {
            let released = run.queued_at.unwrap_or(run.created_at);
            StartWait::Released {
                ms: millis_between(released, started),
            }
        }
    }
}

fn millis_between(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    (to - from).num_milliseconds().max(0)
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::run::RunStatus;
    use crate::spec::parse_manifest;
    use crate::{Schedule, ValidationRules, Window};

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn run(trigger: Trigger, origin: Origin, scheduled_for: &str, lane: Option<Lane>) -> Run {
        let now = at("2026-11-29T00:00:00Z");
        let specs = parse_manifest(
            "schedules:\n  - { id: job, cron: '* * * * *', timezone: UTC, job: { type: noop } }\n",
            &ValidationRules::default(),
            now,
        )
        .unwrap();
        let schedule = Schedule::new(specs[0].clone()).unwrap();
        let t = at(scheduled_for);
        let mut run = schedule.pending_run(
            t,
            Window::new(t - TimeDelta::minutes(1), t),
            origin,
            trigger,
            now,
            1,
        );
        run.status = RunStatus::Queued;
        run.lane = lane;
        run
    }

    #[test]
    fn a_live_scheduled_run_counts_from_its_scheduled_time() {
        let r = run(
            Trigger::Scheduled,
            Origin::Expected,
            "2026-11-29T00:00:00Z",
            Some(Lane::Realtime),
        );
        assert_eq!(
            StartWait::of(&r, at("2026-11-29T00:00:01.500Z")),
            StartWait::Scheduled { ms: 1500 }
        );
    }

    #[test]
    fn catch_up_and_operator_runs_count_from_their_release() {
        let released = at("2026-11-29T00:00:00Z");
        let started = at("2026-11-29T00:00:02Z");
        for (trigger, origin, lane) in [
            (Trigger::CatchUp, Origin::Expected, Lane::Correction),
            (
                Trigger::Backfill,
                Origin::Backfill("bf-1".into()),
                Lane::Backfill,
            ),
            (
                Trigger::Manual,
                Origin::Manual("req-1".into()),
                Lane::Manual,
            ),
            // An approved scheduled run runs on the manual lane: an operator released it.
            (Trigger::Scheduled, Origin::Expected, Lane::Manual),
        ] {
            // A window a century old: its scheduled time says nothing about the start.
            let mut r = run(trigger, origin, "1926-11-29T00:00:00Z", Some(lane));
            r.queued_at = Some(released);
            assert_eq!(
                StartWait::of(&r, started),
                StartWait::Released { ms: 2000 },
                "{trigger} on {lane}"
            );
        }
    }

    #[test]
    fn a_run_never_queued_counts_from_its_creation() {
        let mut r = run(
            Trigger::CatchUp,
            Origin::Expected,
            "2026-11-28T00:00:00Z",
            Some(Lane::Correction),
        );
        r.created_at = at("2026-11-29T00:00:00Z");
        r.queued_at = None;
        assert_eq!(
            StartWait::of(&r, at("2026-11-29T00:00:03Z")),
            StartWait::Released { ms: 3000 }
        );
    }

    #[test]
    fn a_start_before_the_reference_is_no_negative_wait() {
        let r = run(
            Trigger::Scheduled,
            Origin::Expected,
            "2026-11-29T00:01:00Z",
            None,
        );
        assert_eq!(
            StartWait::of(&r, at("2026-11-29T00:00:59Z")),
            StartWait::Scheduled { ms: 0 }
        );
    }
}
