//! End to end with the real function binaries: the ticker, worker, reconciler and api
//! processes, each against a local Lambda Runtime API, on the emulators (a fresh table and
//! lanes of their own), the worker fed by a stand-in for the SQS event source.
//!
//! One schedule goes from a tick to a webhook call to a SUCCESS ledger entry; one whose
//! webhook answers 500 retries through its message's visibility and ends FAILED with its
//! message in the lane's DLQ; an operator's manual run goes from the api to SUCCESS. The
//! worker's logs are JSON and name the runs they are about.
//!
//! Needs the four binaries built (`cargo build -p ticker -p worker -p reconciler -p api`;
//! `infra/local/test` does it before the tests).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use cronledger_aws::lanes::sqs::ERROR_CODE_ATTRIBUTE;
use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::prelude::*;
use cronledger_core::Lane;
use cronledger_tests::api::{auth_config, ADMIN, OPERATOR, VIEWER};
use cronledger_tests::event_source::EventSource;
use cronledger_tests::runtime_api::{
    function_binary, http_api_event, Function, FunctionConfig, Stream,
};
use cronledger_tests::webhook::{Answer, Webhook};
use cronledger_tests::{TestLanes, TestLedger, SHARDS};
use serde_json::{json, Value};

/// How long any one step may take before the test fails.
const STEP: Duration = Duration::from_secs(30);

/// The four functions on one table and one set of lanes.
struct Stack {
    ledger: TestLedger,
    lanes: TestLanes,
    ticker: Function,
    worker: Arc<Function>,
    reconciler: Function,
    api: Function,
}

impl Stack {
    async fn start() -> Stack {
        let ledger = TestLedger::new().await;
        // Short visibility and two receives before SQS's own redrive: a message the worker
        // neither finishes nor dead-letters reaches the DLQ in seconds, not minutes.
        let lanes = TestLanes::with_clients(
            ledger.clients.clone(),
            LaneSettings {
                max_receive_count: 2,
                visibility_timeout: Duration::from_secs(2),
            },
        )
        .await;
        let config = |name: &str| {
            let binary = function_binary(name).unwrap_or_else(|e| panic!("{e}"));
            FunctionConfig::new(name, binary)
                .env("CRONLEDGER_TABLE", ledger.table.as_str())
                .env("CRONLEDGER_QUEUE_PREFIX", lanes.prefix.as_str())
                .env("CRONLEDGER_SHARDS", SHARDS.to_string())
                // The webhooks are on 127.0.0.1: the api and worker must allow loopback.
                .env("CRONLEDGER_HTTP_ALLOW_LOOPBACK", "1")
        };
        let auth = serde_json::to_string(&auth_config()).expect("the auth config serializes");
        let (ticker, worker, reconciler, api) = tokio::join!(
            Function::start(config("ticker")),
            Function::start(config("worker")),
            Function::start(config("reconciler")),
            Function::start(config("api").env("CRONLEDGER_API_AUTH", auth)),
        );
        let started = |f: Result<Function, _>| f.unwrap_or_else(|e| panic!("{e}"));
        Stack {
            ticker: started(ticker),
            worker: Arc::new(started(worker)),
            reconciler: started(reconciler),
            api: started(api),
            ledger,
            lanes,
        }
    }

    /// One request through the api function: status and JSON body.
    async fn call(
        &self,
        who: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> (u64, Value) {
        let event = http_api_event(method, path, body.as_ref(), Some(who), headers);
        let answer = self
            .api
            .invoke(event)
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}{}", self.api.output_tail()));
        let status = answer["statusCode"].as_u64().unwrap_or(0);
        let body = answer["body"]
            .as_str()
            .and_then(|b| serde_json::from_str(b).ok())
            .unwrap_or(Value::Null);
        (status, body)
    }

    async fn create_schedule(&self, doc: Value) {
        let (status, body) = self
            .call(ADMIN, "POST", "/v1/schedules", Some(doc), &[])
            .await;
        assert_eq!(status, 201, "create schedule: {body}");
    }

    /// The schedule's runs, newest first, as the api lists them.
    async fn runs(&self, schedule: &str) -> Vec<Value> {
        let path = format!("/v1/schedules/{schedule}/runs");
        let (status, body) = self.call(VIEWER, "GET", &path, None, &[]).await;
        assert_eq!(status, 200, "{path}: {body}");
        body["items"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until the schedule's only run has one of `statuses`; returns it.
    async fn wait_for_run(&self, schedule: &str, statuses: &[&str]) -> Value {
        let deadline = Instant::now() + STEP;
        loop {
            let runs = self.runs(schedule).await;
            if let [run] = runs.as_slice() {
                if statuses.contains(&run["status"].as_str().unwrap_or("")) {
                    return run.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "{schedule}: no run reached {statuses:?} within {STEP:?}: {runs:?}{}",
                self.worker.output_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// An hourly schedule whose runs may start up to 90 minutes late: the test ticks for this
/// hour's start (see below) while the worker binary reads the wall clock, and a run started
/// past its grace period would be judged by the misfire policy instead of run.
fn http_schedule(id: &str, url: &str, fields: Value) -> Value {
    let mut doc = json!({
        "id": id, "cron": "0 * * * *", "timezone": "UTC", "owner": "e2e", "grace": "90m",
        "job": {"type": "http", "url": url, "timeout": "10s"},
    });
    if let (Some(doc), Some(fields)) = (doc.as_object_mut(), fields.as_object()) {
        doc.extend(fields.clone());
    }
    doc
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_from_tick_and_api_to_webhook_ledger_and_dlq() {
    let began = Instant::now();
    let stack = Stack::start().await;
    let hook = Webhook::start(Answer::Succeed).await;
    let failing = Webhook::start(Answer::Fail(500)).await;

    // Hourly schedules; the api writes each one's next run at the next full hour.
    stack
        .create_schedule(http_schedule("e2e-hourly", &hook.url, json!({})))
        .await;
    stack
        .create_schedule(http_schedule(
            "e2e-failing",
            &failing.url,
            json!({"max_attempts": 2}),
        ))
        .await;
    stack
        .create_schedule(http_schedule("e2e-manual", &hook.url, json!({})))
        .await;

    // The binaries run on the wall clock, so the next hour is up to an hour away. Write the
    // schedules as if created before this hour began (their next run: this hour's start), and
    // tick for that instant, as EventBridge Scheduler's late delivery of that tick would.
    let hour = Utc::now()
        .duration_trunc(TimeDelta::hours(1))
        .expect("an hour boundary");
    for id in ["e2e-hourly", "e2e-failing"] {
        let stored = stack
            .ledger
            .ledger
            .get_schedule(id)
            .await
            .expect("the schedule is stored");
        let next = stored.next_run_at.expect("a next run");
        assert_eq!(next, hour + TimeDelta::hours(1), "{id}");
        // The schedule and its shard's catalog copy (what the ticker reads) both say so.
        let moved = stack
            .ledger
            .ledger
            .advance_next_run(id, next, Some(hour))
            .await
            .expect("next run moved");
        let backdated = cronledger_aws::ledger::StoredSchedule {
            next_run_at: Some(hour),
            ..stored
        };
        let copy = cronledger_aws::fire_mark::encode_catalog_entry(&backdated).expect("copy");
        use cronledger_aws::engine::ItemEngine;
        use cronledger_aws::layer::Layer;
        let written = stack
            .ledger
            .ledger
            .inner()
            .put_if(copy, &cronledger_aws::expr::Expr::new())
            .await
            .expect("catalog copy");
        assert!(written);
        assert!(moved, "{id}: next run not moved");
    }

    // The event source: one mapping per lane, all on the one worker function.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut sources = Vec::new();
    let mut pollers = Vec::new();
    for &lane in Lane::ALL {
        let source = EventSource::new(
            stack.lanes.clients.sqs.clone(),
            stack.lanes.lanes.clone(),
            lane,
        )
        .await
        .expect("an event source for the lane");
        let source = Arc::new(source);
        pollers.push(source.clone().spawn(stack.worker.clone(), stopped.clone()));
        sources.push(source);
    }
    let source = |lane: Lane| {
        sources
            .iter()
            .find(|s| s.lane() == lane)
            .expect("a source per lane")
            .clone()
    };

    // (a) and (b): one tick fires both schedules' windows at `hour`.
    let tick = stack
        .ticker
        .invoke(json!({"time": rfc3339(hour)}))
        .await
        .unwrap_or_else(|e| panic!("tick: {e}"));
    assert_eq!(tick["created"], 2, "{tick}");
    assert_eq!(tick["sent"], 2, "{tick}");
    assert_eq!(tick["errors"], json!([]), "{tick}");

    // (c): an operator's run of the manual schedule, through the api.
    let (status, manual) = stack
        .call(
            OPERATOR,
            "POST",
            "/v1/schedules/e2e-manual/runs",
            Some(json!({"note": "e2e manual run"})),
            &[("Idempotency-Key", "e2e-click-1")],
        )
        .await;
    assert_eq!(status, 201, "run now: {manual}");
    assert_eq!(manual["run"]["trigger"], "MANUAL", "{manual}");

    // (a) tick -> normal lane -> worker -> webhook -> SUCCESS.
    let done = stack.wait_for_run("e2e-hourly", &["SUCCESS"]).await;
    assert_eq!(done["scheduled_for"], rfc3339(hour), "{done}");
    assert_eq!(done["trigger"], "SCHEDULED", "{done}");
    assert_eq!(done["attempts"], 1, "{done}");
    let key = done["idempotency_key"]
        .as_str()
        .expect("an idempotency key");
    assert_eq!(
        key,
        format!(
            "e2e-hourly:{}/{}",
            rfc3339(hour - TimeDelta::hours(1)),
            rfc3339(hour)
        )
    );
    let calls: Vec<_> = hook
        .calls()
        .into_iter()
        .filter(|c| c.idempotency_key == key)
        .collect();
    assert_eq!(calls.len(), 1, "exactly one webhook call: {calls:?}");
    assert_eq!((calls[0].status, calls[0].attempt), (200, 1));

    // (c) api -> manual lane -> worker -> webhook -> SUCCESS.
    let manual_done = stack.wait_for_run("e2e-manual", &["SUCCESS"]).await;
    assert_eq!(manual_done["trigger"], "MANUAL", "{manual_done}");
    assert_eq!(manual_done["run_id"], manual["run"]["run_id"]);
    let manual_key = manual_done["idempotency_key"]
        .as_str()
        .expect("an idempotency key");
    assert_eq!(hook.by_key().get(manual_key), Some(&(1, 1)));

    // (b) 500, then a retry after the backoff the worker set as the message's visibility,
    // then FAILED and the message in the lane's DLQ.
    let failed = stack.wait_for_run("e2e-failing", &["FAILED"]).await;
    assert_eq!(failed["reason"], "RETRIES_EXHAUSTED", "{failed}");
    assert_eq!(failed["attempts"], 2, "{failed}");
    let attempts: Vec<_> = failing
        .calls()
        .iter()
        .map(|c| (c.status, c.attempt))
        .collect();
    assert_eq!(attempts, [(500, 1), (500, 2)]);
    let failing_key = failed["idempotency_key"].as_str().unwrap_or_default();
    assert!(failing
        .calls()
        .iter()
        .all(|c| c.idempotency_key == failing_key));
    let dead = {
        let deadline = Instant::now() + STEP;
        loop {
            let got = stack
                .lanes
                .lanes
                .receive(Lane::Normal, true, 10, Duration::from_secs(1))
                .await
                .expect("receive from the DLQ");
            if !got.is_empty() || Instant::now() > deadline {
                break got;
            }
        }
    };
    assert_eq!(dead.len(), 1, "one message in the normal lane's DLQ");
    assert!(dead[0].body.contains("e2e-failing"), "{}", dead[0].body);
    assert_eq!(
        dead[0]
            .attributes
            .get(ERROR_CODE_ATTRIBUTE)
            .map(String::as_str),
        Some("RUN_RETRIES_EXHAUSTED")
    );

    // The event source finishes the batches it is delivering, then stops.
    let _ = stop.send(true);
    for poller in pollers {
        let _ = poller.await;
    }
    let manual_lane = source(Lane::Manual).deliveries();
    assert_eq!(manual_lane.len(), 1, "{manual_lane:?}");
    assert_eq!(manual_lane[0].deleted.len(), 1, "{manual_lane:?}");
    // The failing run's deliveries: the first listed in batchItemFailures and left on the
    // queue, the second (receive count 2) dead-lettered by the worker and deleted.
    let normal: Vec<_> = source(Lane::Normal)
        .deliveries()
        .into_iter()
        .filter(|d| d.bodies.iter().any(|b| b.contains("e2e-failing")))
        .collect();
    assert_eq!(normal.len(), 2, "{normal:?}");
    // Its record in each batch (the first batch may carry the hourly run's message too, in
    // either order).
    let failing_record = |d: &cronledger_tests::event_source::Delivery| {
        d.records
            .iter()
            .zip(&d.bodies)
            .find(|(_, body)| body.contains("e2e-failing"))
            .map(|(record, _)| record.clone())
            .unwrap_or_else(|| panic!("no e2e-failing record in {d:?}"))
    };
    let (first, second) = (failing_record(&normal[0]), failing_record(&normal[1]));
    assert_eq!(first.1, 1, "{normal:?}");
    assert_eq!(normal[0].failed, vec![first.0.clone()]);
    assert_eq!(second, (first.0.clone(), 2));
    assert_eq!(normal[1].deleted, vec![second.0.clone()]);
    assert!(normal.iter().all(|d| d.function_error.is_none()));
    for &lane in Lane::ALL {
        let depth = stack
            .lanes
            .lanes
            .depth(lane, false)
            .await
            .expect("lane depth");
        assert_eq!(
            depth.visible + depth.in_flight + depth.delayed,
            0,
            "{lane} is empty"
        );
    }

    // The reconciler's pass over the same ledger finds nothing to do and nothing wrong.
    let pass = stack
        .reconciler
        .invoke(json!({"time": rfc3339(Utc::now())}))
        .await
        .unwrap_or_else(|e| panic!("reconcile: {e}"));
    println!("e2e: reconcile {pass}");

    check_logs(&stack);
    println!("e2e: {} s in all", began.elapsed().as_secs_f32());
}

/// A function's output: every line a JSON object (the JSON log format, and EMF metrics),
/// nothing on stderr.
fn json_lines(function: &Function) -> Vec<Value> {
    let stderr = function.lines(Stream::Stderr);
    assert!(
        stderr.is_empty(),
        "{} wrote to stderr: {stderr:?}",
        function.name()
    );
    function
        .lines(Stream::Stdout)
        .iter()
        .map(|line| {
            serde_json::from_str::<Value>(line)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| panic!("a {} line is not JSON: {line}", function.name()))
        })
        .collect()
}

/// The lines whose message is `message`.
fn logged<'a>(lines: &'a [Value], message: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["fields"]["message"] == message)
        .collect()
}

/// A field of a log line: the event's own, else its span's (the functions' JSON names the
/// span the line was written in, not the whole span list).
fn field<'a>(line: &'a Value, name: &str) -> &'a Value {
    let own = &line["fields"][name];
    if !own.is_null() {
        return own;
    }
    &line["span"][name]
}

fn check_logs(stack: &Stack) {
    // Complete output: the last lines may still be in the pipes when an invocation answered.
    for function in [&stack.ticker, &*stack.worker, &stack.reconciler, &stack.api] {
        function.stop();
    }
    let ticker = json_lines(&stack.ticker);
    let worker = json_lines(&stack.worker);
    let reconciler = json_lines(&stack.reconciler);
    json_lines(&stack.api);

    // At INFO the ticker writes one line per tick (the ledger holds each run it created).
    let ticks = logged(&ticker, "tick done");
    assert!(!ticks.is_empty(), "no `tick done` line: {ticker:?}");
    assert!(
        logged(&ticker, "run created").is_empty(),
        "a line per created run is DEBUG"
    );
    // Metrics are EMF lines on stdout, from the ticker, the worker and the reconciler.
    for (name, lines) in [
        ("ticker", &ticker),
        ("worker", &worker),
        ("reconciler", &reconciler),
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l["_aws"]["CloudWatchMetrics"].is_array() && l["Function"] == name),
            "no EMF line from the {name}"
        );
    }

    // Every worker line about a message is written in its `message` span: the Lambda request
    // id, the schedule, the run key and (once started) the attempt.
    for line in worker.iter().filter(|l| l["span"]["name"] == "message") {
        assert!(field(line, "request_id").is_string(), "{line}");
        let schedule = field(line, "schedule").as_str().unwrap_or("");
        let run = field(line, "run").as_str().unwrap_or("");
        assert!(run.starts_with(&format!("{schedule}/RUN#")), "{line}");
    }
    // One INFO line per attempt, with everything about it.
    let finished = logged(&worker, "run attempt finished");
    for line in &finished {
        assert!(field(line, "attempt").is_u64(), "{line}");
        assert!(field(line, "duration_ms").is_i64(), "{line}");
    }
    let statuses = |schedule: &str| -> Vec<&str> {
        finished
            .iter()
            .filter(|l| field(l, "schedule") == schedule)
            .map(|l| field(l, "status").as_str().unwrap_or(""))
            .collect()
    };
    assert_eq!(statuses("e2e-hourly"), ["SUCCESS"]);
    assert_eq!(statuses("e2e-manual"), ["SUCCESS"]);
    assert_eq!(statuses("e2e-failing"), ["RETRY_PENDING", "FAILED"]);
    assert_eq!(finished.len(), 4);
    assert!(
        logged(&worker, "run started").is_empty(),
        "the run's other lines are DEBUG"
    );
}
