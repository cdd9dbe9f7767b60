//! The remote commands end to end: the built `cronledger` binary as a subprocess against the
//! real api router served on 127.0.0.1 (any free port) over a fresh emulator table and lanes
//! (unique names, so these run in parallel with everything else). Run with
//! `infra/local/test -p cronledger-cli`.
//!
//! The server stands in for API Gateway's authorizer: `Authorization: Bearer {principal}`
//! is that principal, no header is the admin (like `cronledger local`). The api's virtual
//! clock starts at the wall clock and moves a second per request.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use cronledger_app::api::Caller;
use cronledger_aws::ledger::ChangeMeta;
use cronledger_core::{Lane, RunStatus};
use cronledger_tests::api::{ApiEnv, ADMIN, OPERATOR, STRANGER, VIEWER};
use cronledger_tests::app::worker_config;
use cronledger_tests::{scheduled_run, unique_name};
use serde_json::{json, Value};

#[path = "remote/answers.rs"]
mod answers;
#[path = "remote/audit.rs"]
mod audit;
#[path = "remote/calendars.rs"]
mod calendars;
#[path = "remote/replay.rs"]
mod replay;
#[path = "remote/status.rs"]
mod status;

/// A change the server makes to the store just before it answers one request (path match):
/// another admin's edit landing between the CLI's plan and its apply.
type Interleave = Arc<Mutex<Option<(String, cronledger_core::ScheduleSpec)>>>;

struct Served {
    api: ApiEnv,
    url: String,
    interleave: Interleave,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Now, to the second: the api's virtual clock starts at the CLI's wall clock.
fn now() -> DateTime<Utc> {
    Utc::now()
        .duration_trunc(TimeDelta::seconds(1))
        .unwrap_or_else(|_| Utc::now())
}

async fn serve() -> Served {
    let api = ApiEnv::new(now()).await;
    let interleave: Interleave = Arc::default();
    let store = api.env.store.clone();
    let clock = api.env.clock.clone();
    let pending = interleave.clone();
    let identify = move |mut req: Request, next: Next| {
        let store = store.clone();
        let clock = clock.clone();
        let pending = pending.clone();
        async move {
            // The api's clock moves like a real one: one second per request, so the audit
            // log's order is the order of the calls.
            clock.advance(TimeDelta::seconds(1));
            let principal = match req.headers().get("authorization") {
                None => Some(ADMIN.to_string()),
                Some(v) => v
                    .to_str()
                    .ok()
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::to_string),
            };
            if let Some(principal) = principal {
                req.extensions_mut().insert(Caller::new(principal));
            }
            let due = {
                let mut slot = lock(&pending);
                match slot.as_ref() {
                    Some((path, _)) if req.uri().path() == path => slot.take(),
                    _ => None,
                }
            };
            if let Some((_, spec)) = due {
                let current = store.get_schedule(&spec.id).await.expect("schedule");
                let meta = ChangeMeta {
                    actor: "another-admin".into(),
                    reason: "edited meanwhile".into(),
                    at: cronledger_app::clock::Clock::now(&clock),
                    details: None,
                };
                store
                    .update_schedule(spec, current.version, meta)
                    .await
                    .expect("the interleaved edit");
            }
            let resp: Response = next.run(req).await;
            resp
        }
    };
    let url = listen(api.router.clone().layer(middleware::from_fn(identify))).await;
    Served {
        api,
        url,
        interleave,
    }
}

/// Serves `router` on 127.0.0.1 (any free port), its base URL.
async fn listen(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    url
}

/// The built CLI pointed at the api at `url` (no token, default auth).
fn command_at(url: &str, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_cronledger"));
    cmd.args(args)
        .env("CRONLEDGER_API_URL", url)
        .env_remove("CRONLEDGER_API_TOKEN")
        .env_remove("CRONLEDGER_API_AUTH_MODE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// One CLI run against the api at `url` to its end (stdin is not a terminal: nothing is
/// ever confirmed).
async fn cli_at(url: &str, args: &[&str]) -> Out {
    let out = tokio::time::timeout(Duration::from_secs(60), command_at(url, args).output())
        .await
        .expect("the CLI ends")
        .expect("the CLI runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }

    fn ok(self) -> Out {
        assert_eq!(
            self.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl Served {
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        command_at(&self.url, args)
    }

    async fn cli(&self, args: &[&str]) -> Out {
        cli_at(&self.url, args).await
    }

    /// Hands whatever the lane holds to a worker until `done` says the run is settled.
    async fn work_until(&self, lane: Lane, schedule: &str, run_id: &str, done: &[RunStatus]) {
        let worker = self.api.env.worker(worker_config("cli-tests"));
        for _ in 0..30 {
            let got = self
                .api
                .env
                .receive(lane, false, 10, Duration::from_millis(500))
                .await;
            self.api.env.deliver(&worker, lane, &got).await;
            let run = self.get_run(schedule, run_id).await;
            if done.iter().any(|s| run["status"] == s.as_str()) {
                return;
            }
        }
        panic!("run {run_id} never reached {done:?}");
    }

    async fn get_run(&self, schedule: &str, run_id: &str) -> Value {
        self.cli(&["runs", schedule, run_id, "--format", "json"])
            .await
            .ok()
            .json()
    }

    /// `get ID --format json`: the stored version and cron.
    async fn version_and_cron(&self, id: &str) -> (u64, String) {
        let got = self.cli(&["get", id, "--format", "json"]).await.ok().json();
        let cron = got["spec"]["cron"].as_str().unwrap_or("").to_string();
        (got["version"].as_u64().unwrap_or(0), cron)
    }

    async fn create(&self, doc: Value) {
        let a = self
            .api
            .call(
                Some(ADMIN),
                axum::http::Method::POST,
                "/v1/schedules",
                Some(doc),
            )
            .await;
        assert_eq!(a.status.as_u16(), 201, "{:?}", a.body);
    }

    async fn audit(&self, schedule: &str) -> Vec<Value> {
        let a = self
            .api
            .call(
                Some(VIEWER),
                axum::http::Method::GET,
                &format!("/v1/schedules/{schedule}/audit"),
                None,
            )
            .await;
        a.body["entries"].as_array().cloned().unwrap_or_default()
    }
}

/// An audit log as (action, reason) pairs.
fn actions_and_reasons(audit: &[Value]) -> Vec<(&str, &str)> {
    audit
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or(""),
                e["reason"].as_str().unwrap_or(""),
            )
        })
        .collect()
}

fn noop(id: &str, cron: &str, job: Value, extra: Value) -> Value {
    let mut doc = json!({"id": id, "cron": cron, "timezone": "UTC", "owner": "cli-tests",
                         "overlap": "ALLOW", "job": job});
    if let (Some(d), Some(e)) = (doc.as_object_mut(), extra.as_object()) {
        d.extend(e.clone());
    }
    doc
}

fn manifest(hourly_cron: &str, owner: &str) -> String {
    format!(
        "schedules:\n  - id: hourly\n    cron: \"{hourly_cron}\"\n    timezone: UTC\n    owner: {owner}\n    job: {{ type: noop }}\n  - id: nightly\n    cron: \"0 2 * * *\"\n    timezone: Asia/Seoul\n    owner: cli-tests\n    job: {{ type: noop }}\n"
    )
}

fn write_manifest(text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("{}.yaml", unique_name("cli-remote")));
    std::fs::write(&path, text).expect("the manifest is written");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_shows_its_plan_applies_with_locking_and_refusals_show_their_codes() {
    let s = serve().await;
    let file = write_manifest(&manifest("0 * * * *", "cli-tests"));
    let f = file.to_str().expect("a path");

    // Without --yes (and no terminal to ask): the plan, nothing written, exit 1.
    let plan = s.cli(&["apply", "-f", f]).await;
    assert_eq!(plan.code, 1, "{}", plan.stderr);
    assert!(plan.stdout.contains("create  hourly"), "{}", plan.stdout);
    assert!(plan.stdout.contains("create  nightly"), "{}", plan.stdout);
    assert!(plan.stderr.contains("not applied"), "{}", plan.stderr);
    let none = s.cli(&["get", "--format", "json"]).await.ok().json();
    assert_eq!(none["items"], json!([]));

    let applied = s.cli(&["apply", "-f", f, "--yes"]).await.ok();
    assert!(
        applied.stdout.contains("hourly at version 1 (ACTIVE)"),
        "{}",
        applied.stdout
    );
    let listed = s.cli(&["get"]).await.ok();
    assert!(listed.stdout.starts_with("ID"), "{}", listed.stdout);
    assert!(
        listed
            .stdout
            .contains("nightly  1        ACTIVE  0 2 * * *  Asia/Seoul"),
        "{}",
        listed.stdout
    );
    assert_eq!(s.version_and_cron("hourly").await, (1, "0 * * * *".into()));
    // Same file again: nothing to change.
    let same = s.cli(&["apply", "-f", f, "--yes"]).await.ok();
    assert!(same.stdout.contains("nothing to change"), "{}", same.stdout);

    // Twelve times as often: an update with its risk, shown before anything is written.
    std::fs::write(&file, manifest("*/5 * * * *", "cli-tests")).expect("rewritten");
    let plan = s.cli(&["apply", "-f", f, "--format", "json"]).await;
    assert_eq!(plan.code, 1);
    let steps = plan.json()["plan"].clone();
    assert_eq!(steps.as_array().map(Vec::len), Some(1), "{steps}");
    assert_eq!(steps[0]["action"], "update");
    assert_eq!(steps[0]["version"], 1);
    assert_eq!(steps[0]["risk"]["level"], "HIGH", "{steps}");
    let table = s.cli(&["apply", "-f", f]).await;
    assert!(
        table.stdout.contains("update  hourly    1        HIGH"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("as often"), "{}", table.stdout);

    // Another admin edits `hourly` between the plan and the write: the If-Match is stale,
    // the CLI says so with the api's code and changes nothing.
    let mut other = cronledger_tests::spec("hourly", "0 * * * *");
    other.owner = Some("someone-else".into());
    *lock(&s.interleave) = Some(("/v1/schedules/hourly/diff".into(), other));
    let stale = s.cli(&["apply", "-f", f, "--yes"]).await;
    assert_eq!(stale.code, 1, "{}", stale.stdout);
    assert!(
        stale.stderr.contains("SCHEDULE_VERSION_CONFLICT") && stale.stderr.contains("(HTTP 412)"),
        "{}",
        stale.stderr
    );
    assert_eq!(s.version_and_cron("hourly").await, (2, "0 * * * *".into()));
    // Planned again against version 2, it applies.
    let fresh = s.cli(&["apply", "-f", f, "--yes"]).await.ok();
    assert!(
        fresh.stdout.contains("hourly at version 3 (ACTIVE)"),
        "{}",
        fresh.stdout
    );

    // Pause and resume with notes; the notes are the audit reasons.
    let paused = s
        .cli(&["pause", "hourly", "--note", "month end"])
        .await
        .ok();
    assert!(
        paused.stdout.contains("hourly  4        PAUSED"),
        "{}",
        paused.stdout
    );
    let resumed = s
        .cli(&["resume", "hourly", "--note", "closed", "--format", "json"])
        .await
        .ok();
    assert_eq!(resumed.json()["state"], "ACTIVE");
    let audit = s.audit("hourly").await;
    let trail = actions_and_reasons(&audit);
    assert_eq!(trail[3..], [("PAUSE", "month end"), ("RESUME", "closed")]);

    // Refused calls: non-zero exit, the api's code and status on stderr, nothing done.
    let stranger = s.cli(&["pause", "hourly", "--token", STRANGER]).await;
    assert_eq!(stranger.code, 1);
    assert!(
        stranger.stderr.starts_with("FORBIDDEN: ") && stranger.stderr.contains("(HTTP 403)"),
        "{}",
        stranger.stderr
    );
    let viewer = s.cli(&["run", "now", "hourly", "--token", VIEWER]).await;
    assert_eq!(viewer.code, 1);
    assert!(
        viewer.stderr.contains("FORBIDDEN")
            && viewer.stderr.contains("is viewer, this needs operator"),
        "{}",
        viewer.stderr
    );
    let nowhere = s.cli(&["get", "--api-url", "http://127.0.0.1:9"]).await;
    assert_eq!(nowhere.code, 1);
    assert!(
        nowhere.stderr.starts_with("REMOTE_UNREACHABLE"),
        "{}",
        nowhere.stderr
    );

    // A bearer token: the api sees that principal (the audit names it).
    let by_token = s
        .cli(&[
            "run", "now", "hourly", "--token", OPERATOR, "--note", "by token", "--format", "json",
        ])
        .await
        .ok()
        .json();
    assert_eq!(by_token["created"], true);
    let audit = s.audit("hourly").await;
    let last = audit.last().cloned().unwrap_or_default();
    assert_eq!(
        (
            last["action"].clone(),
            last["actor"].clone(),
            last["reason"].clone()
        ),
        (json!("RUN_NOW"), json!(OPERATOR), json!("by token"))
    );
    let _ = std::fs::remove_file(&file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_run_now_retry_approve_and_reject_with_attempts_and_notes() {
    let s = serve().await;
    let fails_once = json!({"type": "noop", "fail_times": 1});
    s.create(noop(
        "flaky",
        "*/5 * * * *",
        fails_once.clone(),
        json!({"max_attempts": 1}),
    ))
    .await;
    s.create(noop(
        "bouncy",
        "*/5 * * * *",
        fails_once,
        json!({"max_attempts": 2}),
    ))
    .await;

    // The same idempotency key twice: one run.
    let click = [
        "run",
        "now",
        "flaky",
        "--idempotency-key",
        "k1",
        "--note",
        "first try",
    ];
    let first = s
        .cli(&[&click[..], &["--format", "json"]].concat())
        .await
        .ok()
        .json();
    // A retried command is the same request: same key, same body.
    let again = s.cli(&click).await.ok();
    // The key with another body is refused, not answered with the first run.
    let other_body = s
        .cli(&["run", "now", "flaky", "--idempotency-key", "k1"])
        .await;
    refused_with(&other_body, "IDEMPOTENCY_KEY_REUSED");
    let run_id = first["run"]["run_id"].as_str().unwrap_or("").to_string();
    assert_eq!(first["created"], true);
    assert!(
        again.stdout.starts_with(&format!("existing run {run_id}")),
        "{}",
        again.stdout
    );
    let listed = s
        .cli(&["runs", "flaky", "--format", "json"])
        .await
        .ok()
        .json();
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );

    // It fails (one attempt allowed); the table shows it, the filter finds it.
    s.work_until(Lane::Manual, "flaky", &run_id, &[RunStatus::Failed])
        .await;
    let table = s.cli(&["runs", "flaky"]).await.ok();
    assert!(table.stdout.starts_with("RUN"), "{}", table.stdout);
    assert!(
        table.stdout.contains(&format!("{run_id}  MANUAL   FAILED")),
        "{}",
        table.stdout
    );
    let failed = s
        .cli(&["runs", "flaky", "--status", "FAILED", "--format", "json"])
        .await
        .ok()
        .json();
    assert_eq!(failed["items"][0]["run_id"], run_id.as_str());

    // Retry: a new attempt of the same run, never a new run.
    let retry = s
        .cli(&["retry", "flaky", &run_id, "--note", "vendor fixed"])
        .await
        .ok();
    assert_eq!(retry.stdout, format!("retry: run {run_id} is QUEUED\n"));
    s.work_until(Lane::Manual, "flaky", &run_id, &[RunStatus::Success])
        .await;
    let one = s.get_run("flaky", &run_id).await;
    let outcomes: Vec<&str> = one["attempt_history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, ["FAILED", "SUCCESS"], "{one}");
    let view = s.cli(&["runs", "flaky", &run_id]).await.ok();
    assert!(view.stdout.contains("attempts: 2"), "{}", view.stdout);
    assert!(view.stdout.contains("1  FAILED "), "{}", view.stdout);
    assert!(
        view.stdout.contains("NOOP_INJECTED_FAILURE"),
        "{}",
        view.stdout
    );
    assert!(view.stdout.contains("2  SUCCESS "), "{}", view.stdout);
    let listed = s
        .cli(&["runs", "flaky", "--format", "json"])
        .await
        .ok()
        .json();
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1));
    let refused = s.cli(&["retry", "flaky", &run_id]).await;
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("(HTTP 409)"), "{}", refused.stderr);

    // Fails once, retried by the worker itself: two attempts with their outcomes.
    let bouncy = s
        .cli(&["run", "now", "bouncy", "--format", "json"])
        .await
        .ok()
        .json();
    let bouncy_id = bouncy["run"]["run_id"].as_str().unwrap_or("").to_string();
    s.work_until(Lane::Manual, "bouncy", &bouncy_id, &[RunStatus::Success])
        .await;
    let one = s.get_run("bouncy", &bouncy_id).await;
    let attempts: Vec<(Value, Value, bool)> = one["attempt_history"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a["number"].clone(),
                a["outcome"].clone(),
                a["duration_ms"].is_i64(),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [
            (json!(1), json!("FAILED_RETRYABLE"), true),
            (json!(2), json!("SUCCESS"), true)
        ],
        "{one}"
    );

    // Approve and reject MANUAL_REQUIRED runs, with notes.
    let spec = s
        .api
        .env
        .store
        .get_schedule("flaky")
        .await
        .expect("schedule")
        .spec;
    let at = now().duration_trunc(TimeDelta::hours(1)).expect("an hour") - TimeDelta::hours(2);
    let mut ids = Vec::new();
    for held_at in [at, at + TimeDelta::minutes(5)] {
        let mut run = scheduled_run(&spec, held_at, now(), "tests");
        run.status = RunStatus::ManualRequired;
        run.reason = Some(cronledger_core::Reason::PolicyManual);
        s.api.env.store.create_run(&run).await.expect("held run");
        ids.push(cronledger_core::window::utc_text(held_at));
    }
    let approved = s
        .cli(&["approve", "flaky", &ids[0], "--note", "checked"])
        .await
        .ok();
    assert_eq!(
        approved.stdout,
        format!("approve: run {} is QUEUED\n", ids[0])
    );
    let rejected = s
        .cli(&[
            "reject",
            "flaky",
            &ids[1],
            "--note",
            "not needed",
            "--format",
            "json",
        ])
        .await
        .ok()
        .json();
    assert_eq!(
        (rejected["status"].clone(), rejected["reason"].clone()),
        (json!("CANCELLED"), json!("REJECTED"))
    );

    // Every note is in the schedule's own audit log, in order.
    let audit = s.audit("flaky").await;
    let trail = actions_and_reasons(&audit);
    assert_eq!(
        trail,
        [
            ("CREATE", "created through the api"),
            ("RUN_NOW", "first try"),
            ("RUN_RETRY", "vendor fixed"),
            ("RUN_APPROVE", "checked"),
            ("RUN_REJECT", "not needed")
        ],
        "{audit:?}"
    );
    assert_eq!(audit[4]["details"]["run"], ids[1].as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_keeps_the_run_version_and_current_definition_re_pins_it() {
    let s = serve().await;
    let doc = |target: &str| {
        let job = json!({"type": "noop", "fail_times": 5, "payload": {"target": target}});
        noop("edited", "*/5 * * * *", job, json!({"max_attempts": 1}))
    };
    s.create(doc("old")).await;
    let mut runs = Vec::new();
    for _ in 0..2 {
        let made = s
            .cli(&["run", "now", "edited", "--mode", "new", "--format", "json"])
            .await
            .ok()
            .json();
        runs.push(made["run"]["run_id"].as_str().unwrap_or("").to_string());
    }
    for run in &runs {
        s.work_until(Lane::Manual, "edited", run, &[RunStatus::Failed])
            .await;
    }
    let edited = s
        .api
        .call_with(
            Some(Caller::new(ADMIN)),
            axum::http::Method::PUT,
            "/v1/schedules/edited",
            Some(doc("new")),
            &[("If-Match", "\"1\"")],
        )
        .await;
    assert_eq!(edited.body["version"], 2, "{:?}", edited.body);

    let kept = s
        .cli(&["retry", "edited", &runs[0], "--format", "json"])
        .await
        .ok()
        .json();
    assert_eq!(kept["schedule_version"], 1, "{kept}");
    let repinned = s
        .cli(&[
            "retry",
            "edited",
            &runs[1],
            "--current-definition",
            "--format",
            "json",
        ])
        .await
        .ok()
        .json();
    assert_eq!(
        (
            repinned["status"].clone(),
            repinned["schedule_version"].clone()
        ),
        (json!("QUEUED"), json!(2)),
        "{repinned}"
    );
    let audit = s.audit("edited").await;
    let chosen = |run: &str| {
        audit
            .iter()
            .find(|e| e["action"] == "RUN_RETRY" && e["details"]["run"] == run)
            .map(|e| e["details"]["definition"].clone())
    };
    assert_eq!(chosen(&runs[0]), Some(json!("original")));
    assert_eq!(chosen(&runs[1]), Some(json!("current")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_create_status_pause_resume_watch_cancel_and_verify() {
    let s = serve().await;
    // Without side effects: history before the schedule existed needs no admin's approval.
    s.create(noop(
        "hist",
        "*/10 * * * *",
        json!({"type": "noop"}),
        json!({"side_effects": false}),
    ))
    .await;
    let to = now().duration_trunc(TimeDelta::hours(1)).expect("an hour") - TimeDelta::hours(1);
    let from = to - TimeDelta::hours(1);
    let (from, to) = (
        cronledger_core::window::utc_text(from),
        cronledger_core::window::utc_text(to),
    );
    let range = ["backfill", "create", "hist", "--from", &from, "--to", &to];
    let limits = ["--concurrency", "2", "--batch-size", "5", "--rate", "100"];

    let dry = s
        .cli(&[&range[..], &limits[..], &["--dry-run"]].concat())
        .await
        .ok();
    assert_dry_run(
        &dry.stdout,
        "dry run: 7 of 7 windows would run (missing); nothing written",
    );
    let created = s
        .cli(
            &[
                &range[..],
                &limits[..],
                &["--note", "refill", "--format", "json"],
            ]
            .concat(),
        )
        .await
        .ok()
        .json();
    let id = created["id"].as_str().unwrap_or("").to_string();
    assert_eq!(
        (created["state"].clone(), created["total"].clone()),
        (json!("RUNNING"), json!(7))
    );

    let status = s.cli(&["backfill", "status", &id]).await.ok();
    assert!(
        status.stdout.starts_with(&format!("{id} RUNNING [")),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("0/7"), "{}", status.stdout);
    let paused = s
        .cli(&["backfill", "pause", &id, "--note", "month end"])
        .await
        .ok();
    assert!(paused.stdout.contains(" PAUSED "), "{}", paused.stdout);
    let resumed = s
        .cli(&["backfill", "resume", &id, "--format", "json"])
        .await
        .ok()
        .json();
    assert_eq!(resumed["state"], "RUNNING");

    // `status --watch` redraws until the backfill ends, then exits by itself.
    let watch = s
        .command(&["backfill", "status", &id, "--watch", "--every", "1"])
        .spawn()
        .expect("the watch starts");
    let mut finished = false;
    for _ in 0..40 {
        s.api.env.clock.advance(TimeDelta::minutes(1));
        if s.api.release().await.finished.contains(&id) {
            finished = true;
            break;
        }
        let worker = s.api.env.worker(worker_config("cli-tests"));
        let got = s
            .api
            .env
            .receive(Lane::Backfill, false, 10, Duration::from_millis(500))
            .await;
        s.api.env.deliver(&worker, Lane::Backfill, &got).await;
    }
    assert!(finished, "the backfill did not finish");
    let watched = tokio::time::timeout(Duration::from_secs(30), watch.wait_with_output())
        .await
        .expect("the watch ends when the backfill does")
        .expect("its output");
    let text = String::from_utf8_lossy(&watched.stdout);
    assert!(watched.status.success(), "{text}");
    assert!(text.contains('\r'), "redrawn in place: {text:?}");
    assert!(
        text.contains(&format!("{id} DONE [##############################] 7/7")),
        "{text:?}"
    );

    let verified = s.cli(&["backfill", "verify", &id]).await.ok();
    assert!(
        verified
            .stdout
            .starts_with("7 expected windows: 7 succeeded, 0 missing, 0 failed"),
        "{}",
        verified.stdout
    );

    // A second backfill, cancelled: `status --watch` returns at once.
    let second = s
        .cli(&[&range[..], &["--reprocess", "all", "--format", "json"]].concat())
        .await
        .ok()
        .json();
    let second_id = second["id"].as_str().unwrap_or("").to_string();
    let cancelled = s
        .cli(&["backfill", "cancel", &second_id, "--note", "wrong range"])
        .await
        .ok();
    assert!(
        cancelled.stdout.contains(" CANCELLED "),
        "{}",
        cancelled.stdout
    );
    let closed = s
        .cli(&["backfill", "status", &second_id, "--watch", "--every", "1"])
        .await
        .ok();
    assert!(closed.stdout.contains(" CANCELLED "), "{}", closed.stdout);

    let audit = s.audit("hist").await;
    let trail = actions_and_reasons(&audit);
    assert_eq!(
        trail,
        [
            ("CREATE", "created through the api"),
            ("BACKFILL_CREATE", "refill"),
            ("BACKFILL_PAUSE", "month end"),
            ("BACKFILL_RESUME", ""),
            ("BACKFILL_CREATE", ""),
            ("BACKFILL_CANCEL", "wrong range")
        ],
        "{audit:?}"
    );
}

#[tokio::test]
async fn a_held_backfill_needs_backfill_approve_and_refusals_show_their_codes() {
    let s = serve().await;
    s.create(noop(
        "held",
        "*/10 * * * *",
        json!({"type": "noop"}),
        json!({}),
    ))
    .await;
    let to = now().duration_trunc(TimeDelta::hours(1)).expect("an hour") - TimeDelta::hours(1);
    let from = cronledger_core::window::utc_text(to - TimeDelta::hours(1));
    let to = cronledger_core::window::utc_text(to);
    let range = ["backfill", "create", "held", "--from", &from, "--to", &to];

    let dry = s.cli(&[&range[..], &["--dry-run"]].concat()).await.ok();
    assert_dry_run(
        &dry.stdout,
        "dry run: 7 of 7 windows would run (missing); it would wait PAUSED for an admin's approval (BEFORE_SCHEDULE_CREATED); nothing written",
    );
    let created = s
        .cli(&[&range[..], &["--format", "json"]].concat())
        .await
        .ok()
        .json();
    assert_eq!(created["state"], "PAUSED");
    let id = created["id"].as_str().unwrap_or("").to_string();

    let resume = s.cli(&["backfill", "resume", &id]).await;
    refused_with(&resume, "BACKFILL_APPROVAL_REQUIRED");
    let approved = s
        .cli(&["backfill", "approve", &id, "--note", "history wanted"])
        .await
        .ok();
    assert!(
        approved.stdout.starts_with(&format!("{id} RUNNING [")),
        "{}",
        approved.stdout
    );

    // Run now names an occurrence: an instant inside one is refused with its code.
    let inside = cronledger_core::window::utc_text(
        now().duration_trunc(TimeDelta::hours(1)).expect("an hour") - TimeDelta::minutes(7),
    );
    let refused = s
        .cli(&["run", "now", "held", "--scheduled-for", &inside])
        .await;
    refused_with(&refused, "SCHEDULED_FOR_NOT_AN_OCCURRENCE");
}

/// The CLI failed and its message carries the api's code.
fn refused_with(out: &Out, code: &str) {
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(out.stderr.contains(code), "{}", out.stderr);
}

/// `apply` creates upstreams before the schedules that run after them, and a dependent that
/// leaves out `cron` and `timezone` is stored with its upstream's grid; the same file again
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_creates_upstreams_first_and_a_dependent_inherits_its_grid() {
    let s = serve().await;
    // Sorted by id, the dependents come before their upstream.
    let file = write_manifest(
        "schedules:\n  - { id: b-report, after: [b-aggregate], owner: cli-tests, job: { type: noop } }\n  - { id: b-aggregate, after: [z-collect], owner: cli-tests, job: { type: noop } }\n  - { id: z-collect, cron: \"0 3 * * *\", timezone: Asia/Seoul, owner: cli-tests, job: { type: noop } }\n",
    );
    let f = file.to_str().expect("a path");
    s.cli(&["apply", "-f", f, "--yes"]).await.ok();
    for id in ["z-collect", "b-aggregate", "b-report"] {
        let got = s.cli(&["get", id, "--format", "json"]).await.ok().json();
        assert_eq!(
            (&got["spec"]["cron"], &got["spec"]["timezone"]),
            (&json!("0 3 * * *"), &json!("Asia/Seoul")),
            "{id}: {got}"
        );
    }
    let same = s.cli(&["apply", "-f", f, "--yes"]).await.ok();
    assert!(same.stdout.contains("nothing to change"), "{}", same.stdout);
}

/// A backfill dry run prints its verdict, then its estimate (seven 10-minute windows priced at
/// the noop schedule's max_runtime: no history yet); the finish time moves with the clock.
fn assert_dry_run(stdout: &str, verdict: &str) {
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[0], verdict);
    assert!(
        lines[1]
            .starts_with("estimate: 7 runs, 7 target calls, 1470.1 Lambda GB-s, $0.0197, done by "),
        "{stdout}"
    );
}
