//! The control plane's items: idempotency claims with expiry, backfills under versioned
//! puts, the system audit newest first, the kill switch, and the lanes' release states.

use chrono::{DateTime, Duration, Utc};
use cronledger_aws::{
    Backfill, BackfillState, IdempotencyClaim, KillSwitch, ReleaseState, SystemAuditEntry,
};
use cronledger_core::run::Origin;
use cronledger_core::{Lane, RunKey};
use cronledger_tests::{running_backfill, t};
use serde_json::json;

use crate::conformance;

fn claim(key: &str, run_at: &str, created_at: DateTime<Utc>) -> IdempotencyClaim {
    IdempotencyClaim {
        key: key.into(),
        run: RunKey {
            schedule_id: "claimed".into(),
            scheduled_for: t(run_at),
            origin: Origin::Manual(format!("req-{run_at}")),
        },
        body_hash: Some("ab12".into()),
        created_at,
        expires_at: created_at + Duration::hours(24),
    }
}

fn backfill(id: &str, created_at: DateTime<Utc>) -> Backfill {
    let range = (t("2026-03-01T00:00:00Z"), t("2026-03-02T00:00:00Z"));
    running_backfill(id, "filled", range, 24, created_at)
}

conformance! {
    async fn an_idempotency_claim_is_kept_until_it_expires(env: Env) {
        let t0 = t("2026-03-01T10:00:00.123456Z");
        let first = claim("sched:key-1", "2026-03-01T10:00:00Z", t0);
        assert_eq!(env.ops.claim_idempotency(&first).await.expect("claim"), None);
        // The same key while the first is alive: the first comes back, exactly as stored.
        let second = claim("sched:key-1", "2026-03-01T11:00:00Z", t0 + Duration::hours(1));
        let held = env.ops.claim_idempotency(&second).await.expect("again");
        assert_eq!(held, Some(first.clone()));
        // Another key is its own claim.
        let other = claim("sched:key-2", "2026-03-01T11:00:00Z", t0);
        assert_eq!(env.ops.claim_idempotency(&other).await.expect("other"), None);
        // Past its expiry (to the second) the key is free again, and the new claim holds it.
        let late = claim("sched:key-1", "2026-03-02T12:00:00Z", t0 + Duration::hours(24));
        assert_eq!(
            env.ops.claim_idempotency(&late).await.expect("at expiry"),
            Some(first),
            "a claim expiring this very second still holds"
        );
        let later = claim("sched:key-1", "2026-03-02T12:00:00Z", t0 + Duration::hours(25));
        assert_eq!(env.ops.claim_idempotency(&later).await.expect("expired"), None);
        let after = claim("sched:key-1", "2026-03-02T13:00:00Z", t0 + Duration::hours(26));
        assert_eq!(
            env.ops.claim_idempotency(&after).await.expect("held"),
            Some(later)
        );
    }

    async fn backfills_change_only_from_the_version_read_and_open_ones_list_oldest_first(env: Env) {
        let t0 = t("2026-03-03T00:00:00Z");
        let ops = &env.ops;
        let created = ops.create_backfill(&backfill("bf-b", t0)).await.expect("create");
        assert_eq!(created.version, 1);
        assert_eq!(ops.get_backfill("bf-b").await.expect("get"), created);
        let taken = ops.create_backfill(&backfill("bf-b", t0)).await;
        assert_eq!(taken.unwrap_err().code(), "BACKFILL_ALREADY_EXISTS");
        let missing = ops.get_backfill("bf-none").await;
        assert_eq!(missing.unwrap_err().code(), "BACKFILL_NOT_FOUND");

        // A versioned put: from the version read, at the next one; a stale one is refused.
        let mut paused = created.clone();
        paused.state = BackfillState::Paused;
        paused.held = Some("realtime backlog".into());
        let stored = ops.put_backfill(&paused).await.expect("put").expect("applied");
        assert_eq!(stored.version, 2);
        assert_eq!(ops.get_backfill("bf-b").await.expect("get"), stored);
        assert_eq!(ops.put_backfill(&paused).await.expect("stale"), None);
        let mut ghost = backfill("bf-ghost", t0);
        ghost.version = 1;
        assert_eq!(ops.put_backfill(&ghost).await.expect("absent"), None);

        // Open ones (RUNNING or PAUSED), oldest first; a finished one leaves the list.
        let older = ops
            .create_backfill(&backfill("bf-c", t0 - Duration::hours(1)))
            .await
            .expect("older");
        let mut done = ops
            .create_backfill(&backfill("bf-a", t0 + Duration::hours(1)))
            .await
            .expect("newer");
        let open: Vec<String> = ops.open_backfills().await.expect("open").into_iter().map(|b| b.id).collect();
        assert_eq!(open, ["bf-c", "bf-b", "bf-a"]);
        done.state = BackfillState::Done;
        ops.put_backfill(&done).await.expect("put").expect("done");
        let open = ops.open_backfills().await.expect("open");
        assert_eq!(open, [older, stored]);
    }

    async fn the_system_audit_lists_newest_first_and_the_kill_switch_keeps_the_last_write(env: Env) {
        let t0 = t("2026-03-04T00:00:00Z");
        assert!(env.ops.system_audit(10).await.expect("empty").is_empty());
        let entry = |minute: i64, action: &str| SystemAuditEntry {
            at: t0 + Duration::minutes(minute),
            actor: "admin".into(),
            action: action.into(),
            note: format!("{action} at {minute}"),
            details: json!({"minute": minute}),
        };
        for (minute, action) in [(2, "KILL_SWITCH_RELEASE"), (0, "KILL_SWITCH_ENGAGE"), (1, "KILL_SWITCH_RELEASE")] {
            env.ops.append_system_audit(&entry(minute, action)).await.expect("append");
        }
        // Two actions at one instant both stay.
        env.ops.append_system_audit(&entry(1, "KILL_SWITCH_RELEASE")).await.expect("same instant");
        let newest: Vec<i64> = env
            .ops
            .system_audit(3)
            .await
            .expect("audit")
            .iter()
            .map(|e| (e.at - t0).num_minutes())
            .collect();
        assert_eq!(newest, [2, 1, 1]);
        assert_eq!(env.ops.system_audit(100).await.expect("all").len(), 4);
        assert_eq!(env.ops.system_audit(100).await.expect("all")[3], entry(0, "KILL_SWITCH_ENGAGE"));

        assert_eq!(env.ops.kill_switch().await.expect("never set"), None);
        let engaged = KillSwitch { engaged: true, since: t0, actor: "admin".into(), note: "incident".into() };
        env.ops.put_kill_switch(&engaged).await.expect("engage");
        assert_eq!(env.ops.kill_switch().await.expect("read"), Some(engaged.clone()));
        let released = KillSwitch { engaged: false, since: t0 + Duration::minutes(5), ..engaged };
        env.ops.put_kill_switch(&released).await.expect("release");
        assert_eq!(env.ops.kill_switch().await.expect("read"), Some(released));
    }

    async fn a_release_state_is_written_from_the_version_read(env: Env) {
        let t0 = t("2026-03-05T00:00:00.5Z");
        let control = &env.control;
        assert_eq!(control.release_state(Lane::Backfill).await.expect("none"), None);
        let initial = ReleaseState::initial(Lane::Backfill, t0);
        assert!(control.put_release_state(&initial).await.expect("first"));
        assert!(!control.put_release_state(&initial).await.expect("second first"), "only one creates it");
        let stored = control.release_state(Lane::Backfill).await.expect("read").expect("stored");
        assert_eq!(stored, ReleaseState { version: 1, ..initial });

        let paused = ReleaseState {
            paused: true,
            cause: Some("DLQ_GROWTH".into()),
            since: t0 + Duration::minutes(5),
            last_release_at: Some(t0 + Duration::minutes(4)),
            dlq_depth: Some(3),
            ..stored.clone()
        };
        assert!(control.put_release_state(&paused).await.expect("pause"));
        assert!(!control.put_release_state(&stored).await.expect("stale"), "version 1 was read by both");
        let now = control.release_state(Lane::Backfill).await.expect("read").expect("stored");
        assert_eq!(now, ReleaseState { version: 2, ..paused });
        // Lanes are independent.
        assert_eq!(control.release_state(Lane::Correction).await.expect("other lane"), None);
    }
}
