//! A run executes the job of the version it was created under: that version's spec is read
//! once from its audit entry, the current one never.

use cronledger_app::pinned::{job_of_run, PinnedJobs};
use cronledger_aws::ledger::ChangeMeta;
use cronledger_aws::LedgerStore;
use cronledger_core::JobSpec;
use cronledger_tests::{scheduled_run, spec_with, t};
use serde_json::{json, Value};

use crate::conformance;

fn noop_job(target: &str) -> Value {
    json!({"type": "noop", "fail_times": 5, "payload": {"target": target}})
}

fn target_of(job: &JobSpec) -> &str {
    job.payload()["target"].as_str().unwrap_or("")
}

fn meta(at: &str) -> ChangeMeta {
    ChangeMeta {
        actor: "tests".into(),
        reason: "edit".into(),
        at: t(at),
        details: None,
    }
}

conformance! {
    async fn an_older_version_job_is_read_once_and_the_current_one_never(env: Env) {
        let store: &dyn LedgerStore = &*env.ledger;
        let id = "pinned";
        let v1 = spec_with(id, "0 * * * *", json!({"job": noop_job("one")}));
        store
            .create_schedule(v1.clone(), meta("2026-03-10T10:00:00Z"))
            .await
            .expect("create");
        // A run created under version 1, then the job is edited twice.
        let run = scheduled_run(
            &v1,
            t("2026-03-10T11:00:00Z"),
            t("2026-03-10T10:59:00Z"),
            "ticker",
        );
        for (version, target) in [(1, "two"), (2, "three")] {
            let spec = spec_with(id, "0 * * * *", json!({"job": noop_job(target)}));
            store
                .update_schedule(spec, version, meta("2026-03-10T11:00:10Z"))
                .await
                .expect("edit");
        }
        let stored = store.get_schedule(id).await.expect("get");
        assert_eq!(stored.version, 3);
        let reads = || env.meter.snapshot().scope("schedule_spec_at").calls;
        let cache = PinnedJobs::default();

        // The run's own version's job, not the stored one: one read, then the cache.
        for _ in 0..2 {
            let job = job_of_run(store, &stored, &run, &cache).await.expect("job");
            assert_eq!(target_of(&job), "one");
        }
        assert_eq!(reads(), 1);
        assert_eq!(cache.len(), 1);

        // A run of the current version: the stored job, nothing read.
        let mut current = run.clone();
        current.schedule_version = 3;
        let job = job_of_run(store, &stored, &current, &cache)
            .await
            .expect("job");
        assert_eq!(job, stored.spec.job);
        let mut middle = run.clone();
        middle.schedule_version = 2;
        let job = job_of_run(store, &stored, &middle, &cache)
            .await
            .expect("job");
        assert_eq!(target_of(&job), "two");
        assert_eq!(reads(), 2, "only version 2 was read besides version 1");

        // A version the schedule never had, and a run of another schedule, are typed errors.
        let mut unknown = run.clone();
        unknown.schedule_version = 9;
        let missing = job_of_run(store, &stored, &unknown, &cache).await;
        assert_eq!(
            missing.map_err(|e| e.code()).err(),
            Some("SCHEDULE_VERSION_NOT_FOUND")
        );
        let mut foreign = run.clone();
        foreign.key.schedule_id = "other".into();
        let refused = job_of_run(store, &stored, &foreign, &cache).await;
        assert_eq!(
            refused.map_err(|e| e.code()).err(),
            Some("STORE_INVALID_REQUEST")
        );
    }
}
