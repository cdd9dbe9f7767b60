//! `cronledger runs replay` and `cronledger replays show|cancel`: the dry run lists the
//! runs it would retry, the replay is created and shown, a cancel stops it, and a status a
//! retry cannot reopen is refused with its code.

use cronledger_core::window::utc_text;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_replay_plans_creates_shows_and_cancels_a_replay() {
    let s = serve().await;
    let job = json!({"type": "noop", "fail_times": 5});
    let extra = json!({"max_attempts": 1, "idempotent": true, "side_effects": false});
    s.create(noop("flaky", "*/5 * * * *", job, extra)).await;
    for _ in 0..2 {
        let made = s
            .cli(&["run", "now", "flaky", "--mode", "new", "--format", "json"])
            .await
            .ok()
            .json();
        let run = made["run"]["run_id"].as_str().unwrap_or("").to_string();
        s.work_until(Lane::Manual, "flaky", &run, &[RunStatus::Failed])
            .await;
    }
    let (from, to) = (
        utc_text(now() - TimeDelta::hours(1)),
        utc_text(now() + TimeDelta::hours(1)),
    );
    let filter = [
        "runs",
        "replay",
        "--schedule",
        "flaky",
        "--status",
        "FAILED",
        "--from",
        &from,
        "--to",
        &to,
    ];

    let plan = s.cli(&[&filter[..], &["--dry-run"]].concat()).await.ok();
    assert!(
        plan.stdout.contains("dry run: 2 runs would be retried"),
        "{}",
        plan.stdout
    );
    let created = s
        .cli(
            &[
                &filter[..],
                &["--note", "vendor outage", "--format", "json"],
            ]
            .concat(),
        )
        .await
        .ok()
        .json();
    assert_eq!(created["state"], "RUNNING", "{created}");
    assert_eq!(created["total"], 2, "{created}");
    let id = created["id"].as_str().unwrap_or("").to_string();

    let shown = s.cli(&["replays", "show", &id]).await.ok();
    assert!(
        shown.stdout.starts_with(&format!("{id} RUNNING 0/2")),
        "{}",
        shown.stdout
    );
    let cancelled = s
        .cli(&[
            "replays", "cancel", &id, "--note", "enough", "--format", "json",
        ])
        .await
        .ok()
        .json();
    assert_eq!(cancelled["state"], "CANCELLED", "{cancelled}");

    let mut wrong = filter.to_vec();
    wrong[5] = "SUCCESS";
    refused_with(&s.cli(&wrong).await, "REPLAY_INVALID");
}
