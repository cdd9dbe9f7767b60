//! What a local session ran, printed when it stops: runs per status, webhook executions, and
//! how long runs waited to start (live scheduled runs from their scheduled time; catch-up,
//! backfill and operators' runs from their release, see [`StartWait`]).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

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
    /// Live scheduled runs: `started_at - scheduled_for`.
    pub start_delay: Option<Percentiles>,
    /// Catch-up, backfill and operators' runs: `started_at - released`.
    pub release_delay: Option<Percentiles>,
}

impl Summary {
    pub fn of<'a>(runs: impl IntoIterator<Item = &'a Run>) -> Summary {
        let mut by_status: BTreeMap<RunStatus, u32> = BTreeMap::new();
        let (mut scheduled, mut released) = (Vec::new(), Vec::new());
        for run in runs {
            *by_status.entry(run.status).or_default() += 1;
            match run.started_at.map(|started| StartWait::of(run, started)) {
                Some(StartWait::Scheduled { ms }) => scheduled.push(ms),
                Some(StartWait::Released { ms }) => released.push(ms),
                None => {}
            }
        }
        Summary {
            by_status,
            start_delay: Percentiles::of(scheduled),
            release_delay: Percentiles::of(released),
        }
    }

    /// Reads every schedule's runs (up to `per_schedule` each) from the ledger.
    pub async fn read(ledger: &dyn LedgerStore, per_schedule: u32) -> Result<Summary, StoreError> {
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
        Ok(Summary::of(&runs))
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
                "release delay (catch-up, backfill and operators' runs, started_at - released)",
                self.release_delay,
            ),
        ];
        for (name, figure) in figures {
            if let Some(p) = figure {
                writeln!(
                    f,
                    "{name} over {} runs: p50 {} ms, p99 {} ms, max {} ms",
                    p.runs, p.p50, p.p99, p.max
                )?;
            }
        }
        Ok(())
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
        let summary = Summary::of(&runs);
        assert_eq!(summary.by_status[&RunStatus::Success], 3);
        let start = summary.start_delay.unwrap();
        assert_eq!((start.runs, start.max), (2, 3000));
        let release = summary.release_delay.unwrap();
        assert_eq!((release.runs, release.p99), (1, 4000));
        let text = summary.to_string();
        assert!(text.contains("runs by status: SUCCESS 3"), "{text}");
        assert!(
            text.contains("over 2 runs: p50 3000 ms, p99 3000 ms, max 3000 ms"),
            "{text}"
        );
        assert!(text.contains("release delay"), "{text}");
    }

    #[test]
    fn no_started_run_prints_no_figure() {
        let summary = Summary::of(&[]);
        assert_eq!(summary.start_delay, None);
        assert_eq!(summary.to_string(), "runs by status: none\n");
    }
}
