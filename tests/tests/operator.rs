//! The operator service without HTTP (issue 33, point 4): typed requests and an identity in,
//! typed results out, the same store writes and audit entries as through the api's routes.

use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use cronledger_app::api::{Actor, ApiConfig, ApiDeps, ApiError, Caller, Role};
use cronledger_app::operator::{Made, Operator};
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::ScheduleState;
use cronledger_aws::{AuditAction, OpsStore};
use cronledger_contract::{Mode, Note, RunNowRequest};
use cronledger_core::{Lane, Reason, RunStatus, Trigger};
use cronledger_tests::app::AppEnv;
use cronledger_tests::{scheduled_run, spec, t};

const NOW: &str = "2026-03-10T12:00:30Z";
const WHO: &str = "arn:aws:sts::111122223333:assumed-role/Ops/session-1";

fn operator_on(env: &AppEnv) -> Operator {
    let ops: Arc<dyn OpsStore> = Arc::new(env.ledger.ledger.clone());
    Operator::new(ApiDeps {
        store: env.store.clone(),
        ops,
        health: Some(Arc::new(env.ledger.ledger.clone())),
        lanes: env.queue.clone(),
        clock: Arc::new(env.clock.clone()),
        system: None,
        signals: None,
        auditor: None,
        auth: Default::default(),
        config: ApiConfig::default(),
    })
}

fn note(text: &str) -> Note {
    Note {
        note: Some(text.into()),
    }
}

/// A refusal's status and code.
fn refusal<T: std::fmt::Debug>(answer: Result<T, ApiError>) -> (StatusCode, String) {
    let e = answer.expect_err("a refusal");
    (e.status, e.code)
}

/// The operator's actions in the schedule's audit log: action, actor, note, run.
async fn audited(env: &AppEnv, id: &str) -> Vec<(AuditAction, String, String, String)> {
    let log = env.store.audit_log(id).await.expect("audit log");
    log.into_iter()
        .filter(|e| e.action != AuditAction::Create)
        .map(|e| {
            let run = e.details.as_ref().map(|d| d["run"].to_string());
            (e.action, e.actor, e.reason, run.unwrap_or_default())
        })
        .collect()
}

#[tokio::test]
async fn run_now_then_cancel_and_an_approval_through_the_operator_without_http() {
    let now: DateTime<Utc> = t(NOW);
    let env = AppEnv::new(LaneSettings::default(), now).await;
    let stored = env
        .create(spec("op", "0 * * * *"), t("2026-03-01T00:00:00Z"))
        .await;
    let operator = operator_on(&env);
    let actor = Actor {
        caller: Caller::new(WHO),
        role: Role::Operator,
    };

    // Run now: the latest occurrence, on the manual lane, once per idempotency key.
    let req = RunNowRequest {
        mode: Mode::New,
        scheduled_for: None,
        note: Some("checking the feed".into()),
    };
    let (made, first) = operator
        .run_now(&actor, "op", req.clone(), Some("key-1"))
        .await
        .expect("run now");
    assert_eq!(made, Made::Created);
    assert!(first.created && !first.reused && !first.idempotent_replay);
    assert_eq!(first.run.scheduled_for, t("2026-03-10T12:00:00Z"));
    assert_eq!(first.run.trigger, Trigger::Manual);
    assert_eq!(first.run.status, RunStatus::Queued);
    assert_eq!(first.run.lane, Some(Lane::Manual));
    let (made, again) = operator
        .run_now(&actor, "op", req.clone(), Some("key-1"))
        .await
        .expect("run now again");
    assert_eq!(made, Made::Existing);
    assert!(again.idempotent_replay && !again.created);
    assert_eq!(again.run.run_id, first.run.run_id);
    let other_body = RunNowRequest {
        note: Some("another body".into()),
        ..req
    };
    let reused = operator
        .run_now(&actor, "op", other_body, Some("key-1"))
        .await;
    assert_eq!(
        refusal(reused),
        (StatusCode::CONFLICT, "IDEMPOTENCY_KEY_REUSED".into())
    );

    // Cancel it before it starts (a second later: the audit log is in time order).
    env.clock.set(t("2026-03-10T12:00:31Z"));
    let run_id = first.run.run_id.clone();
    let cancelled = operator
        .cancel(&actor, "op", &run_id, note("not needed after all"))
        .await
        .expect("cancel");
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    assert_eq!(cancelled.reason, Some(Reason::CancelledByOperator));

    // A run held for an operator: approved onto the manual lane, once.
    env.clock.set(t("2026-03-10T12:00:32Z"));
    let mut held = scheduled_run(&stored.spec, t("2026-03-10T11:00:00Z"), now, "tests");
    held.status = RunStatus::ManualRequired;
    held.reason = Some(Reason::PolicyManual);
    env.store.create_run(&held).await.expect("held run");
    let held_id = "2026-03-10T11:00:00Z";
    let approved = operator
        .approve(&actor, "op", held_id, note("checked"))
        .await
        .expect("approve");
    assert_eq!(approved.run.status, RunStatus::Queued);
    assert_eq!(approved.run.lane, Some(Lane::Manual));
    assert!(approved.backfill.is_none());
    let twice = operator.approve(&actor, "op", held_id, note("again")).await;
    assert_eq!(
        refusal(twice),
        (StatusCode::CONFLICT, "RUN_NOT_AWAITING_APPROVAL".into())
    );

    // Each action that changed something is in the schedule's audit log, as the caller.
    let quoted = |s: &str| format!("\"{s}\"");
    assert_eq!(
        audited(&env, "op").await,
        vec![
            (
                AuditAction::RunNow,
                WHO.into(),
                "checking the feed".into(),
                quoted(&run_id)
            ),
            (
                AuditAction::RunCancel,
                WHO.into(),
                "not needed after all".into(),
                quoted(&run_id)
            ),
            (
                AuditAction::RunApprove,
                WHO.into(),
                "checked".into(),
                quoted(held_id)
            ),
        ]
    );
}

#[tokio::test]
async fn pause_and_resume_through_the_operator_check_the_expected_version() {
    let env = AppEnv::new(LaneSettings::default(), t(NOW)).await;
    let stored = env
        .create(spec("lc", "*/5 * * * *"), t("2026-03-01T00:00:00Z"))
        .await;
    let operator = operator_on(&env);
    let actor = Actor {
        caller: Caller::new("admin"),
        role: Role::Admin,
    };
    let stale = operator
        .pause(&actor, "lc", note("maintenance"), Some(stored.version + 1))
        .await;
    assert_eq!(
        refusal(stale),
        (
            StatusCode::PRECONDITION_FAILED,
            "SCHEDULE_VERSION_CONFLICT".into()
        )
    );
    let paused = operator
        .pause(&actor, "lc", note("maintenance"), Some(stored.version))
        .await
        .expect("pause");
    assert_eq!(paused.state, ScheduleState::Paused);
    assert!(paused.version > stored.version);
    let resumed = operator
        .resume(&actor, "lc", Note::default(), None)
        .await
        .expect("resume");
    assert_eq!(resumed.state, ScheduleState::Active);
    let log = env.store.audit_log("lc").await.expect("audit log");
    let last = log.last().expect("entries");
    assert_eq!(
        (last.actor.as_str(), last.reason.as_str()),
        ("admin", "resumed through the api")
    );
}
