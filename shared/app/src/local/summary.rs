//! What a local session ran, printed when it stops: runs per status, webhook executions, and
//! how long runs waited to start (live scheduled runs from their scheduled time; catch-up,
//! backfill and operators' runs from their release, see [`StartWait`]). A live run whose
//! window fell before the runner was up waited for the runner, not for the scheduler: its
//! start delay is reported apart.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use chrono::{DateTime, Utc};
use cronledger_aws::{LedgerStore, StoreError};
use cronledger_core::{Run, RunStatus, StartWait};

/// Percentiles of one wait figure, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percentiles {
    pub runs: usize,
    pub p50: i64,
    pub p99: i64,
    pub max: i64,
}

impl Percentiles {
    fn of(mut values: Vec<i64>) -> Option<Percentiles> {
        let last = values.len().checked_sub(1)?;
        values.sort_unstable();
        let at = |p: f64| values[(last as f64 * p).round() as usize];
        Some(Percentiles {
            runs: values.len(),
            p50: at(0.50),
            p99: at(0.99),
            max: values[last],
        })
    }
}

/// The session's runs, summed up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub by_status: BTreeMap<RunStatus, u32>,
    /// Live scheduled runs whose window fell once the runner was up:
    /// `started_at - scheduled_for`.
    pub start_delay: Option<Percentiles>,
    /// Live scheduled runs whose window fell before the runner was up (the first tick fires
    /// the minute it starts in): `started_at - scheduled_for`, mostly the runner's own start.
    pub before_runner_start_delay: Option<Percentiles>,
    /// Catch-up, backfill and operators' runs: `started_at - released`.
    pub release_delay: Option<Percentiles>,
}

impl Summary {
    /// The summary of `runs` of a runner that was up (ticking and polling) at `runner_started`.
    pub fn of<'a>(
        runs: impl IntoIterator<Item = &'a Run>,
        runner_started: DateTime<Utc>,
    ) -> Summary {
        let mut by_status: BTreeMap<RunStatus, u32> = BTreeMap::new();
        let (mut live, mut before_runner, mut released) = (Vec::new(), Vec::new(), Vec::new());
        for run in runs {
            *by_status.entry(run.status).or_default() += 1;
            match run.started_at.map(|started| StartWait::of(run, started)) {
                Some(StartWait::Scheduled { ms }) if run.key.scheduled_for < runner_started => {
                    before_runner.push(ms)
                }
                Some(StartWait::Scheduled { ms }) => live.push(ms),
                Some(StartWait::Released { ms }) => released.push(ms),
                None => {}
            }
        }
        Summary {
            by_status,
            start_delay: Percentiles::of(live),
            before_runner_start_delay: Percentiles::of(before_runner),
            release_delay: Percentiles::of(released),
        }
    }

    /// Reads every schedule's runs (up to `per_schedule` each) from the ledger: the summary
    /// of a runner up at `runner_started`.
    pub async fn read(
        ledger: &dyn LedgerStore,
        per_schedule: u32,
        runner_started: DateTime<Utc>,
    ) -> Result<Summary, StoreError> {
        let mut runs = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = ledger.list_schedules(100, cursor.as_deref()).await?;
            for schedule in &page.items {
                runs.extend(
                    ledger
                        .run_history(schedule.id(), per_schedule, None)
                        .await?
                        .items,
                );
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        Ok(Summary::of(&runs, runner_started))
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut statuses = String::new();
        for (status, n) in &self.by_status {
            let sep = if statuses.is_empty() { "" } else { ", " };
            let _ = write!(statuses, "{sep}{status} {n}");
        }
        if statuses.is_empty() {
            statuses.push_str("none");
        }
        writeln!(f, "runs by status: {statuses}")?;
        let figures = [
            (
                "start delay (live scheduled runs, started_at - scheduled_for)",
                self.start_delay,
            ),
            (
                "start delay of live runs whose window fell before the runner started (not in the line above)",
                self.before_runner_start_delay,
            ),
            (
                "release delay (catch-up, backfill and operators' runs, started_at - released)",
                self.release_delay,
            ),
        ];
        for (name, figure) in figures {
            if let Some(p) = figure {
                writeln!(f, "{name}: {p}")?;
            }
        }
        Ok(())
    }
}

/// The figures with the number of runs they are over (a p99 of 2 runs is the larger one).
impl fmt::Display for Percentiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "p50 {} ms, p99 {} ms, max {} ms (n={})",
            self.p50, self.p99, self.max, self.runs
        )
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeDelta, Utc};
    use cronledger_core::run::{Origin, Trigger};
    use cronledger_core::spec::parse_manifest;
    use cronledger_core::{Lane, Schedule, ValidationRules, Window};

    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn started_run(trigger: Trigger, scheduled_for: &str, started: &str) -> Run {
        let specs = parse_manifest(
            "schedules:\n  - { id: job, cron: '* * * * *', timezone: UTC, job: { type: noop } }\n",
            &ValidationRules::default(),
            at("2026-11-29T00:00:00Z"),
        )
        .unwrap();
        let schedule = Schedule::new(specs[0].clone()).unwrap();
        let t = at(scheduled_for);
        let started = at(started);
        let mut run = schedule.pending_run(
            t,
            Window::new(t - TimeDelta::minutes(1), t),
            Origin::Expected,
            trigger,
            t.min(started),
            1,
        );
        run.status = RunStatus::Success;
        run.started_at = Some(started);
        if trigger != Trigger::Scheduled {
            run.lane = Some(Lane::Correction);
            run.queued_at = Some(started - TimeDelta::seconds(4));
        }
        run
    }

    #[test]
    fn a_century_old_catch_up_window_does_not_count_as_start_delay() {
        let runs = [
            started_run(
                Trigger::Scheduled,
                "2026-11-29T00:00:00Z",
                "2026-11-29T00:00:01Z",
            ),
            started_run(
                Trigger::Scheduled,
                "2026-11-29T00:01:00Z",
                "2026-11-29T00:01:03Z",
            ),
            started_run(
                Trigger::CatchUp,
                "1926-11-29T00:00:00Z",
                "2026-11-29T00:02:00Z",
            ),
        ];
        let summary = Summary::of(&runs, at("2026-11-29T00:00:00Z"));
        assert_eq!(summary.by_status[&RunStatus::Success], 3);
        let start = summary.start_delay.unwrap();
        assert_eq!((start.runs, start.max), (2, 3000));
        let release = summary.release_delay.unwrap();
        assert_eq!((release.runs, release.p99), (1, 4000));
        let text = summary.to_string();
        assert!(text.contains("runs by status: SUCCESS 3"), "{text}");
        assert!(
            text.contains("scheduled_for): p50 3000 ms, p99 3000 ms, max 3000 ms (n=2)"),
            "{text}"
        );
        assert!(text.contains("release delay"), "{text}");
    }

    #[test]
    fn a_window_that_fell_while_the_runner_booted_is_reported_apart() {
        // The runner came up 9 s into the minute its first tick fired: that run waited for the
        // runner, the next ones for the scheduler.
        let runner_started = at("2026-11-29T00:00:09Z");
        let runs = [
            started_run(
                Trigger::Scheduled,
                "2026-11-29T00:00:00Z",
                "2026-11-29T00:00:08.962Z",
            ),
            started_run(
                Trigger::Scheduled,
                "2026-11-29T00:01:00Z",
                "2026-11-29T00:01:00.012Z",
            ),
            started_run(
                Trigger::Scheduled,
                "2026-11-29T00:02:00Z",
                "2026-11-29T00:02:00.020Z",
            ),
        ];
        let summary = Summary::of(&runs, runner_started);
        let live = summary.start_delay.unwrap();
        assert_eq!((live.runs, live.p50, live.max), (2, 20, 20));
        let before = summary.before_runner_start_delay.unwrap();
        assert_eq!((before.runs, before.p50), (1, 8962));
        let text = summary.to_string();
        assert!(
            text.contains(
                "start delay (live scheduled runs, started_at - scheduled_for): \
                 p50 20 ms, p99 20 ms, max 20 ms (n=2)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "start delay of live runs whose window fell before the runner started \
                 (not in the line above): p50 8962 ms, p99 8962 ms, max 8962 ms (n=1)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn no_started_run_prints_no_figure() {
        let summary = Summary::of(&[], at("2026-11-29T00:00:00Z"));
        assert_eq!(summary.start_delay, None);
        assert_eq!(summary.to_string(), "runs by status: none\n");
    }
}
