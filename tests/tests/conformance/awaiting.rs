//! Reminder trackers of held work: one per (schedule, group) whoever races, the due ones
//! soonest first, moved on or dropped, and never seen by the schedule's other reads or the
//! runs' and outbox's share of the `active` index.

use chrono::{DateTime, Duration, Utc};
use cronledger_aws::alerts::AWAITING_RECORD_DAYS;
use cronledger_aws::{Awaiting, HeldWork};
use cronledger_core::{RunKey, RunStatus};
use cronledger_tests::{scheduled_run, spec, t, SHARDS};

use crate::{conformance, meta};

const WRITERS: usize = 8;

fn held_run(schedule: &str, window_end: DateTime<Utc>, since: DateTime<Utc>) -> Awaiting {
    let key = RunKey::expected(schedule, window_end);
    Awaiting {
        schedule: schedule.into(),
        group: key.to_string(),
        held: HeldWork::Run { key },
        since,
        remind_at: since + Duration::hours(4),
    }
}

fn groups(due: &[Awaiting]) -> Vec<(&str, &str)> {
    due.iter()
        .map(|a| (a.schedule.as_str(), a.group.as_str()))
        .collect()
}

conformance! {
    async fn a_group_is_tracked_once_whoever_races_and_the_first_keeps_its_since(env: Env) {
        let since = t("2026-04-01T10:00:00Z");
        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let alerts = env.alerts.clone();
            let mut tracker = held_run("raced", since, since + Duration::seconds(writer as i64));
            tracker.remind_at = tracker.since + Duration::hours(4);
            tasks.push(tokio::spawn(async move { alerts.track_awaiting(&tracker, tracker.since).await }));
        }
        let mut started = 0;
        for task in tasks {
            if task.await.expect("writer task").expect("track_awaiting") {
                started += 1;
            }
        }
        assert_eq!(started, 1, "exactly one writer starts the tracker");
        let due = env.alerts.awaiting_due(since + Duration::hours(5), 10).await.expect("due");
        assert_eq!(due.len(), 1);
        assert!(due[0].since <= since + Duration::seconds(WRITERS as i64));
    }

    async fn due_trackers_come_soonest_first_and_move_on_or_go(env: Env) {
        let t0 = t("2026-04-02T00:00:00Z");
        let mut late = held_run("x", t0, t0);
        late.remind_at = t0 + Duration::hours(3);
        let mut early = held_run("y", t0, t0);
        early.remind_at = t0 + Duration::hours(1);
        let gap = Awaiting {
            schedule: "z".into(),
            group: "replay-1".into(),
            held: HeldWork::Windows { first: t0 - Duration::days(1), last: t0 },
            since: t0,
            remind_at: t0 + Duration::hours(2),
        };
        for each in [&late, &early, &gap] {
            assert!(env.alerts.track_awaiting(each, t0).await.expect("track"));
        }
        assert!(env.alerts.awaiting_due(t0 + Duration::minutes(59), 10).await.expect("none").is_empty());
        let due = env.alerts.awaiting_due(t0 + Duration::hours(2), 10).await.expect("due");
        assert_eq!(groups(&due), groups(&[early.clone(), gap.clone()]));
        assert_eq!(due[1], gap, "the tracker reads back whole");
        assert_eq!(env.alerts.awaiting_due(t0 + Duration::hours(9), 1).await.expect("one").len(), 1);
        assert!(env.alerts.awaiting_due(t0 + Duration::hours(9), 0).await.expect("none asked").is_empty());

        // Reminded: next one in four hours. Nothing waits any more: gone.
        env.alerts.remind_awaiting(&early, Some(t0 + Duration::hours(5))).await.expect("move");
        env.alerts.remind_awaiting(&gap, None).await.expect("drop");
        let due = env.alerts.awaiting_due(t0 + Duration::hours(4), 10).await.expect("due");
        assert_eq!(groups(&due), groups(&[late.clone()]));
        let due = env.alerts.awaiting_due(t0 + Duration::hours(5), 10).await.expect("due");
        assert_eq!(groups(&due), groups(&[late.clone(), early.clone()]));
        assert_eq!(due[1].remind_at, t0 + Duration::hours(5));
        assert_eq!(due[1].since, t0, "moving the reminder keeps when it started waiting");

        // A dropped tracker is not brought back by a racing pass's move; a new hold of the
        // group starts a new one.
        env.alerts.remind_awaiting(&gap, Some(t0 + Duration::hours(6))).await.expect("late move");
        assert!(!groups(&env.alerts.awaiting_due(t0 + Duration::hours(9), 10).await.expect("due")).contains(&("z", "replay-1")));
        assert!(env.alerts.track_awaiting(&gap, t0 + Duration::hours(9)).await.expect("again"));
    }

    async fn trackers_stay_out_of_the_schedules_reads_and_the_runs_index(env: Env) {
        let t0 = t("2026-04-03T00:00:00Z");
        let tracked = spec("tracked", "0 * * * *");
        env.ledger.create_schedule(tracked.clone(), meta("alice", t0)).await.expect("create");
        let run = scheduled_run(&tracked, t0 + Duration::hours(1), t0, "ticker");
        env.ledger.create_run(&run).await.expect("run");
        assert!(env.alerts.track_awaiting(&held_run("tracked", t0 + Duration::hours(1), t0), t0).await.expect("track"));

        assert_eq!(env.ledger.audit_log("tracked").await.expect("audit").len(), 1);
        let history = env.ledger.run_history("tracked", 10, None).await.expect("history");
        assert_eq!(history.items.iter().map(|r| &r.key).collect::<Vec<_>>(), [&run.key]);
        let (_, recent) = env.ledger.schedule_with_recent_runs("tracked", 10, None).await.expect("recent");
        assert_eq!(recent.runs.iter().map(|r| r.status).collect::<Vec<_>>(), [RunStatus::Pending]);
        assert!(env.alerts.alerts_of("tracked", 10).await.expect("alerts").is_empty());
        assert!(env.alerts.unpublished_alerts(10).await.expect("outbox").is_empty());
        let mut active = 0;
        for shard in 0..SHARDS {
            active += env.ledger.active_runs(shard, None, 100, None).await.expect("active").items.len();
        }
        assert_eq!(active, 1, "only the run");
    }

    async fn an_expired_tracker_gives_its_group_to_a_new_hold(env: Env) {
        let t0 = t("2026-04-04T00:00:00Z");
        let tracker = held_run("lapsed", t0, t0);
        assert!(env.alerts.track_awaiting(&tracker, t0).await.expect("first"));
        let kept = Duration::days(AWAITING_RECORD_DAYS);
        assert!(!env.alerts.track_awaiting(&tracker, t0 + kept).await.expect("live"));
        let mut again = tracker.clone();
        again.since = t0 + kept + Duration::seconds(1);
        again.remind_at = again.since + Duration::hours(4);
        assert!(env.alerts.track_awaiting(&again, again.since).await.expect("expired"));
        let due = env.alerts.awaiting_due(again.remind_at, 10).await.expect("due");
        assert_eq!(due, [again]);
    }
}
