//! The operator console in a real browser: `cronledger local` with the example manifest (on
//! the emulators `infra/local/test` starts) serves it, and headless Chromium, driven over
//! WebDriver, goes through its pages: every example schedule is listed; a schedule shows its
//! next fire times and history; approving a held run from the page changes the ledger (read
//! back through the api); a viewer sees no action buttons, and an action it forces anyway is
//! refused with 403. Each page's screenshot goes to the target folder's `console-screenshots`.
//!
//! Needs the `cronledger` binary (`infra/local/test` builds it) and Debian's `chromium` and
//! `chromium-driver` (`infra/local/test` installs them). Without them the test fails, saying so;
//! outside CI, `CRONLEDGER_SKIP_BROWSER=1` skips it on a machine without a browser.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use chrono::{TimeDelta, Utc};
use cronledger_app::api::answer_log::{RecordedAnswer, ANSWER_LOG_VARIABLE};
use cronledger_aws::prelude::*;
use cronledger_aws::DynamoLedger;
use cronledger_core::{Reason, RunEvent, RunStatus, Timing};
use cronledger_tests::contract;
use cronledger_tests::webdriver::{browser_binaries, free_port, Browser, WAIT};
use cronledger_tests::{clients, ended_run, scheduled_run};
use serde_json::{json, Value};

const EXAMPLES: &str = include_str!("../../examples/schedules.yaml");
const HELD: &str = "daily-settlement";
const HOURLY: &str = "hourly-aggregation";
/// Buttons that change something; a viewer must see none of them.
const ACTIONS: &str = "main button[data-action]:not([data-action=verify])";

/// A running `cronledger local`, stopped with SIGTERM on drop.
struct Runner {
    child: Child,
    url: String,
    table: String,
    /// Every answer the runner's api gave (`CRONLEDGER_ANSWER_LOG`).
    answers: PathBuf,
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.answers);
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn cronledger_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("a profile folder");
    let binary = dir.join("cronledger");
    assert!(
        binary.is_file(),
        "{} is missing: run `cargo build -p cronledger-cli` first (infra/local/test does)",
        binary.display()
    );
    binary
}

impl Runner {
    /// Starts the runner as `identity` on the emulators in the environment and waits for its
    /// ready line, which names its table.
    fn start(identity: &str) -> Runner {
        cronledger_tests::require_emulator();
        let port = free_port();
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/schedules.yaml");
        let answers = std::env::temp_dir().join(format!(
            "cronledger-console-answers-{identity}-{}-{port}.jsonl",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&answers);
        let mut child = Command::new(cronledger_binary())
            .args(["local", "-f", example, "--port", &port.to_string()])
            .env("CRONLEDGER_LOCAL_IDENTITY", identity)
            .env(ANSWER_LOG_VARIABLE, &answers)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the runner starts");
        let stdout = child.stdout.take().expect("its stdout");
        let (tx, rx) = mpsc::channel();
        // Read to the end, so the runner never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut runner = Runner {
            child,
            url: format!("http://127.0.0.1:{port}"),
            table: String::new(),
            answers,
        };
        loop {
            match rx.recv_timeout(WAIT) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("cronledger local: table ") {
                        runner.table = rest.split(',').next().unwrap_or("").to_string();
                        return runner;
                    }
                }
                Err(e) => panic!("the runner never said it was ready: {e}"),
            }
        }
    }

    /// Checks every answer the runner's api gave the browser and the test against
    /// `/openapi.json` (the webhook receiver's own routes are not the api's); how many.
    fn check_answers(&self) -> usize {
        let text = std::fs::read_to_string(&self.answers).expect("the runner recorded its answers");
        let mut checked = 0;
        for line in text.lines() {
            let answer: RecordedAnswer = serde_json::from_str(line).expect("a recorded answer");
            let api = ["/v1/", "/console", "/openapi.json"];
            if !api.iter().any(|prefix| answer.path.starts_with(prefix)) {
                continue;
            }
            contract::check(
                &answer.method,
                &answer.path,
                answer.status,
                answer.content_type.as_deref(),
                answer.body.as_bytes(),
            );
            checked += 1;
        }
        checked
    }

    /// The ledger behind the runner (one shard, as `local` creates it).
    async fn ledger(&self) -> DynamoLedger {
        DynamoLedger::new(&clients().await, self.table.clone(), 1)
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let http = reqwest::Client::new();
        let url = format!("{}{path}", self.url);
        let req = match body {
            Some(body) => http
                .request(method.parse().expect("a method"), &url)
                .json(&body),
            None => http.request(method.parse().expect("a method"), &url),
        };
        let resp = req.send().await.expect("the runner answers");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }
}

/// Two held runs of the daily settlement (its misfire policy is MANUAL) in one replay group,
/// and a few hours of the hourly aggregation, the last one failed. Returns the held runs' ids.
async fn seed(runner: &Runner) -> Vec<String> {
    let ledger = runner.ledger().await;
    let now = Utc::now();
    let settle = ledger.get_schedule(HELD).await.expect("the example").spec;
    let timing = Timing::parse(&settle.cron, settle.timezone).expect("its timing");
    let past: Vec<_> = timing
        .next_n(now - TimeDelta::days(3), 4)
        .into_iter()
        .filter(|t| *t < now)
        .collect();
    let mut held = Vec::new();
    for at in past.iter().rev().take(2).rev() {
        let mut run = scheduled_run(&settle, *at, now, "catch-up-console");
        run.status = RunStatus::ManualRequired;
        run.reason = Some(Reason::PolicyManual);
        ledger.create_run(&run).await.expect("a held run");
        held.push(cronledger_core::window::utc_text(*at));
    }
    let hourly = ledger.get_schedule(HOURLY).await.expect("the example").spec;
    let timing = Timing::parse(&hourly.cron, hourly.timezone).expect("its timing");
    let hours: Vec<_> = timing
        .next_n(now - TimeDelta::hours(9), 9)
        .into_iter()
        .filter(|t| *t < now - TimeDelta::minutes(5))
        .collect();
    for (i, at) in hours.iter().enumerate() {
        let end = if i + 1 == hours.len() {
            RunEvent::Fail
        } else {
            RunEvent::Succeed
        };
        ended_run(&ledger, &hourly, *at, end).await;
    }
    held
}

fn example_ids() -> BTreeSet<String> {
    let doc: Value = serde_norway::from_str(EXAMPLES).expect("the examples parse");
    doc["schedules"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_string))
        .collect()
}

fn screenshots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&dir).expect("the screenshot folder");
    dir
}

async fn open(browser: &Browser, runner: &Runner, path: &str, page: &str) {
    browser
        .goto(&format!("{}/console{path}", runner.url))
        .await
        .expect("navigate");
    let script = format!("return document.body.dataset.ready === '{page}'");
    browser
        .wait_for(&format!("the {page} page"), &script)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The whole page (the window made as tall as it, within a bound) at `width`.
async fn shot(browser: &Browser, name: &str, width: u32) {
    let height = browser
        .eval("return document.documentElement.scrollHeight", json!([]))
        .await
        .ok()
        .and_then(|h| h.as_u64())
        .unwrap_or(900)
        .clamp(600, 2400);
    browser.resize(width, height as u32).await.expect("resize");
    let path = screenshots().join(format!("{name}.png"));
    browser.screenshot(&path).await.expect("a screenshot");
    browser.resize(width, 900).await.expect("resize");
    println!("screenshot: {}", path.display());
}

async fn count(browser: &Browser, css: &str) -> u64 {
    let script = format!("return document.querySelectorAll({css:?}).length");
    let n = browser.eval(&script, json!([])).await.expect("a count");
    n.as_u64().unwrap_or(0)
}

fn browser_or_skip() -> bool {
    match browser_binaries() {
        Ok(_) => true,
        Err(why) => {
            let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
            let skip = std::env::var("CRONLEDGER_SKIP_BROWSER").is_ok_and(|v| v == "1");
            assert!(skip && !ci, "{why}");
            eprintln!("skipped (CRONLEDGER_SKIP_BROWSER=1): {why}");
            false
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_shows_and_approves_and_a_viewer_cannot_act() {
    if !browser_or_skip() {
        return;
    }
    let admin = Runner::start("admin");
    let held = seed(&admin).await;
    let browser = Browser::start(1280, 900).await.expect("a browser");

    // The schedules page lists every example schedule.
    open(&browser, &admin, "", "schedules").await;
    let listed = browser
        .eval(
            "return [...document.querySelectorAll('tr[data-schedule]')].map(r => r.dataset.schedule)",
            json!([]),
        )
        .await
        .expect("the rows");
    let listed: BTreeSet<String> = serde_json::from_value(listed).expect("ids");
    assert_eq!(listed, example_ids());
    let timing = browser
        .eval(
            "const nav = performance.getEntriesByType('navigation')[0];
             const mark = performance.getEntriesByName('console-first-render')[0];
             return {first_render_ms: mark && mark.startTime, dom_content_loaded_ms: nav.domContentLoadedEventEnd, load_ms: nav.loadEventEnd};",
            json!([]),
        )
        .await
        .expect("the page's timing");
    println!("console load (schedules page, local runner): {timing}");
    assert!(timing["first_render_ms"].is_number(), "{timing}");
    shot(&browser, "schedules", 1280).await;

    // A schedule: its next ten fire times and its history, held runs included.
    open(&browser, &admin, &format!("/schedules/{HELD}"), "schedule").await;
    assert_eq!(count(&browser, "tr.fire").await, 10);
    for id in &held {
        let row = format!("tr[data-run='{id}'][data-status=MANUAL_REQUIRED]");
        assert_eq!(count(&browser, &row).await, 1, "{row}");
    }
    assert_eq!(count(&browser, "button[data-action=pause]").await, 1);
    shot(&browser, "schedule", 1280).await;

    // Needs attention: approve the older held run with a note, from the page.
    open(&browser, &admin, "/attention", "attention").await;
    assert_eq!(
        count(&browser, "tr[data-run] button[data-action=approve]").await,
        2
    );
    assert_eq!(
        count(&browser, "button[data-action=approve-group]").await,
        1
    );
    assert_eq!(count(&browser, "button[data-action=retry]").await, 1);
    shot(&browser, "attention", 1280).await;
    let approve = format!("tr[data-run='{}'] button[data-action=approve]", held[0]);
    browser.click(&approve).await.expect("click approve");
    browser
        .wait_for(
            "the dialog",
            "return document.getElementById('dialog').open",
        )
        .await
        .expect("the dialog opens");
    let note = "checked with finance: console test";
    browser.type_into("#dialog-note", note).await.expect("type");
    browser.click("#dialog-ok").await.expect("confirm");
    browser
        .wait_for(
            "the approved run to leave the page",
            &format!(
                "return document.body.dataset.ready === 'attention' && !document.querySelector(\"tr[data-run='{}']\")",
                held[0]
            ),
        )
        .await
        .expect("the row goes");
    let run_path = format!("/v1/schedules/{HELD}/runs/{}", held[0]);
    let (status, run) = admin.call("GET", &run_path, None).await;
    assert_eq!(status, 200, "{run}");
    assert_ne!(run["status"], "MANUAL_REQUIRED", "{run}");
    let (_, audit) = admin
        .call("GET", &format!("/v1/schedules/{HELD}/audit"), None)
        .await;
    assert!(
        audit["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["reason"] == note && e["actor"] == "local-admin"),
        "{audit}"
    );

    // A run, the backfills (one started through the api) and the system page.
    open(&browser, &admin, &run_path.replace("/v1", ""), "run").await;
    assert!(count(&browser, "main table").await >= 1);
    shot(&browser, "run", 1280).await;
    let now = Utc::now();
    let backfill = json!({"from": cronledger_core::window::utc_text(now - TimeDelta::hours(30)),
                          "to": cronledger_core::window::utc_text(now - TimeDelta::hours(10)),
                          "reprocess": "all", "rate_per_minute": 2, "note": "rebuild after the schema fix"});
    let (status, body) = admin
        .call(
            "POST",
            &format!("/v1/schedules/{HOURLY}/backfills"),
            Some(backfill),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    open(&browser, &admin, "/backfills", "backfills").await;
    assert_eq!(count(&browser, "article[data-backfill] .bar").await, 1);
    shot(&browser, "backfills", 1280).await;
    open(&browser, &admin, "/system", "system").await;
    assert_eq!(count(&browser, "button[data-action=kill-switch]").await, 1);
    shot(&browser, "system", 1280).await;
    browser.resize(390, 844).await.expect("a phone's width");
    open(&browser, &admin, "", "schedules").await;
    shot(&browser, "schedules-phone", 390).await;
    browser.resize(1280, 900).await.expect("back to a laptop");

    // A viewer: the same pages without a single action button; a forced action is 403.
    let viewer = Runner::start("viewer");
    let viewer_held = seed(&viewer).await;
    for (path, page) in [
        ("", "schedules"),
        (&*format!("/schedules/{HELD}"), "schedule"),
        ("/attention", "attention"),
        (
            &*format!("/schedules/{HELD}/runs/{}", viewer_held[0]),
            "run",
        ),
        ("/system", "system"),
    ] {
        open(&browser, &viewer, path, page).await;
        assert_eq!(count(&browser, ACTIONS).await, 0, "{page} shows actions");
    }
    // The held runs are listed, only without their buttons.
    open(&browser, &viewer, "/attention", "attention").await;
    assert_eq!(count(&browser, "tr[data-run]").await, 3);
    let role = browser
        .eval(
            "return document.getElementById('role').textContent",
            json!([]),
        )
        .await
        .expect("the role");
    assert_eq!(role, "viewer");
    let forced = format!("/v1/schedules/{HELD}/runs/{}/approve", viewer_held[0]);
    let (status, body) = viewer
        .call("POST", &forced, Some(json!({"note": "forced"})))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("FORBIDDEN")),
        "{body}"
    );
    let (_, still) = viewer
        .call(
            "GET",
            &format!("/v1/schedules/{HELD}/runs/{}", viewer_held[0]),
            None,
        )
        .await;
    assert_eq!(still["status"], "MANUAL_REQUIRED", "{still}");

    // Every answer the console's pages and this test got is what /openapi.json promises.
    let checked = admin.check_answers() + viewer.check_answers();
    assert!(checked > 20, "only {checked} answers recorded");
}
