//! Helpers shared by the core's integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use cronledger_core::spec::{parse_manifest, validate_schedule};
use cronledger_core::{Schedule, ScheduleSpec, Timing, ValidationRules};
use serde_json::{json, Value};

/// An RFC3339 instant; panics on a typo in the test itself.
pub fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("bad instant `{text}` in test: {e}"))
        .with_timezone(&Utc)
}

pub fn zone(name: &str) -> Tz {
    name.parse()
        .unwrap_or_else(|_| panic!("unknown zone `{name}` in test"))
}

pub fn timing(expr: &str, tz: &str) -> Timing {
    Timing::parse(expr, zone(tz)).unwrap_or_else(|e| panic!("`{expr}` in {tz}: {e}"))
}

/// The fixed "now" the validation tests anchor their calendar checks to.
pub fn validation_now() -> DateTime<Utc> {
    utc("2026-01-01T00:00:00Z")
}

/// A minimal valid schedule as plain data; tests override fields on it.
pub fn schedule_value(id: &str, cron: &str, tz: &str) -> Value {
    json!({
        "id": id,
        "cron": cron,
        "timezone": tz,
        "job": { "type": "noop" },
    })
}

/// Validates one schedule with the default rules, panicking with the issues if invalid.
pub fn valid_spec(value: Value) -> ScheduleSpec {
    validate_schedule(&value, "", &ValidationRules::default(), validation_now())
        .unwrap_or_else(|issues| panic!("expected a valid spec, got {issues:?}"))
}

/// A compiled schedule built from a base value plus field overrides.
pub fn schedule_with(cron: &str, tz: &str, overrides: Value) -> Schedule {
    let mut value = schedule_value("job", cron, tz);
    let (Value::Object(base), Value::Object(extra)) = (&mut value, overrides) else {
        panic!("overrides must be a JSON object");
    };
    base.extend(extra);
    Schedule::new(valid_spec(value)).unwrap()
}

/// Parses a manifest with the default rules.
pub fn manifest(text: &str) -> Result<Vec<ScheduleSpec>, cronledger_core::Invalid> {
    parse_manifest(text, &ValidationRules::default(), validation_now())
}
