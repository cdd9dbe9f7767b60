//! `cronledger audit`: one line per schedule and the fleet's completeness, every page of the
//! missing windows in JSON, and exit 1 when the completeness is below 1.

use chrono::DurationRound;
use cronledger_contract::CompletenessReport;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_prints_each_schedule_and_exits_1_on_an_incomplete_ledger() {
    let s = serve().await;
    let store = s.api.env.store.clone();
    let hour = TimeDelta::hours(1);
    let created = now().duration_trunc(hour).expect("an hour") - hour * 6;
    for id in ["kept", "holey"] {
        let meta = ChangeMeta {
            actor: "tests".into(),
            reason: "audit".into(),
            at: created,
            details: None,
        };
        let spec = cronledger_tests::spec(id, "0 * * * *");
        store
            .create_schedule(spec.clone(), meta)
            .await
            .expect("create");
        // Windows 1 to 4 hours after the creation; the holey one lacks its third.
        for n in [1, 2, 3, 4] {
            if id == "holey" && n == 3 {
                continue;
            }
            let at = created + hour * n;
            store
                .create_run(&scheduled_run(&spec, at, at, "ticker"))
                .await
                .expect("entry");
        }
    }
    let (from, to) = (utc(created), utc(created + hour * 5));
    let args = ["audit", "--from", &from, "--to", &to];

    let kept = s
        .cli(&[&args[..], &["--schedule", "kept"]].concat())
        .await
        .ok();
    assert!(
        kept.stdout.contains("completeness 100.0000%"),
        "{}",
        kept.stdout
    );

    let table = s.cli(&args).await;
    assert_eq!(table.code, 1, "{}\n{}", table.stdout, table.stderr);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(lines[0].starts_with("SCHEDULE"), "{}", table.stdout);
    let row = |n: usize| lines[n].split_whitespace().collect::<Vec<_>>();
    assert_eq!(
        row(1)[..6],
        ["holey", "4", "3", "1", "0", "0"],
        "{}",
        table.stdout
    );
    assert_eq!(row(1)[6], utc(created + hour * 3));
    assert_eq!(
        row(2)[..6],
        ["kept", "4", "4", "0", "0", "0"],
        "{}",
        table.stdout
    );
    assert!(
        lines[3].starts_with("completeness 87.5000%"),
        "{}",
        table.stdout
    );

    let json = s.cli(&[&args[..], &["--format", "json"]].concat()).await;
    assert_eq!(json.code, 1);
    let report: CompletenessReport = serde_json::from_str(&json.stdout).expect("the report");
    assert_eq!(report.completeness, 7.0 / 8.0);
    assert_eq!(report.schedules[0].missing, [created + hour * 3]);
    assert_eq!(report.next, None);

    let refused = s.cli(&["audit", "--from", &to, "--to", &from]).await;
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("AUDIT_RANGE_INVALID"),
        "{}",
        refused.stderr
    );
}

fn utc(t: DateTime<Utc>) -> String {
    cronledger_core::window::utc_text(t)
}
