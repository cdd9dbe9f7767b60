//! `apply` with a manifest's calendars: planned against the stored ones with the windows they
//! move, put before the schedules naming them, deleted with `--prune` once nothing names
//! them; a calendar neither defined nor stored is refused before anything is written;
//! `calendars list|get` read them.

use cronledger_contract::{CalendarList, CalendarView};

use super::*;

/// A manifest whose `holidays` calendar excludes `dates` (none: no calendars), with
/// `settle` at 02:00 UTC naming `names`.
fn calendar_manifest(dates: Option<&str>, names: &str) -> String {
    let calendars = dates
        .map(|d| format!("calendars:\n  holidays: {{ exclude: [{d}] }}\n"))
        .unwrap_or_default();
    format!(
        "{calendars}schedules:\n  - {{ id: settle, cron: '0 2 * * *', timezone: UTC, owner: cli-tests, calendars: [{names}], job: {{ type: noop }} }}\n"
    )
}

/// A local date `days` from now, and its 02:00 UTC window as the plan prints it.
fn day(days: i64) -> (String, String) {
    let date = (now() + TimeDelta::days(days)).date_naive();
    (
        date.format("%Y-%m-%d").to_string(),
        format!("{}T02:00:00Z", date.format("%Y-%m-%d")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_puts_calendars_first_shows_the_windows_they_move_and_prunes_unnamed_ones() {
    let s = serve().await;
    let (first, first_window) = day(5);
    let file = write_manifest(&calendar_manifest(Some(&format!("'{first}'")), "holidays"));
    let f = file.to_str().expect("a path");

    // The plan: the calendar to create, with the window it excludes; nothing written.
    let plan = s.cli(&["apply", "-f", f]).await;
    assert_eq!(plan.code, 1, "{}", plan.stderr);
    for line in [
        "+ create calendar holidays (1 dates or ranges)".to_string(),
        "    settle: over the next 30 days".to_string(),
        format!("      + {first_window} excluded"),
    ] {
        assert!(
            plan.stdout.lines().any(|l| l == line),
            "{line:?} in:\n{}",
            plan.stdout
        );
    }
    let listed = s.cli(&["calendars", "list", "--format", "json"]).await.ok();
    let none: CalendarList = serde_json::from_str(&listed.stdout).expect("a CalendarList");
    assert!(none.items.is_empty());

    let applied = s.cli(&["apply", "-f", f, "--yes"]).await.ok();
    let calendar_at = applied.stdout.find("calendar holidays at version 1");
    let schedule_at = applied.stdout.find("settle at version 1 (ACTIVE)");
    assert!(
        calendar_at.is_some() && calendar_at < schedule_at,
        "{}",
        applied.stdout
    );
    let got = s
        .cli(&["calendars", "get", "holidays", "--format", "json"])
        .await
        .ok();
    let view: CalendarView = serde_json::from_str(&got.stdout).expect("a CalendarView");
    assert_eq!(view.version, 1);
    assert_eq!(
        view.exclude
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [first]
    );
    let table = s.cli(&["calendars", "list"]).await.ok();
    assert!(table.stdout.starts_with("CALENDAR"), "{}", table.stdout);
    assert!(
        table.stdout.contains("holidays  1        1"),
        "{}",
        table.stdout
    );
    let missing = s.cli(&["calendars", "get", "closures"]).await;
    refused_with(&missing, "CALENDAR_NOT_FOUND");
    let same = s.cli(&["apply", "-f", f, "--yes"]).await.ok();
    assert!(same.stdout.contains("nothing to change"), "{}", same.stdout);

    // Another day: an update under version 1, the old window given back, the new one taken.
    let (second, second_window) = day(6);
    std::fs::write(
        &file,
        calendar_manifest(Some(&format!("'{second}'")), "holidays"),
    )
    .expect("rewritten");
    let plan = s.cli(&["apply", "-f", f, "--format", "json"]).await;
    assert_eq!(plan.code, 1, "{}", plan.stderr);
    let planned = plan.json()["calendars"][0].clone();
    assert_eq!(
        (&planned["action"], &planned["version"]),
        (&json!("UPDATE"), &json!(1)),
        "{planned}"
    );
    assert_eq!(
        planned["schedules"][0]["windows"],
        json!([{"at": first_window, "excluded": false}, {"at": second_window, "excluded": true}])
    );
    s.cli(&["apply", "-f", f, "--yes"]).await.ok();
    let log = s
        .api
        .call(
            Some(VIEWER),
            axum::http::Method::GET,
            "/v1/calendars/holidays/audit",
            None,
        )
        .await;
    let notes: Vec<(&str, &str)> = log.body["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or(""),
                e["note"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let note = format!("cronledger apply -f {f}");
    assert_eq!(
        notes,
        [("CREATE", note.as_str()), ("UPDATE", note.as_str())]
    );

    // A stored calendar may be named without being defined; one neither defined nor stored
    // is refused before anything is written.
    std::fs::write(&file, calendar_manifest(None, "holidays")).expect("rewritten");
    let kept = s.cli(&["apply", "-f", f, "--yes"]).await.ok();
    assert!(kept.stdout.contains("nothing to change"), "{}", kept.stdout);
    std::fs::write(&file, calendar_manifest(None, "holidays, closures")).expect("rewritten");
    let unknown = s.cli(&["apply", "-f", f, "--yes"]).await;
    refused_with(&unknown, "CALENDAR_UNKNOWN");
    assert!(
        unknown.stderr.contains("schedules[settle].calendars[1]"),
        "{}",
        unknown.stderr
    );
    assert_eq!(s.version_and_cron("settle").await.0, 1);

    // No longer named and no longer in the file: --prune deletes it after the schedules.
    std::fs::write(&file, calendar_manifest(None, "")).expect("rewritten");
    let pruned = s.cli(&["apply", "-f", f, "--yes", "--prune"]).await.ok();
    assert!(
        pruned.stdout.contains("- delete calendar holidays"),
        "{}",
        pruned.stdout
    );
    let update_at = pruned.stdout.find("settle at version 2");
    let delete_at = pruned.stdout.find("calendar holidays deleted (version 3)");
    assert!(
        update_at.is_some() && update_at < delete_at,
        "{}",
        pruned.stdout
    );
    let listed = s.cli(&["calendars", "list", "--format", "json"]).await.ok();
    let empty: CalendarList = serde_json::from_str(&listed.stdout).expect("a CalendarList");
    assert!(empty.items.is_empty());
    let _ = std::fs::remove_file(&file);
}
