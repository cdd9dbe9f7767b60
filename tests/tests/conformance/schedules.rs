//! The schedule lifecycle with its audit, each version's spec read back, and the listing.

use chrono::Duration;
use cronledger_aws::{AuditAction, ScheduleState, StoreError, StreakChange};
use cronledger_tests::{scheduled_run, spec, spec_with, t};
use serde_json::json;

use crate::{conformance, due_ids, meta};

conformance! {
    async fn schedules_are_created_paused_resumed_and_archived_with_an_audit_trail(env: Env) {
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

    async fn each_version_spec_reads_back_from_its_audit_entry(env: Env) {
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
        let meter = env.meter.snapshot();
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

    async fn schedules_list_in_pages(env: Env) {
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

    /// The failure streak lives on the schedule's state: failures add one each (however
    /// many workers end runs at once), a success ends it, an edit keeps it, a resume
    /// starts it again, and an unknown schedule is an error, not a new item.
    async fn the_failure_streak_counts_failures_in_a_row(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-03-01T00:00:00Z");
        let id = "streaky";
        ledger
            .create_schedule(spec(id, "*/5 * * * *"), meta("alice", t0))
            .await
            .expect("create");
        let adds = (0..6).map(|_| ledger.count_failure_streak(id, StreakChange::Failed));
        let mut seen: Vec<u32> = futures_util::future::join_all(adds)
            .await
            .into_iter()
            .map(|r| r.expect("count"))
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, [1, 2, 3, 4, 5, 6], "each failure answers its own count");
        let stored = ledger.get_schedule(id).await.expect("get");
        assert_eq!(stored.failure_streak, 6);

        let edited = ledger
            .update_schedule(spec(id, "*/10 * * * *"), stored.version, meta("bob", t0))
            .await
            .expect("edit");
        assert_eq!(edited.failure_streak, 6, "an edit keeps the streak");
        assert_eq!(ledger.get_schedule(id).await.expect("get").failure_streak, 6);

        let zero = ledger
            .count_failure_streak(id, StreakChange::Succeeded)
            .await
            .expect("success");
        assert_eq!(zero, 0);
        assert_eq!(ledger.get_schedule(id).await.expect("get").failure_streak, 0);

        ledger
            .count_failure_streak(id, StreakChange::Failed)
            .await
            .expect("count");
        ledger.pause_schedule(id, None, meta("cronledger", t0)).await.expect("pause");
        let resumed = ledger
            .resume_schedule(id, None, meta("carol", t0 + Duration::minutes(1)))
            .await
            .expect("resume");
        assert_eq!(resumed.failure_streak, 0, "a resume starts the count again");

        let unknown = ledger.count_failure_streak("nobody", StreakChange::Failed).await;
        assert_eq!(unknown.map_err(|e| e.code()).err(), Some("SCHEDULE_NOT_FOUND"));
        assert_eq!(
            ledger.get_schedule("nobody").await.map_err(|e| e.code()).err(),
            Some("SCHEDULE_NOT_FOUND"),
            "no item was created for it"
        );
    }

    async fn a_dependent_is_never_due_and_its_upstream_keeps_a_downstream_list_through_edits(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-03-01T00:00:00Z");
        let upstream = ledger
            .create_schedule(spec("collect", "0 * * * *"), meta("alice", t0))
            .await
            .expect("upstream");
        assert!(upstream.downstream.is_empty());
        let dependent = ledger
            .create_schedule(
                spec_with("report", "0 * * * *", json!({"after": ["collect"]})),
                meta("alice", t0),
            )
            .await
            .expect("dependent");
        // The ticker never fires it: no next run, not in the `due` index.
        assert_eq!(dependent.next_run_at, None);
        assert!(due_ids(&env, "report", t0 + Duration::days(1)).await.is_empty());

        let list = vec!["report".to_string()];
        ledger.set_downstream("collect", &list).await.expect("set");
        assert_eq!(ledger.get_schedule("collect").await.expect("get").downstream, list);
        // An edit of the upstream's rule keeps the list; its version does not move for it.
        let edited = ledger
            .update_schedule(spec("collect", "0 * * * *"), 1, meta("bob", t0))
            .await
            .expect("edit");
        assert_eq!((edited.version, edited.downstream.clone()), (2, list));
        ledger.set_downstream("collect", &[]).await.expect("clear");
        let cleared = ledger.get_schedule("collect").await.expect("get");
        assert!(cleared.downstream.is_empty());
        assert_eq!(cleared.version, 2);

        let missing = ledger.set_downstream("nobody", &[]).await;
        assert_eq!(missing.unwrap_err().code(), "SCHEDULE_NOT_FOUND");
    }
}
