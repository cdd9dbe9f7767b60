//! Invariants 1 and 6 under real concurrency: one run per window,
//! whoever races; one winner per schedule version, audited exactly once.

use std::collections::BTreeMap;

use chrono::Duration;
use cronledger_aws::{ChangeMeta, Created, StoreError};
use cronledger_tests::{scheduled_run, spec, t};

use crate::conformance;

const WRITERS: usize = 8;
const WINDOWS: usize = 1_000;

conformance! {
    async fn eight_writers_racing_over_a_thousand_windows_leave_exactly_one_run_each(env: Env) {
        let ledger = env.ledger.clone();
        let spec = spec("race", "* * * * *");
        let first = t("2026-03-01T00:00:00Z");
        let windows: Vec<_> = (0..WINDOWS)
            .map(|i| first + Duration::minutes(i as i64))
            .collect();

        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let (ledger, spec, windows) = (ledger.clone(), spec.clone(), windows.clone());
            tasks.push(tokio::spawn(async move {
                let name = format!("writer-{writer}");
                // Each writer walks the windows from a different offset so they really collide.
                let offset = writer * WINDOWS / WRITERS;
                let mut results = Vec::with_capacity(WINDOWS);
                for i in 0..WINDOWS {
                    let at = windows[(i + offset) % WINDOWS];
                    let run = scheduled_run(&spec, at, at, &name);
                    let created = ledger.create_run(&run).await.expect("create_run");
                    results.push((at, created));
                }
                (name, results)
            }));
        }

        let mut creator_of = BTreeMap::new();
        let mut created_total = 0;
        let mut answers = Vec::new();
        for task in tasks {
            let (name, results) = task.await.expect("writer task");
            for (at, created) in results {
                assert_eq!(
                    created.run().key.scheduled_for,
                    at,
                    "the answer is about the asked window"
                );
                if created.is_new() {
                    created_total += 1;
                    assert!(
                        creator_of.insert(at, name.clone()).is_none(),
                        "two writers were told they created {at}"
                    );
                }
                answers.push((name.clone(), at, created));
            }
        }
        assert_eq!(created_total, WINDOWS, "every window created exactly once");

        // Every "found" answer returned the stored run, and it is the creator's.
        for (name, at, created) in &answers {
            let creator = &creator_of[at];
            let recorded = created.run().replay_group_id.as_deref();
            assert_eq!(recorded, Some(creator.as_str()), "{name} at {at}");
            if let Created::Existing(_) = created {
                assert_ne!(
                    name, creator,
                    "{name} was told it found its own run at {at}"
                );
            }
        }

        // And the table holds exactly one item per window, each written by its creator.
        let stored = env
            .ledger
            .runs_between("race", windows[0], windows[WINDOWS - 1])
            .await
            .expect("runs_between");
        assert_eq!(stored.len(), WINDOWS);
        for run in &stored {
            assert_eq!(
                run.replay_group_id.as_deref(),
                Some(creator_of[&run.key.scheduled_for].as_str())
            );
        }

        // A found run costs one request, not a put and a get.
        let usage = env.meter.snapshot().scope("create_run");
        assert_eq!(usage.calls, (WRITERS * WINDOWS) as u64);
    }

    async fn eight_concurrent_edits_at_one_version_have_one_winner_and_one_audit_entry(env: Env) {
        let ledger = env.ledger.clone();
        let now = t("2026-03-01T00:00:00Z");
        let created = ledger
            .create_schedule(
                spec("edited", "0 * * * *"),
                ChangeMeta {
                    actor: "creator".into(),
                    reason: "new".into(),
                    at: now,
                    details: None,
                },
            )
            .await
            .expect("create");
        assert_eq!(created.version, 1);

        let mut tasks = Vec::new();
        for editor in 0..WRITERS {
            let ledger = ledger.clone();
            tasks.push(tokio::spawn(async move {
                let mut edited = spec("edited", &format!("{editor} * * * *"));
                edited.owner = Some(format!("editor-{editor}"));
                let meta = ChangeMeta {
                    actor: format!("editor-{editor}"),
                    reason: format!("edit {editor}"),
                    at: now + Duration::seconds(1),
                    details: None,
                };
                (editor, ledger.update_schedule(edited, 1, meta).await)
            }));
        }
        let mut winners = Vec::new();
        for task in tasks {
            match task.await.expect("editor task") {
                (editor, Ok(schedule)) => {
                    assert_eq!(schedule.version, 2);
                    winners.push(editor);
                }
                (
                    _,
                    Err(StoreError::VersionConflict {
                        expected, actual, ..
                    }),
                ) => {
                    assert_eq!((expected, actual), (1, 2));
                }
                (editor, Err(other)) => panic!("editor {editor}: unexpected {} {other}", other.code()),
            }
        }
        assert_eq!(winners.len(), 1, "exactly one edit wins: {winners:?}");
        let winner = format!("editor-{}", winners[0]);

        let stored = env.ledger.get_schedule("edited").await.expect("get");
        assert_eq!(stored.version, 2);
        assert_eq!(stored.spec.owner.as_deref(), Some(winner.as_str()));

        let audit = env.ledger.audit_log("edited").await.expect("audit");
        let versions: Vec<u64> = audit.iter().map(|a| a.version).collect();
        assert_eq!(versions, [1, 2], "one audit entry per version");
        let last = &audit[1];
        assert_eq!(last.actor, winner);
        assert_eq!(last.reason, format!("edit {}", winners[0]));
        assert_eq!(
            last.before.as_ref().map(|b| b["version"].clone()),
            Some(1.into())
        );
        assert_eq!(last.after["spec"]["owner"], serde_json::json!(winner));
        assert_eq!(audit[0].before, None);
    }
}
