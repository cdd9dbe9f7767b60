//! The outcome counters: concurrent adds all counted, a range read returns its days only,
//! one schedule's counters are its own, and the schedule's other readers never see them.

use chrono::{Duration, NaiveDate};
use cronledger_aws::{DayTally, Outcome};
use cronledger_tests::{scheduled_run, spec, t};

use crate::{conformance, meta};

fn day(text: &str) -> NaiveDate {
    text.parse().expect("a date")
}

conformance! {
    async fn concurrent_adds_are_all_counted(env: Env) {
        let on = day("2026-12-01");
        let adds = (0..24u64).map(|i| {
            let health = env.health.clone();
            let outcome = match i % 4 {
                0 => Outcome::Succeeded { fresh: true },
                1 => Outcome::Succeeded { fresh: false },
                2 => Outcome::Failed,
                _ => Outcome::Skipped,
            };
            tokio::spawn(async move { health.count_outcome("busy", on, outcome, i + 1).await })
        });
        for add in adds.collect::<Vec<_>>() {
            add.await.expect("join").expect("count");
        }
        // Nothing added: no request, no change.
        env.health
            .count_outcome("busy", on, Outcome::Failed, 0)
            .await
            .expect("count 0");
        let sum = |rem: u64| (0..24u64).filter(|i| i % 4 == rem).map(|i| i + 1).sum::<u64>();
        let days = env.health.outcome_days("busy", on, on).await.expect("days");
        assert_eq!(
            days,
            vec![DayTally {
                day: Some(on),
                succeeded: sum(0) + sum(1),
                failed: sum(2),
                skipped: sum(3),
                fresh: sum(0),
            }]
        );
    }

    async fn a_range_read_returns_its_days_oldest_first(env: Env) {
        for (on, outcome) in [
            ("2026-11-01", Outcome::Failed),
            ("2026-11-02", Outcome::Succeeded { fresh: true }),
            ("2026-11-15", Outcome::Skipped),
            ("2026-11-30", Outcome::Failed),
            ("2026-12-01", Outcome::Succeeded { fresh: false }),
        ] {
            env.health
                .count_outcome("ranged", day(on), outcome, 1)
                .await
                .expect("count");
        }
        let days = env
            .health
            .outcome_days("ranged", day("2026-11-02"), day("2026-11-30"))
            .await
            .expect("days");
        let listed: Vec<Option<NaiveDate>> = days.iter().map(|d| d.day).collect();
        assert_eq!(
            listed,
            vec![
                Some(day("2026-11-02")),
                Some(day("2026-11-15")),
                Some(day("2026-11-30"))
            ]
        );
        assert_eq!((days[0].succeeded, days[0].fresh), (1, 1));
        assert_eq!(days[1].skipped, 1);
        let none = env
            .health
            .outcome_days("ranged", day("2026-11-03"), day("2026-11-14"))
            .await
            .expect("gap");
        assert!(none.is_empty());
        let backwards = env
            .health
            .outcome_days("ranged", day("2026-12-01"), day("2026-11-01"))
            .await
            .expect("from after through");
        assert!(backwards.is_empty());
    }

    async fn each_schedule_has_its_own_counters(env: Env) {
        let on = day("2026-12-01");
        env.health.count_outcome("a", on, Outcome::Failed, 2).await.expect("a");
        env.health.count_outcome("a2", on, Outcome::Skipped, 5).await.expect("a2");
        let a = env.health.outcome_days("a", on, on).await.expect("a days");
        assert_eq!((a.len(), a[0].failed, a[0].skipped), (1, 2, 0));
        let a2 = env.health.outcome_days("a2", on, on).await.expect("a2 days");
        assert_eq!((a2.len(), a2[0].failed, a2[0].skipped), (1, 0, 5));
        assert!(env.health.outcome_days("b", on, on).await.expect("b").is_empty());
    }

    async fn the_schedules_other_readers_never_see_its_counters(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-12-01T00:00:00Z");
        let spec = spec("counted", "*/5 * * * *");
        ledger
            .create_schedule(spec.clone(), meta("alice", t0))
            .await
            .expect("schedule");
        let run = scheduled_run(&spec, t0 + Duration::minutes(5), t0, "ticker");
        ledger.create_run(&run).await.expect("run");
        for on in ["2026-11-30", "2026-12-01", "2026-12-02"] {
            env.health
                .count_outcome("counted", day(on), Outcome::Failed, 1)
                .await
                .expect("count");
        }
        let history = ledger.run_history("counted", 50, None).await.expect("history");
        assert_eq!(history.items, vec![run.clone()]);
        let recent = ledger.recent_runs("counted", 50, None).await.expect("recent");
        assert_eq!(recent.runs, vec![run.clone()]);
        let (stored, recent) = ledger
            .schedule_with_recent_runs("counted", 50, None)
            .await
            .expect("schedule and runs");
        assert_eq!((stored.spec.id.as_str(), recent.runs), ("counted", vec![run.clone()]));
        let between = ledger
            .runs_between("counted", t0 - Duration::days(2), t0 + Duration::days(2))
            .await
            .expect("between");
        assert_eq!(between, vec![run]);
        let audit = ledger.audit_log("counted").await.expect("audit");
        assert_eq!(audit.len(), 1);
        let listed = ledger.list_schedules(50, None).await.expect("list");
        let ids: Vec<&str> = listed.items.iter().map(|s| s.spec.id.as_str()).collect();
        assert_eq!(ids, vec!["counted"]);
    }
}
