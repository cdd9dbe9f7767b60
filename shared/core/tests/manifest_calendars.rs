//! A manifest's `calendars:` beside its `schedules:`: read with the core's codes, and a
//! schedule may name only a calendar the manifest defines or (for `apply`) one stored.

mod common;

use common::{manifest, validation_now};
use cronledger_core::calendar::DateSel;
use cronledger_core::error::Code;
use cronledger_core::spec::read_manifest;
use cronledger_core::ValidationRules;

const WITH_HOLIDAYS: &str = r#"
calendars:
  kr-holidays:
    exclude: ["2026-12-25", "2027-01-01..2027-01-02"]
  empty: {}
schedules:
  - id: settle
    cron: "0 2 * * *"
    timezone: Asia/Seoul
    calendars: [kr-holidays]
    job: { type: noop }
"#;

fn codes_and_fields(err: &cronledger_core::Invalid) -> Vec<(Code, String)> {
    err.0.iter().map(|i| (i.code, i.field.clone())).collect()
}

#[test]
fn a_manifest_defines_calendars_its_schedules_name() {
    let read = read_manifest(
        WITH_HOLIDAYS,
        &ValidationRules::default(),
        validation_now(),
        &|_| false,
    )
    .expect("valid");
    assert_eq!(read.schedules.len(), 1);
    assert_eq!(read.schedules[0].calendars, ["kr-holidays"]);
    let holidays = read.calendars.get("kr-holidays").expect("defined");
    let range: DateSel = "2027-01-01..2027-01-02".parse().expect("range");
    assert_eq!(
        holidays.exclude,
        ["2026-12-25".parse().expect("day"), range]
    );
    assert!(read
        .calendars
        .get("empty")
        .expect("defined")
        .exclude
        .is_empty());
    // The schedules-only parse reads the same manifest.
    assert_eq!(manifest(WITH_HOLIDAYS).expect("valid"), read.schedules);
}

#[test]
fn a_calendar_neither_defined_nor_stored_is_unknown() {
    let text = WITH_HOLIDAYS.replace("[kr-holidays]", "[kr-holidays, closures]");
    let err = manifest(&text).expect_err("closures is nowhere");
    assert_eq!(
        codes_and_fields(&err),
        [(
            Code::CalendarUnknown,
            "schedules[settle].calendars[1]".to_string()
        )]
    );
    assert_eq!(err.0[0].id.as_deref(), Some("settle"));
    // Stored where the manifest is applied: known.
    let stored = |name: &str| name == "closures";
    let read = read_manifest(
        &text,
        &ValidationRules::default(),
        validation_now(),
        &stored,
    )
    .expect("closures is stored");
    assert!(!read.calendars.contains("closures"));
}

#[test]
fn a_calendar_written_wrong_is_told_about_once() {
    let text = WITH_HOLIDAYS.replace("\"2026-12-25\"", "\"2026-12-32\"");
    let err = manifest(&text).expect_err("bad date");
    assert_eq!(
        codes_and_fields(&err),
        [(Code::CalendarInvalid, "calendars.kr-holidays".to_string())]
    );
    let text = WITH_HOLIDAYS.replace("  empty: {}", "  Bad Name: {}");
    let err = manifest(&text).expect_err("bad name");
    assert_eq!(
        codes_and_fields(&err),
        [(Code::CalendarInvalid, "calendars.Bad Name".to_string())]
    );
    let text = WITH_HOLIDAYS.replace("  empty: {}", "  extra: {exclude: [], note: hi}");
    assert_eq!(
        codes_and_fields(&manifest(&text).expect_err("unknown field")),
        [(Code::CalendarInvalid, "calendars.extra".to_string())]
    );
    let listed = "calendars: [kr-holidays]\nschedules: []\n";
    assert_eq!(
        codes_and_fields(&manifest(listed).expect_err("a list")),
        [(Code::CalendarInvalid, "calendars".to_string())]
    );
    let other = "schedules: []\nholidays: {}\n";
    assert_eq!(
        codes_and_fields(&manifest(other).expect_err("unknown key")),
        [(Code::ManifestInvalid, "holidays".to_string())]
    );
}
