//! Which windows a tick fires for one shard, from its catalog and its fire mark: pure, so
//! the rule is tested apart from the writes.
//!
//! A tick owns the fire times in (`fired_through`, `until`]. Each firing schedule
//! contributes its fire times there (never one before its `next_run_at`, the first fire time
//! of its current definition). A window already past its grace is not fired: the tick only
//! moves the mark past it and leaves it to the reconciler's misfire policy. At most
//! `max_per_schedule` windows of one schedule are fired per tick; a schedule with more cuts
//! the tick at its first window left over, and the mark moves only to just before it, so
//! the next tick carries on from there and no window is passed unfired.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_core::Schedule;
use cronledger_ledger::ledger::StoredSchedule;

/// Fire times are whole seconds: the mark stops one second before a cut.
const RESOLUTION: TimeDelta = TimeDelta::seconds(1);

/// A firing schedule, compiled.
#[derive(Clone)]
pub struct Firing {
    pub stored: StoredSchedule,
    pub schedule: Arc<Schedule>,
}

/// One window to fire: the catalog entry (an index into the tick's `Firing` list) and its
/// fire time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub schedule: usize,
    pub fire_at: DateTime<Utc>,
    /// At or before the mark: a window of a schedule changed since the tick that moved the
    /// mark over it (that tick did not know the definition). Its run is written if absent
    /// and sent by whoever writes it; one found written was the earlier tick's.
    pub below_mark: bool,
}

/// How long before the mark's last move a change still counts as unseen by it: the mark
/// holds fire times (a tick's time plus its lookahead) and changes carry the api's clock.
pub const CHANGE_MARGIN: TimeDelta = TimeDelta::seconds(60);

/// What a tick of one shard does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickPlan {
    /// In fire-time order.
    pub windows: Vec<Window>,
    /// Windows past their grace: left to the reconciler.
    pub left_for_reconciler: Vec<Window>,
    /// Where the mark moves: every fire time up to it is in `windows` or
    /// `left_for_reconciler`.
    pub fired_through: DateTime<Utc>,
    /// The first fire time after `fired_through` among the schedules (`None`: none fires).
    pub next_fire_at: Option<DateTime<Utc>>,
}

/// The first fire time of `firing` after `after`, not before its definition's first.
fn first_after(firing: &Firing, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let schedule = &firing.schedule;
    let next = schedule.next_fire_after(schedule.occurrence_at(after))?;
    let first = firing.stored.next_run_at?;
    Some(next.max(first))
}

fn following(firing: &Firing, fire_at: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let schedule = &firing.schedule;
    schedule.next_fire_after(schedule.occurrence_at(fire_at))
}

/// The tick's plan for the fire times in (`from`, `until`] at `now` (see the module docs).
/// A schedule changed at or after `changed_since` (the last move of the mark, less
/// [`CHANGE_MARGIN`]) also gets its windows from its first fire time up to `from`, within
/// grace, as `below_mark` windows.
pub fn plan(
    schedules: &[Firing],
    from: DateTime<Utc>,
    changed_since: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    max_per_schedule: usize,
) -> TickPlan {
    let mut windows = Vec::new();
    let mut left = Vec::new();
    let mut cut: Option<DateTime<Utc>> = None;
    let mut next_fire_at: Option<DateTime<Utc>> = None;
    for (index, firing) in schedules.iter().enumerate() {
        if !firing.stored.fires() {
            continue;
        }
        let grace = firing.schedule.spec.grace.as_delta();
        let mut fired = 0;
        let changed = changed_since.is_some_and(|since| firing.stored.updated_at >= since);
        let start = if changed {
            // From its first fire time (within grace: older ones are the reconciler's).
            from.min(now - grace - RESOLUTION)
        } else {
            from
        };
        let mut at = first_after(firing, start);
        while let Some(fire_at) = at.filter(|t| *t <= until) {
            let below_mark = fire_at <= from;
            if below_mark && now - fire_at > grace {
                at = following(firing, fire_at);
                continue;
            }
            let window = Window {
                schedule: index,
                fire_at,
                below_mark,
            };
            if below_mark {
                windows.push(window);
            } else if now - fire_at > grace {
                left.push(window);
            } else if fired == max_per_schedule {
                cut = Some(cut.map_or(fire_at, |c| c.min(fire_at)));
                break;
            } else {
                windows.push(window);
                fired += 1;
            }
            at = following(firing, fire_at);
        }
        if let Some(after) = at {
            next_fire_at = Some(next_fire_at.map_or(after, |n| n.min(after)));
        }
    }
    let fired_through = match cut {
        Some(cut) => {
            windows.retain(|w| w.fire_at < cut || w.below_mark);
            left.retain(|w| w.fire_at < cut);
            next_fire_at = Some(next_fire_at.map_or(cut, |n| n.min(cut)));
            cut - RESOLUTION
        }
        None => until,
    };
    windows.sort_by_key(|w| (w.fire_at, w.schedule));
    TickPlan {
        windows,
        left_for_reconciler: left,
        fired_through,
        next_fire_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronledger_core::ScheduleSpec;
    use cronledger_ledger::ledger::ScheduleState;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("instant")
    }

    fn firing(id: &str, cron: &str, first: &str, grace: &str) -> Firing {
        let spec: ScheduleSpec = serde_json::from_value(serde_json::json!({
            "id": id, "cron": cron, "timezone": "UTC", "job": {"type": "noop"}, "grace": grace
        }))
        .expect("spec");
        let schedule = Arc::new(Schedule::new(spec.clone()).expect("schedule"));
        Firing {
            stored: StoredSchedule {
                spec,
                version: 1,
                state: ScheduleState::Active,
                shard: 0,
                next_run_at: Some(t(first)),
                reconciled_through: t("2026-03-01T00:00:00Z"),
                pauses: Vec::new(),
                past_timings: Vec::new(),
                created_at: t("2026-03-01T00:00:00Z"),
                updated_at: t("2026-03-01T00:00:00Z"),
                failure_streak: 0,
                downstream: Vec::new(),
            },
            schedule,
        }
    }

    #[test]
    fn a_schedule_changed_after_the_marks_last_move_gets_its_windows_below_the_mark() {
        let mut new = firing("new", "* * * * *", "2026-03-01T10:01:00Z", "2m");
        new.stored.updated_at = t("2026-03-01T10:00:30Z");
        let old = firing("old", "* * * * *", "2026-03-01T00:01:00Z", "2m");
        let fleet = [new, old];
        // The 10:00 tick moved the mark to 10:01 before `new` existed.
        let plan = plan(
            &fleet,
            t("2026-03-01T10:01:00Z"),
            Some(t("2026-03-01T09:59:00Z")),
            t("2026-03-01T10:01:00Z"),
            t("2026-03-01T10:02:00Z"),
            10,
        );
        let below: Vec<_> = plan.windows.iter().filter(|w| w.below_mark).collect();
        assert_eq!(below.len(), 1, "{plan:?}");
        assert_eq!(
            (below[0].schedule, below[0].fire_at),
            (0, t("2026-03-01T10:01:00Z"))
        );
        assert_eq!(plan.windows.len(), 3, "10:02 of both, and `new`'s 10:01");
    }

    /// A first tick's plan (no change since the mark) for the range (`from`, `until`].
    fn plan_between(fleet: &[Firing], from: &str, now: &str, until: &str, cap: usize) -> TickPlan {
        plan(fleet, t(from), None, t(now), t(until), cap)
    }

    fn times(windows: &[Window]) -> Vec<(usize, DateTime<Utc>)> {
        windows.iter().map(|w| (w.schedule, w.fire_at)).collect()
    }

    #[test]
    fn fires_each_fire_time_in_the_range_once_and_moves_the_mark_to_its_end() {
        let fleet = [
            firing("a", "* * * * *", "2026-03-01T00:01:00Z", "2m"),
            firing("b", "*/5 * * * *", "2026-03-01T00:05:00Z", "2m"),
        ];
        let plan = plan_between(
            &fleet,
            "2026-03-01T10:00:00Z",
            "2026-03-01T10:01:00Z",
            "2026-03-01T10:02:00Z",
            10,
        );
        assert_eq!(
            times(&plan.windows),
            vec![
                (0, t("2026-03-01T10:01:00Z")),
                (0, t("2026-03-01T10:02:00Z"))
            ],
            "the range excludes its start and includes its end"
        );
        assert_eq!(plan.fired_through, t("2026-03-01T10:02:00Z"));
        assert_eq!(plan.next_fire_at, Some(t("2026-03-01T10:03:00Z")));
    }

    #[test]
    fn a_definition_fires_from_its_first_fire_time_and_a_stopped_schedule_not_at_all() {
        let mut paused = firing("p", "* * * * *", "2026-03-01T00:01:00Z", "2m");
        paused.stored.state = ScheduleState::Paused;
        let fleet = [
            firing("new", "* * * * *", "2026-03-01T10:02:00Z", "2m"),
            paused,
        ];
        let plan = plan_between(
            &fleet,
            "2026-03-01T10:00:00Z",
            "2026-03-01T10:01:00Z",
            "2026-03-01T10:02:00Z",
            10,
        );
        assert_eq!(times(&plan.windows), vec![(0, t("2026-03-01T10:02:00Z"))]);
    }

    #[test]
    fn windows_past_their_grace_are_left_to_the_reconciler_and_passed() {
        let fleet = [firing("a", "* * * * *", "2026-03-01T00:01:00Z", "2m")];
        let plan = plan_between(
            &fleet,
            "2026-03-01T09:55:00Z",
            "2026-03-01T10:00:00Z",
            "2026-03-01T10:01:00Z",
            10,
        );
        assert_eq!(plan.left_for_reconciler.len(), 2, "09:56 and 09:57");
        assert_eq!(plan.windows.len(), 4, "09:58 through 10:01");
        assert_eq!(plan.fired_through, t("2026-03-01T10:01:00Z"));
    }

    #[test]
    fn a_schedule_over_its_cap_cuts_the_tick_before_its_first_window_left_over() {
        let fleet = [
            firing("busy", "* * * * *", "2026-03-01T00:01:00Z", "1h"),
            firing("other", "* * * * *", "2026-03-01T00:01:00Z", "1m"),
        ];
        let plan = plan_between(
            &fleet,
            "2026-03-01T09:30:00Z",
            "2026-03-01T10:00:00Z",
            "2026-03-01T10:01:00Z",
            3,
        );
        let busy: Vec<_> = plan.windows.iter().filter(|w| w.schedule == 0).collect();
        assert_eq!(busy.len(), 3);
        assert_eq!(plan.fired_through, t("2026-03-01T09:33:59Z"));
        assert!(plan.windows.iter().all(|w| w.fire_at <= plan.fired_through));
        assert!(plan
            .left_for_reconciler
            .iter()
            .all(|w| w.fire_at <= plan.fired_through));
        assert_eq!(plan.next_fire_at, Some(t("2026-03-01T09:34:00Z")));
    }
}
