//! The shards' fire marks and catalogs: every schedule change moves its shard's catalog in
//! the same transaction, the mark moves only as read, the reconciler's fence only forward,
//! and a run written under a changed definition is taken back only while still as written.

use chrono::Duration;
use cronledger_aws::keys::shard_of;
use cronledger_aws::{ScheduleState, StoreError};
use cronledger_core::RunStatus;
use cronledger_tests::{scheduled_run, spec, t, SHARDS};

use crate::{conformance, meta};

conformance! {
    async fn every_schedule_change_moves_its_shards_catalog_in_the_same_write(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-03-01T00:00:00Z");
        let id = "catalogued";
        let shard = shard_of(id, SHARDS);
        let before = ledger.fire_mark(shard).await.expect("mark");
        assert_eq!(before.catalog_version, 0, "no change yet: {before:?}");

        let created = ledger
            .create_schedule(spec(id, "*/15 * * * *"), meta("alice", t0))
            .await
            .expect("create");
        let catalog = ledger.shard_catalog(shard).await.expect("catalog");
        assert_eq!(catalog, std::slice::from_ref(&created), "a copy of the schedule as written");
        let v1 = ledger.fire_mark(shard).await.expect("mark").catalog_version;
        assert_eq!(v1, 1);

        let paused = ledger
            .pause_schedule(id, None, meta("ops", t0 + Duration::hours(1)))
            .await
            .expect("pause");
        let catalog = ledger.shard_catalog(shard).await.expect("catalog");
        assert_eq!(catalog[0].state, ScheduleState::Paused);
        assert_eq!(catalog[0].version, paused.version);
        assert_eq!(ledger.fire_mark(shard).await.expect("mark").catalog_version, 2);

        ledger
            .archive_schedule(id, None, meta("ops", t0 + Duration::hours(2)))
            .await
            .expect("archive");
        assert!(ledger.shard_catalog(shard).await.expect("catalog").is_empty());
        assert_eq!(ledger.fire_mark(shard).await.expect("mark").catalog_version, 3);
        // The reconciler's watermark is not copied: the catalog holds definitions only.
        let other = ledger
            .create_schedule(spec("other-one", "0 * * * *"), meta("alice", t0))
            .await
            .expect("create");
        ledger
            .advance_watermark(other.id(), other.reconciled_through, t0 + Duration::hours(3))
            .await
            .expect("watermark");
        let copy = ledger
            .shard_catalog(other.shard)
            .await
            .expect("catalog")
            .into_iter()
            .find(|s| s.id() == other.id())
            .expect("copy");
        assert_eq!(copy.reconciled_through, other.reconciled_through);
    }

    async fn the_fire_mark_moves_only_as_read_and_the_fence_only_forward(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-03-01T00:00:00Z");
        let shard = 0;
        let fresh = ledger.fire_mark(shard).await.expect("mark");
        assert!(fresh.fired_through.is_none() && fresh.sent_through.is_none());

        let (from, to) = (t0 - Duration::minutes(1), t0 + Duration::minutes(1));
        assert!(ledger.move_fired_mark(&fresh, from, to).await.expect("move"));
        let moved = ledger.fire_mark(shard).await.expect("mark");
        assert_eq!((moved.fired_through, moved.sent_through), (Some(to), Some(from)));
        // A ticker that read the mark before lost its move.
        assert!(!ledger.move_fired_mark(&fresh, from, to).await.expect("stale move"));

        // `sent_through` follows only from where it stood.
        assert!(!ledger.move_sent_mark(shard, Some(t0), to).await.expect("wrong from"));
        assert!(ledger.move_sent_mark(shard, Some(from), to).await.expect("sent"));
        assert_eq!(ledger.fire_mark(shard).await.expect("mark").sent_through, Some(to));

        // A schedule change in the shard makes a move under the old catalog fail.
        let read = ledger.fire_mark(shard).await.expect("mark");
        let id = (0..)
            .map(|i| format!("in-shard-{i}"))
            .find(|id| shard_of(id, SHARDS) == shard)
            .expect("an id");
        ledger
            .create_schedule(spec(&id, "* * * * *"), meta("alice", t0))
            .await
            .expect("create");
        let later = to + Duration::minutes(1);
        assert!(!ledger.move_fired_mark(&read, to, later).await.expect("stale catalog"));

        // The fence moves the mark forward, never back, and leaves `sent_through` behind.
        assert!(!ledger.fence_fire_mark(shard, t0).await.expect("fence behind"));
        assert!(ledger.fence_fire_mark(shard, later).await.expect("fence"));
        let fenced = ledger.fire_mark(shard).await.expect("mark");
        assert_eq!((fenced.fired_through, fenced.sent_through), (Some(later), Some(to)));
        assert!(ledger.fence_fire_mark(1, t0).await.expect("fence a fresh shard"));
    }

    async fn a_run_is_taken_back_only_while_it_is_as_written(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-03-01T00:00:00Z");
        let created = ledger
            .create_schedule(spec("taken", "* * * * *"), meta("alice", t0))
            .await
            .expect("create");
        let mut run = scheduled_run(&created.spec, t0 + Duration::minutes(1), t0, "ticker");
        run.status = RunStatus::Queued;
        ledger.create_run(&run).await.expect("run");
        let mut other_version = run.clone();
        other_version.schedule_version += 1;
        assert!(!ledger.take_back_run(&other_version).await.expect("not as written"));
        assert!(ledger.take_back_run(&run).await.expect("take back"));
        assert!(matches!(
            ledger.get_run(&run.key).await,
            Err(StoreError::RunNotFound(_))
        ));
    }

    async fn a_catalog_is_seeded_from_schedules_written_before_catalogs(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-03-01T00:00:00Z");
        let created = ledger
            .create_schedule(spec("seeded", "* * * * *"), meta("alice", t0))
            .await
            .expect("create");
        // Seeding never replaces the copy a change wrote (it is as new or newer).
        assert_eq!(ledger.seed_catalog(created.shard).await.expect("seed"), 0);
        let catalog = ledger.shard_catalog(created.shard).await.expect("catalog");
        assert_eq!(catalog, std::slice::from_ref(&created));
        assert_eq!(
            ledger.fire_mark(created.shard).await.expect("mark").catalog_version,
            2,
            "seeding moves the version"
        );
    }
}
