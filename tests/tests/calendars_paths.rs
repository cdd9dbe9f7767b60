//! Calendars and bounds on every path that creates a run, against the emulators: the
//! ticker's fire, the reconciler's plan of an outage, and a dependent's window record an
//! excluded window SKIPPED (EXCLUDED) and send nothing; a calendar edit changes the windows
//! created after it only; no path creates a window outside `start_at`..`end_at`.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use cronledger_app::reconciler::QuietSignals;
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::ledger::ChangeMeta;
use cronledger_core::calendar::CalendarSpec;
use cronledger_core::{Reason, RunKey, RunStatus, Schedule};
use cronledger_tests::app::AppEnv;
use cronledger_tests::reconcile::{
    assert_every_window_once, ledger, reconcile, reconciler, reconciler_config,
};
use cronledger_tests::{spec_with, t};
use serde_json::json;

fn meta(at: DateTime<Utc>) -> ChangeMeta {
    ChangeMeta {
        actor: "tests".into(),
        reason: "calendar".into(),
        at,
        details: None,
    }
}

fn calendar(dates: &[&str]) -> CalendarSpec {
    serde_json::from_value(json!({ "exclude": dates })).expect("calendar")
}

#[tokio::test]
async fn the_ticker_records_an_excluded_window_skipped_and_sends_nothing() {
    let day = t("2026-03-02T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), day).await;
    env.store
        .put_calendar("holidays", calendar(&["2026-03-02"]), None, meta(day))
        .await
        .expect("calendar");
    env.create(
        spec_with("own", "0 10 * * *", json!({"exclude": ["2026-03-02"]})),
        day - Duration::hours(1),
    )
    .await;
    env.create(
        spec_with("named", "0 10 * * *", json!({"calendars": ["holidays"]})),
        day - Duration::hours(1),
    )
    .await;
    env.create(
        spec_with("plain", "0 10 * * *", json!({})),
        day - Duration::hours(1),
    )
    .await;
    let report = env.tick(day).await;
    assert_eq!(report.sent, 1, "{report:?}");
    for id in ["own", "named"] {
        let run = env.run(&RunKey::expected(id, day)).await;
        assert_eq!(
            (run.status, run.reason),
            (RunStatus::Skipped, Some(Reason::Excluded)),
            "{id}"
        );
    }
    assert_eq!(
        env.run(&RunKey::expected("plain", day)).await.status,
        RunStatus::Queued
    );
    assert_eq!(env.queue.sends(), vec![RunKey::expected("plain", day)]);

    // The calendar changes: the next day is now a holiday and the 2nd no longer is. The
    // window already recorded keeps what it was; the next one follows the new calendar.
    let next = day + Duration::days(1);
    let stored = env.store.get_calendar("holidays").await.expect("stored");
    env.store
        .put_calendar(
            "holidays",
            calendar(&["2026-03-03"]),
            Some(stored.version),
            meta(next - Duration::hours(2)),
        )
        .await
        .expect("edit");
    env.tick(next).await;
    let kept = env.run(&RunKey::expected("named", day)).await;
    assert_eq!(
        kept.reason,
        Some(Reason::Excluded),
        "an edit changes the future only"
    );
    let after = env.run(&RunKey::expected("named", next)).await;
    assert_eq!(
        (after.status, after.reason),
        (RunStatus::Skipped, Some(Reason::Excluded))
    );
    assert_eq!(
        env.run(&RunKey::expected("own", next)).await.status,
        RunStatus::Queued
    );
}

#[tokio::test]
async fn an_outage_over_a_holiday_is_planned_excluded_not_missed() {
    let created = t("2026-03-01T00:30:00Z");
    let env = AppEnv::new(LaneSettings::default(), created).await;
    env.store
        .put_calendar("holidays", calendar(&["2026-03-02"]), None, meta(created))
        .await
        .expect("calendar");
    let spec = spec_with(
        "hourly",
        "0 * * * *",
        json!({"misfire": "SKIP", "grace": "1m", "calendars": ["holidays"]}),
    );
    env.create(spec.clone(), created).await;
    // No tick for three days: the reconciler accounts for every window.
    let now = t("2026-03-03T12:00:00Z");
    let r = reconciler(&env, Arc::new(QuietSignals), reconciler_config());
    reconcile(&r, now).await;
    let entries = ledger(env.store.as_ref(), "hourly", created, now).await;
    let windows = |reason: Reason| -> u32 {
        entries
            .iter()
            .filter(|r| r.reason == Some(reason))
            .map(|r| r.count.max(1))
            .sum()
    };
    assert_eq!(windows(Reason::Excluded), 24, "{entries:?}");
    assert!(windows(Reason::Missed) > 0);
    assert!(entries.iter().all(|r| r.status == RunStatus::Skipped));
    assert!(env.queue.sends().is_empty());
    let schedule = Schedule::new(spec).expect("compiles");
    assert_every_window_once(
        env.store.as_ref(),
        &schedule,
        created,
        now - Duration::minutes(2),
    )
    .await;
}

#[tokio::test]
async fn no_path_creates_a_window_outside_the_bounds() {
    let created = t("2026-03-01T09:30:00Z");
    let env = AppEnv::new(LaneSettings::default(), created).await;
    let spec = spec_with(
        "bounded",
        "0 * * * *",
        json!({"misfire": "RUN_ONCE", "grace": "1m",
               "start_at": "2026-03-01T11:00:00Z", "end_at": "2026-03-01T13:00:00Z"}),
    );
    env.create(spec.clone(), created).await;
    // Before start_at the ticker fires nothing; from it, each window; after end_at nothing.
    assert_eq!(env.tick(t("2026-03-01T10:00:00Z")).await.created, 0);
    assert_eq!(env.tick(t("2026-03-01T11:00:00Z")).await.created, 1);
    // 12:00 and 13:00 pass without a tick (an outage); the reconciler plans only those.
    let r = reconciler(&env, Arc::new(QuietSignals), reconciler_config());
    reconcile(&r, t("2026-03-01T18:00:00Z")).await;
    assert_eq!(env.tick(t("2026-03-01T18:00:00Z")).await.created, 0);
    let entries = ledger(
        env.store.as_ref(),
        "bounded",
        t("2026-03-01T00:00:00Z"),
        t("2026-03-02T00:00:00Z"),
    )
    .await;
    let times: Vec<_> = entries.iter().map(|r| r.key.scheduled_for).collect();
    assert_eq!(
        times,
        vec![
            t("2026-03-01T11:00:00Z"),
            t("2026-03-01T12:00:00Z"),
            t("2026-03-01T13:00:00Z")
        ],
        "{entries:?}"
    );
}
