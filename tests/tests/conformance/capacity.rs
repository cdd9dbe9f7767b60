//! The same requests cost the same on both stores: calls per operation always, and consumed
//! units where DynamoDB Local reports what DynamoDB charges (single-item puts, gets and
//! table queries of items in no index; moto reports no capacity at all). Writes of items in
//! an index, transactions above all, are left out of the units: DynamoDB Local's numbers
//! for them are known to differ from DynamoDB's (the cost model corrects for it).

use chrono::{DateTime, Duration, Utc};
use cronledger_aws::{AuditAction, IdempotencyClaim, KillSwitch, OperatorAction, ReleaseState};
use cronledger_aws::{MeterSnapshot, Outcome, SystemAuditEntry};
use cronledger_core::alerts::AlertKind;
use cronledger_core::run::Origin;
use cronledger_core::{Lane, RunKey};
use cronledger_tests::{spec, t};
use serde_json::json;

use crate::alerts::alert;
use crate::{meta, Backend, Env};

/// Operations whose every request is a plain one on an item in no index.
const PLAIN: &[&str] = cronledger_tests::PLAIN_SCOPES;

/// A day of control-plane requests, the same on any store.
async fn requests(env: &Env) -> MeterSnapshot {
    let t0 = t("2026-03-06T00:00:00Z");
    // A long spec and note, so items span more than one unit.
    let mut long = spec("costed", "*/5 * * * *");
    long.name = Some("d".repeat(1500));
    env.ledger
        .create_schedule(long, meta("alice", t0))
        .await
        .expect("create");
    for minute in 0..3 {
        env.ledger
            .record_operator_action(&OperatorAction {
                schedule_id: "costed".into(),
                action: AuditAction::RunNow,
                actor: "ops".into(),
                reason: "n".repeat(900 * minute),
                at: t0 + Duration::minutes(minute as i64),
                details: json!({"run": minute}),
            })
            .await
            .expect("operator action");
    }
    env.ledger.get_schedule("costed").await.expect("get");
    env.ledger.audit_log("costed").await.expect("audit");
    env.ledger
        .schedule_spec_at("costed", 1)
        .await
        .expect("spec");

    let mut state = ReleaseState::initial(Lane::Correction, t0);
    for cause in ["a", "b"] {
        state.cause = Some(cause.repeat(2000));
        assert!(env.control.put_release_state(&state).await.expect("put"));
        state.version += 1;
    }
    env.control
        .release_state(Lane::Correction)
        .await
        .expect("read");
    let switch = KillSwitch {
        engaged: true,
        since: t0,
        actor: "admin".into(),
        note: "x".repeat(1200),
    };
    env.ops.put_kill_switch(&switch).await.expect("engage");
    env.ops
        .put_kill_switch(&KillSwitch {
            engaged: false,
            ..switch
        })
        .await
        .expect("release");
    env.ops.kill_switch().await.expect("read");
    env.ops
        .claim_idempotency(&IdempotencyClaim {
            key: "costed:k".into(),
            run: RunKey {
                schedule_id: "costed".into(),
                scheduled_for: t0,
                origin: Origin::Manual("r".into()),
            },
            body_hash: None,
            created_at: t0,
            expires_at: t0 + Duration::hours(24),
        })
        .await
        .expect("claim");
    for minute in 0..4 {
        env.ops
            .append_system_audit(&SystemAuditEntry {
                at: t0 + Duration::minutes(minute),
                actor: "admin".into(),
                action: "KILL_SWITCH_ENGAGE".into(),
                note: "y".repeat(700),
                details: json!({}),
            })
            .await
            .expect("append");
    }
    env.ops.system_audit(10).await.expect("system audit");
    alert_requests(env, t0).await;
    let today = t0.date_naive();
    for (back, outcome) in [
        (0, Outcome::Succeeded { fresh: true }),
        (0, Outcome::Failed),
        (1, Outcome::Skipped),
    ] {
        let on = today - Duration::days(back);
        env.health
            .count_outcome("costed", on, outcome, 3)
            .await
            .expect("count");
    }
    env.health
        .outcome_days("costed", today - Duration::days(30), today)
        .await
        .expect("days");
    env.meter.snapshot()
}

/// Alerts recorded (once, twice, racing nobody), published, listed: the outbox's index
/// writes are left out of the units like every index write, the listing is compared.
async fn alert_requests(env: &Env, t0: DateTime<Utc>) {
    for (hour, subject) in ["first", "second", "third"].iter().enumerate() {
        let at = t0 + Duration::hours(hour as i64);
        let mut failed = alert("costed", AlertKind::ConsecutiveFailures, subject, at);
        failed.message = "m".repeat(1500 * hour);
        assert!(env.alerts.record_alert(&failed, at).await.expect("record"));
        assert!(!env.alerts.record_alert(&failed, at).await.expect("again"));
        env.alerts
            .alert_published(&failed, at)
            .await
            .expect("published");
    }
    let waiting = alert("costed", AlertKind::MissedWindows, "gap", t0);
    assert!(env.alerts.record_alert(&waiting, t0).await.expect("record"));
    let ghost = alert("ghost", AlertKind::Recovered, "r", t0);
    env.alerts.alert_published(&ghost, t0).await.expect("ghost");
    assert_eq!(
        env.alerts
            .unpublished_alerts(10)
            .await
            .expect("outbox")
            .len(),
        1
    );
    env.alerts
        .alert_published(&waiting, t0)
        .await
        .expect("published");
    assert_eq!(
        env.alerts
            .alerts_of("costed", 10)
            .await
            .expect("alerts")
            .len(),
        4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_requests_cost_the_same_on_both_stores() {
    let dynamodb = requests(&Env::new(Backend::DynamoDb).await).await;
    let memory = requests(&Env::new(Backend::Memory).await).await;
    let calls = |m: &MeterSnapshot| -> Vec<(String, String, u64)> {
        m.usage
            .iter()
            // Creating the test's table is the harness's, not a store operation.
            .filter(|((scope, _), _)| scope != "create_table")
            .map(|((scope, op), u)| (scope.clone(), op.clone(), u.calls))
            .collect()
    };
    assert_eq!(calls(&memory), calls(&dynamodb), "calls per operation");
    if std::env::var("CRONLEDGER_DYNAMODB_BACKEND").as_deref() == Ok("dynamodb-local") {
        for scope in PLAIN {
            let (d, m) = (dynamodb.scope(scope), memory.scope(scope));
            assert!(
                d.read_units + d.write_units > 0.0,
                "{scope}: the emulator reported nothing"
            );
            assert_eq!(
                (m.read_units, m.write_units),
                (d.read_units, d.write_units),
                "{scope}: memory {m:?}, DynamoDB Local {d:?}"
            );
        }
    }
}
