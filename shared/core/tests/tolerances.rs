//! Tolerances a schedule asks for that the system cannot honour are refused, each with its
//! stable code: a grace under the ticker's cadence, a max_runtime or http timeout past the
//! worker's timeout (less its margin), an http timeout past max_runtime.

mod common;

use common::{schedule_value, validation_now};
use cronledger_core::spec::validate_schedule;
use cronledger_core::{Code, Issue, ValidationRules};
use serde_json::{json, Value};

fn issues(overrides: Value, rules: &ValidationRules) -> Vec<(Code, String)> {
    let mut value = schedule_value("job", "*/5 * * * *", "UTC");
    if let (Some(base), Some(extra)) = (value.as_object_mut(), overrides.as_object()) {
        base.extend(extra.clone());
    }
    match validate_schedule(&value, "s", rules, validation_now()) {
        Ok(_) => vec![],
        Err(found) => found
            .into_iter()
            .map(|Issue { code, field, .. }| (code, field))
            .collect(),
    }
}

fn http(timeout: &str) -> Value {
    json!({"type": "http", "url": "https://example.internal/x", "timeout": timeout})
}

#[test]
fn grace_under_thirty_seconds_is_refused() {
    let rules = ValidationRules::default();
    for short in ["0s", "1s", "29s"] {
        assert_eq!(
            issues(json!({"grace": short}), &rules),
            vec![(Code::ScheduleGraceTooShort, "s.grace".to_string())],
            "grace {short}"
        );
    }
    assert!(issues(json!({"grace": "30s"}), &rules).is_empty());
    assert!(issues(json!({}), &rules).is_empty(), "the default grace");
}

#[test]
fn max_runtime_must_leave_the_worker_its_margin() {
    let rules = ValidationRules::default();
    // The worker's timeout is 900 s and it keeps 60 s: 14 minutes is the most.
    assert!(issues(json!({"max_runtime": "14m"}), &rules).is_empty());
    assert!(
        issues(json!({}), &rules).is_empty(),
        "the default max_runtime"
    );
    for long in ["14m1s", "15m", "20m"] {
        assert_eq!(
            issues(json!({"max_runtime": long}), &rules),
            vec![(
                Code::ScheduleMaxRuntimeOverWorkerTimeout,
                "s.max_runtime".to_string()
            )],
            "max_runtime {long}"
        );
    }
    // A longer worker timeout (the api's CRONLEDGER_WORKER_TIMEOUT_SECONDS) moves the ceiling.
    let shorter = ValidationRules {
        worker_timeout: cronledger_core::Span::seconds(300),
        ..ValidationRules::default()
    };
    assert_eq!(
        issues(json!({"max_runtime": "5m"}), &shorter),
        vec![(
            Code::ScheduleMaxRuntimeOverWorkerTimeout,
            "s.max_runtime".to_string()
        )]
    );
    assert!(issues(json!({"max_runtime": "4m"}), &shorter).is_empty());
}

#[test]
fn http_timeout_must_fit_the_worker_and_max_runtime() {
    let rules = ValidationRules::default();
    assert!(issues(json!({"job": http("30s")}), &rules).is_empty());
    assert_eq!(
        issues(json!({"job": http("15m"), "max_runtime": "14m"}), &rules),
        vec![(
            Code::ScheduleHttpTimeoutOverWorkerTimeout,
            "s.job.timeout".to_string()
        )]
    );
    assert_eq!(
        issues(json!({"job": http("2m"), "max_runtime": "1m"}), &rules),
        vec![(
            Code::ScheduleHttpTimeoutOverMaxRuntime,
            "s.job.timeout".to_string()
        )]
    );
    assert!(issues(json!({"job": http("1m"), "max_runtime": "1m"}), &rules).is_empty());
}

#[test]
fn the_new_codes_are_stable_strings() {
    for (code, text) in [
        (Code::ScheduleGraceTooShort, "SCHEDULE_GRACE_TOO_SHORT"),
        (
            Code::ScheduleMaxRuntimeOverWorkerTimeout,
            "SCHEDULE_MAX_RUNTIME_OVER_WORKER_TIMEOUT",
        ),
        (
            Code::ScheduleHttpTimeoutOverWorkerTimeout,
            "SCHEDULE_HTTP_TIMEOUT_OVER_WORKER_TIMEOUT",
        ),
        (
            Code::ScheduleHttpTimeoutOverMaxRuntime,
            "SCHEDULE_HTTP_TIMEOUT_OVER_MAX_RUNTIME",
        ),
    ] {
        assert_eq!(code.as_str(), text);
        assert_eq!(serde_json::to_value(code).unwrap(), json!(text));
    }
}
