//! The next run people are shown (a schedule's `next_run_at` and its health's): the earliest
//! of its windows that has not started yet. The ticker writes a window's run QUEUED up to its
//! lookahead before the fire time, and a worker starts it at about that time, so the next fire
//! time after now skips a window whose run is written but still waits: that window is the
//! next run, not the one after it.

use chrono::{DateTime, Utc};
use cronledger_core::run::Origin;
use cronledger_core::{Run, RunStatus};
use cronledger_ledger::ledger::StoredSchedule;

/// `stored`'s next run at `now`, given its newest runs (the bounded read its health makes):
/// the fire time of the earliest window whose run is PENDING or QUEUED and never started,
/// when that comes before its next fire time after `now`; else that next fire time. A
/// stopped schedule (paused, archived, disabled) starts none of its waiting runs: its next
/// fire time alone.
pub fn next_run_at(
    stored: &StoredSchedule,
    newest_runs: &[Run],
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let next_fire = stored.next_fire_after(now);
    if stored.stopped().is_some() {
        return next_fire;
    }
    let Ok(schedule) = stored.schedule() else {
        return next_fire;
    };
    newest_runs
        .iter()
        .filter(|run| not_started(run))
        .map(|run| schedule.fire_time(run.key.scheduled_for))
        .chain(next_fire)
        .min()
}

/// A window of the schedule's own (not an operator's run or a backfill's) still waiting for
/// its first start.
fn not_started(run: &Run) -> bool {
    run.key.origin == Origin::Expected
        && matches!(run.status, RunStatus::Pending | RunStatus::Queued)
        && run.started_at.is_none()
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;
    use cronledger_core::run::Trigger;
    use cronledger_core::spec::parse_manifest;
    use cronledger_core::{ValidationRules, Window};
    use cronledger_ledger::ledger::ScheduleState;

    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    /// A minutely schedule created at 19:50, whose first fire time was 19:51.
    fn stored() -> StoredSchedule {
        let created = at("2026-11-29T19:50:00Z");
        let spec = parse_manifest(
            "schedules:\n  - { id: job, cron: '* * * * *', timezone: UTC, job: { type: noop } }\n",
            &ValidationRules::default(),
            created,
        )
        .unwrap()
        .remove(0);
        StoredSchedule {
            spec,
            version: 1,
            state: ScheduleState::Active,
            shard: 0,
            next_run_at: Some(at("2026-11-29T19:51:00Z")),
            reconciled_through: created,
            pauses: Vec::new(),
            past_timings: Vec::new(),
            created_at: created,
            updated_at: created,
            failure_streak: 0,
            downstream: Vec::new(),
        }
    }

    fn run(stored: &StoredSchedule, scheduled_for: &str, status: RunStatus) -> Run {
        let t = at(scheduled_for);
        let mut run = stored.schedule().unwrap().pending_run(
            t,
            Window::new(t - TimeDelta::minutes(1), t),
            Origin::Expected,
            Trigger::Scheduled,
            t - TimeDelta::seconds(50),
            1,
        );
        run.status = status;
        if status != RunStatus::Pending && status != RunStatus::Queued {
            run.started_at = Some(t + TimeDelta::milliseconds(20));
        }
        run
    }

    #[test]
    fn a_queued_window_whose_fire_time_passed_is_the_next_run() {
        let s = stored();
        let now = at("2026-11-29T19:53:00.400Z");
        // Newest first: 19:54 written ahead, 19:53 fired but not started yet, 19:52 ran.
        let runs = [
            run(&s, "2026-11-29T19:54:00Z", RunStatus::Queued),
            run(&s, "2026-11-29T19:53:00Z", RunStatus::Queued),
            run(&s, "2026-11-29T19:52:00Z", RunStatus::Success),
        ];
        assert_eq!(s.next_fire_after(now), Some(at("2026-11-29T19:54:00Z")));
        assert_eq!(
            next_run_at(&s, &runs, now),
            Some(at("2026-11-29T19:53:00Z"))
        );
    }

    #[test]
    fn started_runs_and_operators_runs_are_not_the_next_run() {
        let s = stored();
        let now = at("2026-11-29T19:53:00.400Z");
        let mut manual = run(&s, "2026-11-29T19:52:30Z", RunStatus::Queued);
        manual.key.origin = Origin::Manual("req-1".into());
        let runs = [
            run(&s, "2026-11-29T19:53:00Z", RunStatus::Running),
            manual,
            run(&s, "2026-11-29T19:52:00Z", RunStatus::Success),
        ];
        assert_eq!(
            next_run_at(&s, &runs, now),
            Some(at("2026-11-29T19:54:00Z"))
        );
    }

    #[test]
    fn a_paused_schedule_shows_its_next_fire_time() {
        let mut s = stored();
        s.state = ScheduleState::Paused;
        let now = at("2026-11-29T19:53:00.400Z");
        let runs = [run(&s, "2026-11-29T19:53:00Z", RunStatus::Queued)];
        assert_eq!(next_run_at(&s, &runs, now), s.next_fire_after(now));
    }
}
