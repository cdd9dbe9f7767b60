//! `cronledger status`: every schedule's health, worst first, as a table and as JSON.

use cronledger_app::api::health::ScheduleHealth;
use cronledger_aws::{HealthStore, Outcome};
use cronledger_core::RunEvent;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lists_every_schedule_worst_first() {
    let s = serve().await;
    let mut steady = noop("steady", "*/5 * * * *", json!({"type": "noop"}), json!({}));
    steady["slo"] = json!({"within": "30m", "target": "90%"});
    s.create(steady).await;
    for id in ["flaky", "held"] {
        s.create(noop(id, "*/5 * * * *", json!({"type": "noop"}), json!({})))
            .await;
    }
    let store = s.api.env.store.clone();
    let counters = &s.api.env.ledger.ledger;
    let today = now().date_naive();
    let earlier = now() - TimeDelta::hours(1);
    let flaky = store.get_schedule("flaky").await.expect("flaky").spec;
    for minutes in [0, 5] {
        let at = earlier + TimeDelta::minutes(minutes);
        cronledger_tests::ended_run(store.as_ref(), &flaky, at, RunEvent::Fail).await;
    }
    // One success of 2.5 s: steady's durations.
    let steady = store.get_schedule("steady").await.expect("steady").spec;
    cronledger_tests::ended_run(store.as_ref(), &steady, earlier, RunEvent::Succeed).await;
    let held = store.get_schedule("held").await.expect("held").spec;
    let mut waiting = scheduled_run(&held, earlier, earlier, "ticker");
    waiting.status = RunStatus::ManualRequired;
    store.create_run(&waiting).await.expect("held run");
    for (id, outcome, count) in [
        ("steady", Outcome::Succeeded { fresh: true }, 10),
        ("flaky", Outcome::Succeeded { fresh: false }, 2),
        ("flaky", Outcome::Failed, 2),
    ] {
        counters
            .count_outcome(id, today, outcome, count)
            .await
            .expect("count");
    }

    let listed = s.cli(&["status", "--format", "json"]).await.ok();
    let items: Vec<ScheduleHealth> = serde_json::from_str(&listed.stdout).expect("the typed list");
    let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["flaky", "held", "steady"]);
    let flaky = items[0].health.as_ref().expect("flaky's health");
    assert_eq!(flaky.consecutive_failures, 2);
    assert_eq!(flaky.success_rate_7d, Some(0.5));
    assert_eq!(
        items[1].health.as_ref().map(|h| h.awaiting_approval),
        Some(1)
    );

    let table = s.cli(&["status"]).await.ok().stdout;
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("SCHEDULE"), "{table}");
    let row = |n: usize| lines[n].split_whitespace().collect::<Vec<_>>();
    // The last columns: failures in a row, awaiting approval, the durations (`-` before a
    // success).
    let last_three = |n: usize| row(n)[row(n).len() - 3..].to_vec();
    assert_eq!(row(1)[..3], ["flaky", "ACTIVE", "FAILED"], "{table}");
    assert_eq!(
        (row(1)[5], last_three(1)),
        ("50.0%", vec!["2", "0", "-"]),
        "{table}"
    );
    assert_eq!(
        (row(2)[0], last_three(2)),
        ("held", vec!["0", "1", "-"]),
        "{table}"
    );
    assert!(lines[3].contains("100.0% >= 90.0%"), "{table}");
    assert_eq!(last_three(3), ["2.5s", "/", "2.5s"], "{table}");
}
