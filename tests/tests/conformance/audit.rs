//! The completeness audit reads both ledgers alike: a deleted entry is missing, a doubled
//! execution a duplicate, an entry off the grid unexplained; a version edit, a pause, bounds
//! and a calendar exclusion expect what they say and no more.

use chrono::{DateTime, Duration, Utc};
use cronledger_app::audit::{completeness, AuditPage, AuditRange};
use cronledger_aws::ledger::Opening;
use cronledger_aws::{LedgerStore, RunChange};
use cronledger_contract::audit::{CompletenessReport, ScheduleAudit};
use cronledger_core::{Reason, Run, RunEvent, RunStatus, ScheduleSpec, Trigger};
use cronledger_tests::{bare, manual_run, scheduled_run, spec, spec_with, t};
use serde_json::json;

use crate::{conformance, meta};

const DAY: &str = "2026-03-01T00:00:00Z";

/// The hour `h` of the test day.
fn hour(h: i64) -> DateTime<Utc> {
    t(DAY) + Duration::hours(h)
}

/// Stores the automatic entry of each window in `windows`, under `version`, as `status`.
async fn record(
    store: &dyn LedgerStore,
    spec: &ScheduleSpec,
    version: u64,
    windows: impl IntoIterator<Item = DateTime<Utc>>,
    status: RunStatus,
    reason: Option<Reason>,
) -> Vec<Run> {
    let mut out = Vec::new();
    for at in windows {
        let mut run = scheduled_run(spec, at, at, "tests");
        run.schedule_version = version;
        run.status = status;
        run.reason = reason;
        store.create_run(&run).await.expect("run");
        out.push(run);
    }
    out
}

/// Starts a run's first attempt and ends it with `end` (SUCCEED, FAIL_RETRYABLE, ...).
async fn execute(store: &dyn LedgerStore, run: &Run, end: RunEvent) -> Run {
    let at = run.key.scheduled_for;
    let start = RunChange::open(
        Opening::Start,
        run.status,
        run.lease_epoch,
        at,
        "w",
        at + Duration::minutes(5),
    );
    let started = store.transition_run(&run.key, &start).await.expect("start");
    let end = bare(
        end,
        RunStatus::Running,
        started.lease_epoch,
        at + Duration::seconds(3),
    );
    store.transition_run(&run.key, &end).await.expect("end")
}

async fn audit_of(store: &dyn LedgerStore, id: &str, from: i64, to: i64) -> ScheduleAudit {
    let report = audit_range(store, Some(id), from, to, AuditPage::default()).await;
    assert_eq!(report.schedules.len(), 1, "{report:?}");
    report.schedules[0].clone()
}

async fn audit_range(
    store: &dyn LedgerStore,
    id: Option<&str>,
    from: i64,
    to: i64,
    page: AuditPage,
) -> CompletenessReport {
    let range = AuditRange {
        from: hour(from),
        to: hour(to),
        schedule: id.map(str::to_string),
    };
    completeness(store, range, page).await.expect("audit")
}

conformance! {
    async fn a_deleted_entry_is_missing_and_a_doubled_execution_a_duplicate(env: Env) {
        let store: &dyn LedgerStore = &*env.ledger;
        let hourly = spec("audited", "0 * * * *");
        store.create_schedule(hourly.clone(), meta("ops", t(DAY))).await.expect("create");
        let runs = record(store, &hourly, 1, (1..=6).map(hour), RunStatus::Queued, None).await;
        // The 03:00 entry is deleted from the ledger.
        assert!(store.take_back_run(&runs[2]).await.expect("delete"));
        // 04:00 ran, and an operator's run of it ran again.
        execute(store, &runs[3], RunEvent::Succeed).await;
        let again = manual_run(&runs[3], "req-1");
        store.create_run(&again).await.expect("manual");
        execute(store, &again, RunEvent::Succeed).await;
        // 05:00, a job not declared idempotent: its worker's lease was taken over mid-run
        // (nobody knows whether it acted) and another worker ran it again.
        let at = hour(5);
        let first = RunChange::open(Opening::Start, RunStatus::Queued, 0, at, "w1", at + Duration::minutes(1));
        store.transition_run(&runs[4].key, &first).await.expect("start");
        let later = at + Duration::minutes(2);
        let reclaim = RunChange::open(Opening::Reclaim, RunStatus::Running, 1, later, "w2", later + Duration::minutes(1));
        store.transition_run(&runs[4].key, &reclaim).await.expect("reclaim");
        let done = bare(RunEvent::Succeed, RunStatus::Running, 2, later + Duration::seconds(3));
        store.transition_run(&runs[4].key, &done).await.expect("end");
        // 06:00 failed once and was retried: the job said it failed, no second execution.
        let at = hour(6);
        let start = RunChange::open(Opening::Start, RunStatus::Queued, 0, at, "w", at + Duration::minutes(1));
        store.transition_run(&runs[5].key, &start).await.expect("start");
        let failed = bare(RunEvent::FailRetryable, RunStatus::Running, 1, at + Duration::seconds(2));
        store.transition_run(&runs[5].key, &failed).await.expect("fail");
        let retry = RunChange::open(Opening::Start, RunStatus::RetryPending, 1, at + Duration::seconds(30), "w", at + Duration::minutes(2));
        store.transition_run(&runs[5].key, &retry).await.expect("retry");
        let done = bare(RunEvent::Succeed, RunStatus::Running, 2, at + Duration::seconds(33));
        store.transition_run(&runs[5].key, &done).await.expect("end");

        let found = audit_of(store, "audited", 0, 7).await;
        assert_eq!((found.expected, found.accounted, found.missing_count), (6, 5, 1));
        assert_eq!(found.missing, [hour(3)]);
        let dups: Vec<_> = found
            .duplicates
            .iter()
            .map(|d| (d.scheduled_for, d.runs, d.executions, d.why.as_str()))
            .collect();
        assert_eq!(dups, [(hour(4), 2, 2, "RUNS"), (hour(5), 1, 2, "EXECUTIONS")]);
        assert!(found.unexplained.is_empty());
        let report = audit_range(store, Some("audited"), 0, 7, AuditPage::default()).await;
        // 01:00, 02:00 and 06:00 are accounted for exactly once.
        assert!((report.completeness - 3.0 / 6.0).abs() < 1e-9, "{}", report.completeness);
    }

    async fn an_entry_off_the_grid_or_of_no_version_is_unexplained(env: Env) {
        let store: &dyn LedgerStore = &*env.ledger;
        let hourly = spec("grid", "0 * * * *");
        store.create_schedule(hourly.clone(), meta("ops", t(DAY))).await.expect("create");
        record(store, &hourly, 1, (1..=3).map(hour), RunStatus::Queued, None).await;
        let off = hour(2) + Duration::minutes(30);
        record(store, &hourly, 1, [off], RunStatus::Queued, None).await;
        record(store, &hourly, 9, [hour(4)], RunStatus::Queued, None).await;
        let found = audit_of(store, "grid", 0, 5).await;
        let why: Vec<_> = found
            .unexplained
            .iter()
            .map(|u| (u.scheduled_for, u.schedule_version, u.why.as_str()))
            .collect();
        assert_eq!(
            why,
            [(off, 1, "NOT_A_WINDOW_OF_ITS_VERSION"), (hour(4), 9, "UNKNOWN_VERSION")]
        );
        assert_eq!(found.unexplained[0].trigger, "SCHEDULED");
        assert_eq!((found.expected, found.accounted), (4, 4));
    }

    async fn windows_before_and_after_an_edit_follow_each_version_and_paused_ones_are_expected(env: Env) {
        let store: &dyn LedgerStore = &*env.ledger;
        let hourly = spec("edited", "0 * * * *");
        store.create_schedule(hourly.clone(), meta("ops", t(DAY))).await.expect("create");
        // Version 2 at 02:10: every 30 minutes.
        let half = spec("edited", "*/30 * * * *");
        let edit = hour(2) + Duration::minutes(10);
        store.update_schedule(half.clone(), 1, meta("ops", edit)).await.expect("edit");
        // Paused (version 3) from 03:40 to 05:10 (version 4).
        store.pause_schedule("edited", None, meta("ops", hour(3) + Duration::minutes(40))).await.expect("pause");
        store.resume_schedule("edited", None, meta("ops", hour(5) + Duration::minutes(10))).await.expect("resume");

        record(store, &hourly, 1, [hour(1), hour(2)], RunStatus::Queued, None).await;
        let half_hours = |from: i64, to: i64| (from..to).map(|m| t(DAY) + Duration::minutes(30 * m));
        record(store, &half, 2, half_hours(5, 8), RunStatus::Queued, None).await;
        record(store, &half, 3, half_hours(8, 11), RunStatus::Skipped, Some(Reason::Paused)).await;
        record(store, &half, 4, half_hours(11, 12), RunStatus::Queued, None).await;
        let found = audit_of(store, "edited", 0, 6).await;
        // 01:00, 02:00 (version 1); 02:30 .. 05:30 every half hour (versions 2 to 4).
        assert_eq!((found.expected, found.accounted), (9, 9), "{found:?}");
        assert!(found.missing.is_empty() && found.duplicates.is_empty() && found.unexplained.is_empty(), "{found:?}");

        // The old grid after the edit is no window of the version it names.
        record(store, &hourly, 2, [hour(6) + Duration::minutes(15)], RunStatus::Queued, None).await;
        let found = audit_of(store, "edited", 0, 7).await;
        assert_eq!(found.missing, [hour(6), hour(6) + Duration::minutes(30)]);
        assert_eq!(found.unexplained.len(), 1);
    }

    async fn bounds_expect_nothing_outside_them_and_an_excluded_skip_accounts_for_its_window(env: Env) {
        let store: &dyn LedgerStore = &*env.ledger;
        let bounded = spec_with(
            "bounded",
            "0 * * * *",
            json!({"start_at": "2026-03-01T03:00:00Z", "end_at": "2026-03-01T05:00:00Z"}),
        );
        store.create_schedule(bounded.clone(), meta("ops", t(DAY))).await.expect("create");
        record(store, &bounded, 1, [hour(3), hour(4)], RunStatus::Queued, None).await;
        // An entry past `end_at` is none of its windows.
        record(store, &bounded, 1, [hour(6)], RunStatus::Queued, None).await;
        let found = audit_of(store, "bounded", 0, 12).await;
        assert_eq!((found.expected, found.accounted), (3, 2));
        assert_eq!(found.missing, [hour(5)]);
        assert_eq!(found.unexplained.len(), 1);
        assert_eq!(found.unexplained[0].scheduled_for, hour(6));

        // A daily schedule that does not run on 2026-03-03: that window is still expected,
        // and its SKIPPED (EXCLUDED) entry accounts for it.
        let daily = spec_with("daily", "0 6 * * *", json!({"exclude": ["2026-03-03"]}));
        store.create_schedule(daily.clone(), meta("ops", t(DAY))).await.expect("create");
        let days = |n: i64| hour(6) + Duration::days(n);
        record(store, &daily, 1, [days(0), days(1), days(3)], RunStatus::Queued, None).await;
        record(store, &daily, 1, [days(2)], RunStatus::Skipped, Some(Reason::Excluded)).await;
        let report = audit_range(store, Some("daily"), 0, 24 * 4, AuditPage::default()).await;
        let found = &report.schedules[0];
        assert_eq!((found.expected, found.accounted, found.missing_count), (4, 4, 0));
        assert_eq!(report.completeness, 1.0);
    }

    async fn a_range_record_begun_before_the_range_accounts_for_its_windows_in_it(env: Env) {
        let store: &dyn LedgerStore = &*env.ledger;
        let hourly = spec("gap", "0 * * * *");
        store.create_schedule(hourly.clone(), meta("ops", t(DAY))).await.expect("create");
        // 01:00 to 10:00 skipped as one record, written by the reconciler.
        let mut range = scheduled_run(&hourly, hour(1), hour(11), "reconciler");
        range.trigger = Trigger::CatchUp;
        range.status = RunStatus::Skipped;
        range.reason = Some(Reason::Missed);
        range.range_end = Some(hour(10));
        range.count = 10;
        store.create_run(&range).await.expect("range");
        record(store, &hourly, 1, [hour(11)], RunStatus::Queued, None).await;
        let found = audit_of(store, "gap", 8, 13).await;
        assert_eq!((found.expected, found.accounted), (5, 4));
        assert_eq!(found.missing, [hour(12)]);
    }

    async fn the_fleet_audit_pages_the_missing_lists_and_counts_them_whole(env: Env) {
        let store: &dyn LedgerStore = &*env.ledger;
        for id in ["fleet-a", "fleet-b"] {
            store.create_schedule(spec(id, "0 * * * *"), meta("ops", t(DAY))).await.expect("create");
        }
        let done = spec("fleet-b", "0 * * * *");
        record(store, &done, 1, (1..=4).map(hour), RunStatus::Queued, None).await;
        // Not created until after the range: nothing to say about it.
        store.create_schedule(spec("fleet-c", "0 * * * *"), meta("ops", hour(20))).await.expect("create");
        let page = |after: Option<String>| AuditPage { max_missing: 3, after };
        let first = audit_range(store, None, 0, 5, page(None)).await;
        let ids: Vec<&str> = first.schedules.iter().map(|s| s.schedule.as_str()).collect();
        assert_eq!(ids, ["fleet-a", "fleet-b"]);
        assert_eq!(first.schedules[0].missing, [hour(1), hour(2), hour(3)]);
        assert_eq!(first.schedules[0].missing_count, 4);
        assert!((first.completeness - 0.5).abs() < 1e-9);
        let second = audit_range(store, None, 0, 5, page(first.next.clone())).await;
        assert_eq!(second.schedules[0].missing, [hour(4)]);
        assert_eq!(second.next, None);
        assert_eq!(second.completeness, first.completeness);
        let bad = completeness(
            store,
            AuditRange { from: hour(0), to: hour(5), schedule: None },
            page(Some("later".into())),
        )
        .await;
        assert_eq!(bad.map(|_| ()).map_err(|e| e.code()), Err("STORE_BAD_CURSOR"));
        let unknown = completeness(
            store,
            AuditRange { from: hour(0), to: hour(5), schedule: Some("nope".into()) },
            page(None),
        )
        .await;
        assert_eq!(unknown.map(|_| ()).map_err(|e| e.code()), Err("SCHEDULE_NOT_FOUND"));
    }
}
