//! Business windows, business dates and idempotency keys (DESIGN invariants 3 and 5): all
//! derived from the schedule's calendar, never from when a run happens to execute.

mod common;

use common::{schedule_with, utc};
use cronledger_core::run::Origin;
use cronledger_core::{IdempotencyKey, RunKey, Window};
use serde_json::json;

#[test]
fn window_is_previous_occurrence_to_scheduled_for_across_dst() {
    let s = schedule_with("30 2 * * *", "America/New_York", json!({}));
    // The gap-shifted fire at 03:00 EDT closes the window that opened at 02:30 EST the day before.
    let shifted = s.window_for(utc("2026-03-08T07:00:00Z"));
    assert_eq!(
        shifted,
        Window::new(utc("2026-03-07T07:30:00Z"), utc("2026-03-08T07:00:00Z"))
    );
    let after = s.window_for(utc("2026-03-09T06:30:00Z"));
    assert_eq!(after.start, utc("2026-03-08T07:00:00Z"));
    assert_eq!(s.business_date(&after).to_string(), "2026-03-08");

    let hourly = schedule_with("0 * * * *", "America/New_York", json!({}));
    // The second 01:00 (EST) covers the hour since the first 01:00 (EDT): one real hour.
    let second_pass = hourly.window_for(utc("2026-11-01T06:00:00Z"));
    assert_eq!(second_pass.start, utc("2026-11-01T05:00:00Z"));
}

#[test]
fn business_date_is_the_local_date_of_the_window_start() {
    // Midnight in Seoul is 15:00Z the day before.
    let s = schedule_with("0 0 * * *", "Asia/Seoul", json!({}));
    let window = s.window_for(utc("2026-01-02T15:00:00Z"));
    assert_eq!(window.start, utc("2026-01-01T15:00:00Z"));
    assert_eq!(s.business_date(&window).to_string(), "2026-01-02");
    // Kathmandu's +5:45 moves the date at 18:15Z.
    let k = schedule_with("0 6 * * *", "Asia/Kathmandu", json!({}));
    let window = k.window_for(utc("2026-01-02T00:15:00Z"));
    assert_eq!(window.start, utc("2026-01-01T00:15:00Z"));
    assert_eq!(k.business_date(&window).to_string(), "2026-01-01");
}

#[test]
fn the_first_occurrence_ever_has_an_empty_window() {
    let s = schedule_with("cron(0 12 L * ? 2026)", "UTC", json!({}));
    let first = utc("2026-01-31T12:00:00Z");
    assert_eq!(s.window_for(first), Window::new(first, first));
    assert_eq!(s.window_for(utc("2026-02-28T12:00:00Z")).start, first);
}

#[test]
fn idempotency_key_comes_from_the_window_and_tenant() {
    let with_tenant = schedule_with(
        "0 2 * * *",
        "Asia/Seoul",
        json!({ "job": { "type": "noop", "payload": { "tenant": "kr" } } }),
    );
    let window = with_tenant.window_for(utc("2026-01-02T17:00:00Z"));
    let key = with_tenant.idempotency_key(&window);
    assert_eq!(
        key.as_str(),
        "job:2026-01-01T17:00:00Z/2026-01-02T17:00:00Z:kr"
    );
    // Computing it again later (a retry, a catch-up, a manual reuse) gives the same key.
    assert_eq!(
        with_tenant.idempotency_key(&with_tenant.window_for(utc("2026-01-02T17:00:00Z"))),
        key
    );
    assert_ne!(
        with_tenant.idempotency_key(&with_tenant.window_for(utc("2026-01-03T17:00:00Z"))),
        key
    );

    let plain = schedule_with("0 2 * * *", "Asia/Seoul", json!({}));
    assert_eq!(
        plain.idempotency_key(&window).as_str(),
        "job:2026-01-01T17:00:00Z/2026-01-02T17:00:00Z"
    );
    // Sub-second instants keep their fraction rather than colliding with the whole second.
    let odd = Window::new(utc("2026-01-01T00:00:00.25Z"), utc("2026-01-01T00:01:00Z"));
    assert_eq!(
        IdempotencyKey::for_window("s", &odd, None).as_str(),
        "s:2026-01-01T00:00:00.250Z/2026-01-01T00:01:00Z"
    );
}

#[test]
fn run_keys_sort_expected_before_operator_runs() {
    let at = utc("2026-01-01T09:00:00Z");
    let expected = RunKey::expected("s", at);
    assert_eq!(expected.sort_key(), "RUN#2026-01-01T09:00:00Z");
    let manual = RunKey {
        origin: Origin::Manual("req-7".into()),
        ..expected.clone()
    };
    assert_eq!(manual.sort_key(), "RUN#2026-01-01T09:00:00Z#MANUAL#req-7");
    let backfill = RunKey {
        origin: Origin::Backfill("bf-1".into()),
        ..expected.clone()
    };
    assert_eq!(
        backfill.sort_key(),
        "RUN#2026-01-01T09:00:00Z#BACKFILL#bf-1"
    );
    assert!(expected < manual && expected < backfill);
    assert_eq!(
        manual.to_string(),
        "s/RUN#2026-01-01T09:00:00Z#MANUAL#req-7"
    );
}

#[test]
fn only_fire_times_are_occurrences_in_the_schedules_zone() {
    let hourly = schedule_with("0 * * * *", "UTC", json!({}));
    assert!(hourly.timing().is_occurrence(utc("2026-03-10T10:00:00Z")));
    // Inside the hour, or a fraction of a second off: not a fire time.
    assert!(!hourly.timing().is_occurrence(utc("2026-03-10T10:17:00Z")));
    assert!(!hourly
        .timing()
        .is_occurrence(utc("2026-03-10T10:00:00.500Z")));
    // 09:00 in New York is 14:00Z in winter and 13:00Z in summer: the zone decides.
    let daily = schedule_with("0 9 * * *", "America/New_York", json!({}));
    assert!(daily.timing().is_occurrence(utc("2026-01-05T14:00:00Z")));
    assert!(!daily.timing().is_occurrence(utc("2026-01-05T09:00:00Z")));
    assert!(daily.timing().is_occurrence(utc("2026-07-06T13:00:00Z")));
    // A rate: multiples of its step.
    let rate = schedule_with("rate(15 minutes)", "UTC", json!({}));
    assert!(rate.timing().is_occurrence(utc("2026-03-10T10:45:00Z")));
    assert!(!rate.timing().is_occurrence(utc("2026-03-10T10:50:00Z")));
}
