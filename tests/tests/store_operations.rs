//! Every store operation against the emulator: the schedule lifecycle with its audit, each
//! version's spec read back, the ticker's transaction, and the run listings.

use chrono::{DateTime, Duration, Utc};
use cronledger_aws::keys::shard_of;
use cronledger_aws::{
    AuditAction, ChangeMeta, Fire, FireOutcome, LedgerStore, RunChange, ScheduleState, StoreError,
};
use cronledger_core::{RunEvent, RunStatus};
use cronledger_tests::{manual_run, scheduled_run, spec, spec_with, t, TestLedger, SHARDS};
use serde_json::json;

fn meta(actor: &str, at: DateTime<Utc>) -> ChangeMeta {
    ChangeMeta {
        actor: actor.into(),
        reason: format!("{actor} did it"),
        at,
        details: None,
    }
}

async fn due_ids(env: &TestLedger, id: &str, until: DateTime<Utc>) -> Vec<String> {
    env.ledger
        .due_schedules(shard_of(id, SHARDS), until, 100)
        .await
        .expect("due")
        .into_iter()
        .map(|s| s.spec.id)
        .collect()
}

#[tokio::test]
async fn schedules_are_created_paused_resumed_and_archived_with_an_audit_trail() {
    let env = TestLedger::new().await;
    let ledger = &env.ledger;
    let t0 = t("2026-03-01T00:00:00Z");
    let id = "life";

    let created = ledger
        .create_schedule(spec(id, "*/15 * * * *"), meta("alice", t0))
        .await
        .expect("create");
    assert_eq!((created.version, created.state), (1, ScheduleState::Active));
    assert_eq!(created.next_run_at, Some(t0 + Duration::minutes(15)));
    assert_eq!(created.reconciled_through, t0);
    assert_eq!(ledger.get_schedule(id).await.expect("get"), created);
    assert_eq!(due_ids(&env, id, t0 + Duration::minutes(15)).await, [id]);
    assert!(due_ids(&env, id, t0 + Duration::minutes(14))
        .await
        .is_empty());

    let again = ledger
        .create_schedule(spec(id, "0 * * * *"), meta("bob", t0))
        .await;
    assert_eq!(again.unwrap_err().code(), "SCHEDULE_ALREADY_EXISTS");

    // A run recorded before the archive stays readable after it.
    let run = scheduled_run(&created.spec, t0 + Duration::minutes(15), t0, "ticker");
    ledger.create_run(&run).await.expect("run");

    let t1 = t0 + Duration::hours(1);
    let paused = ledger
        .pause_schedule(id, None, meta("ops", t1))
        .await
        .expect("pause");
    assert_eq!((paused.version, paused.state), (2, ScheduleState::Paused));
    assert_eq!(paused.pauses.len(), 1);
    assert_eq!(paused.pauses[0].note, "ops did it");
    assert!(paused.paused_at(t1 + Duration::minutes(1)) && !paused.paused_at(t0));
    assert!(
        due_ids(&env, id, t1 + Duration::days(1)).await.is_empty(),
        "paused is not due"
    );
    let twice = ledger.pause_schedule(id, None, meta("ops", t1)).await;
    assert_eq!(twice.unwrap_err().code(), "STORE_INVALID_REQUEST");

    let t2 = t1 + Duration::hours(2);
    let resumed = ledger
        .resume_schedule(id, Some(2), meta("ops", t2))
        .await
        .expect("resume");
    assert_eq!((resumed.version, resumed.state), (3, ScheduleState::Active));
    assert_eq!(resumed.pauses[0].until, Some(t2));
    assert!(resumed.paused_at(t2 - Duration::minutes(1)) && !resumed.paused_at(t2));
    assert_eq!(resumed.next_run_at, Some(t2 + Duration::minutes(15)));
    assert_eq!(due_ids(&env, id, t2 + Duration::minutes(15)).await, [id]);

    let stale = ledger
        .update_schedule(spec(id, "0 * * * *"), 1, meta("bob", t2))
        .await;
    match stale {
        Err(StoreError::VersionConflict {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (1, 3)),
        other => panic!("expected a version conflict, got {other:?}"),
    }

    let t3 = t2 + Duration::hours(1);
    let archived = ledger
        .archive_schedule(id, Some(3), meta("alice", t3))
        .await
        .expect("archive");
    assert_eq!(
        (archived.version, archived.state),
        (4, ScheduleState::Archived)
    );
    assert!(due_ids(&env, id, t3 + Duration::days(1)).await.is_empty());
    let after = ledger
        .update_schedule(spec(id, "0 * * * *"), 4, meta("bob", t3))
        .await;
    assert_eq!(after.unwrap_err().code(), "SCHEDULE_ARCHIVED");
    assert_eq!(
        ledger
            .get_schedule(id)
            .await
            .expect("still readable")
            .version,
        4
    );
    let history = ledger.run_history(id, 10, None).await.expect("history");
    assert_eq!(history.items, [run]);

    let audit = ledger.audit_log(id).await.expect("audit");
    let trail: Vec<(u64, AuditAction, &str)> = audit
        .iter()
        .map(|a| (a.version, a.action, a.actor.as_str()))
        .collect();
    assert_eq!(
        trail,
        [
            (1, AuditAction::Create, "alice"),
            (2, AuditAction::Pause, "ops"),
            (3, AuditAction::Resume, "ops"),
            (4, AuditAction::Archive, "alice"),
        ]
    );
    assert_eq!(
        audit[3].before.as_ref().map(|b| b["state"].clone()),
        Some("ACTIVE".into())
    );
    assert_eq!(audit[3].after["state"], "ARCHIVED");

    let missing = ledger.get_schedule("nobody").await.unwrap_err();
    assert_eq!(missing.code(), "SCHEDULE_NOT_FOUND");
    let missing = ledger
        .update_schedule(spec("nobody", "0 * * * *"), 1, meta("bob", t3))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), "SCHEDULE_NOT_FOUND");
}

#[tokio::test]
async fn each_version_spec_reads_back_from_its_audit_entry() {
    let env = TestLedger::new().await;
    let ledger = &env.ledger;
    let id = "versions";
    let t0 = t("2026-03-01T00:00:00Z");
    let job = |tag: &str| json!({"job": {"type": "noop", "payload": {"target": tag}}});
    let v1 = spec_with(id, "*/15 * * * *", job("one"));
    let v2 = spec_with(id, "0 * * * *", job("two"));
    let v3 = spec_with(id, "0 * * * *", job("three"));
    ledger
        .create_schedule(v1.clone(), meta("alice", t0))
        .await
        .expect("create");
    ledger
        .update_schedule(v2.clone(), 1, meta("bob", t0 + Duration::minutes(1)))
        .await
        .expect("update to 2");
    ledger
        .update_schedule(v3.clone(), 2, meta("bob", t0 + Duration::minutes(2)))
        .await
        .expect("update to 3");
    // An operator's action under version 3 sorts beside its entry, never in its place.
    ledger
        .record_operator_action(&cronledger_aws::OperatorAction {
            schedule_id: id.into(),
            action: AuditAction::RunRetry,
            actor: "ops".into(),
            reason: "retried".into(),
            at: t0 + Duration::minutes(3),
            details: json!({"run": "x"}),
        })
        .await
        .expect("operator action");

    for (version, expected) in [(1, &v1), (2, &v2), (3, &v3)] {
        let read = ledger.schedule_spec_at(id, version).await;
        assert_eq!(read.as_ref().ok(), Some(expected), "version {version}");
    }
    let meter = env.clients.meter.snapshot();
    assert_eq!(meter.scope("schedule_spec_at").calls, 3, "one read each");

    for (schedule, version) in [(id, 4), (id, 0), ("never-created", 1)] {
        let missing = ledger.schedule_spec_at(schedule, version).await;
        assert_eq!(
            missing.map_err(|e| e.code()).err(),
            Some("SCHEDULE_VERSION_NOT_FOUND"),
            "{schedule} v{version}"
        );
    }
}

#[tokio::test]
async fn only_a_retry_re_pins_a_run_to_another_schedule_version() {
    let env = TestLedger::new().await;
    let ledger = &env.ledger;
    let t0 = t("2026-03-01T00:00:00Z");
    let spec = spec("repin", "*/5 * * * *");
    let run = scheduled_run(&spec, t0 + Duration::minutes(5), t0, "ticker");
    ledger.create_run(&run).await.expect("run");
    let at = t0 + Duration::minutes(5);
    let step = |event, from, epoch| RunChange::new(event, from, epoch, at);

    let mut enqueue = step(RunEvent::Enqueue, RunStatus::Pending, 0);
    enqueue.schedule_version = Some(2);
    let refused = ledger.transition_run(&run.key, &enqueue).await;
    assert_eq!(
        refused.map_err(|e| e.code()).err(),
        Some("STORE_INVALID_REQUEST")
    );
    enqueue.schedule_version = None;
    ledger
        .transition_run(&run.key, &enqueue)
        .await
        .expect("enqueue");
    let start =
        step(RunEvent::Start, RunStatus::Queued, 0).with_lease("w", at + Duration::minutes(1));
    ledger
        .transition_run(&run.key, &start)
        .await
        .expect("start");
    let fail = step(RunEvent::Fail, RunStatus::Running, 1);
    let failed = ledger.transition_run(&run.key, &fail).await.expect("fail");
    assert_eq!(
        failed.schedule_version, 1,
        "a plain change keeps the version"
    );

    let mut retry = step(RunEvent::Retry, RunStatus::Failed, 1);
    retry.schedule_version = Some(3);
    let reopened = ledger
        .transition_run(&run.key, &retry)
        .await
        .expect("retry");
    assert_eq!(
        (reopened.status, reopened.schedule_version),
        (RunStatus::Pending, 3)
    );
    // The window and business inputs stay as created.
    assert_eq!(
        (&reopened.window, reopened.business_date, &reopened.cron),
        (&run.window, run.business_date, &run.cron)
    );
    assert_eq!(ledger.get_run(&run.key).await.expect("get"), reopened);
}

#[tokio::test]
async fn schedules_list_in_pages() {
    let env = TestLedger::new().await;
    let t0 = t("2026-03-01T00:00:00Z");
    for id in ["a", "b", "c"] {
        env.ledger
            .create_schedule(spec(id, "0 * * * *"), meta("alice", t0))
            .await
            .expect("create");
    }
    let mut ids = Vec::new();
    let mut cursor = None;
    for _ in 0..10 {
        let page = env
            .ledger
            .list_schedules(2, cursor.as_deref())
            .await
            .expect("list");
        ids.extend(page.items.into_iter().map(|s| s.spec.id));
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(ids, ["a", "b", "c"]);
}

/// A lost fire as (who wrote the existing run, whether the schedule had moved).
fn lost(outcome: Result<FireOutcome, StoreError>) -> (Option<String>, bool) {
    match outcome.expect("fire") {
        FireOutcome::Lost {
            existing,
            schedule_moved,
        } => (existing.and_then(|r| r.replay_group_id), schedule_moved),
        FireOutcome::Created => panic!("expected a lost race, the run was created"),
    }
}

#[tokio::test]
async fn the_ticker_writes_the_run_and_moves_the_schedule_in_one_transaction() {
    let env = TestLedger::new().await;
    let ledger = &env.ledger;
    let t0 = t("2026-03-01T00:00:00Z");
    let id = "tick";
    let schedule = ledger
        .create_schedule(spec(id, "* * * * *"), meta("alice", t0))
        .await
        .expect("create");
    let first = t0 + Duration::minutes(1);
    assert_eq!(schedule.next_run_at, Some(first));

    let fire_at = |at: DateTime<Utc>, expected: DateTime<Utc>, writer: &str| Fire {
        run: scheduled_run(&schedule.spec, at, at, writer),
        expected_next_run_at: expected,
        next_run_at: Some(at + Duration::minutes(1)),
    };

    // Ticker A wins the first minute; one request for the fired run.
    let before = env.clients.meter.snapshot().scope("fire");
    let won = ledger
        .fire(&fire_at(first, first, "a"))
        .await
        .expect("fire");
    assert_eq!(won, FireOutcome::Created);
    let cost = env.clients.meter.snapshot().scope("fire");
    assert_eq!(cost.calls - before.calls, 1, "one request per fired run");
    // Two items in a transaction cost 2 x 2 write units. DynamoDB Local reports them;
    // moto does not report capacity at all.
    if std::env::var("CRONLEDGER_DYNAMODB_BACKEND").as_deref() == Ok("dynamodb-local") {
        assert!(cost.write_units - before.write_units >= 4.0, "{cost:?}");
    }
    let moved = ledger.get_schedule(id).await.expect("get");
    assert_eq!(moved.next_run_at, Some(first + Duration::minutes(1)));
    assert_eq!(due_ids(&env, id, first).await, Vec::<String>::new());

    // Ticker B read the same due entry: it loses both conditions, and learns what exists.
    let b = ledger.fire(&fire_at(first, first, "b")).await;
    assert_eq!(lost(b), (Some("a".into()), true));

    // The reconciler wrote the next minute first: the ticker learns it, nothing moves, and
    // it then advances the schedule alone (once).
    let second = first + Duration::minutes(1);
    ledger
        .create_run(&scheduled_run(&schedule.spec, second, second, "reconciler"))
        .await
        .expect("reconciler run");
    let a = ledger.fire(&fire_at(second, second, "a")).await;
    assert_eq!(lost(a), (Some("reconciler".into()), false));
    let third = second + Duration::minutes(1);
    assert!(ledger
        .advance_next_run(id, second, Some(third))
        .await
        .expect("advance"));
    assert!(!ledger
        .advance_next_run(id, second, Some(third))
        .await
        .expect("again"));

    // An edit between the ticker's read and its write: the ticker's version is stale, so
    // nothing is written, not even the run.
    let mut edited = schedule.spec.clone();
    edited.owner = Some("someone-else".into());
    ledger
        .update_schedule(edited, 1, meta("bob", third))
        .await
        .expect("edit");
    let a = ledger.fire(&fire_at(third, third, "a")).await;
    assert_eq!(lost(a), (None, true));
    let runs = ledger.runs_between(id, third, third).await.expect("runs");
    assert!(runs.is_empty(), "no run written by a losing transaction");

    // The reconciler's watermark only moves forward, and only from where it was read.
    assert!(ledger
        .advance_watermark(id, t0, third)
        .await
        .expect("watermark"));
    assert!(!ledger
        .advance_watermark(id, t0, third)
        .await
        .expect("stale"));
    let back = ledger.advance_watermark(id, third, t0).await;
    assert_eq!(back.unwrap_err().code(), "STORE_INVALID_REQUEST");
    // The edit did not undo the ticker's position.
    assert_eq!(
        ledger.get_schedule(id).await.expect("get").next_run_at,
        Some(third)
    );
}

#[tokio::test]
async fn a_batch_of_fires_writes_every_run_and_advance_or_nothing() {
    let env = TestLedger::new().await;
    let ledger = &env.ledger;
    let t0 = t("2026-03-01T00:00:00Z");
    let first = t0 + Duration::minutes(1);
    let mut schedules = Vec::new();
    for id in ["b1", "b2", "b3"] {
        let created = ledger
            .create_schedule(spec(id, "* * * * *"), meta("alice", t0))
            .await
            .expect("create");
        schedules.push(created);
    }
    let fires_at = |at: DateTime<Utc>| -> Vec<Fire> {
        schedules
            .iter()
            .map(|s| Fire {
                run: scheduled_run(&s.spec, at, at, "batch"),
                expected_next_run_at: at,
                next_run_at: Some(at + Duration::minutes(1)),
            })
            .collect()
    };
    let before = env.clients.meter.snapshot().scope("fire_all");
    assert!(ledger.fire_all(&fires_at(first)).await.expect("batch"));
    let cost = env.clients.meter.snapshot().scope("fire_all");
    assert_eq!(
        cost.calls - before.calls,
        1,
        "one request for three fired runs"
    );
    for s in &schedules {
        let runs = ledger
            .runs_between(s.id(), first, first)
            .await
            .expect("runs");
        assert_eq!(runs.len(), 1);
        let moved = ledger.get_schedule(s.id()).await.expect("get");
        assert_eq!(moved.next_run_at, Some(first + Duration::minutes(1)));
    }

    // The reconciler recorded b2's next minute first: the whole batch is refused and none
    // of its runs or advances is written; each fire then learns its own fate alone.
    let second = first + Duration::minutes(1);
    ledger
        .create_run(&scheduled_run(
            &schedules[1].spec,
            second,
            second,
            "reconciler",
        ))
        .await
        .expect("reconciler run");
    assert!(!ledger.fire_all(&fires_at(second)).await.expect("refused"));
    for (s, expected_runs) in schedules.iter().zip([0, 1, 0]) {
        let runs = ledger
            .runs_between(s.id(), second, second)
            .await
            .expect("runs");
        assert_eq!(runs.len(), expected_runs, "{}", s.id());
        let unmoved = ledger.get_schedule(s.id()).await.expect("get");
        assert_eq!(unmoved.next_run_at, Some(second), "{}", s.id());
    }
    let alone = ledger.fire(&fires_at(second)[0]).await.expect("alone");
    assert_eq!(alone, FireOutcome::Created);

    let too_many: Vec<Fire> = (0..51).map(|_| fires_at(second)[2].clone()).collect();
    let refused = ledger.fire_all(&too_many).await;
    assert_eq!(refused.unwrap_err().code(), "STORE_INVALID_REQUEST");
}

#[tokio::test]
async fn runs_list_newest_first_by_window_range_and_while_active() {
    let env = TestLedger::new().await;
    let ledger = &env.ledger;
    let id = "hist";
    let spec = spec(id, "* * * * *");
    let t0 = t("2026-03-01T00:00:00Z");
    let minute = |m: i64| t0 + Duration::minutes(m);
    for m in 0..25 {
        let run = scheduled_run(&spec, minute(m), minute(m), "ticker");
        assert!(ledger.create_run(&run).await.expect("create").is_new());
    }
    let base = scheduled_run(&spec, minute(10), minute(30), "operator");
    for request in ["req-1", "req-2"] {
        let manual = manual_run(&base, request);
        assert!(ledger.create_run(&manual).await.expect("manual").is_new());
    }

    // Found, not overwritten: the stored run comes back.
    let again = scheduled_run(&spec, minute(3), minute(40), "late");
    let found = ledger.create_run(&again).await.expect("again");
    assert!(!found.is_new());
    assert_eq!(found.run().replay_group_id.as_deref(), Some("ticker"));

    // Created in a status a run cannot start in: refused before any I/O.
    let mut running = again.clone();
    running.status = RunStatus::Running;
    assert_eq!(
        ledger.create_run(&running).await.unwrap_err().code(),
        "STORE_INVALID_REQUEST"
    );

    // History: newest first, in pages, 27 in all.
    let mut seen = Vec::new();
    let mut cursor = None;
    for _ in 0..10 {
        let page = ledger
            .run_history(id, 10, cursor.as_deref())
            .await
            .expect("history");
        seen.extend(page.items.into_iter().map(|r| r.key));
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(seen.len(), 27);
    assert!(
        seen.windows(2).all(|w| w[0].sort_key() > w[1].sort_key()),
        "newest first"
    );
    assert_eq!(seen[0].scheduled_for, minute(24));
    let bad = ledger.run_history(id, 10, Some("not-a-cursor")).await;
    assert_eq!(bad.unwrap_err().code(), "STORE_BAD_CURSOR");

    // A window range, operator runs included, in one request.
    let before = env.clients.meter.snapshot().scope("runs_between").calls;
    let range = ledger
        .runs_between(id, minute(5), minute(10))
        .await
        .expect("range");
    assert_eq!(
        env.clients.meter.snapshot().scope("runs_between").calls - before,
        1
    );
    let times: Vec<_> = range.iter().map(|r| r.key.scheduled_for).collect();
    assert_eq!(
        times,
        [5, 6, 7, 8, 9, 10, 10, 10].map(minute),
        "expected and operator runs of [5, 10]"
    );

    // Active runs: all 27 are PENDING; one skipped leaves, one enqueued changes status.
    let shard = shard_of(id, SHARDS);
    let active = |status| async move {
        ledger
            .active_runs(shard, status, 100, None)
            .await
            .expect("active")
            .items
    };
    assert_eq!(active(None).await.len(), 27);
    let skip = RunChange::new(RunEvent::Skip, RunStatus::Pending, 0, minute(30));
    ledger.transition_run(&seen[0], &skip).await.expect("skip");
    let enqueue = RunChange::new(RunEvent::Enqueue, RunStatus::Pending, 0, minute(30));
    let queued = ledger
        .transition_run(&seen[1], &enqueue)
        .await
        .expect("enqueue");
    assert_eq!(queued.queued_at, Some(minute(30)));
    assert_eq!(active(None).await.len(), 26);
    let queued_now: Vec<_> = active(Some(RunStatus::Queued))
        .await
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(queued_now, [seen[1].clone()]);
    assert_eq!(active(Some(RunStatus::Pending)).await.len(), 25);
}

#[tokio::test]
async fn recent_runs_sends_only_runs_in_flight_and_at_the_instant_and_says_how_far_it_read() {
    let env = TestLedger::new().await;
    let ledger = &env.ledger;
    let id = "recent";
    let spec = spec(id, "* * * * *");
    let t0 = t("2026-03-01T00:00:00Z");
    let minute = |m: i64| t0 + Duration::minutes(m);
    // Minutes 0..30: every fifth PENDING, the rest SKIPPED; an operator's run at minute 20.
    for m in 0..30 {
        let mut run = scheduled_run(&spec, minute(m), minute(m), "ticker");
        if m % 5 != 0 {
            run.status = RunStatus::Skipped;
        }
        ledger.create_run(&run).await.expect("create");
    }
    let mut operator = manual_run(&scheduled_run(&spec, minute(20), minute(20), "op"), "req");
    operator.status = RunStatus::Skipped;
    ledger.create_run(&operator).await.expect("manual");

    let minutes = |runs: &[cronledger_core::Run]| -> Vec<i64> {
        runs.iter()
            .map(|r| (r.key.scheduled_for - t0).num_minutes())
            .collect()
    };
    // The newest 10 are minutes 29..21 and the operator's run at 20 (it sorts after minute 20's
    // own key): in flight only 25; at 20, both runs of that instant too.
    let recent = ledger.recent_runs(id, 10, None).await.expect("recent");
    assert_eq!(minutes(&recent.runs), [25]);
    assert!(!recent.complete);
    assert_eq!(recent.oldest_read, Some(minute(20)));
    let at_20 = ledger
        .recent_runs(id, 12, Some(minute(20)))
        .await
        .expect("recent at 20");
    assert_eq!(minutes(&at_20.runs), [25, 20, 20]);
    assert_eq!(at_20.oldest_read, Some(minute(19)));
    // Read to the end: complete, every run in flight.
    let all = ledger.recent_runs(id, 100, None).await.expect("all");
    assert!(all.complete);
    assert_eq!(minutes(&all.runs), [25, 20, 15, 10, 5, 0]);

    // With the schedule, in one query: the same pages. The runs have no schedule item yet.
    let err = ledger
        .schedule_with_recent_runs(id, 12, Some(minute(20)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::ScheduleNotFound(_)), "{err}");
    ledger
        .create_schedule(spec.clone(), meta("op", t0))
        .await
        .expect("schedule");
    let scope = "schedule_with_recent_runs";
    let before = env.clients.meter.snapshot().scope(scope).attempts;
    let (stored, with_schedule) = ledger
        .schedule_with_recent_runs(id, 12, Some(minute(20)))
        .await
        .expect("schedule with recent");
    let requests = env.clients.meter.snapshot().scope(scope).attempts - before;
    assert_eq!(requests, 1);
    assert_eq!(stored.id(), id);
    assert_eq!(with_schedule, at_20);
    let (_, everything) = ledger
        .schedule_with_recent_runs(id, 100, None)
        .await
        .expect("everything");
    assert_eq!(everything, all);
}
