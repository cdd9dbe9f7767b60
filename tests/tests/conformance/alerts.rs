//! Recorded alerts: one record per (schedule, kind, subject) whoever races, the outbox of
//! unpublished ones oldest first, a schedule's alerts newest first, and expiry. The records
//! share the schedule's partition and the `active` index with runs, audit entries and
//! backfills, which must not notice them.

use chrono::{DateTime, Duration, Utc};
use cronledger_aws::alerts::ALERT_RECORD_DAYS;
use cronledger_core::alerts::{Alert, AlertKind, Severity};
use cronledger_core::{RunStatus, Window};
use cronledger_tests::{scheduled_run, spec, t, SHARDS};

use crate::{conformance, meta};

const WRITERS: usize = 8;

pub fn alert(schedule: &str, kind: AlertKind, subject: &str, at: DateTime<Utc>) -> Alert {
    Alert {
        kind,
        severity: Severity::Warning,
        schedule: schedule.into(),
        owner: Some("payments".into()),
        window: Some(Window::new(at - Duration::hours(1), at)),
        run: Some(format!("{schedule}/RUN#{}", at.to_rfc3339())),
        message: format!("{kind} on {schedule}"),
        console_url: None,
        at,
        subject: subject.into(),
    }
}

/// The (schedule, key) of each alert, in order.
fn keys(alerts: &[cronledger_aws::RecordedAlert]) -> Vec<(String, String)> {
    alerts
        .iter()
        .map(|r| (r.alert.schedule.clone(), r.alert.key()))
        .collect()
}

conformance! {
    async fn an_alert_is_recorded_once_whoever_races(env: Env) {
        let at = t("2026-03-01T10:00:00.5Z");
        let failed = alert("raced", AlertKind::ConsecutiveFailures, "raced/RUN#1", at);
        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let (alerts, failed) = (env.alerts.clone(), failed.clone());
            let seen = at + Duration::milliseconds(writer as i64);
            tasks.push(tokio::spawn(async move { alerts.record_alert(&failed, seen).await }));
        }
        let mut recorded = 0;
        for task in tasks {
            if task.await.expect("writer task").expect("record_alert") {
                recorded += 1;
            }
        }
        assert_eq!(recorded, 1, "exactly one writer records it");
        let held = env.alerts.alerts_of("raced", 10).await.expect("alerts_of");
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].alert, failed);
        assert_eq!(held[0].published_at, None);
        // Later writers (a redelivery, the next reconciler pass) are told it is there.
        assert!(!env.alerts.record_alert(&failed, at + Duration::hours(1)).await.expect("again"));
    }

    async fn kinds_subjects_and_schedules_make_different_alerts(env: Env) {
        let at = t("2026-03-01T11:00:00Z");
        let first = alert("a", AlertKind::ConsecutiveFailures, "a/RUN#1", at);
        let other_kind = alert("a", AlertKind::PausedOnFailure, "a/RUN#1", at);
        let other_subject = alert("a", AlertKind::ConsecutiveFailures, "a/RUN#2", at);
        let other_schedule = alert("b", AlertKind::ConsecutiveFailures, "a/RUN#1", at);
        for each in [&first, &other_kind, &other_subject, &other_schedule] {
            assert!(env.alerts.record_alert(each, at).await.expect("record"), "{}", each.key());
        }
        // The same kind and subject is the same alert, whatever else differs.
        let mut reworded = first.clone();
        reworded.message = "said again".into();
        reworded.severity = Severity::Critical;
        assert!(!env.alerts.record_alert(&reworded, at + Duration::minutes(1)).await.expect("same"));
        assert_eq!(env.alerts.alerts_of("a", 10).await.expect("a").len(), 3);
        assert_eq!(env.alerts.alerts_of("b", 10).await.expect("b").len(), 1);
        assert!(env.alerts.alerts_of("c", 10).await.expect("c").is_empty());
    }

    async fn the_outbox_lists_unpublished_alerts_oldest_first_and_drops_published_ones(env: Env) {
        let t0 = t("2026-03-02T00:00:00Z");
        let late = alert("x", AlertKind::MissedWindows, "gap-1", t0);
        let early = alert("y", AlertKind::DeadlineMissed, "w-1", t0);
        let middle = alert("z", AlertKind::AwaitingApproval, "bf-1", t0);
        // Recorded out of order; a fraction of a second apart still orders them.
        let recorded = [(&late, 2_000), (&early, 0), (&middle, 500)];
        for (each, millis) in recorded {
            let at = t0 + Duration::milliseconds(millis);
            assert!(env.alerts.record_alert(each, at).await.expect("record"));
        }
        let waiting = env.alerts.unpublished_alerts(10).await.expect("outbox");
        assert_eq!(keys(&waiting), keys_of(&[&early, &middle, &late]));
        assert_eq!(waiting[1].recorded_at, t0 + Duration::milliseconds(500));
        assert_eq!(keys(&env.alerts.unpublished_alerts(2).await.expect("two")), keys_of(&[&early, &middle]));
        assert!(env.alerts.unpublished_alerts(0).await.expect("none asked").is_empty());

        let sent_at = t0 + Duration::minutes(1);
        env.alerts.alert_published(&middle, sent_at).await.expect("published");
        // Idempotent: the first publish time stays.
        env.alerts.alert_published(&middle, sent_at + Duration::minutes(1)).await.expect("again");
        assert_eq!(keys(&env.alerts.unpublished_alerts(10).await.expect("outbox")), keys_of(&[&early, &late]));
        let z = env.alerts.alerts_of("z", 10).await.expect("z");
        assert_eq!(z.len(), 1);
        assert_eq!(z[0].published_at, Some(sent_at));
        assert_eq!(z[0].recorded_at, t0 + Duration::milliseconds(500));

        // Publishing an alert that was never recorded leaves no record behind.
        let ghost = alert("ghost", AlertKind::Recovered, "r", t0);
        env.alerts.alert_published(&ghost, sent_at).await.expect("ghost");
        assert!(env.alerts.alerts_of("ghost", 10).await.expect("ghost").is_empty());

        // The outbox shares the `active` index with runs and backfills, which do not see it.
        for shard in 0..SHARDS {
            let page = env.ledger.active_runs(shard, None, 100, None).await.expect("active");
            assert!(page.items.is_empty(), "shard {shard}: {:?}", page.items);
        }
        assert!(env.ops.open_backfills().await.expect("backfills").is_empty());
    }

    async fn a_schedules_alerts_list_newest_first_beside_its_runs_and_audit(env: Env) {
        let t0 = t("2026-03-03T00:00:00Z");
        let listed = spec("listed", "0 * * * *");
        env.ledger.create_schedule(listed.clone(), meta("alice", t0)).await.expect("create");
        let run = scheduled_run(&listed, t0 + Duration::hours(1), t0, "ticker");
        env.ledger.create_run(&run).await.expect("run");
        let subjects = ["first", "second", "third"];
        for (hour, subject) in subjects.iter().enumerate() {
            let at = t0 + Duration::hours(hour as i64);
            let each = alert("listed", AlertKind::ConsecutiveFailures, subject, at);
            assert!(env.alerts.record_alert(&each, at).await.expect("record"));
        }
        assert!(env.alerts.record_alert(&alert("other", AlertKind::MissedWindows, "g", t0), t0).await.expect("other"));

        let newest: Vec<String> = env.alerts.alerts_of("listed", 10).await.expect("alerts")
            .into_iter().map(|r| r.alert.subject).collect();
        assert_eq!(newest, ["third", "second", "first"]);
        let two = env.alerts.alerts_of("listed", 2).await.expect("two");
        assert_eq!(two.iter().map(|r| r.alert.subject.as_str()).collect::<Vec<_>>(), ["third", "second"]);

        // The schedule's own reads skip the alert records in its partition.
        assert_eq!(env.ledger.audit_log("listed").await.expect("audit").len(), 1);
        let history = env.ledger.run_history("listed", 10, None).await.expect("history");
        assert_eq!(history.items.iter().map(|r| &r.key).collect::<Vec<_>>(), [&run.key]);
        let (stored, recent) = env.ledger.schedule_with_recent_runs("listed", 10, None).await.expect("recent");
        assert_eq!(stored.spec.id, "listed");
        assert_eq!(recent.runs.iter().map(|r| r.status).collect::<Vec<_>>(), [RunStatus::Pending]);
        let between = env.ledger.runs_between("listed", t0, t0 + Duration::hours(3)).await.expect("between");
        assert_eq!(between.iter().map(|r| &r.key).collect::<Vec<_>>(), [&run.key]);
    }

    async fn an_expired_record_can_be_recorded_again(env: Env) {
        let t0 = t("2026-03-04T00:00:00Z");
        let gap = alert("lapsed", AlertKind::MissedWindows, "gap", t0);
        assert!(env.alerts.record_alert(&gap, t0).await.expect("first"));
        env.alerts.alert_published(&gap, t0 + Duration::minutes(1)).await.expect("sent");
        let kept = Duration::days(ALERT_RECORD_DAYS);
        assert!(!env.alerts.record_alert(&gap, t0 + kept - Duration::days(1)).await.expect("live"));
        assert!(!env.alerts.record_alert(&gap, t0 + kept).await.expect("expiring this second"));
        let again = t0 + kept + Duration::seconds(1);
        assert!(env.alerts.record_alert(&gap, again).await.expect("expired"), "an expired record is taken over");
        let held = env.alerts.alerts_of("lapsed", 10).await.expect("alerts");
        assert_eq!(held.len(), 1);
        assert_eq!((held[0].recorded_at, held[0].published_at), (again, None));
        assert_eq!(keys(&env.alerts.unpublished_alerts(10).await.expect("outbox")), keys_of(&[&gap]));
    }
}

fn keys_of(alerts: &[&Alert]) -> Vec<(String, String)> {
    alerts
        .iter()
        .map(|a| (a.schedule.clone(), a.key()))
        .collect()
}
