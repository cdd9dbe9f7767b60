//! Signed webhooks (`auth: {type: hmac}`): the worker signs each call with the secret from
//! Secrets Manager (the emulator's), the local receiver verifies it and refuses a forged body,
//! an old or future timestamp and a missing signature without executing; during a rotation
//! (`AWSPENDING`) each call carries two `v1` values and a receiver holding either key accepts
//! it. The README's Python and Node receivers are run against the worker's signatures.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use cronledger_app::clock::ManualClock;
use cronledger_app::jobs::http_auth::{HttpAuthorizer, SecretCache, SecretsManagerSource};
use cronledger_app::jobs::webhook_signature::{
    signature_header, verify, DEFAULT_TOLERANCE_SECONDS, SIGNATURE_HEADER,
};
use cronledger_app::local::receiver::{self, Executions, HookSigning};
use cronledger_aws::config::load_sdk_config;
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::AwsSettings;
use cronledger_core::http_target::{HmacAuth, HmacKind, HttpAuth};
use cronledger_core::RunStatus;
use cronledger_tests::app::AppEnv;
use cronledger_tests::{require_emulator, spec_with, t, unique_name};
use serde_json::{json, Value};

const README: &str = include_str!("../../README.md");

/// The first fenced block of `language` in the README that contains `marker`.
fn readme_snippet(language: &str, marker: &str) -> String {
    README
        .split(&format!("```{language}\n"))
        .skip(1)
        .filter_map(|rest| rest.split_once("\n```").map(|(code, _)| code))
        .find(|code| code.contains(marker))
        .unwrap_or_else(|| panic!("the README has a {language} block with {marker}"))
        .to_string()
}

/// Runs `source` (a README verifier and its harness) with `program`, reading the script
/// from stdin; one `true`/`false` per line it printed.
fn run_snippet(program: &str, source: &str) -> Vec<bool> {
    let mut child = Command::new(program)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} runs the README's snippet: {e}"));
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("a stdin");
        stdin
            .write_all(source.as_bytes())
            .expect("the script is written");
    }
    let output = child.wait_with_output().expect("the snippet ends");
    assert!(
        output.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    text.lines().map(|l| l.trim() == "true").collect()
}

/// `cases` as a string literal both Python and JavaScript read (a JSON string).
fn literal(cases: &Value) -> String {
    serde_json::to_string(&cases.to_string()).unwrap_or_default()
}

/// The README's Python verifier, then a harness printing its verdict on each case.
fn python_program(cases: &Value) -> String {
    format!(
        "{}\n\nimport json\nfor c in json.loads({}):\n    \
         print(str(verify_signature(c['key'], c['header'], c['body'].encode())).lower())\n",
        readme_snippet("python", "def verify_signature"),
        literal(cases)
    )
}

/// The README's Node verifier, then the same harness.
fn node_program(cases: &Value) -> String {
    format!(
        "{}\n\nfor (const c of JSON.parse({})) \
         console.log(String(verifySignature(c.key, c.header, Buffer.from(c.body))));\n",
        readme_snippet("js", "function verifySignature"),
        literal(cases)
    )
}

#[test]
fn the_readme_receivers_accept_the_workers_signatures_and_refuse_forged_old_future_and_wrong_key() {
    let now = Utc::now().timestamp();
    let body = r#"{"run":{"schedule":"report"},"attempt":1,"payload":{"amount":"10.00"}}"#;
    let forged = body.replace("10.00", "99.00");
    let signed = |keys: &[&str], at: i64| signature_header(keys, at, body.as_bytes());
    let case =
        |key: &str, header: String, body: &str| json!({"key": key, "header": header, "body": body});
    let cases = json!([
        case("old-key", signed(&["old-key"], now), body),
        case("old-key", signed(&["old-key"], now), &forged),
        case("old-key", signed(&["old-key"], now - 600), body),
        case("old-key", signed(&["old-key"], now + 600), body),
        case("other-key", signed(&["old-key"], now), body),
        // A rotation: the current and the pending key; either receiver accepts.
        case("old-key", signed(&["old-key", "new-key"], now), body),
        case("new-key", signed(&["old-key", "new-key"], now), body),
        case("old-key", "garbage".to_string(), body),
    ]);
    let expected = vec![true, false, false, false, false, true, true, false];
    // The Rust verifier, which the local receiver uses, agrees.
    let rust: Vec<bool> = cases
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| {
            verify(
                c["header"].as_str(),
                &[c["key"].as_str().unwrap_or_default()],
                c["body"].as_str().unwrap_or_default().as_bytes(),
                now,
                DEFAULT_TOLERANCE_SECONDS,
            )
            .is_ok()
        })
        .collect();
    assert_eq!(rust, expected, "rust");
    assert_eq!(
        run_snippet("python3", &python_program(&cases)),
        expected,
        "python"
    );
    assert_eq!(run_snippet("node", &node_program(&cases)), expected, "node");
}

/// Serves the local receiver with `signing` on `listener`.
fn serve_receiver(listener: tokio::net::TcpListener, executions: Executions, signing: HookSigning) {
    let router = receiver::router(executions, Some(signing));
    tokio::spawn(async move {
        let _ = receiver::serve_on(listener, router).await;
    });
}

fn hmac(secret: &str) -> HttpAuth {
    HttpAuth::Hmac(HmacAuth {
        kind: HmacKind::Hmac,
        secret: secret.to_string(),
    })
}

/// A fresh cache (nothing of another step's reads) over the emulator's Secrets Manager.
fn fresh_secrets(sdk: &aws_config::SdkConfig) -> Arc<SecretCache> {
    Arc::new(SecretCache::new(
        Arc::new(SecretsManagerSource::new(sdk)),
        Duration::from_secs(300),
    ))
}

/// A POST of `body` to `url`, signed by `authorizer` as the worker signs; its status, its
/// answer's code and the signature it carried.
async fn post_signed(
    authorizer: &HttpAuthorizer,
    auth: Option<&HttpAuth>,
    url: &str,
    body: &str,
    key: &str,
) -> (u16, String, String) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(url)
        .header("Idempotency-Key", key)
        .header("content-type", "application/json")
        .body(body.to_string())
        .build()
        .expect("a request");
    authorizer.apply(auth, &mut request).await.expect("signed");
    let signature = request
        .headers()
        .get(SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let answer = client.execute(request).await.expect("answered");
    let status = answer.status().as_u16();
    let answer: Value = answer.json().await.unwrap_or(Value::Null);
    let code = answer["code"].as_str().unwrap_or_default().to_string();
    (status, code, signature)
}

#[tokio::test]
async fn an_hmac_job_is_verified_by_the_local_receiver_which_refuses_bad_signatures_and_follows_a_rotation(
) {
    require_emulator();
    let sdk = load_sdk_config(&AwsSettings::default()).await;
    let secrets = aws_sdk_secretsmanager::Client::new(&sdk);
    let name = format!("cronledger/{}", unique_name("hook-key"));
    let old_key = unique_name("old");
    secrets
        .create_secret()
        .name(&name)
        .secret_string(&old_key)
        .send()
        .await
        .expect("secret created in the emulator");

    // The receiver knows the hook from the schedule's job, as `cronledger local` does.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("an address").port();
    let hook = format!("http://127.0.0.1:{port}/hooks/settle");
    let spec = spec_with(
        "signed",
        "0 * * * *",
        json!({"job": {"type": "http", "url": hook, "timeout": "10s",
                       "auth": {"type": "hmac", "secret": name}}}),
    );
    let executions = Executions::default();
    let signing = HookSigning::for_jobs([&spec.job], fresh_secrets(&sdk));
    serve_receiver(listener, executions.clone(), signing);

    // End to end: the worker's signed call runs and executes once.
    let at = t("2026-03-01T10:00:00Z");
    let env = AppEnv::new(LaneSettings::default(), at).await;
    env.create(spec, t("2026-03-01T09:59:30Z")).await;
    let run = env
        .fire_authenticated("signed", at, HttpAuthorizer::from_sdk(&sdk))
        .await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(executions.total(), 1);

    let auth = hmac(&name);
    let body = r#"{"attempt":1,"payload":{"amount":"10.00"}}"#;
    let signer = HttpAuthorizer::default().with_secrets(fresh_secrets(&sdk));
    let (status, _, signature) = post_signed(&signer, Some(&auth), &hook, body, "k1").await;
    assert_eq!(status, 200);
    assert_eq!(signature.matches("v1=").count(), 1, "{signature}");

    // A forged body under a genuine signature, no signature, and calls dated 10 minutes
    // off either way: refused with their codes, nothing executed.
    let forged = reqwest::Client::new()
        .post(&hook)
        .header("Idempotency-Key", "k2")
        .header(SIGNATURE_HEADER, &signature)
        .body(body.replace("10.00", "99.00"))
        .send()
        .await
        .expect("answered");
    assert_eq!(forged.status().as_u16(), 401);
    let answer: Value = forged.json().await.expect("json");
    assert_eq!(answer["code"], "SIGNATURE_MISMATCH");
    let unsigned = post_signed(&signer, None, &hook, body, "k3").await;
    assert_eq!(
        (unsigned.0, unsigned.1.as_str()),
        (401, "SIGNATURE_MISSING")
    );
    for (off, code) in [(-10, "SIGNATURE_TOO_OLD"), (10, "SIGNATURE_IN_FUTURE")] {
        let skewed = HttpAuthorizer::default()
            .with_secrets(fresh_secrets(&sdk))
            .with_clock(Arc::new(ManualClock::new(
                Utc::now() + TimeDelta::minutes(off),
            )));
        let (status, answered, _) = post_signed(&skewed, Some(&auth), &hook, body, "k4").await;
        assert_eq!((status, answered.as_str()), (401, code));
    }
    assert_eq!(executions.total(), 2, "only the genuine calls executed");

    // A rotation: the new key staged AWSPENDING. Calls carry both keys' signatures, and a
    // receiver holding either key accepts them.
    let new_key = unique_name("new");
    secrets
        .put_secret_value()
        .secret_id(&name)
        .secret_string(&new_key)
        .version_stages("AWSPENDING")
        .send()
        .await
        .expect("a pending version");
    let rotating = HttpAuthorizer::default().with_secrets(fresh_secrets(&sdk));
    let (status, _, signature) = post_signed(&rotating, Some(&auth), &hook, body, "k5").await;
    assert_eq!(status, 200, "the local receiver reads both stages");
    assert_eq!(signature.matches("v1=").count(), 2, "{signature}");
    let now = Utc::now().timestamp();
    for key in [&old_key, &new_key] {
        assert_eq!(
            verify(Some(&signature), &[key], body.as_bytes(), now, 300),
            Ok(()),
            "a receiver holding only {key}"
        );
    }
    assert!(verify(Some(&signature), &["another"], body.as_bytes(), now, 300).is_err());
    assert_eq!(executions.total(), 3);
}
