//! The ticker's transaction, batches of fires, and the run listings.

use chrono::{DateTime, Duration, Utc};
use cronledger_aws::keys::shard_of;
use cronledger_aws::ledger::{LeaseGrant, Opening, Transition};
use cronledger_aws::{Fire, FireOutcome, RunChange, StoreError};
use cronledger_core::{RunEvent, RunStatus};
use cronledger_tests::bare;
use cronledger_tests::{manual_run, scheduled_run, spec, t, SHARDS};

use crate::{conformance, due_ids, meta, Backend};

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

conformance! {
    async fn the_due_index_answers_in_firing_order_up_to_the_limit(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-03-01T00:00:00Z");
        let crons = ["*/7 * * * *", "*/3 * * * *", "*/5 * * * *", "*/2 * * * *", "*/9 * * * *"];
        let mut ids = Vec::new();
        for (n, cron) in crons.iter().enumerate() {
            for copy in 0..2 {
                let id = format!("due-{n}-{copy}");
                ledger
                    .create_schedule(spec(&id, cron), meta("t", t0))
                    .await
                    .expect("create");
                ids.push(id);
            }
        }
        ledger
            .pause_schedule("due-3-0", None, meta("t", t0))
            .await
            .expect("pause");
        let until = t0 + Duration::minutes(6);
        let mut seen = 0;
        for shard in 0..SHARDS {
            let due = ledger.due_schedules(shard, until, 100).await.expect("due");
            let order: Vec<_> = due.iter().map(|s| (s.next_run_at, s.spec.id.clone())).collect();
            let mut sorted = order.clone();
            sorted.sort();
            assert_eq!(order, sorted, "shard {shard} in firing order");
            assert!(due.iter().all(|s| s.shard == shard && s.spec.id != "due-3-0"));
            assert!(due.iter().all(|s| s.next_run_at.is_some_and(|n| n <= until)));
            if let Some(first) = due.first() {
                let one = ledger.due_schedules(shard, until, 1).await.expect("one");
                assert_eq!(one.len(), 1);
                assert_eq!(one[0].spec.id, first.spec.id);
            }
            seen += due.len();
        }
        // By minute six: the three- and five-minute pairs and the two-minute one not paused.
        assert_eq!(seen, 5);

        let late = ids.iter().find(|id| id.starts_with("due-1-")).expect("an id");
        let shard = shard_of(late, SHARDS);
        let stored = ledger.get_schedule(late).await.expect("get");
        let at = stored.next_run_at.expect("fires");
        assert!(ledger.advance_next_run(late, at, None).await.expect("advance"));
        assert!(!ledger.advance_next_run(late, at, None).await.expect("stale"));
        let due = ledger.due_schedules(shard, until, 100).await.expect("due");
        assert!(due.iter().all(|s| &s.spec.id != late), "no longer due");
    }

    async fn pending_live_runs_and_running_before_read_the_active_index(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-03-01T00:00:00Z");
        let minute = |n: i64| t0 + Duration::minutes(n);
        let spec = spec("h", "* * * * *");
        for n in 1..=3 {
            ledger
                .create_run(&scheduled_run(&spec, minute(n), t0, "w"))
                .await
                .expect("create");
        }
        let mut catch_up = scheduled_run(&spec, minute(4), t0, "w");
        catch_up.trigger = cronledger_core::Trigger::CatchUp;
        ledger.create_run(&catch_up).await.expect("create");
        let shard = shard_of("h", SHARDS);
        let pending = ledger
            .pending_live_runs(shard, minute(2), minute(4), 10)
            .await
            .expect("pending");
        let windows: Vec<_> = pending.iter().map(|r| r.key.scheduled_for).collect();
        assert_eq!(windows, [minute(2), minute(3)], "catch-up runs wait for their release");

        let first = scheduled_run(&spec, minute(1), t0, "w").key;
        let start =
            RunChange::open(Opening::Start, RunStatus::Pending, 0, minute(1), "w", minute(2));
        ledger.transition_run(&first, &start).await.expect("start");
        let running = ledger.running_before("h", minute(2)).await.expect("running");
        assert_eq!(running.len(), 1);
        assert!(ledger.running_before("h", minute(1)).await.expect("none").is_empty());
        assert!(ledger.running_before("other", minute(2)).await.expect("other").is_empty());
    }

    async fn step_checkpoints_ride_on_transitions_and_survive_a_hand_over(env: Env) {
        use cronledger_core::steps::{self as steps_core, Step, StepStatus};
        let ledger = &env.ledger;
        let t0 = t("2026-03-01T00:00:00Z");
        let spec = spec("stepped", "*/5 * * * *");
        let run = scheduled_run(&spec, t0 + Duration::minutes(5), t0, "ticker");
        ledger.create_run(&run).await.expect("run");
        let at = t0 + Duration::minutes(5);
        let list: Vec<Step> = serde_json::from_value(serde_json::json!([
            {"name": "collect", "type": "noop"}, {"name": "upload", "type": "noop"}
        ]))
        .expect("steps");
        let lease = |owner: &str, minutes| LeaseGrant::new(owner, at + Duration::minutes(minutes));
        let opening = Transition::Open {
            event: Opening::Start,
            lease: lease("w", 1),
            steps: Some(steps_core::start(&list, &[], 0, at)),
        };
        let start = RunChange::new(RunStatus::Pending, 0, at, opening);
        let started = ledger.transition_run(&run.key, &start).await.expect("start");
        assert_eq!(started.steps[0].status, StepStatus::Running);

        let output = serde_json::json!({"rows": 3});
        let hand_over = Transition::HandOver {
            lease: lease("handover", 1),
            steps: steps_core::end(&started.steps, 0, at, Ok(Some(output.clone()))),
        };
        let advance = RunChange::new(RunStatus::Running, 1, at, hand_over);
        let handed = ledger.transition_run(&run.key, &advance).await.expect("advance");
        assert_eq!(handed.status, RunStatus::Running);
        assert!(steps_core::handed_over(&handed.steps));
        assert_eq!(handed.steps[0].output, Some(output));

        // Two takers of the next step's message: one starts it under a new epoch.
        let taking = Transition::Open {
            event: Opening::StartStep,
            lease: lease("w2", 1),
            steps: Some(steps_core::start(&list, &handed.steps, 1, at)),
        };
        let take = RunChange::new(RunStatus::Running, 1, at, taking);
        let taken = ledger.transition_run(&run.key, &take).await.expect("take");
        assert_eq!((taken.lease_epoch, taken.attempts), (2, 2));
        let again = ledger.transition_run(&run.key, &take).await;
        assert_eq!(again.map_err(|e| e.code()).err(), Some("RUN_LEASE_LOST"));

        // A change without checkpoints keeps the stored ones.
        let hb = RunChange::heartbeat(2, at, "w2", at + Duration::minutes(2));
        let beat = ledger.transition_run(&run.key, &hb).await.expect("heartbeat");
        assert_eq!(beat.steps, taken.steps);
        assert_eq!(ledger.get_run(&run.key).await.expect("get"), beat);
    }

    async fn only_a_retry_re_pins_a_run_to_another_schedule_version(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-03-01T00:00:00Z");
        let spec = spec("repin", "*/5 * * * *");
        let run = scheduled_run(&spec, t0 + Duration::minutes(5), t0, "ticker");
        ledger.create_run(&run).await.expect("run");
        let at = t0 + Duration::minutes(5);
        let step = |event, from, epoch| bare(event, from, epoch, at);

        // Only a retry can carry a schedule version: an enqueue has no field for one, and
        // a bare decision cannot stand in for a retry.
        let refused = ledger
            .transition_run(&run.key, &RunChange::decide(RunEvent::Retry, RunStatus::Pending, 0, at, None))
            .await;
        assert_eq!(
            refused.map_err(|e| e.code()).err(),
            Some("STORE_INVALID_REQUEST")
        );
        let enqueue = step(RunEvent::Enqueue, RunStatus::Pending, 0);
        ledger
            .transition_run(&run.key, &enqueue)
            .await
            .expect("enqueue");
        let start =
            RunChange::open(Opening::Start, RunStatus::Queued, 0, at, "w", at + Duration::minutes(1));
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

        let repinned = Transition::Retry {
            reason: None,
            schedule_version: Some(3),
            cascade: Some(true),
        };
        let retry = RunChange::new(RunStatus::Failed, 1, at, repinned);
        let reopened = ledger
            .transition_run(&run.key, &retry)
            .await
            .expect("retry");
        assert_eq!(
            (reopened.status, reopened.schedule_version, reopened.cascade),
            (RunStatus::Pending, 3, true),
            "the retry's cascade is stored with it"
        );
        // The window and business inputs stay as created.
        assert_eq!(
            (&reopened.window, reopened.business_date, &reopened.cron),
            (&run.window, run.business_date, &run.cron)
        );
        assert_eq!(ledger.get_run(&run.key).await.expect("get"), reopened);
    }

    async fn the_ticker_writes_the_run_then_moves_the_schedule(env: Env) {
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

        // Ticker A wins the first minute: two plain requests (the run, then the schedule).
        let before = env.meter.snapshot().scope("fire");
        let won = ledger
            .fire(&fire_at(first, first, "a"))
            .await
            .expect("fire");
        assert_eq!(won, FireOutcome::Created);
        let cost = env.meter.snapshot().scope("fire");
        assert_eq!(cost.calls - before.calls, 2, "two requests per fired run");
        // Outside a transaction each item costs its own units once: the run's put (and its
        // `active` entry), the schedule's update (and its `due` entry moving: two). DynamoDB
        // Local reports them and the memory store charges by the same rules; moto reports no
        // capacity at all.
        if env.backend == Backend::Memory
            || std::env::var("CRONLEDGER_DYNAMODB_BACKEND").as_deref() == Ok("dynamodb-local")
        {
            let units = cost.write_units - before.write_units;
            assert!((2.0..8.0).contains(&units), "{cost:?}");
        }
        let moved = ledger.get_schedule(id).await.expect("get");
        assert_eq!(moved.next_run_at, Some(first + Duration::minutes(1)));
        assert_eq!(due_ids(&env, id, first).await, Vec::<String>::new());

        // Ticker B read the same due entry: it loses to A's run and learns it (its advance
        // then finds the schedule moved).
        let b = ledger.fire(&fire_at(first, first, "b")).await;
        assert_eq!(lost(b), (Some("a".into()), false));
        assert!(!ledger
            .advance_next_run(id, first, Some(first + Duration::minutes(1)))
            .await
            .expect("advance"));

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
        // its run is taken back and nothing stays written.
        let mut edited = schedule.spec.clone();
        edited.owner = Some("someone-else".into());
        ledger
            .update_schedule(edited, 1, meta("bob", third))
            .await
            .expect("edit");
        let a = ledger.fire(&fire_at(third, third, "a")).await;
        assert_eq!(lost(a), (None, true));
        let runs = ledger.runs_between(id, third, third).await.expect("runs");
        assert!(runs.is_empty(), "no run left by a fire that lost to an edit");

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

    async fn a_batch_of_fires_answers_for_each_fire(env: Env) {
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
        let outcomes = ledger.fire_all(&fires_at(first)).await.expect("batch");
        assert_eq!(outcomes, vec![FireOutcome::Created; 3]);
        for s in &schedules {
            let runs = ledger
                .runs_between(s.id(), first, first)
                .await
                .expect("runs");
            assert_eq!(runs.len(), 1);
            let moved = ledger.get_schedule(s.id()).await.expect("get");
            assert_eq!(moved.next_run_at, Some(first + Duration::minutes(1)));
        }

        // The reconciler recorded b2's next minute first: b2's fire alone loses (and says to
        // whom); the others are written and advanced.
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
        let mut outcomes = ledger.fire_all(&fires_at(second)).await.expect("batch");
        assert_eq!(outcomes.len(), 3);
        let b2 = outcomes.remove(1);
        assert_eq!(lost(Ok(b2)), (Some("reconciler".into()), false));
        assert_eq!(outcomes, vec![FireOutcome::Created; 2]);
        for (s, next) in schedules.iter().zip([3, 2, 3]) {
            let runs = ledger
                .runs_between(s.id(), second, second)
                .await
                .expect("runs");
            assert_eq!(runs.len(), 1, "{}", s.id());
            let schedule = ledger.get_schedule(s.id()).await.expect("get");
            assert_eq!(
                schedule.next_run_at,
                Some(t0 + Duration::minutes(next)),
                "{}",
                s.id()
            );
        }

        let too_many: Vec<Fire> = (0..51).map(|_| fires_at(second)[2].clone()).collect();
        let refused = ledger.fire_all(&too_many).await;
        assert_eq!(refused.unwrap_err().code(), "STORE_INVALID_REQUEST");
    }

    async fn runs_list_newest_first_by_window_range_and_while_active(env: Env) {
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
        let before = env.meter.snapshot().scope("runs_between").calls;
        let range = ledger
            .runs_between(id, minute(5), minute(10))
            .await
            .expect("range");
        assert_eq!(
            env.meter.snapshot().scope("runs_between").calls - before,
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
        let skip = bare(RunEvent::Skip, RunStatus::Pending, 0, minute(30));
        ledger.transition_run(&seen[0], &skip).await.expect("skip");
        let enqueue = RunChange::enqueue(RunStatus::Pending, 0, minute(30));
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

    async fn recent_runs_sends_only_runs_in_flight_and_at_the_instant_and_says_how_far_it_read(env: Env) {
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
        let before = env.meter.snapshot().scope(scope).attempts;
        let (stored, with_schedule) = ledger
            .schedule_with_recent_runs(id, 12, Some(minute(20)))
            .await
            .expect("schedule with recent");
        let requests = env.meter.snapshot().scope(scope).attempts - before;
        assert_eq!(requests, 1);
        assert_eq!(stored.id(), id);
        assert_eq!(with_schedule, at_20);
        let (_, everything) = ledger
            .schedule_with_recent_runs(id, 100, None)
            .await
            .expect("everything");
        assert_eq!(everything, all);
    }
}
