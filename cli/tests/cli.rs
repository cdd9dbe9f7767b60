//! The CLI as a user runs it: exit codes, stderr lines, JSON shapes.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn cronledger(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cronledger"))
        .args(args)
        .output()
        .expect("the cronledger binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write_temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cronledger-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn example() -> String {
    format!("{}/../examples/schedules.yaml", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn validate_accepts_the_examples() {
    let out = cronledger(&[
        "validate",
        "-f",
        &example(),
        "--now",
        "2026-11-29T00:00:00Z",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("OK daily-settlement"));
}

#[test]
fn validate_reports_every_problem_with_codes_on_stderr() {
    let path = write_temp(
        "bad.yaml",
        r#"
schedules:
  - id: Bad_Id
    cron: "0 0 30 2 *"
    timezone: Asia/Seoul
    misfire: RUN_TWICE
    job: { type: http, url: "https://x", payload: { nested: { api_key: "k" } } }
  - id: other
    cron: "61 * * * *"
    timezone: Mars/Olympus
    job: { type: noop }
"#,
    );
    let out = cronledger(&["validate", "-f", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    for code in [
        "SCHEDULE_INVALID_ID:",
        "SCHEDULE_NEVER_FIRES:",
        "SCHEDULE_UNKNOWN_POLICY:",
        "SCHEDULE_PAYLOAD_SECRET:",
        "SCHEDULE_UNKNOWN_TIMEZONE:",
    ] {
        assert!(err.contains(code), "missing {code} in:\n{err}");
    }
    assert!(!err.contains("panicked"));
}

#[test]
fn validate_json_lists_issues_for_machines() {
    let out = cronledger(&[
        "validate",
        "--cron",
        "*/0 * * * *",
        "--tz",
        "UTC",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["valid"], false);
    assert_eq!(doc["issues"][0]["code"], "SCHEDULE_INVALID_CRON");
}

#[test]
fn validate_names_a_schedule_by_its_id_beside_its_position() {
    let path = write_temp(
        "grace.yaml",
        r#"
schedules:
  - { id: collect, cron: "0 * * * *", timezone: UTC, job: { type: noop } }
  - { id: nightly, cron: "0 2 * * *", timezone: UTC, grace: 1s, job: { type: noop } }
  - { id: Not_An_Id, cron: "0 2 * * *", timezone: UTC, grace: 1s, job: { type: noop } }
"#,
    );
    let out = cronledger(&["validate", "-f", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let grace: Vec<&Value> = doc["issues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["code"] == "SCHEDULE_GRACE_TOO_SHORT")
        .collect();
    assert_eq!(grace.len(), 2, "{doc}");
    assert_eq!(
        (&grace[0]["field"], &grace[0]["id"], &grace[0]["index"]),
        (
            &serde_json::json!("schedules[nightly].grace"),
            &serde_json::json!("nightly"),
            &serde_json::json!(1)
        )
    );
    // An id that cannot name it: the position does, and no `id` is given.
    assert_eq!(grace[1]["field"], "schedules[2].grace");
    assert_eq!(grace[1]["index"], 2);
    assert!(grace[1].get("id").is_none(), "{}", grace[1]);

    let text = stderr(&cronledger(&["validate", "-f", path.to_str().unwrap()]));
    assert!(text.contains("(schedules[nightly].grace)"), "{text}");
    let plan = cronledger(&[
        "plan",
        "-f",
        path.to_str().unwrap(),
        "--watermark",
        "2026-11-29T00:00:00Z",
        "--now",
        "2026-11-29T03:00:00Z",
    ]);
    assert_eq!(plan.status.code(), Some(1));
    assert!(
        stderr(&plan).contains("(schedules[nightly].grace)"),
        "{}",
        stderr(&plan)
    );
}

#[test]
fn preview_json_marks_dst_shifts() {
    let out = cronledger(&[
        "preview",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-07T12:00:00Z",
        "--count",
        "2",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc[0]["at"], "2026-03-08T07:00:00Z");
    assert_eq!(doc[0]["local"], "2026-03-08T03:00:00-04:00");
    assert!(doc[0]["note"].as_str().unwrap().contains("gap"));
    // The api's name for the same note (POST /v1/preview answers `dst_note`).
    assert_eq!(doc[0]["dst_note"], doc[0]["note"]);
    assert_eq!(doc[1]["at"], "2026-03-09T06:30:00Z");
    assert!(doc[1].get("note").is_none());
    assert!(doc[1].get("dst_note").is_none());
}

#[test]
fn plan_json_accounts_for_every_window() {
    let existing = write_temp(
        "existing.json",
        r#"["2026-11-29T02:00:00Z", {"schedule": "hourly-aggregation", "scheduled_for": "2026-11-29T03:00:00Z"}]"#,
    );
    let out = cronledger(&[
        "plan",
        "-f",
        &example(),
        "--schedule",
        "hourly-aggregation",
        "--watermark",
        "2026-11-29T00:00:00Z",
        "--now",
        "2026-11-29T06:00:00Z",
        "--existing",
        existing.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let plan = &doc[0];
    assert_eq!(plan["totals"]["expected"], 5);
    assert_eq!(plan["totals"]["recorded"], 2);
    let entries = plan["entries"].as_array().unwrap();
    let planned: Vec<&str> = entries
        .iter()
        .map(|e| e["scheduled_for"].as_str().unwrap())
        .collect();
    assert_eq!(
        planned,
        [
            "2026-11-29T01:00:00Z",
            "2026-11-29T04:00:00Z",
            "2026-11-29T05:00:00Z"
        ]
    );
    for e in entries {
        assert_eq!(e["trigger"], "CATCH_UP");
        assert!(e["idempotency_key"]
            .as_str()
            .unwrap()
            .starts_with("hourly-aggregation:"));
        assert_ne!(e["lane"], "realtime");
    }
    // The recovery priced: every window it would run, at the schedule's max_runtime.
    let totals = &plan["totals"];
    let to_run = totals["fire"].as_u64().unwrap() + totals["manual"].as_u64().unwrap();
    assert!(to_run > 0);
    assert_eq!(plan["estimate"]["runs"], to_run);
    assert!(plan["estimate"]["target_calls"].as_u64().unwrap() >= to_run);
    assert!(plan["estimate"]["cost_usd"].as_f64().unwrap() > 0.0);
    assert!(plan["estimate"]["finishes_at"].as_str().unwrap() > "2026-11-29T06:00:00Z");
}

#[test]
fn plan_shows_the_dependency_chain_and_plans_no_dependent_window_from_its_cron() {
    // The dependents name no grid: they inherit `collect`'s, down the chain.
    let manifest = write_temp(
        "chain.yaml",
        r#"schedules:
  - { id: collect, cron: "0 * * * *", timezone: UTC, job: { type: noop } }
  - { id: aggregate, after: [collect], job: { type: noop } }
  - { id: report, after: [aggregate], job: { type: noop } }
"#,
    );
    let args = |format: &'static str| {
        [
            "plan",
            "-f",
            manifest.to_str().unwrap(),
            "--watermark",
            "2026-11-29T00:00:00Z",
            "--now",
            "2026-11-29T03:00:00Z",
            "--format",
            format,
        ]
    };
    let out = cronledger(&args("json"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc[0]["chain"]["upstream"], serde_json::json!([]));
    assert_eq!(
        doc[0]["chain"]["downstream"],
        serde_json::json!(["aggregate", "report"])
    );
    assert!(!doc[0]["entries"].as_array().unwrap().is_empty());
    assert_eq!(
        doc[2]["chain"]["upstream"],
        serde_json::json!(["aggregate", "collect"])
    );
    assert_eq!(doc[2]["entries"], serde_json::json!([]));

    let text = stdout(&cronledger(&args("text")));
    assert!(
        text.contains("schedule aggregate: runs after collect; runs before report"),
        "{text}"
    );
    assert!(text.contains("none is planned from its cron"), "{text}");
}

#[test]
fn bad_times_and_files_exit_1_without_a_panic() {
    for args in [
        vec![
            "preview",
            "* * * * *",
            "--tz",
            "UTC",
            "--after",
            "yesterday",
        ],
        vec!["preview", "* * * * *", "--tz", "UTC", "--count", "99999999"],
        vec![
            "plan",
            "-f",
            "/nonexistent.yaml",
            "--watermark",
            "2026-01-01T00:00:00Z",
            "--now",
            "2026-01-01T01:00:00Z",
        ],
        vec![
            "plan",
            "-f",
            "README.md",
            "--watermark",
            "2026-01-02T00:00:00Z",
            "--now",
            "2026-01-01T00:00:00Z",
        ],
        vec!["diff", "/nonexistent-a.yaml", "/nonexistent-b.yaml"],
    ] {
        let out = cronledger(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{args:?}");
        assert!(!stderr(&out).is_empty());
    }
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["preview"],
        vec!["validate"],
        vec!["validate", "--tz", "UTC"],
    ] {
        let out = cronledger(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("Usage:"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Colour is for a terminal: piped into a file, clap's usage errors have no escape codes.
#[test]
fn no_colour_codes_in_a_pipe() {
    let out = cronledger(&["validate"]);
    assert!(!stderr(&out).contains('\u{1b}'), "{:?}", stderr(&out));
}

#[test]
fn diff_flags_a_tenfold_frequency_increase_as_high_risk() {
    let old = write_temp(
        "old.yaml",
        "schedules:\n  - { id: job, cron: '*/10 * * * *', timezone: UTC, job: { type: noop } }\n",
    );
    let new = write_temp(
        "new.yaml",
        "schedules:\n  - { id: job, cron: '* * * * *', timezone: UTC, job: { type: noop } }\n",
    );
    let out = cronledger(&[
        "diff",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "--now",
        "2026-11-29T00:00:00Z",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc[0]["change"], "UPDATE");
    assert_eq!(doc[0]["risk"]["level"], "HIGH");
    assert_eq!(doc[0]["risk"]["refires_past_window"], false);
    assert_eq!(doc[0]["risk"]["next_after"].as_array().unwrap().len(), 5);
}

#[test]
fn diff_shows_the_data_gap_at_the_switch() {
    // Hourly made every five minutes at 00:26: [00:00, 00:25) is in no run's window.
    let old = write_temp(
        "gap-old.yaml",
        "schedules:\n  - { id: job, cron: '0 * * * *', timezone: UTC, job: { type: noop } }\n",
    );
    let new = write_temp(
        "gap-new.yaml",
        "schedules:\n  - { id: job, cron: '*/5 * * * *', timezone: UTC, job: { type: noop } }\n",
    );
    let args = |format: &'static str| {
        vec![
            "diff".to_string(),
            old.to_str().unwrap().to_string(),
            new.to_str().unwrap().to_string(),
            "--now".to_string(),
            "2026-11-29T00:26:00Z".to_string(),
            "--format".to_string(),
            format.to_string(),
        ]
    };
    let run = |format| {
        let owned = args(format);
        cronledger(&owned.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let out = run("json");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let gap = &doc[0]["risk"]["window_gap"];
    assert_eq!(gap["start"], "2026-11-29T00:00:00Z");
    assert_eq!(gap["end"], "2026-11-29T00:25:00Z");
    assert_eq!(gap["duration"], "25m");
    assert_eq!(doc[0]["risk"]["window_overlap"], Value::Null);
    let out = run("text");
    assert!(
        stdout(&out).contains(
            "data gap at the switch: [2026-11-29T00:00:00Z, 2026-11-29T00:25:00Z) (25m): no run covers it"
        ),
        "{}",
        stdout(&out)
    );
}

/// `simulate` with FROM/TO around the examples' windows and extra arguments.
fn simulate(extra: &[&str]) -> Output {
    let example = example();
    let mut args = vec![
        "simulate",
        "-f",
        &example,
        "--from",
        "2026-11-29T00:00:00Z",
        "--to",
        "2026-11-29T06:00:00Z",
    ];
    args.extend_from_slice(extra);
    cronledger(&args)
}

#[test]
fn simulate_lists_the_operator_levers() {
    let out = cronledger(&["simulate", "--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let help = stdout(&out);
    for flag in [
        "--pause <ID@T>",
        "--resume <ID@T>",
        "--kill-switch <FROM..TO>",
        "--approve-all-at <T>",
        "--backfill <ID@T=REQUEST>",
    ] {
        assert!(help.contains(flag), "no {flag} in:\n{help}");
    }
}

/// `examples/budget.yaml`: a backfill capped at its estimate's target calls, whose runs each
/// retry once, is paused by its budget halfway.
#[test]
fn simulate_shows_a_budget_pausing_a_backfill() {
    let example = format!("{}/../examples/budget.yaml", env!("CARGO_MANIFEST_DIR"));
    let out = cronledger(&[
        "simulate",
        "-f",
        &example,
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-01T03:00:00Z",
        "--backfill",
        r#"retried@2026-03-01T00:01:00Z={"from": "2026-02-28T12:00:00Z", "to": "2026-02-28T23:00:00Z", "max_target_calls": 12}"#,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let b = &doc["backfills"][0];
    assert_eq!(b["state"], "PAUSED", "{b}");
    assert_eq!(b["pause_reason"], "BUDGET");
    assert_eq!(b["estimate"]["target_calls"], 12);
    assert_eq!(b["spent"]["target_calls"], 12);
    assert_eq!(b["written"], 6);
}

/// A lever that cannot be pulled is bad usage: exit 2 with the reason, before any emulator
/// is started.
#[test]
fn simulate_refuses_bad_levers_with_exit_2() {
    for (args, says) in [
        (
            vec!["--pause", "no-such-schedule@2026-11-29T01:00:00Z"],
            "the file has no schedule `no-such-schedule`",
        ),
        (
            vec!["--pause", "daily-settlement@yesterday"],
            "has a bad instant `yesterday`",
        ),
        (vec!["--pause", "daily-settlement"], "has no `@`"),
        (
            vec!["--backfill", "daily-settlement@2026-11-29T01:00:00Z"],
            "has no `=`",
        ),
        (
            vec!["--backfill", "daily-settlement@2026-11-29T01:00:00Z={\"from\": 1}"],
            "is not a backfill request",
        ),
        (
            vec![
                "--backfill",
                "no-such-schedule@2026-11-29T01:00:00Z={\"from\": \"2026-11-28T00:00:00Z\", \"to\": \"2026-11-28T06:00:00Z\"}",
            ],
            "the file has no schedule `no-such-schedule`",
        ),
        (
            vec!["--pause", "daily-settlement@2026-11-30T01:00:00Z"],
            "is not inside the range",
        ),
        (
            vec!["--resume", "daily-settlement@2026-11-29T01:00:00Z"],
            "is not paused then (no --pause of it before)",
        ),
        (
            vec![
                "--pause",
                "daily-settlement@2026-11-29T02:00:00Z",
                "--resume",
                "daily-settlement@2026-11-29T01:00:00Z",
            ],
            "is not paused then",
        ),
        (
            vec![
                "--pause",
                "daily-settlement@2026-11-29T01:00:00Z",
                "--pause",
                "daily-settlement@2026-11-29T02:00:00Z",
            ],
            "is already paused then",
        ),
        (
            vec!["--kill-switch", "2026-11-29T02:00:00Z"],
            "kill switch `2026-11-29T02:00:00Z` has no `..`",
        ),
        (
            vec![
                "--kill-switch",
                "2026-11-29T03:00:00Z..2026-11-29T02:00:00Z",
            ],
            "ends before it starts",
        ),
        (
            vec![
                "--kill-switch",
                "2026-11-29T05:00:00Z..2026-11-29T07:00:00Z",
            ],
            "is not inside the range",
        ),
        (
            vec!["--approve-all-at", "noon"],
            "--approve-all-at `noon` is not an RFC3339 instant",
        ),
    ] {
        let out = simulate(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("SIMULATE_INVALID: "), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
}

/// People read one duration format: `5h 59m` in the header and the alert, never `359m`.
#[test]
fn plan_text_spells_durations_one_way() {
    let out = cronledger(&[
        "plan",
        "-f",
        &example(),
        "--schedule",
        "cache-refresh",
        "--watermark",
        "2026-11-29T00:00:00Z",
        "--now",
        "2026-11-29T06:00:00Z",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("oldest missed 5h 59m ago"), "{text}");
    assert!(text.contains("window(s) over 5h 59m"), "{text}");
    assert!(!text.contains("359m"), "{text}");
}
