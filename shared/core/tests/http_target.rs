//! An http job's target: which addresses no job may call, `auth` as written in a manifest,
//! and credentials in urls (refused at validation, redacted when shown).

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use common::{schedule_value, validation_now};
use cronledger_core::http_target::{
    forbidden_address, redact_url_credentials, secret_name_of, signing_target_of, AwsIamAuth,
    AwsIamKind, ForbiddenAddress, HmacAuth, HmacKind, HttpAuth, SecretAuth,
};
use cronledger_core::spec::validate_schedule;
use cronledger_core::{Code, JobSpec, ScheduleSpec, ValidationRules};
use proptest::prelude::*;
use serde_json::{json, Value};

fn http_schedule(job: Value) -> Value {
    let mut value = schedule_value("s", "*/5 * * * *", "UTC");
    value["job"] = job;
    value
}

fn validate(job: Value, rules: &ValidationRules) -> Result<ScheduleSpec, Vec<(Code, String)>> {
    validate_schedule(&http_schedule(job), "", rules, validation_now())
        .map_err(|issues| issues.into_iter().map(|i| (i.code, i.field)).collect())
}

fn codes_of(job: Value, rules: &ValidationRules) -> Vec<(Code, String)> {
    match validate(job.clone(), rules) {
        Ok(_) => panic!("expected problems in {job}"),
        Err(codes) => codes,
    }
}

fn one(code: Code, field: &str) -> Vec<(Code, String)> {
    vec![(code, field.to_string())]
}

fn auth_of(spec: &ScheduleSpec) -> Option<&HttpAuth> {
    match &spec.job {
        JobSpec::Http { auth, .. } => auth.as_ref(),
        _ => None,
    }
}

proptest! {
    #[test]
    fn every_ipv4_address_is_classified_by_its_range(bits in any::<u32>()) {
        let v4 = Ipv4Addr::from(bits);
        let [first, second, ..] = v4.octets();
        let expected = match (first, second) {
            (127, _) => Some(ForbiddenAddress::Loopback),
            (0, _) => Some(ForbiddenAddress::Unspecified),
            (169, 254) => Some(ForbiddenAddress::LinkLocal),
            _ => None,
        };
        prop_assert_eq!(forbidden_address(IpAddr::V4(v4)), expected);
        // The same address written as IPv6 (mapped, ::ffff:a.b.c.d) reaches the same host.
        prop_assert_eq!(forbidden_address(IpAddr::V6(v4.to_ipv6_mapped())), expected);
    }

    #[test]
    fn ipv6_link_local_is_all_of_fe80_slash_10(low in any::<u128>()) {
        let inside = Ipv6Addr::from((0xfe80u128 << 112) | (low >> 10));
        prop_assert_eq!(forbidden_address(IpAddr::V6(inside)), Some(ForbiddenAddress::LinkLocal));
        // Just past the range (fec0::/10, fe40::/10): global as far as the fence goes.
        let above = Ipv6Addr::from((0xfec0u128 << 112) | (low >> 10));
        let below = Ipv6Addr::from((0xfe40u128 << 112) | (low >> 10));
        prop_assert_eq!(forbidden_address(IpAddr::V6(above)), None);
        prop_assert_eq!(forbidden_address(IpAddr::V6(below)), None);
    }
}

#[test]
fn ipv6_loopback_and_unspecified_are_forbidden_and_private_addresses_are_not() {
    let cases = [
        ("::1", Some(ForbiddenAddress::Loopback)),
        ("::", Some(ForbiddenAddress::Unspecified)),
        ("fe80::1", Some(ForbiddenAddress::LinkLocal)),
        ("::ffff:169.254.169.254", Some(ForbiddenAddress::LinkLocal)),
        ("::127.0.0.1", Some(ForbiddenAddress::Loopback)),
        ("fd00:ec2::254", None),
        ("10.0.0.1", None),
        ("192.168.1.1", None),
        ("172.16.0.1", None),
        ("2001:db8::1", None),
    ];
    for (text, expected) in cases {
        let ip: IpAddr = text.parse().expect("an address");
        assert_eq!(forbidden_address(ip), expected, "{text}");
    }
}

#[test]
fn signing_service_and_region_come_from_aws_hosts() {
    assert_eq!(
        signing_target_of("abc123.execute-api.eu-west-1.amazonaws.com"),
        Some(("execute-api", "eu-west-1".to_string()))
    );
    assert_eq!(
        signing_target_of("xyz.lambda-url.us-east-2.on.aws"),
        Some(("lambda", "us-east-2".to_string()))
    );
    assert_eq!(signing_target_of("api.example.com"), None);
    assert_eq!(signing_target_of("execute-api.example.com"), None);
}

#[test]
fn urls_lose_their_credentials_when_shown() {
    assert_eq!(
        redact_url_credentials("https://user:pa%40ss@host.example/x?y=1@z"),
        "https://REDACTED@host.example/x?y=1@z"
    );
    assert_eq!(
        redact_url_credentials("https://host.example/a@b"),
        "https://host.example/a@b"
    );
    let job = JobSpec::Http {
        url: "http://admin:hunter2@10.0.0.5/hook".into(),
        timeout: cronledger_core::Span::seconds(5),
        payload: Value::Null,
        guard: None,
        auth: None,
    };
    let shown = serde_json::to_string(&job.redacted()).expect("json");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("REDACTED@10.0.0.5"), "{shown}");
}

#[test]
fn a_url_with_credentials_is_refused_with_its_own_code_and_not_echoed() {
    let rules = ValidationRules::default();
    let job = json!({"type": "http", "url": "https://user:hunter2@api.example.com/run"});
    let issues =
        validate_schedule(&http_schedule(job), "", &rules, validation_now()).expect_err("refused");
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].code, Code::HttpUrlHasCredentials);
    assert_eq!(issues[0].field, "job.url");
    assert!(
        !issues[0].message.contains("hunter2"),
        "{}",
        issues[0].message
    );
}

#[test]
fn literal_loopback_and_link_local_targets_are_refused_unless_loopback_is_allowed() {
    let rules = ValidationRules::default();
    for url in [
        "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://0.0.0.0:8080/x",
        "http://localhost:8080/x",
        "http://169.254.170.2/v2/credentials",
    ] {
        let job = json!({"type": "http", "url": url});
        assert_eq!(
            codes_of(job, &rules),
            one(Code::HttpTargetForbidden, "job.url"),
            "{url}"
        );
    }
    let local = ValidationRules {
        allow_loopback_targets: true,
        ..ValidationRules::default()
    };
    for url in ["http://127.0.0.1:8089/hooks/a", "http://localhost:8089/x"] {
        assert!(
            validate(json!({"type": "http", "url": url}), &local).is_ok(),
            "{url}"
        );
    }
    // Link-local is never a job's target, even for the local runner.
    let metadata = json!({"type": "http", "url": "http://169.254.169.254/"});
    assert_eq!(
        codes_of(metadata, &local),
        one(Code::HttpTargetForbidden, "job.url")
    );
    // Private addresses are the usual target: allowed.
    let private = json!({"type": "http", "url": "http://10.1.2.3:8080/run"});
    assert!(validate(private, &rules).is_ok());
}

#[test]
fn secret_auth_parses_with_its_defaults_and_is_not_taken_for_a_payload_secret() {
    let rules = ValidationRules::default();
    let job = json!({
        "type": "http",
        "url": "https://api.example.com/run",
        "auth": {"secret": "cronledger/reports-token"},
    });
    let spec = validate(job, &rules).expect("valid");
    assert_eq!(
        auth_of(&spec),
        Some(&HttpAuth::Secret(SecretAuth {
            secret: "cronledger/reports-token".into(),
            header: "Authorization".into(),
            prefix: None,
        }))
    );
    let job = json!({
        "type": "http",
        "url": "https://api.example.com/run",
        "auth": {"secret": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cronledger/x-AbCdEf",
                 "header": "X-Api-Key", "prefix": "Bearer "},
    });
    let spec = validate(job, &rules).expect("valid");
    let text = serde_json::to_value(&spec).expect("json");
    assert_eq!(text["job"]["auth"]["header"], "X-Api-Key");
    assert_eq!(text["job"]["auth"]["prefix"], "Bearer ");
    // Round trip: what is stored reads back the same.
    let again: ScheduleSpec = serde_json::from_value(text).expect("reads back");
    assert_eq!(again, spec);
}

#[test]
fn aws_iam_auth_infers_its_service_from_the_host_or_needs_one() {
    let rules = ValidationRules::default();
    let job = json!({
        "type": "http",
        "url": "https://abc.execute-api.eu-west-1.amazonaws.com/prod/run",
        "auth": {"type": "aws_iam"},
    });
    let spec = validate(job, &rules).expect("valid");
    assert_eq!(
        auth_of(&spec),
        Some(&HttpAuth::AwsIam(AwsIamAuth {
            kind: AwsIamKind::AwsIam,
            service: None,
            region: None,
        }))
    );
    let job = json!({
        "type": "http",
        "url": "https://internal.example.com/run",
        "auth": {"type": "aws_iam"},
    });
    assert_eq!(
        codes_of(job, &rules),
        one(Code::HttpAuthInvalid, "job.auth.service")
    );
    let job = json!({
        "type": "http",
        "url": "https://internal.example.com/run",
        "auth": {"type": "aws_iam", "service": "execute-api", "region": "eu-west-1"},
    });
    assert!(validate(job, &rules).is_ok());
}

#[test]
fn bad_auth_is_reported_field_by_field_with_stable_codes() {
    let rules = ValidationRules {
        secret_name_prefix: Some("cronledger/".into()),
        ..ValidationRules::default()
    };
    let url = "https://api.example.com/run";
    let cases = [
        (
            json!({"type": "basic"}),
            one(Code::HttpAuthUnknownType, "job.auth.type"),
        ),
        (json!("Bearer abc"), one(Code::HttpAuthInvalid, "job.auth")),
        (
            json!({"header": "X-Key"}),
            one(Code::HttpAuthInvalid, "job.auth.secret"),
        ),
        (
            json!({"secret": "other/team-token"}),
            one(Code::HttpAuthSecretOutsidePrefix, "job.auth.secret"),
        ),
        (
            json!({"secret": "arn:aws:secretsmanager:eu-west-1:1:secret:other/t-AbCdEf"}),
            one(Code::HttpAuthSecretOutsidePrefix, "job.auth.secret"),
        ),
        (
            json!({"secret": "cronledger/t", "header": "Idempotency-Key"}),
            one(Code::HttpAuthInvalid, "job.auth.header"),
        ),
        (
            json!({"secret": "cronledger/t", "header": "Bad Header"}),
            one(Code::HttpAuthInvalid, "job.auth.header"),
        ),
        (
            json!({"secret": "cronledger/t", "prefix": "Bearer\n"}),
            one(Code::HttpAuthInvalid, "job.auth.prefix"),
        ),
        (
            json!({"secret": "cronledger/t", "value": "x"}),
            one(Code::ScheduleUnknownField, "job.auth.value"),
        ),
    ];
    for (auth, expected) in cases {
        let job = json!({"type": "http", "url": url, "auth": auth});
        assert_eq!(codes_of(job, &rules), expected, "{auth}");
    }
    // Inside the prefix, by name or ARN: fine.
    for secret in [
        "cronledger/t",
        "arn:aws:secretsmanager:eu-west-1:1:secret:cronledger/t-AbCdEf",
    ] {
        let job = json!({"type": "http", "url": url, "auth": {"secret": secret}});
        assert!(validate(job, &rules).is_ok(), "{secret}");
    }
    assert_eq!(
        secret_name_of("arn:aws:secretsmanager:eu-west-1:1:secret:a/b-AbCdEf"),
        "a/b-AbCdEf"
    );
}

#[test]
fn hmac_auth_names_a_secret_under_the_prefix_and_nothing_else_with_stable_codes() {
    let rules = ValidationRules {
        secret_name_prefix: Some("cronledger/".into()),
        ..ValidationRules::default()
    };
    let url = "https://hooks.example.com/report";
    let job = json!({"type": "http", "url": url,
                     "auth": {"type": "hmac", "secret": "cronledger/hook-key"}});
    let spec = validate(job, &rules).expect("valid");
    assert_eq!(
        auth_of(&spec),
        Some(&HttpAuth::Hmac(HmacAuth {
            kind: HmacKind::Hmac,
            secret: "cronledger/hook-key".into(),
        }))
    );
    // Stored and read back as the same type, never taken for a header secret.
    let stored = serde_json::to_value(&spec).expect("json");
    assert_eq!(
        stored["job"]["auth"],
        json!({"type": "hmac", "secret": "cronledger/hook-key"})
    );
    let again: ScheduleSpec = serde_json::from_value(stored).expect("reads back");
    assert_eq!(again, spec);

    let cases = [
        (
            json!({"type": "hmac"}),
            one(Code::HttpAuthInvalid, "job.auth.secret"),
        ),
        (
            json!({"type": "hmac", "secret": " "}),
            one(Code::HttpAuthInvalid, "job.auth.secret"),
        ),
        (
            json!({"type": "hmac", "secret": "other/hook-key"}),
            one(Code::HttpAuthSecretOutsidePrefix, "job.auth.secret"),
        ),
        // A signature has no header or prefix to choose.
        (
            json!({"type": "hmac", "secret": "cronledger/k", "header": "X-Sig"}),
            one(Code::ScheduleUnknownField, "job.auth.header"),
        ),
        (
            json!({"type": "HMAC", "secret": "cronledger/k"}),
            one(Code::HttpAuthUnknownType, "job.auth.type"),
        ),
    ];
    for (auth, expected) in cases {
        let job = json!({"type": "http", "url": url, "auth": auth});
        assert_eq!(codes_of(job, &rules), expected, "{auth}");
    }
}
