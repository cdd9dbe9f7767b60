//! Destructive-job guards: `approval: every_run` holds each window for an operator (and
//! skips it past `approval_timeout`); `guard.max_affected` makes the worker dry-run the
//! target first and hold the run with the dry run's numbers when it would touch too much; a
//! target that cannot dry-run is never run unguarded.

use cronledger_aws::ledger::Transition;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Duration as Delta, Utc};
use cronledger_app::reconciler::QuietSignals;
use cronledger_aws::lanes::{LaneSettings, MessageOutcome};
use cronledger_aws::ledger::RunChange;
use cronledger_core::{Lane, Reason, RunKey, RunStatus};
use cronledger_tests::app::{worker_config, AppEnv};
use cronledger_tests::reconcile::{reconcile, reconciler, reconciler_config};
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{spec_with, t};
use serde_json::{json, Value};

fn hour() -> DateTime<Utc> {
    t("2026-03-01T10:00:00Z")
}

async fn fire(env: &AppEnv, hook: &Webhook, id: &str, mut fields: Value) -> RunKey {
    let mut job = json!({ "type": "http", "url": hook.url, "timeout": "20s" });
    if let Some(guard) = fields.get("guard").cloned() {
        job["guard"] = guard;
        fields.as_object_mut().map(|f| f.remove("guard"));
    }
    fields["job"] = job;
    env.create(
        spec_with(id, "0 * * * *", fields),
        hour() - Delta::seconds(30),
    )
    .await;
    env.tick(hour()).await;
    RunKey::expected(id, hour())
}

/// Approves a held run as the API does: PENDING again and on the manual lane in one write
/// (how the rule book knows it was approved), then sent there.
async fn approve(env: &AppEnv, key: &RunKey) {
    let held = env.run(key).await;
    let approve = Transition::Approve { reason: None };
    let change = RunChange::new(held.status, held.lease_epoch, hour(), approve);
    let approved = env
        .store
        .transition_run(key, &change)
        .await
        .expect("approve");
    env.resend(&approved).await;
}

async fn deliver_one(env: &AppEnv, lane: Lane) -> MessageOutcome {
    let worker = env.worker(worker_config("w"));
    let got = env.receive(lane, false, 1, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1, "one message on {lane}");
    env.deliver(&worker, lane, &got).await.outcomes[0].1.clone()
}

#[tokio::test]
async fn every_window_of_an_approval_schedule_waits_for_an_operator_or_times_out() {
    let env = AppEnv::new(LaneSettings::default(), hour()).await;
    let hook = Webhook::start(Answer::Succeed).await;
    let key = fire(
        &env,
        &hook,
        "cleanup",
        json!({"approval": "every_run", "approval_timeout": "2h"}),
    )
    .await;
    let held = env.run(&key).await;
    assert_eq!(
        (held.status, held.reason),
        (RunStatus::ManualRequired, Some(Reason::ApprovalRequired))
    );
    assert!(env.queue.sends().is_empty(), "nothing sent before approval");

    // The 11:00 window is approved and runs; the 10:00 one is left and times out.
    let next = hour() + Delta::hours(1);
    env.tick(next).await;
    let eleven = RunKey::expected("cleanup", next);
    approve(&env, &eleven).await;
    assert_eq!(deliver_one(&env, Lane::Manual).await, MessageOutcome::Done);
    assert_eq!(env.run(&eleven).await.status, RunStatus::Success);
    assert_eq!(hook.executions().len(), 1);

    let r = reconciler(&env, Arc::new(QuietSignals), reconciler_config());
    let early = reconcile(&r, hour() + Delta::minutes(119)).await;
    assert_eq!(early.approvals_expired, 0);
    let late = reconcile(&r, hour() + Delta::minutes(121)).await;
    assert_eq!(late.approvals_expired, 1);
    let expired = env.run(&key).await;
    assert_eq!(
        (expired.status, expired.reason),
        (RunStatus::Skipped, Some(Reason::ApprovalTimeout))
    );
}

#[tokio::test]
async fn a_guarded_job_dry_runs_first_and_is_held_over_its_limit_until_approved() {
    let env = AppEnv::new(LaneSettings::default(), hour()).await;
    let hook = Webhook::start(Answer::Succeed).await;
    hook.answer_dry_runs(Some(50));
    let key = fire(&env, &hook, "purge", json!({"guard": {"max_affected": 10}})).await;

    // The dry run says 50 > 10: held with its numbers, nothing executed.
    assert_eq!(deliver_one(&env, Lane::Normal).await, MessageOutcome::Done);
    let held = env.run(&key).await;
    assert_eq!(
        (held.status, held.reason),
        (RunStatus::ManualRequired, Some(Reason::AffectedOverLimit))
    );
    let result = held.result.clone().expect("the dry run's numbers");
    assert_eq!(result.count, Some(50));
    assert!(hook.executions().is_empty());
    assert_eq!(hook.calls()[0].mode, "dry_run");

    // Approved: executes once, told the approved count, with no second dry run.
    approve(&env, &key).await;
    assert_eq!(deliver_one(&env, Lane::Manual).await, MessageOutcome::Done);
    assert_eq!(env.run(&key).await.status, RunStatus::Success);
    let executed = hook.executions();
    assert_eq!(executed.len(), 1);
    assert_eq!(
        (executed[0].mode.as_str(), executed[0].approved_affected),
        ("execute", Some(50))
    );
    assert_eq!(hook.calls().len(), 2, "one dry run, one execution");

    // Under the limit: dry run, then execute at once with the count.
    hook.answer_dry_runs(Some(3));
    let small = fire(&env, &hook, "small", json!({"guard": {"max_affected": 10}})).await;
    assert_eq!(deliver_one(&env, Lane::Normal).await, MessageOutcome::Done);
    assert_eq!(env.run(&small).await.status, RunStatus::Success);
    assert_eq!(
        hook.executions().last().and_then(|c| c.approved_affected),
        Some(3)
    );
}

#[tokio::test]
async fn a_target_that_cannot_dry_run_fails_the_run_instead_of_running_unguarded() {
    let env = AppEnv::new(LaneSettings::default(), hour()).await;
    // This receiver ignores the mode (answers {"count": 1}, no `affected`).
    let hook = Webhook::start(Answer::Succeed).await;
    let key = fire(
        &env,
        &hook,
        "unaware",
        json!({"guard": {"max_affected": 10}}),
    )
    .await;
    let outcome = deliver_one(&env, Lane::Normal).await;
    assert!(
        matches!(outcome, MessageOutcome::DeadLettered { .. }),
        "{outcome:?}"
    );
    let failed = env.run(&key).await;
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(
        failed.result.and_then(|r| r.error_code).as_deref(),
        Some("GUARD_UNSUPPORTED")
    );
    assert_eq!(hook.calls().len(), 1, "only the dry run was sent");
}
