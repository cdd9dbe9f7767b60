//! Manifest parsing and validation: every problem at once, each with its stable code and
//! the path of the field it is about; defaults; serialization round trip.

mod common;

use common::{manifest, schedule_value, valid_spec, validation_now};
use cronledger_core::spec::{parse_manifest, validate_schedule, validate_timing, Approval};
use cronledger_core::{
    Code, Invalid, Issue, JobSpec, MisfirePolicy, OverlapPolicy, Priority, ScheduleSpec, Span,
    ValidationRules,
};
use serde_json::{json, Value};

/// The issues of an invalid manifest, or a panic naming the specs it accepted.
fn issues_of(text: &str) -> Vec<Issue> {
    match manifest(text) {
        Ok(specs) => panic!("expected problems, got {} valid spec(s)", specs.len()),
        Err(Invalid(issues)) => issues,
    }
}

fn codes(issues: &[Issue]) -> Vec<(Code, &str)> {
    issues.iter().map(|i| (i.code, i.field.as_str())).collect()
}

fn schedule_issues(value: Value, rules: &ValidationRules) -> Vec<Issue> {
    match validate_schedule(&value, "s", rules, validation_now()) {
        Ok(_) => panic!("expected problems in {value}"),
        Err(issues) => issues,
    }
}

fn with(mut base: Value, field: &str, value: Value) -> Value {
    base[field] = value;
    base
}

const YAML: &str = r#"
schedules:
  - id: daily-settlement
    cron: "0 2 * * *"
    timezone: Asia/Seoul
    misfire: MANUAL
    overlap: SKIP_NEW
    grace: 30m
    max_auto_catch_up: 0
    max_runtime: 14m
    priority: CRITICAL
    side_effects: true
    enabled: true
    owner: settlement-platform
    job: { type: http, url: "https://example.internal/settle", payload: { tenant: kr } }
  - id: hourly-report
    cron: "cron(0 * ? * MON-FRI *)"
    timezone: Europe/Berlin
    job:
      type: lambda
      function: report
"#;

#[test]
fn yaml_manifest_from_the_design_parses() {
    let specs = manifest(YAML).unwrap();
    assert_eq!(specs.len(), 2);
    let settle = &specs[0];
    assert_eq!(settle.id, "daily-settlement");
    assert_eq!(settle.timezone, chrono_tz::Asia::Seoul);
    assert_eq!(settle.misfire, MisfirePolicy::Manual);
    assert_eq!(settle.overlap, OverlapPolicy::SkipNew);
    assert_eq!(settle.grace, Span::minutes(30));
    assert_eq!(settle.max_auto_catch_up, 0);
    assert_eq!(settle.max_runtime, Span::minutes(14));
    assert_eq!(settle.priority, Priority::Critical);
    assert_eq!(settle.owner.as_deref(), Some("settlement-platform"));
    assert_eq!(settle.job.tenant(), Some("kr"));
    assert!(
        matches!(&settle.job, JobSpec::Http { url, .. } if url == "https://example.internal/settle")
    );
    assert!(matches!(&specs[1].job, JobSpec::Lambda { function, .. } if function == "report"));
}

#[test]
fn json_manifest_parses_the_same() {
    let specs = manifest(YAML).unwrap();
    let json_text = serde_json::to_string(&json!({ "schedules": specs })).unwrap();
    assert_eq!(manifest(&json_text).unwrap(), specs);
}

#[test]
fn omitted_fields_take_the_documented_defaults() {
    let spec = valid_spec(schedule_value("minimal", "0 9 * * *", "UTC"));
    assert!(spec.enabled);
    assert_eq!(spec.misfire, MisfirePolicy::RunOnce);
    assert_eq!(spec.overlap, OverlapPolicy::SkipNew);
    assert_eq!(spec.grace, Span::minutes(2));
    assert_eq!(spec.max_auto_catch_up, 5);
    // The worker's 15-minute timeout less its 60 s margin.
    assert_eq!(spec.max_runtime, Span::minutes(14));
    assert_eq!(spec.priority, Priority::Normal);
    assert!(spec.side_effects, "unknown side effects must be assumed");
    assert!(!spec.idempotent);
    assert_eq!(spec.max_attempts, 3);
    assert_eq!(spec.owner, None);
    assert_eq!(spec.catch_up.immediate, Span::minutes(5));
    assert_eq!(spec.catch_up.serial, Span::hours(1));
    assert_eq!(spec.catch_up.backfill, Span::hours(24));
    let http = valid_spec(with(
        schedule_value("web", "0 9 * * *", "UTC"),
        "job",
        json!({ "type": "http", "url": "https://x.test" }),
    ));
    assert!(matches!(http.job, JobSpec::Http { timeout, .. } if timeout == Span::seconds(30)));
}

#[test]
fn validated_specs_round_trip_through_yaml_and_json() {
    let mut specs = manifest(YAML).unwrap();
    specs.push(valid_spec(schedule_value(
        "minimal",
        "@daily",
        "Australia/Lord_Howe",
    )));
    for spec in specs {
        let json_text = serde_json::to_string(&spec).unwrap();
        assert_eq!(
            serde_json::from_str::<ScheduleSpec>(&json_text).unwrap(),
            spec
        );
        let yaml_text = serde_norway::to_string(&spec).unwrap();
        assert_eq!(
            serde_norway::from_str::<ScheduleSpec>(&yaml_text).unwrap(),
            spec
        );
        // The serialized form also passes validation to the same spec.
        let value: Value = serde_json::from_str(&json_text).unwrap();
        let again = validate_schedule(&value, "", &ValidationRules::default(), validation_now());
        assert_eq!(again.unwrap(), spec);
    }
}

#[test]
fn each_problem_has_its_code_and_field() {
    let rules = ValidationRules::default();
    let base = || schedule_value("ok", "0 9 * * *", "UTC");
    let cases: Vec<(Value, Code, &str)> = vec![
        (
            with(base(), "cron", json!("0 25 * * *")),
            Code::ScheduleInvalidCron,
            "s.cron",
        ),
        (
            with(base(), "cron", json!("0 0 9 * * *")),
            Code::ScheduleInvalidCron,
            "s.cron",
        ),
        (
            with(base(), "timezone", json!("Mars/Olympus")),
            Code::ScheduleUnknownTimezone,
            "s.timezone",
        ),
        (
            with(base(), "timezone", json!("EST5EDT6")),
            Code::ScheduleUnknownTimezone,
            "s.timezone",
        ),
        (
            with(base(), "cron", json!("0 0 30 2 *")),
            Code::ScheduleNeverFires,
            "s.cron",
        ),
        (
            with(base(), "cron", json!("cron(0 0 1 1 ? 2020)")),
            Code::ScheduleNeverFires,
            "s.cron",
        ),
        (
            with(base(), "misfire", json!("RUN_TWICE")),
            Code::ScheduleUnknownPolicy,
            "s.misfire",
        ),
        (
            with(base(), "overlap", json!("allow")),
            Code::ScheduleUnknownPolicy,
            "s.overlap",
        ),
        (
            with(base(), "priority", json!("URGENT")),
            Code::ScheduleUnknownPolicy,
            "s.priority",
        ),
        (
            with(base(), "grace", json!("soon")),
            Code::ScheduleInvalidDuration,
            "s.grace",
        ),
        (
            with(base(), "id", json!("Has Spaces")),
            Code::ScheduleInvalidId,
            "s.id",
        ),
        (
            with(base(), "id", json!("x".repeat(65))),
            Code::ScheduleInvalidId,
            "s.id",
        ),
        (
            with(base(), "retries", json!(3)),
            Code::ScheduleUnknownField,
            "s.retries",
        ),
        (
            with(base(), "enabled", json!("yes")),
            Code::ScheduleInvalidField,
            "s.enabled",
        ),
        (
            with(base(), "max_attempts", json!(0)),
            Code::ScheduleInvalidField,
            "s.max_attempts",
        ),
        (
            with(base(), "max_auto_catch_up", json!(-1)),
            Code::ScheduleInvalidField,
            "s.max_auto_catch_up",
        ),
        (
            with(base(), "job", json!({ "type": "ftp" })),
            Code::ScheduleInvalidJob,
            "s.job",
        ),
        (
            with(base(), "job", json!({ "type": "http", "url": "ftp://x" })),
            Code::ScheduleInvalidJob,
            "s.job.url",
        ),
        (
            with(base(), "job", json!({ "type": "noop", "colour": "red" })),
            Code::ScheduleInvalidJob,
            "s.job",
        ),
        (
            with(
                base(),
                "catch_up",
                json!({ "immediate": "2h", "serial": "1h" }),
            ),
            Code::ScheduleInvalidField,
            "s.catch_up",
        ),
    ];
    for (value, code, field) in cases {
        let issues = schedule_issues(value.clone(), &rules);
        assert_eq!(codes(&issues), vec![(code, field)], "{value}");
        assert!(!issues[0].message.is_empty());
    }
    let missing = schedule_issues(json!({ "id": "x" }), &rules);
    assert_eq!(
        codes(&missing),
        vec![
            (Code::ScheduleMissingField, "s.cron"),
            (Code::ScheduleMissingField, "s.timezone"),
            (Code::ScheduleMissingField, "s.job"),
        ]
    );
}

#[test]
fn interval_floor_default_and_per_job_type() {
    let mut rules = ValidationRules::default();
    // The default floor is one minute: every minute is fine, rate(1 minute) too.
    for cron in ["* * * * *", "rate(1 minute)", "*/2 * * * *"] {
        let value = with(
            schedule_value("x", cron, "America/New_York"),
            "job",
            json!({ "type": "http", "url": "https://x.test" }),
        );
        assert!(
            validate_schedule(&value, "s", &rules, validation_now()).is_ok(),
            "{cron}"
        );
    }
    rules
        .min_interval_by_type
        .insert("http".into(), Span::minutes(5));
    let http = |cron: &str| {
        with(
            schedule_value("x", cron, "America/New_York"),
            "job",
            json!({ "type": "http", "url": "https://x.test" }),
        )
    };
    let issues = schedule_issues(http("*/2 * * * *"), &rules);
    assert_eq!(
        codes(&issues),
        vec![(Code::ScheduleIntervalTooShort, "s.cron")]
    );
    assert!(
        issues[0].message.contains("2m") && issues[0].message.contains("5m"),
        "{}",
        issues[0].message
    );
    assert!(issues[0].message.contains("http"), "{}", issues[0].message);
    // Exactly at the floor passes; other job types keep the global floor.
    assert!(validate_schedule(&http("*/5 * * * *"), "s", &rules, validation_now()).is_ok());
    let noop = schedule_value("x", "*/2 * * * *", "UTC");
    assert!(validate_schedule(&noop, "s", &rules, validation_now()).is_ok());
    // Uneven steps count their closest pair: 0,3 is three minutes apart.
    let issues = schedule_issues(http("0,3 * * * *"), &rules);
    assert_eq!(
        codes(&issues),
        vec![(Code::ScheduleIntervalTooShort, "s.cron")]
    );
    // A per-type floor never loosens the global one.
    rules
        .min_interval_by_type
        .insert("noop".into(), Span::seconds(1));
    rules.min_interval = Span::minutes(10);
    let issues = schedule_issues(schedule_value("x", "*/5 * * * *", "UTC"), &rules);
    assert_eq!(
        codes(&issues),
        vec![(Code::ScheduleIntervalTooShort, "s.cron")]
    );
}

#[test]
fn payload_size_limit_is_8_kib() {
    let rules = ValidationRules::default();
    // `{"blob":"…"}` is 11 bytes of wrapping around the string.
    let payload = |len: usize| json!({ "type": "noop", "payload": { "blob": "a".repeat(len) } });
    let at_limit = with(
        schedule_value("x", "0 9 * * *", "UTC"),
        "job",
        payload(8192 - 11),
    );
    assert!(validate_schedule(&at_limit, "s", &rules, validation_now()).is_ok());
    let over = with(
        schedule_value("x", "0 9 * * *", "UTC"),
        "job",
        payload(8192 - 10),
    );
    let issues = schedule_issues(over, &rules);
    assert_eq!(
        codes(&issues),
        vec![(Code::SchedulePayloadTooLarge, "s.job.payload")]
    );
    assert!(issues[0].message.contains("8193"), "{}", issues[0].message);
}

#[test]
fn secret_looking_keys_are_found_at_any_depth() {
    let rules = ValidationRules::default();
    let job = json!({
        "type": "http",
        "url": "https://x.test",
        "payload": {
            "tenant": "kr",
            "Password": "p",
            "db": { "client_secret": "s", "hosts": [{ "name": "a" }, { "auth": { "Authorization": "Bearer x" } }] },
            "refresh-token": "t",
            "API_KEY": "k",
            "apiKey": "k2",
        },
    });
    let issues = schedule_issues(
        with(schedule_value("x", "0 9 * * *", "UTC"), "job", job),
        &rules,
    );
    assert!(
        issues.iter().all(|i| i.code == Code::SchedulePayloadSecret),
        "{issues:?}"
    );
    let mut found: Vec<&str> = issues.iter().map(|i| i.field.as_str()).collect();
    found.sort();
    let mut expected = vec![
        "s.job.payload.Password",
        "s.job.payload.db.client_secret",
        "s.job.payload.db.hosts[1].auth.Authorization",
        "s.job.payload.refresh-token",
        "s.job.payload.API_KEY",
        "s.job.payload.apiKey",
    ];
    expected.sort();
    assert_eq!(found, expected);
    // Secret-looking values under innocent keys are the user's business.
    let innocent = json!({ "type": "noop", "payload": { "note": "password", "tenant": "kr" } });
    assert!(validate_schedule(
        &with(schedule_value("x", "0 9 * * *", "UTC"), "job", innocent),
        "s",
        &rules,
        validation_now()
    )
    .is_ok());
}

#[test]
fn one_manifest_with_many_problems_reports_all_of_them() {
    let text = r#"
schedules:
  - id: good
    cron: "0 9 * * *"
    timezone: UTC
    job: { type: noop }
  - id: good
    cron: "0 10 * * *"
    timezone: UTC
    job: { type: noop }
  - id: broken
    cron: "0 9 * *"
    timezone: Mars/Olympus
    misfire: SOMETIMES
    colour: blue
    job: { type: http, url: "https://x.test", payload: { token: abc } }
  - id: feb30
    cron: "0 0 30 2 *"
    timezone: Asia/Seoul
    job: { type: noop, payload: { blob: "BLOB" } }
  - id: good
    cron: "not a cron"
    timezone: UTC
    job: { type: noop }
extra: true
"#
    .replace("BLOB", &"b".repeat(9000));
    let issues = issues_of(&text);
    let found = codes(&issues);
    let expected = [
        (Code::ManifestInvalid, "extra"),
        (Code::ScheduleDuplicateId, "schedules[1].id"),
        (Code::ScheduleUnknownField, "schedules[broken].colour"),
        (Code::ScheduleUnknownTimezone, "schedules[broken].timezone"),
        (Code::ScheduleUnknownPolicy, "schedules[broken].misfire"),
        (
            Code::SchedulePayloadSecret,
            "schedules[broken].job.payload.token",
        ),
        (Code::ScheduleInvalidCron, "schedules[broken].cron"),
        (
            Code::SchedulePayloadTooLarge,
            "schedules[feb30].job.payload",
        ),
        (Code::ScheduleNeverFires, "schedules[feb30].cron"),
        // `good` is used three times: no id names one of them, so their positions do.
        (Code::ScheduleInvalidCron, "schedules[4].cron"),
        (Code::ScheduleDuplicateId, "schedules[4].id"),
    ];
    for want in expected {
        assert!(found.contains(&want), "missing {want:?} in {found:?}");
    }
    assert_eq!(found.len(), expected.len(), "{found:?}");
    // Each issue carries the schedule's id (when usable) and its position beside the path.
    let placed: Vec<(Option<&str>, Option<usize>)> =
        issues.iter().map(|i| (i.id.as_deref(), i.index)).collect();
    assert_eq!(placed[0], (None, None), "a top-level key is in no schedule");
    assert!(placed.contains(&(Some("broken"), Some(2))), "{placed:?}");
    assert!(placed.contains(&(Some("feb30"), Some(3))), "{placed:?}");
    assert!(placed.contains(&(None, Some(4))), "{placed:?}");
    let as_json = serde_json::to_value(&issues).expect("json");
    let broken = as_json
        .as_array()
        .and_then(|all| all.iter().find(|i| i["field"] == "schedules[broken].cron"))
        .expect("the broken cron");
    assert_eq!(
        (&broken["id"], &broken["index"], &broken["code"]),
        (&json!("broken"), &json!(2), &json!("SCHEDULE_INVALID_CRON"))
    );
    assert!(as_json[0].get("id").is_none(), "no id field when none");
}

#[test]
fn a_graph_issue_names_the_schedule_by_its_id() {
    let text = r#"
schedules:
  - id: load
    cron: "0 * * * *"
    timezone: UTC
    after: [extract]
    job: { type: noop }
"#;
    let issues = issues_of(text);
    assert_eq!(
        codes(&issues),
        vec![(Code::DependencyUnknownUpstream, "schedules[load].after")]
    );
    assert_eq!(
        (issues[0].id.as_deref(), issues[0].index),
        (Some("load"), Some(0))
    );
}

#[test]
fn documents_that_are_not_manifests() {
    for text in [
        "",
        "schedules: 3",
        "[1, 2]",
        "{ \"schedules\": {} }",
        "not: [valid",
        "{\"schedules\": [}",
    ] {
        let issues = issues_of(text);
        assert_eq!(issues.len(), 1, "{text}: {issues:?}");
        assert_eq!(issues[0].code, Code::ManifestInvalid, "{text}");
    }
    let issues = issues_of("schedules:\n  - 42\n");
    assert_eq!(
        codes(&issues),
        vec![(Code::ManifestInvalid, "schedules[0]")]
    );
    assert!(manifest("schedules: []").unwrap().is_empty());
}

#[test]
fn timing_only_validation() {
    let rules = ValidationRules::default();
    let now = validation_now();
    assert!(validate_timing("0 9 * * 1-5", "Asia/Seoul", &rules, now).is_ok());
    let code_of = |cron: &str, tz: &str| {
        validate_timing(cron, tz, &rules, now)
            .unwrap_err()
            .into_iter()
            .map(|i| i.code)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        code_of("0 9 * * *", "Nowhere/Town"),
        vec![Code::ScheduleUnknownTimezone]
    );
    assert_eq!(code_of("0 9 * *", "UTC"), vec![Code::ScheduleInvalidCron]);
    assert_eq!(code_of("0 0 30 2 *", "UTC"), vec![Code::ScheduleNeverFires]);
    assert_eq!(
        code_of("0 9 * *", "Nowhere/Town"),
        vec![Code::ScheduleUnknownTimezone, Code::ScheduleInvalidCron]
    );
}

#[test]
fn codes_are_stable_strings() {
    let issue = Issue::new(
        Code::SchedulePayloadSecret,
        "schedules[0].job.payload.token",
        "looks like a secret",
    );
    assert_eq!(
        issue.to_string(),
        "SCHEDULE_PAYLOAD_SECRET: looks like a secret"
    );
    assert_eq!(
        serde_json::to_value(Code::ScheduleNeverFires).unwrap(),
        json!("SCHEDULE_NEVER_FIRES")
    );
    let invalid = parse_manifest(
        "schedules: 1",
        &ValidationRules::default(),
        validation_now(),
    )
    .unwrap_err();
    assert!(invalid
        .to_string()
        .starts_with("1 problem(s): MANIFEST_INVALID"));
}

#[test]
fn secret_markers_match_whole_words_only() {
    let rules = ValidationRules::default();
    let job = json!({
        "type": "noop",
        "payload": { "max_tokens": 100, "tokenizer": "bpe", "secretary": "x", "accessToken": "t" },
    });
    let issues = schedule_issues(
        with(schedule_value("x", "0 9 * * *", "UTC"), "job", job),
        &rules,
    );
    let found: Vec<&str> = issues.iter().map(|i| i.field.as_str()).collect();
    assert_eq!(found, vec!["s.job.payload.accessToken"]);
}

#[test]
fn handler_jobs_name_a_compiled_in_handler() {
    let rules = ValidationRules::default();
    let ok = with(
        schedule_value("x", "0 9 * * *", "UTC"),
        "job",
        json!({ "type": "handler", "name": "settle", "payload": { "tenant": "kr" } }),
    );
    assert!(validate_schedule(&ok, "s", &rules, validation_now()).is_ok());
    let blank = with(
        schedule_value("x", "0 9 * * *", "UTC"),
        "job",
        json!({ "type": "handler", "name": " " }),
    );
    assert_eq!(
        codes(&schedule_issues(blank, &rules)),
        vec![(Code::ScheduleInvalidJob, "s.job.name")]
    );
}

#[test]
fn approval_and_guard_fields_parse_with_their_defaults() {
    let plain = valid_spec(schedule_value("plain", "0 9 * * *", "UTC"));
    assert_eq!(plain.approval, Approval::None);
    assert_eq!(plain.approval_timeout, Span::hours(24));
    assert_eq!(plain.job.guard(), None);
    // Defaults stay out of the serialized spec, so stored specs do not change.
    let text = serde_json::to_value(&plain).unwrap();
    assert!(text.get("approval").is_none() && text.get("approval_timeout").is_none());

    let yaml = r#"
schedules:
  - id: purge
    cron: "0 3 * * *"
    timezone: UTC
    approval: every_run
    approval_timeout: 6h
    job: { type: noop, affected: 120, guard: { max_affected: 100 } }
  - id: export
    cron: "0 4 * * *"
    timezone: UTC
    job: { type: http, url: "https://x.test/purge", guard: { max_affected: 0 } }
  - id: prune
    cron: "0 5 * * *"
    timezone: UTC
    approval: none
    job: { type: lambda, function: prune, guard: { max_affected: 5000 } }
  - id: local
    cron: "0 6 * * *"
    timezone: UTC
    job: { type: handler, name: sweep, guard: { max_affected: 7 } }
"#;
    let specs = manifest(yaml).unwrap();
    assert_eq!(specs[0].approval, Approval::EveryRun);
    assert_eq!(specs[0].approval_timeout, Span::hours(6));
    assert!(matches!(
        specs[0].job,
        JobSpec::Noop {
            affected: Some(120),
            ..
        }
    ));
    let limits: Vec<Option<u64>> = specs
        .iter()
        .map(|s| s.job.guard().map(|g| g.max_affected))
        .collect();
    assert_eq!(limits, vec![Some(100), Some(0), Some(5000), Some(7)]);
    assert_eq!(specs[2].approval, Approval::None);
    for spec in specs {
        let value = serde_json::to_value(&spec).unwrap();
        let again = validate_schedule(&value, "", &ValidationRules::default(), validation_now());
        assert_eq!(again.unwrap(), spec);
    }
    // A noop with a guard and no `affected` is valid: its dry run is what refuses.
    let blind = with(
        schedule_value("blind", "0 9 * * *", "UTC"),
        "job",
        json!({ "type": "noop", "guard": { "max_affected": 1 } }),
    );
    assert!(matches!(
        valid_spec(blind).job,
        JobSpec::Noop { affected: None, .. }
    ));
}

#[test]
fn bad_approval_and_guard_values_get_their_codes() {
    let rules = ValidationRules::default();
    let base = || schedule_value("x", "0 9 * * *", "UTC");
    let job = |job: Value| with(base(), "job", job);
    let table = [
        (
            with(base(), "approval", json!("always")),
            Code::ScheduleInvalidField,
            "s.approval",
        ),
        (
            with(base(), "approval", json!(true)),
            Code::ScheduleInvalidField,
            "s.approval",
        ),
        (
            with(base(), "approval_timeout", json!("soon")),
            Code::ScheduleInvalidDuration,
            "s.approval_timeout",
        ),
        (
            with(base(), "approval_timeout", json!("0s")),
            Code::ScheduleInvalidField,
            "s.approval_timeout",
        ),
        (
            job(json!({"type": "noop", "guard": {"max_affected": -1}})),
            Code::ScheduleInvalidField,
            "s.job.guard.max_affected",
        ),
        (
            job(json!({"type": "noop", "guard": {"max_affected": "100"}})),
            Code::ScheduleInvalidField,
            "s.job.guard.max_affected",
        ),
        (
            job(json!({"type": "noop", "guard": {"max_affected": 1.5}})),
            Code::ScheduleInvalidField,
            "s.job.guard.max_affected",
        ),
        (
            job(json!({"type": "noop", "guard": {}})),
            Code::ScheduleMissingField,
            "s.job.guard.max_affected",
        ),
        (
            job(json!({"type": "noop", "guard": 100})),
            Code::ScheduleInvalidField,
            "s.job.guard",
        ),
        (
            job(json!({"type": "noop", "guard": {"max_affected": 1, "min": 0}})),
            Code::ScheduleUnknownField,
            "s.job.guard.min",
        ),
        (
            job(json!({"type": "noop", "affected": -3})),
            Code::ScheduleInvalidField,
            "s.job.affected",
        ),
        (
            job(json!({"type": "http", "url": "https://x.test", "affected": 3})),
            Code::ScheduleInvalidJob,
            "s.job",
        ),
    ];
    for (value, code, field) in table {
        let issues = schedule_issues(value.clone(), &rules);
        assert_eq!(codes(&issues), vec![(code, field)], "{value}");
    }
    // Every problem at once: a bad guard does not hide a bad url.
    let both = job(json!({"type": "http", "url": "ftp://x", "guard": {"max_affected": -1}}));
    assert_eq!(
        codes(&schedule_issues(both, &rules)),
        vec![
            (Code::ScheduleInvalidField, "s.job.guard.max_affected"),
            (Code::ScheduleInvalidJob, "s.job.url"),
        ]
    );
}

/// Messages are for people: a policy by its name in words, a bad cron field by its name and
/// the values it takes; no Rust type or library category names.
#[test]
fn messages_name_the_field_in_plain_words() {
    let issues = schedule_issues(
        with(
            schedule_value("s", "0 * * * *", "UTC"),
            "misfire",
            json!("RUN_TWICE"),
        ),
        &ValidationRules::default(),
    );
    let text: Vec<&str> = issues.iter().map(|i| i.message.as_str()).collect();
    assert!(
        text.iter().any(|m| m.contains(
            "unknown misfire policy `RUN_TWICE`; expected one of SKIP, RUN_ONCE, CATCH_UP_ALL, MANUAL"
        )),
        "{text:?}"
    );
    for (expr, says) in [
        (
            "61 * * * *",
            "the minute field `61` is not valid (number out of bounds); minute takes 0-59",
        ),
        ("0 25 * * *", "the hour field `25` is not valid"),
        ("0 0 * 13 *", "the month field `13` is not valid"),
        (
            "cron(0 9 ? * MON-FRX *)",
            "the day-of-week field `MON-FRX` is not valid",
        ),
        (
            "cron(0 9 ? * MON 20X6)",
            "the year field `20X6` is not valid",
        ),
    ] {
        let issues = validate_timing(expr, "UTC", &ValidationRules::default(), validation_now())
            .err()
            .unwrap_or_else(|| panic!("{expr} accepted"));
        let message = &issues[0].message;
        assert!(message.contains(says), "{expr}: {message}");
        for leak in ["Component error", "CronPattern", "CronScheduler", "Policy"] {
            assert!(!message.contains(leak), "{expr}: {message}");
        }
    }
}

/// A manifest of noop schedules, each `(id, cron, timezone, after)`; an empty cron or zone is
/// left out.
fn grid_manifest(schedules: &[(&str, &str, &str, &[&str])]) -> String {
    let items: Vec<Value> = schedules
        .iter()
        .map(|(id, cron, tz, after)| {
            let mut doc = json!({"id": id, "job": {"type": "noop"}});
            if !cron.is_empty() {
                doc["cron"] = json!(cron);
            }
            if !tz.is_empty() {
                doc["timezone"] = json!(tz);
            }
            if !after.is_empty() {
                doc["after"] = json!(after);
            }
            doc
        })
        .collect();
    json!({ "schedules": items }).to_string()
}

fn grid(spec: &cronledger_core::ScheduleSpec) -> (&str, &str) {
    (spec.cron.as_str(), spec.timezone.name())
}

#[test]
fn after_without_cron_inherits_the_upstream_grid() {
    let specs = manifest(&grid_manifest(&[
        ("report", "", "", &["collect"]),
        ("collect", "0 1 * * *", "Asia/Seoul", &[]),
    ]))
    .expect("the dependent inherits its grid");
    assert_eq!(grid(&specs[0]), ("0 1 * * *", "Asia/Seoul"));
    assert_eq!(specs[0].after, ["collect"]);

    // A zone given beside an inherited cron is the schedule's own, and must match.
    let specs = manifest(&grid_manifest(&[
        ("collect", "0 1 * * *", "Asia/Seoul", &[]),
        ("report", "", "Asia/Seoul", &["collect"]),
    ]))
    .expect("the same zone");
    assert_eq!(grid(&specs[1]), ("0 1 * * *", "Asia/Seoul"));
    let issues = issues_of(&grid_manifest(&[
        ("collect", "0 1 * * *", "Asia/Seoul", &[]),
        ("report", "", "UTC", &["collect"]),
    ]));
    assert_eq!(
        codes(&issues),
        vec![(Code::DependencyGridMismatch, "schedules[report].after")]
    );

    // Without `after` there is nothing to inherit from.
    let issues = issues_of(&grid_manifest(&[("alone", "", "UTC", &[])]));
    assert_eq!(
        codes(&issues),
        vec![(Code::ScheduleMissingField, "schedules[alone].cron")]
    );
}

#[test]
fn several_upstreams_share_one_grid_or_cron_names_it() {
    let specs = manifest(&grid_manifest(&[
        ("orders", "*/15 * * * *", "Europe/Paris", &[]),
        ("payments", "*/15 * * * *", "Europe/Paris", &[]),
        ("join", "", "", &["orders", "payments"]),
    ]))
    .expect("two upstreams on one grid");
    assert_eq!(grid(&specs[2]), ("*/15 * * * *", "Europe/Paris"));

    let issues = issues_of(&grid_manifest(&[
        ("orders", "*/15 * * * *", "Europe/Paris", &[]),
        ("payments", "0 * * * *", "Europe/Paris", &[]),
        ("join", "", "", &["orders", "payments"]),
    ]));
    assert_eq!(
        codes(&issues),
        vec![(Code::DependencyGridMismatch, "schedules[join].after")],
        "{issues:?}"
    );
    assert!(
        issues[0].message.contains("`orders`") && issues[0].message.contains("`payments`"),
        "{}",
        issues[0].message
    );
    assert_eq!(
        (issues[0].id.as_deref(), issues[0].index),
        (Some("join"), Some(2))
    );
}

#[test]
fn a_chain_without_cron_inherits_from_its_head() {
    let specs = manifest(&grid_manifest(&[
        ("c", "", "", &["b"]),
        ("b", "", "", &["a"]),
        ("a", "30 2 * * *", "America/New_York", &[]),
    ]))
    .expect("a chain inherits through");
    for spec in &specs {
        assert_eq!(
            grid(spec),
            ("30 2 * * *", "America/New_York"),
            "{}",
            spec.id
        );
    }

    // A chain with no head to inherit from: a cycle, an unknown upstream, an invalid head.
    let cycle = issues_of(&grid_manifest(&[
        ("a", "", "", &["b"]),
        ("b", "", "", &["a"]),
    ]));
    assert_eq!(codes(&cycle).len(), 1, "{cycle:?}");
    assert_eq!(cycle[0].code, Code::DependencyCycle);
    let unknown = issues_of(&grid_manifest(&[("b", "", "", &["nobody"])]));
    assert_eq!(
        codes(&unknown),
        vec![(Code::DependencyUnknownUpstream, "schedules[b].after")]
    );
    let bad_head = issues_of(&grid_manifest(&[
        ("a", "0 9 * *", "UTC", &[]),
        ("b", "", "", &["a"]),
        ("c", "", "", &["b"]),
    ]));
    assert_eq!(
        codes(&bad_head),
        vec![(Code::ScheduleInvalidCron, "schedules[a].cron")],
        "the head's own problem, not one per dependent"
    );
}

#[test]
fn a_single_schedule_inherits_from_the_grids_it_is_given() {
    use cronledger_core::spec::{validate_with_upstreams, Grid, UpstreamGrid};
    let doc = json!({"id": "report", "after": ["collect"], "job": {"type": "noop"}});
    let hourly = Grid {
        cron: "0 * * * *".into(),
        timezone: "UTC".into(),
    };
    let rules = ValidationRules::default();
    let spec = validate_with_upstreams(&doc, "", &rules, validation_now(), &mut |id| match id {
        "collect" => UpstreamGrid::Known(hourly.clone()),
        _ => UpstreamGrid::Unknown,
    })
    .expect("inherits");
    assert_eq!(grid(&spec), ("0 * * * *", "UTC"));
    let issues = validate_with_upstreams(&doc, "", &rules, validation_now(), &mut |_| {
        UpstreamGrid::Unknown
    })
    .expect_err("nothing to inherit from");
    assert_eq!(
        codes(&issues),
        vec![(Code::DependencyUnknownUpstream, "after")]
    );
    // The inherited grid is checked like a written one: a jitter past its interval.
    let mut jittered = doc.clone();
    jittered["jitter"] = json!("2h");
    let issues = validate_with_upstreams(&jittered, "", &rules, validation_now(), &mut |_| {
        UpstreamGrid::Known(hourly.clone())
    })
    .expect_err("jitter over the inherited interval");
    assert_eq!(issues[0].code, Code::ScheduleInvalidJitter);
}
