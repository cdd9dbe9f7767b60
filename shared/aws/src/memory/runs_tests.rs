//! The in-memory runs' conditional semantics, beside the conformance suite that holds them
//! to DynamoDB: conflicts, all-or-nothing fires, orderings and pages.

use chrono::{DateTime, Duration, Utc};
use cronledger_core::run::Origin;
use cronledger_core::{
    Lane, Run, RunEvent, RunStatus, Schedule, ScheduleSpec, Trigger, ValidationRules,
};

use crate::ledger::{Created, Fire, FireOutcome, RunChange, ScheduleState, StoredSchedule};
use crate::memory::InMemoryStore;
use crate::meter::RequestMeter;
use crate::StoreError;

fn t(s: &str) -> DateTime<Utc> {
    s.parse().expect("a test instant")
}

fn t0() -> DateTime<Utc> {
    t("2026-03-01T00:00:00Z")
}

fn spec(id: &str) -> ScheduleSpec {
    let doc = serde_json::json!({
        "id": id, "cron": "* * * * *", "timezone": "UTC", "owner": "tests",
        "job": { "type": "noop" },
    });
    cronledger_core::spec::validate_schedule(&doc, "", &ValidationRules::local(), t0())
        .expect("a valid test spec")
}

fn store() -> InMemoryStore {
    InMemoryStore::new(1, RequestMeter::new())
}

/// Puts a schedule straight into the table, firing next at `next`.
fn with_schedule(store: &InMemoryStore, id: &str, next: DateTime<Utc>) -> StoredSchedule {
    let schedule = StoredSchedule {
        spec: spec(id),
        version: 1,
        state: ScheduleState::Active,
        shard: 0,
        next_run_at: Some(next),
        reconciled_through: t0(),
        pauses: Vec::new(),
        past_timings: Vec::new(),
        created_at: t0(),
        updated_at: t0(),
        failure_streak: 0,
        downstream: Vec::new(),
    };
    store
        .tables()
        .schedules
        .insert(id.to_string(), schedule.clone());
    schedule
}

fn run(id: &str, at: DateTime<Utc>, writer: &str) -> Run {
    let schedule = Schedule::new(spec(id)).expect("compiles");
    let mut run = schedule.pending_run(
        at,
        schedule.window_for(at),
        Origin::Expected,
        Trigger::Scheduled,
        at,
        1,
    );
    run.replay_group_id = Some(writer.to_string());
    run.lane = Some(Lane::Normal);
    run
}

fn fire(id: &str, at: DateTime<Utc>, writer: &str) -> Fire {
    Fire {
        run: run(id, at, writer),
        expected_next_run_at: at,
        next_run_at: Some(at + Duration::minutes(1)),
    }
}

fn minute(n: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(n)
}

fn next_run_at(store: &InMemoryStore, id: &str) -> Option<DateTime<Utc>> {
    store.tables().schedules[id].next_run_at
}

#[test]
fn a_fire_writes_the_run_and_moves_the_schedule_or_nothing() {
    let store = store();
    with_schedule(&store, "a", minute(1));
    let won = store.fire_impl(&fire("a", minute(1), "t1")).expect("fire");
    assert_eq!(won, FireOutcome::Created);
    assert_eq!(next_run_at(&store, "a"), Some(minute(2)));

    // A second ticker with the same read loses to the run and learns the winner (it then
    // finds the schedule moved when it tries to advance it).
    let lost = store.fire_impl(&fire("a", minute(1), "t2")).expect("fire");
    let FireOutcome::Lost {
        existing: Some(existing),
        schedule_moved: false,
    } = lost
    else {
        panic!("expected a lost race: {lost:?}");
    };
    assert_eq!(existing.replay_group_id.as_deref(), Some("t1"));

    // A run already recorded (the reconciler's): nothing moves.
    store
        .create_run_impl(&run("a", minute(2), "reconciler"))
        .expect("create");
    let lost = store.fire_impl(&fire("a", minute(2), "t1")).expect("fire");
    assert!(matches!(
        lost,
        FireOutcome::Lost {
            existing: Some(_),
            schedule_moved: false
        }
    ));
    assert_eq!(next_run_at(&store, "a"), Some(minute(2)));

    // An edit since the ticker's read (a newer version): the run is taken back.
    store.tables().schedules.get_mut("a").expect("a").version = 2;
    let lost = store.fire_impl(&fire("a", minute(3), "t1"));
    assert!(matches!(
        lost,
        Ok(FireOutcome::Lost {
            existing: None,
            schedule_moved: true
        })
    ));
    assert!(store
        .runs_between_impl("a", minute(3), minute(3))
        .expect("runs")
        .is_empty());
}

#[test]
fn a_batch_of_fires_answers_for_each_fire() {
    let store = store();
    for id in ["b1", "b2", "b3"] {
        with_schedule(&store, id, minute(1));
    }
    let batch = |at| ["b1", "b2", "b3"].map(|id| fire(id, at, "batch")).to_vec();
    let outcomes = store.fire_all_impl(&batch(minute(1))).expect("batch");
    assert_eq!(outcomes, vec![FireOutcome::Created; 3]);

    // The reconciler recorded b2's next window first: b2 alone loses; the others fire.
    store
        .create_run_impl(&run("b2", minute(2), "reconciler"))
        .expect("create");
    let outcomes = store.fire_all_impl(&batch(minute(2))).expect("batch");
    assert_eq!(outcomes[0], FireOutcome::Created);
    assert!(matches!(
        &outcomes[1],
        FireOutcome::Lost {
            existing: Some(run),
            schedule_moved: false
        } if run.replay_group_id.as_deref() == Some("reconciler")
    ));
    assert_eq!(outcomes[2], FireOutcome::Created);
    for (id, next) in [("b1", minute(3)), ("b2", minute(2)), ("b3", minute(3))] {
        let found = store
            .runs_between_impl(id, minute(2), minute(2))
            .expect("runs");
        assert_eq!(found.len(), 1, "{id}");
        assert_eq!(next_run_at(&store, id), Some(next), "{id}");
    }

    let too_many: Vec<Fire> = (0..51)
        .map(|i| fire(&format!("x{i}"), minute(1), "b"))
        .collect();
    let err = store.fire_all_impl(&too_many).unwrap_err();
    assert_eq!(err.code(), "STORE_INVALID_REQUEST");
}

#[test]
fn create_if_absent_returns_the_run_that_was_there_first() {
    let store = store();
    let first = store
        .create_run_impl(&run("c", minute(1), "one"))
        .expect("create");
    assert!(first.is_new());
    let again = store
        .create_run_impl(&run("c", minute(1), "two"))
        .expect("create");
    let Created::Existing(existing) = again else {
        panic!("expected the existing run");
    };
    assert_eq!(existing.replay_group_id.as_deref(), Some("one"));
    let mut running = run("c", minute(2), "x");
    running.status = RunStatus::Running;
    let err = store.create_run_impl(&running).unwrap_err();
    assert_eq!(err.code(), "STORE_INVALID_REQUEST");
}

fn start(from: RunStatus, epoch: u64, at: DateTime<Utc>, owner: &str) -> RunChange {
    RunChange::new(RunEvent::Start, from, epoch, at).with_lease(owner, at + Duration::minutes(5))
}

#[test]
fn transitions_are_conditioned_on_status_epoch_lane_and_one_catch_up() {
    let store = store();
    let key = run("d", minute(1), "w").key;
    store
        .create_run_impl(&run("d", minute(1), "w"))
        .expect("create");

    let missing = run("d", minute(9), "w").key;
    let err = store
        .transition_run_impl(&missing, &start(RunStatus::Pending, 0, minute(1), "w1"))
        .unwrap_err();
    assert_eq!(err.code(), "RUN_NOT_FOUND");

    let started = store
        .transition_run_impl(&key, &start(RunStatus::Pending, 0, minute(1), "w1"))
        .expect("start");
    assert_eq!(
        (started.status, started.lease_epoch, started.attempts),
        (RunStatus::Running, 1, 1)
    );
    assert_eq!(started.lease.as_ref().map(|l| l.epoch), Some(1));

    // A writer holding the old epoch lost its lease; one with the wrong status conflicts.
    let stale = RunChange::new(RunEvent::Succeed, RunStatus::Running, 0, minute(2));
    assert_eq!(
        store.transition_run_impl(&key, &stale).unwrap_err().code(),
        "RUN_LEASE_LOST"
    );
    let wrong = RunChange::new(RunEvent::Skip, RunStatus::Queued, 1, minute(2));
    assert_eq!(
        store.transition_run_impl(&key, &wrong).unwrap_err().code(),
        "RUN_STATUS_CONFLICT"
    );
    // A lane the run is not in anymore.
    let mut moved = RunChange::new(RunEvent::Heartbeat, RunStatus::Running, 1, minute(2));
    moved.lane_was = Some(Lane::Backfill);
    assert_eq!(
        store.transition_run_impl(&key, &moved).unwrap_err().code(),
        "RUN_STATUS_CONFLICT"
    );

    // Catch-up planning happens once: the second planner finds the trigger changed.
    let other = run("d", minute(2), "w").key;
    store
        .create_run_impl(&run("d", minute(2), "w"))
        .expect("create");
    let mut plan = RunChange::new(RunEvent::Enqueue, RunStatus::Pending, 0, minute(3));
    plan.catch_up = Some("group-1".into());
    let planned = store.transition_run_impl(&other, &plan).expect("plan");
    assert_eq!(
        (planned.trigger, planned.status),
        (Trigger::CatchUp, RunStatus::Queued)
    );
    plan.from = RunStatus::Queued;
    plan.catch_up = Some("group-2".into());
    assert_eq!(
        store.transition_run_impl(&other, &plan).unwrap_err().code(),
        "RUN_STATUS_CONFLICT"
    );

    // The run read back is the one the transition returned.
    assert_eq!(store.get_run_impl(&other).expect("get"), planned);
}

#[test]
fn attempts_ride_on_the_run_and_only_the_last_twenty_are_kept() {
    let store = store();
    let key = run("e", minute(1), "w").key;
    store
        .create_run_impl(&run("e", minute(1), "w"))
        .expect("create");
    let mut status = RunStatus::Pending;
    for epoch in 0..22 {
        let at = minute(epoch as i64 + 1);
        store
            .transition_run_impl(&key, &start(status, epoch, at, &format!("w{epoch}")))
            .expect("start");
        let fail = RunChange::new(RunEvent::FailRetryable, RunStatus::Running, epoch + 1, at);
        status = store.transition_run_impl(&key, &fail).expect("fail").status;
    }
    let (run, attempts) = store.get_run_with_attempts_impl(&key).expect("get");
    assert_eq!(run.attempts, 22);
    let numbers: Vec<u64> = attempts.iter().map(|a| a.number).collect();
    assert_eq!(numbers, (3..=22).collect::<Vec<_>>());
    assert!(attempts
        .iter()
        .all(|a| a.start.is_some() && a.end.is_some()));
    assert_eq!(
        attempts[19].start.as_ref().map(|s| s.worker.as_str()),
        Some("w21")
    );
}

#[test]
fn the_active_index_follows_status_and_pages_in_window_order() {
    let store = store();
    for n in [3, 1, 2, 4] {
        store
            .create_run_impl(&run("f", minute(n), "w"))
            .expect("create");
    }
    let key4 = run("f", minute(4), "w").key;
    store
        .transition_run_impl(&key4, &start(RunStatus::Pending, 0, minute(4), "w"))
        .expect("start");

    let page = store
        .active_runs_impl(0, Some(RunStatus::Pending), 2, None)
        .expect("page");
    let windows: Vec<_> = page.items.iter().map(|r| r.key.scheduled_for).collect();
    assert_eq!(windows, [minute(1), minute(2)]);
    let rest = store
        .active_runs_impl(0, Some(RunStatus::Pending), 2, page.next.as_deref())
        .expect("rest");
    assert_eq!(
        rest.items
            .iter()
            .map(|r| r.key.scheduled_for)
            .collect::<Vec<_>>(),
        [minute(3)]
    );
    assert_eq!(rest.next, None);
    let running = store
        .active_runs_impl(0, Some(RunStatus::Running), 10, None)
        .expect("running");
    assert_eq!(running.items.len(), 1);

    // Terminal runs leave the index; the history still has them, newest first.
    let done = RunChange::new(RunEvent::Succeed, RunStatus::Running, 1, minute(5));
    store.transition_run_impl(&key4, &done).expect("succeed");
    let all = store.active_runs_impl(0, None, 10, None).expect("all");
    assert_eq!(all.items.len(), 3);
    let history = store.run_history_impl("f", 3, None).expect("history");
    let windows: Vec<_> = history.items.iter().map(|r| r.key.scheduled_for).collect();
    assert_eq!(windows, [minute(4), minute(3), minute(2)]);
    let older = store
        .run_history_impl("f", 3, history.next.as_deref())
        .expect("older");
    assert_eq!(
        older
            .items
            .iter()
            .map(|r| r.key.scheduled_for)
            .collect::<Vec<_>>(),
        [minute(1)]
    );
    assert!(matches!(
        store.run_history_impl("f", 3, Some("zz")),
        Err(StoreError::BadCursor)
    ));
}

#[test]
fn recent_runs_says_how_far_it_read() {
    let store = store();
    with_schedule(&store, "g", minute(10));
    for n in 1..=5 {
        store
            .create_run_impl(&run("g", minute(n), "w"))
            .expect("create");
    }
    let key5 = run("g", minute(5), "w").key;
    let skip = RunChange::new(RunEvent::Skip, RunStatus::Pending, 0, minute(5));
    store.transition_run_impl(&key5, &skip).expect("skip");

    let recent = store
        .recent_runs_impl("g", 3, Some(minute(5)))
        .expect("recent");
    let windows: Vec<_> = recent.runs.iter().map(|r| r.key.scheduled_for).collect();
    assert_eq!(windows, [minute(5), minute(4), minute(3)]);
    assert!(!recent.complete);
    assert_eq!(recent.oldest_read, Some(minute(3)));

    // With the schedule: its item is read first and counts toward the page.
    let (schedule, recent) = store
        .schedule_with_recent_runs_impl("g", 2, None)
        .expect("both");
    assert_eq!(schedule.id(), "g");
    assert_eq!(recent.runs.len(), 1, "the SKIPPED run is read but not sent");
    assert_eq!(recent.oldest_read, Some(minute(4)));
    let (_, all) = store
        .schedule_with_recent_runs_impl("g", 10, None)
        .expect("all");
    assert!(all.complete && all.oldest_read.is_none());
    assert_eq!(all.runs.len(), 4);
    assert_eq!(
        store
            .schedule_with_recent_runs_impl("nope", 2, None)
            .unwrap_err()
            .code(),
        "SCHEDULE_NOT_FOUND"
    );
}

#[test]
fn due_schedules_come_in_index_order_up_to_the_limit() {
    let store = store();
    with_schedule(&store, "late", minute(2));
    with_schedule(&store, "zz", minute(1));
    with_schedule(&store, "aa", minute(1));
    with_schedule(&store, "future", minute(9));
    store.tables().schedules.get_mut("future").expect("f").state = ScheduleState::Paused;
    let ids = |limit| -> Vec<String> {
        store
            .due_schedules_impl(0, minute(5), limit)
            .expect("due")
            .iter()
            .map(|s| s.id().to_string())
            .collect()
    };
    assert_eq!(ids(10), ["aa", "zz", "late"]);
    assert_eq!(ids(2), ["aa", "zz"]);
    assert!(store
        .due_schedules_impl(1, minute(5), 10)
        .expect("other shard")
        .is_empty());
    assert!(store
        .advance_next_run_impl("late", minute(2), None)
        .expect("advance"));
    assert!(!store
        .advance_next_run_impl("late", minute(2), None)
        .expect("stale"));
    assert_eq!(ids(10), ["aa", "zz"]);
}

#[test]
fn pending_live_runs_and_running_before_read_the_active_index() {
    let store = store();
    for n in 1..=3 {
        store
            .create_run_impl(&run("h", minute(n), "w"))
            .expect("create");
    }
    let mut catch_up = run("h", minute(4), "w");
    catch_up.trigger = Trigger::CatchUp;
    store.create_run_impl(&catch_up).expect("create");
    let pending = store
        .pending_live_runs_impl(0, minute(2), minute(4), 10)
        .expect("pending");
    let windows: Vec<_> = pending.iter().map(|r| r.key.scheduled_for).collect();
    assert_eq!(
        windows,
        [minute(2), minute(3)],
        "catch-up runs wait for their release"
    );

    let key1 = run("h", minute(1), "w").key;
    store
        .transition_run_impl(&key1, &start(RunStatus::Pending, 0, minute(1), "w"))
        .expect("start");
    assert_eq!(
        store
            .running_before_impl("h", minute(2))
            .expect("running")
            .len(),
        1
    );
    assert!(store
        .running_before_impl("h", minute(1))
        .expect("none")
        .is_empty());
    assert!(store
        .running_before_impl("other", minute(2))
        .expect("other")
        .is_empty());
}

/// A fleet's day through the store alone, as the ticker and the worker drive it (due read,
/// batched fires, enqueue, admission read, start, success): where the store's time goes at
/// fleet size. Prints what it measured; run with `--ignored` on an optimised build.
#[test]
#[ignore = "a measurement, not a check"]
fn a_fleet_day_through_the_store() {
    let schedules = 1000;
    let minutes = 1440;
    let store = store();
    let ids: Vec<String> = (0..schedules).map(|i| format!("fleet-{i:04}")).collect();
    for id in &ids {
        with_schedule(&store, id, minute(1));
    }
    let template = run("fleet-0000", minute(1), "t");
    let started = std::time::Instant::now();
    for m in 1..=minutes {
        let at = minute(m);
        let due = store.due_schedules_impl(0, at, 10_000).expect("due");
        assert_eq!(due.len(), schedules);
        let fires: Vec<Fire> = due
            .iter()
            .map(|s| {
                let mut run = template.clone();
                run.key.schedule_id = s.id().to_string();
                run.key.scheduled_for = at;
                Fire {
                    run,
                    expected_next_run_at: at,
                    next_run_at: Some(at + Duration::minutes(1)),
                }
            })
            .collect();
        for batch in fires.chunks(50) {
            let outcomes = store.fire_all_impl(batch).expect("fire");
            assert!(outcomes.iter().all(|o| *o == FireOutcome::Created));
        }
        for fire in &fires {
            let key = &fire.run.key;
            let enqueue = RunChange::new(RunEvent::Enqueue, RunStatus::Pending, 0, at);
            store.transition_run_impl(key, &enqueue).expect("enqueue");
            store
                .schedule_with_recent_runs_impl(&key.schedule_id, 10, Some(at))
                .expect("admission");
            store
                .transition_run_impl(key, &start(RunStatus::Queued, 0, at, "w"))
                .expect("start");
            let done = RunChange::new(RunEvent::Succeed, RunStatus::Running, 1, at);
            store.transition_run_impl(key, &done).expect("succeed");
        }
    }
    let runs = schedules as i64 * minutes;
    let elapsed = started.elapsed();
    eprintln!(
        "{runs} runs in {:.1}s ({:.2} us per run)",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / runs as f64
    );
}
