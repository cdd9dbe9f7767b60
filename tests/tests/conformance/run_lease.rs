//! Invariant 4: a worker whose lease was taken over cannot change the run.

use chrono::Duration;
use cronledger_aws::ledger::{Ending, Opening};
use cronledger_aws::{RunChange, StoreError};
use cronledger_core::run::RunResult;
use cronledger_core::{Reason, RunEvent, RunStatus};
use cronledger_tests::bare;
use cronledger_tests::{scheduled_run, spec, t};

use crate::conformance;

conformance! {
    async fn a_stale_lease_epoch_is_rejected_and_changes_nothing(env: Env) {
        let ledger = &env.ledger;
        let at = t("2026-03-01T10:00:00Z");
        let run = scheduled_run(&spec("leased", "0 * * * *"), at, at, "ticker");
        assert!(ledger.create_run(&run).await.expect("create").is_new());

        // Worker A starts (epoch 0 -> 1), its lease expires, worker B reclaims (1 -> 2).
        let until = at + Duration::minutes(1);
        let start = RunChange::open(Opening::Start, RunStatus::Pending, 0, at, "worker-a", until);
        let a = ledger
            .transition_run(&run.key, &start)
            .await
            .expect("start");
        assert_eq!(
            (a.status, a.lease_epoch, a.attempts),
            (RunStatus::Running, 1, 1)
        );
        assert!(a.key.scheduled_for == at && a.lease.as_ref().is_some_and(|l| l.owner == "worker-a"));

        let later = at + Duration::minutes(5);
        let until = later + Duration::minutes(1);
        let reclaim =
            RunChange::open(Opening::Reclaim, RunStatus::Running, 1, later, "worker-b", until);
        let b = ledger
            .transition_run(&run.key, &reclaim)
            .await
            .expect("reclaim");
        assert_eq!((b.lease_epoch, b.attempts), (2, 2));

        // A comes back and reports success under its old epoch: refused, nothing written.
        let before = ledger.get_run(&run.key).await.expect("get");
        let counted = RunResult {
            count: Some(42),
            ..RunResult::default()
        };
        let stale = RunChange::end(Ending::Succeed, 1, later, counted.clone());
        match ledger.transition_run(&run.key, &stale).await {
            Err(StoreError::LeaseLost {
                expected, actual, ..
            }) => assert_eq!((expected, actual), (1, 2)),
            other => panic!("expected RUN_LEASE_LOST, got {other:?}"),
        }
        let after = ledger.get_run(&run.key).await.expect("get");
        assert_eq!(before, after, "a refused write changes nothing");

        // B, holding the current epoch, can finish; the run leaves the active index.
        let done = RunChange::end(Ending::Succeed, 2, later, counted);
        let finished = ledger
            .transition_run(&run.key, &done)
            .await
            .expect("succeed");
        assert_eq!(finished.status, RunStatus::Success);
        assert_eq!(finished.completed_at, Some(later));
        assert_eq!(finished.result.and_then(|r| r.count), Some(42));
        let shard = cronledger_aws::keys::shard_of("leased", cronledger_tests::SHARDS);
        let active = ledger
            .active_runs(shard, None, 100, None)
            .await
            .expect("active");
        assert!(
            active.items.iter().all(|r| r.key != run.key),
            "terminal runs leave the index"
        );
    }

    async fn status_conflicts_and_invalid_transitions_are_told_apart(env: Env) {
        let ledger = &env.ledger;
        let at = t("2026-03-01T11:00:00Z");
        let run = scheduled_run(&spec("guarded", "0 * * * *"), at, at, "ticker");
        ledger.create_run(&run).await.expect("create");

        // The caller thinks it is QUEUED; it is PENDING.
        let until = at + Duration::minutes(1);
        let wrong_status = RunChange::open(Opening::Start, RunStatus::Queued, 0, at, "w", until);
        match ledger.transition_run(&run.key, &wrong_status).await {
            Err(e @ StoreError::StatusConflict { .. }) => assert_eq!(e.code(), "RUN_STATUS_CONFLICT"),
            other => panic!("expected RUN_STATUS_CONFLICT, got {other:?}"),
        }

        // PENDING -> SUCCEED is not in the table: refused before any request is sent.
        let calls_before = env.meter.snapshot().scope("transition_run").calls;
        let invalid = bare(RunEvent::Succeed, RunStatus::Pending, 0, at);
        let err = ledger.transition_run(&run.key, &invalid).await.unwrap_err();
        assert_eq!(err.code(), "RUN_INVALID_TRANSITION");
        assert_eq!(
            env.meter.snapshot().scope("transition_run").calls,
            calls_before
        );

        // Missing run.
        let mut ghost = run.key.clone();
        ghost.scheduled_for = at + Duration::hours(1);
        let skip = bare(RunEvent::Skip, RunStatus::Pending, 0, at);
        let err = ledger.transition_run(&ghost, &skip).await.unwrap_err();
        assert_eq!(err.code(), "RUN_NOT_FOUND");

        // A valid skip records its reason and leaves the active index.
        let skip = RunChange::decide(RunEvent::Skip, RunStatus::Pending, 0, at, Some(Reason::Overlap));
        let skipped = ledger.transition_run(&run.key, &skip).await.expect("skip");
        assert_eq!(
            (skipped.status, skipped.reason),
            (RunStatus::Skipped, Some(Reason::Overlap))
        );
    }
}
