//! Calendars in the local commands: `diff` shows each calendar's change and, for the
//! schedules naming it, the windows of the next 30 days it excludes or gives back; `plan`
//! plans the manifest's excluded windows SKIPPED (EXCLUDED); `validate` refuses a schedule
//! naming a calendar the manifest does not define.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn cronledger(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cronledger"))
        .args(args)
        .output()
        .expect("the cronledger binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write_temp(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cronledger-calendars-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let path = dir.join(name);
    std::fs::write(&path, body).expect("a temp file");
    path
}

/// A manifest whose `kr` calendar excludes `dates`; `settle` runs at 02:00 Seoul time.
fn manifest(name: &str, dates: &str) -> PathBuf {
    write_temp(
        name,
        &format!(
            "calendars:\n  kr: {{ exclude: [{dates}] }}\nschedules:\n  - {{ id: settle, cron: '0 2 * * *', timezone: Asia/Seoul, calendars: [kr], job: {{ type: noop }} }}\n  - {{ id: plain, cron: '0 3 * * *', timezone: UTC, job: {{ type: noop }} }}\n"
        ),
    )
}

#[test]
fn diff_shows_a_calendar_change_and_the_windows_it_moves() {
    let old = manifest("old.yaml", "'2026-12-24'");
    let new = manifest("new.yaml", "'2026-12-25..2026-12-26', '2027-03-01'");
    let args = |format: &'static str| {
        let (old, new) = (old.to_str().unwrap_or(""), new.to_str().unwrap_or(""));
        cronledger(&[
            "diff",
            old,
            new,
            "--now",
            "2026-12-01T00:00:00Z",
            "--format",
            format,
        ])
    };
    let out = args("text");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    for line in [
        "~ update calendar kr (1 -> 2 dates or ranges)",
        "    settle: over the next 30 days",
        "      - 2026-12-23T17:00:00Z no longer excluded",
        "      + 2026-12-24T17:00:00Z excluded",
        "      + 2026-12-25T17:00:00Z excluded",
        "= unchanged settle",
    ] {
        assert!(
            printed.lines().any(|l| l == line),
            "{line:?} in:\n{printed}"
        );
    }
    // 2027-03-01 is past the 30 days; `plain` names no calendar.
    assert!(!printed.contains("2027-02-28T17:00:00Z"), "{printed}");
    assert!(!printed.contains("plain: over"), "{printed}");

    let out = args("json");
    let doc: Value = serde_json::from_str(&text(&out.stdout)).expect("JSON");
    let calendar = &doc[0];
    assert_eq!(
        (
            &calendar["change"],
            &calendar["action"],
            &calendar["calendar"]
        ),
        (
            &Value::from("CALENDAR"),
            &Value::from("UPDATE"),
            &Value::from("kr")
        )
    );
    assert_eq!(
        calendar["before"]["exclude"],
        serde_json::json!(["2026-12-24"])
    );
    let windows = &calendar["schedules"][0]["windows"];
    assert_eq!(calendar["schedules"][0]["schedule"], "settle");
    assert_eq!(windows[0]["at"], "2026-12-23T17:00:00Z");
    assert_eq!(windows[0]["excluded"], false);
    assert_eq!(windows.as_array().map(Vec::len), Some(3));
}

#[test]
fn plan_records_the_manifests_excluded_windows_skipped() {
    let file = manifest("plan.yaml", "'2026-12-25'");
    let out = cronledger(&[
        "plan",
        "-f",
        file.to_str().unwrap_or(""),
        "--schedule",
        "settle",
        "--watermark",
        "2026-12-23T00:00:00Z",
        "--now",
        "2026-12-26T06:00:00Z",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_str(&text(&out.stdout)).expect("JSON");
    let entries = doc[0]["entries"].as_array().cloned().unwrap_or_default();
    let excluded: Vec<(&str, &str)> = entries
        .iter()
        .filter(|e| e["reason"] == "EXCLUDED")
        .map(|e| {
            (
                e["scheduled_for"].as_str().unwrap_or(""),
                e["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(excluded, [("2026-12-24T17:00:00Z", "SKIPPED")], "{doc}");
}

#[test]
fn a_schedule_naming_a_calendar_the_manifest_does_not_define_is_refused() {
    let file = write_temp(
        "unknown.yaml",
        "schedules:\n  - { id: settle, cron: '0 2 * * *', timezone: UTC, calendars: [kr], job: { type: noop } }\n",
    );
    let out = cronledger(&["validate", "-f", file.to_str().unwrap_or("")]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stdout) + &text(&out.stderr);
    assert!(err.contains("CALENDAR_UNKNOWN"), "{err}");
    assert!(err.contains("schedules[settle].calendars[0]"), "{err}");
}
