//! A cron or timezone edit while the reconciler's watermark trails behind: the windows up to
//! the edit are judged by the expression that was in force then, the windows after it by the
//! new one. Neither a window the new expression would have had before the edit (it was never
//! expected) nor one the old expression had and nobody ran (it was) is judged wrongly.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use cronledger_app::reconciler::{QuietSignals, Reconciler};
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::ChangeMeta;
use cronledger_core::{Reason, RunKey, RunStatus, ScheduleSpec};
use cronledger_tests::app::AppEnv;
use cronledger_tests::reconcile::{reconcile, reconciler, reconciler_config};
use cronledger_tests::{spec_with, t};
use serde_json::json;

fn minute(m: i64) -> DateTime<Utc> {
    t("2026-03-01T10:00:00Z") + Duration::minutes(m)
}

fn spec(id: &str, cron: &str) -> ScheduleSpec {
    spec_with(
        id,
        cron,
        json!({"misfire": "RUN_ONCE", "side_effects": false, "overlap": "ALLOW"}),
    )
}

async fn edit_cron(env: &AppEnv, id: &str, cron: &str, at: DateTime<Utc>) {
    let stored = env.store.get_schedule(id).await.expect("schedule");
    let meta = ChangeMeta {
        actor: "test".into(),
        reason: "new timing".into(),
        at,
        details: None,
    };
    env.store
        .update_schedule(spec(id, cron), stored.version, meta)
        .await
        .expect("update");
}

/// A schedule every 10 minutes from 10:00, and a reconciler.
async fn every_ten_minutes(id: &str) -> (AppEnv, Reconciler) {
    let env = AppEnv::new(LaneSettings::default(), minute(0)).await;
    env.create(spec(id, "*/10 * * * *"), t("2026-03-01T09:59:30Z"))
        .await;
    let r = reconciler(&env, Arc::new(QuietSignals), reconciler_config());
    (env, r)
}

/// Every entry of the schedule from 10:00 on: `(minute, status, reason)`.
async fn entries(env: &AppEnv, id: &str) -> Vec<(i64, RunStatus, Option<Reason>)> {
    env.store
        .runs_between(id, minute(0), minute(60))
        .await
        .expect("runs")
        .into_iter()
        .map(|r| {
            (
                (r.key.scheduled_for - minute(0)).num_minutes(),
                r.status,
                r.reason,
            )
        })
        .collect()
}

#[tokio::test]
async fn a_window_the_new_expression_had_before_the_edit_is_not_missed() {
    let (env, r) = every_ten_minutes("denser").await;
    for m in [0, 10, 20] {
        assert_eq!(env.tick(minute(m)).await.sent, 1);
    }
    // The watermark reaches 10:23; at 10:27 the schedule goes from every 10 to every 5.
    reconcile(&r, minute(25)).await;
    edit_cron(&env, "denser", "*/5 * * * *", minute(27)).await;
    assert_eq!(env.tick(minute(30)).await.sent, 1);
    // 10:25 is a window of the new expression, before it was in force: never expected.
    let report = reconcile(&r, minute(33)).await;
    assert_eq!(report.missed_windows, 0, "{report:?}");
    assert_eq!(
        entries(&env, "denser").await,
        [
            (0, RunStatus::Queued, None),
            (10, RunStatus::Queued, None),
            (20, RunStatus::Queued, None),
            (30, RunStatus::Queued, None),
        ]
    );
}

#[tokio::test]
async fn a_window_the_old_expression_had_and_nobody_ran_is_missed() {
    let (env, r) = every_ten_minutes("sparser").await;
    assert_eq!(env.tick(minute(0)).await.sent, 1);
    reconcile(&r, minute(5)).await;
    // The ticker is down from 10:01 (10:10 and 10:20 never fire); at 10:24 the schedule goes
    // hourly. The next pass sees the gap under the expression that had it.
    edit_cron(&env, "sparser", "0 * * * *", minute(24)).await;
    let report = reconcile(&r, minute(30)).await;
    assert_eq!(report.missed_windows, 2, "{report:?}");
    assert_eq!(
        entries(&env, "sparser").await,
        [
            (0, RunStatus::Queued, None),
            (10, RunStatus::Coalesced, Some(Reason::Coalesced)),
            // RUN_ONCE: the gap's latest fires (catch-up, correction lane).
            (20, RunStatus::Queued, None),
        ]
    );
    let latest = env.run(&RunKey::expected("sparser", minute(20))).await;
    assert_eq!(latest.trigger, cronledger_core::Trigger::CatchUp);
}
