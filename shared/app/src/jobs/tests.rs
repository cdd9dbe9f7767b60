//! Dry runs through [`JobTargets`]: the http protocol against a local target, noop with and
//! without `affected`, Lambda through a fake invoker, targets that ignore the mode.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use cronledger_core::spec::JobGuard;
use cronledger_core::{IdempotencyKey, JobSpec, RunKey, Span, Window};
use serde_json::{json, Value};

use super::*;
use crate::simulate::{ExecutionLog, VirtualNoop, VirtualTime};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("a test instant")
}

fn ctx(mode: JobMode) -> JobContext {
    let window = Window::new(at("2026-03-01T00:00:00Z"), at("2026-03-02T00:00:00Z"));
    JobContext {
        run: RunKey::expected("purge", window.end),
        window,
        business_date: window.start.date_naive(),
        idempotency_key: IdempotencyKey::for_window("purge", &window, None),
        attempt: 1,
        payload: json!({"table": "events"}),
        deadline: at("2026-03-02T00:15:00Z"),
        mode,
        approved_affected: None,
        step: None,
        previous: None,
        child: None,
    }
}

/// One request the target saw: its path, `X-Cronledger-Mode` (if any) and body.
type Seen = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

/// A target at `/{behaviour}`: `guarded` answers the protocol, `ignores` answers every call
/// as an execution, `gone` is 404, `busy` is 503, `text` answers 200 with plain text,
/// `huge` reports a sample past the cap.
async fn target() -> (String, Seen) {
    async fn hook(
        State(seen): State<Seen>,
        Path(behaviour): Path<String>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> (StatusCode, String) {
        let mode = headers
            .get(MODE_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let dry = body["mode"] == "dry_run";
        seen.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((behaviour.clone(), mode, body));
        let answer = |v: Value| (StatusCode::OK, v.to_string());
        match behaviour.as_str() {
            "guarded" if dry => {
                answer(json!({"affected": 42, "oldest": "2025-01-01", "newest": {"id": 9}}))
            }
            "huge" if dry => answer(json!({"affected": 1, "oldest": "x".repeat(5000)})),
            "guarded" | "huge" | "ignores" => answer(json!({"count": 42})),
            "gone" => (StatusCode::NOT_FOUND, "no".into()),
            "busy" => (StatusCode::SERVICE_UNAVAILABLE, "later".into()),
            _ => (StatusCode::OK, "ok".into()),
        }
    }
    let seen = Seen::default();
    let app = Router::new()
        .route("/{behaviour}", post(hook))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

fn http(url: String, guard: Option<u64>) -> JobSpec {
    JobSpec::Http {
        url,
        timeout: Span::seconds(5),
        payload: json!({"table": "events"}),
        guard: guard.map(|max_affected| JobGuard { max_affected }),
        auth: None,
    }
}

fn targets() -> JobTargets {
    // The test targets listen on 127.0.0.1, which the fence refuses unless told otherwise.
    JobTargets::new(HttpJob::with_options(HttpOptions::local()).expect("a client"))
}

#[tokio::test]
async fn an_http_dry_run_posts_the_run_with_the_mode_and_reads_the_count() {
    let (url, seen) = target().await;
    let job = http(format!("{url}/guarded"), Some(100));
    // The caller's context says execute: a dry run is a dry run all the same.
    let report = targets().dry_run(&job, &ctx(JobMode::Execute)).await;
    assert_eq!(
        report,
        Ok(DryRunReport {
            affected: 42,
            oldest: Some(json!("2025-01-01")),
            newest: Some(json!({"id": 9})),
        })
    );
    let approved = JobContext {
        approved_affected: Some(42),
        ..ctx(JobMode::Execute)
    };
    let ran = targets().run(&job, &approved).await.expect("executed");
    assert_eq!(ran.result.count, Some(42));

    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(seen.len(), 2);
    let (_, dry_header, dry_body) = &seen[0];
    assert_eq!(dry_header.as_deref(), Some("dry-run"));
    assert_eq!(dry_body["mode"], "dry_run");
    assert!(dry_body.get("approved_affected").is_none(), "{dry_body}");
    // The body keeps its shape: the run's fields and the payload, plus the mode.
    let keys: Vec<&str> = dry_body
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let expected = [
        "attempt",
        "business_date",
        "idempotency_key",
        "mode",
        "payload",
        "run",
        "window",
    ];
    assert_eq!(keys, expected);
    let (_, exec_header, exec_body) = &seen[1];
    assert_eq!(exec_header.as_deref(), Some("execute"));
    assert_eq!(exec_body["mode"], "execute");
    assert_eq!(exec_body["approved_affected"], 42);
}

#[tokio::test]
async fn an_unguarded_http_call_has_no_mode_header_but_says_execute_in_the_body() {
    let (url, seen) = target().await;
    let job = http(format!("{url}/ignores"), None);
    targets()
        .run(&job, &ctx(JobMode::Execute))
        .await
        .expect("executed");
    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(seen[0].1, None);
    assert_eq!(seen[0].2["mode"], "execute");
}

#[tokio::test]
async fn a_target_that_does_not_answer_the_protocol_is_guard_unsupported() {
    let (url, _) = target().await;
    for behaviour in ["ignores", "gone", "text"] {
        let job = http(format!("{url}/{behaviour}"), Some(10));
        let failure = targets()
            .dry_run(&job, &ctx(JobMode::DryRun))
            .await
            .expect_err(behaviour);
        assert!(
            matches!(&failure, JobFailure::Permanent { code, .. } if code == GUARD_UNSUPPORTED),
            "{behaviour}: {failure:?}"
        );
    }
    // A target that is down is retried as for an execution.
    let busy = targets()
        .dry_run(
            &http(format!("{url}/busy"), Some(10)),
            &ctx(JobMode::DryRun),
        )
        .await;
    assert_eq!(busy, Err(JobFailure::retryable("HTTP_503", "later")));
    let unreachable = targets()
        .dry_run(
            &http("http://127.0.0.1:1/x".into(), Some(10)),
            &ctx(JobMode::DryRun),
        )
        .await
        .expect_err("nothing listens there");
    assert!(
        matches!(unreachable, JobFailure::Retryable { .. }),
        "{unreachable:?}"
    );
}

#[tokio::test]
async fn samples_past_the_cap_are_cut() {
    let (url, _) = target().await;
    let report = targets()
        .dry_run(
            &http(format!("{url}/huge"), Some(10)),
            &ctx(JobMode::DryRun),
        )
        .await
        .expect("a report");
    let oldest = report.oldest.expect("a sample");
    assert!(
        oldest.to_string().len() <= DRY_RUN_SAMPLE_MAX_BYTES,
        "{oldest}"
    );
    assert!(oldest
        .as_str()
        .is_some_and(|s| s.starts_with("xxx") && s.ends_with("...")));
    let object = json!({"affected": 1, "newest": {"quote": "\"".repeat(400)}});
    let newest = DryRunReport::from_answer(&object).expect("a report").newest;
    let newest = newest.expect("a sample");
    assert!(
        newest.to_string().len() <= DRY_RUN_SAMPLE_MAX_BYTES,
        "{newest}"
    );
}

fn noop(affected: Option<u64>) -> JobSpec {
    JobSpec::Noop {
        duration: Span::ZERO,
        duration_ms: 0,
        fail_times: 0,
        fail_before: None,
        payload: Value::Null,
        affected,
        guard: Some(JobGuard { max_affected: 5 }),
        children: 0,
        fail_children: 0,
        count: None,
        count_sequence: Vec::new(),
    }
}

#[tokio::test]
async fn a_noop_answers_its_affected_and_without_one_cannot_dry_run() {
    let report = targets()
        .dry_run(&noop(Some(7)), &ctx(JobMode::DryRun))
        .await;
    assert_eq!(report.map(|r| r.affected), Ok(7));
    let blind = targets().dry_run(&noop(None), &ctx(JobMode::DryRun)).await;
    assert!(matches!(blind, Err(JobFailure::Permanent { code, .. }) if code == GUARD_UNSUPPORTED));
}

#[tokio::test]
async fn the_simulators_noop_dry_runs_without_counting_an_execution() {
    let log = ExecutionLog::default();
    let virtual_noop = VirtualNoop {
        time: VirtualTime::new(at("2026-03-02T00:00:00Z")),
        log: log.clone(),
    };
    let targets = targets().with_noop(Arc::new(virtual_noop));
    let report = targets.dry_run(&noop(Some(3)), &ctx(JobMode::DryRun)).await;
    assert_eq!(report.map(|r| r.affected), Ok(3));
    assert!(log.snapshot().is_empty(), "a dry run is not an execution");
    targets
        .run(&noop(Some(3)), &ctx(JobMode::Execute))
        .await
        .expect("executed");
    assert_eq!(log.snapshot().values().map(Vec::len).sum::<usize>(), 1);
}

/// Answers every Invoke with what it is told, and keeps what it was sent.
struct FakeLambda {
    answer: Value,
    sent: Mutex<Vec<Value>>,
}

#[async_trait]
impl LambdaInvoker for FakeLambda {
    async fn invoke(&self, _function: &str, payload: &Value) -> Result<Value, JobFailure> {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(payload.clone());
        Ok(self.answer.clone())
    }
}

#[tokio::test]
async fn a_lambda_dry_run_carries_the_mode_in_its_context() {
    let job = JobSpec::Lambda {
        function: "purge".into(),
        payload: json!({"table": "events"}),
        guard: Some(JobGuard { max_affected: 1 }),
    };
    let answering = Arc::new(FakeLambda {
        answer: json!({"affected": 12}),
        sent: Mutex::default(),
    });
    let targets_with = |lambda: Arc<FakeLambda>| targets().with_lambda(lambda);
    let report = targets_with(answering.clone())
        .dry_run(&job, &ctx(JobMode::Execute))
        .await;
    assert_eq!(report.map(|r| r.affected), Ok(12));
    let sent = answering
        .sent
        .lock()
        .unwrap_or_else(PoisonError::into_inner)[0]
        .clone();
    assert_eq!(sent["context"]["mode"], "dry_run");
    assert_eq!(sent["payload"], json!({"table": "events"}));

    let ignoring = Arc::new(FakeLambda {
        answer: json!({"count": 12}),
        sent: Mutex::default(),
    });
    let failure = targets_with(ignoring)
        .dry_run(&job, &ctx(JobMode::DryRun))
        .await
        .expect_err("no affected in the answer");
    assert_eq!(failure.code(), GUARD_UNSUPPORTED);
}

/// A compiled-in handler that knows only how to run.
struct RunOnly;

#[async_trait]
impl JobHandler for RunOnly {
    async fn run(&self, _job: &JobSpec, _ctx: &JobContext) -> JobOutcome {
        Ok(JobSuccess::default())
    }
}

#[tokio::test]
async fn a_handler_without_a_dry_run_is_guard_unsupported() {
    let job = JobSpec::Handler {
        name: "sweep".into(),
        payload: Value::Null,
        guard: Some(JobGuard { max_affected: 1 }),
    };
    let targets = targets().with_handler("sweep", Arc::new(RunOnly));
    let failure = targets
        .dry_run(&job, &ctx(JobMode::DryRun))
        .await
        .expect_err("refused");
    assert_eq!(failure.code(), GUARD_UNSUPPORTED);
    assert!(matches!(failure, JobFailure::Permanent { .. }));
}
