//! The remote commands: they call the api (`CRONLEDGER_API_URL`), print tables for people and
//! JSON (`--format json`) for scripts.

pub mod args;
mod backfill;
pub mod client;
pub mod sigv4;
mod status;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use cronledger_core::dependency::chain;
use reqwest::Method;
use serde_json::{json, Value};

use self::args::{
    ApplyArgs, BackfillArgs, GetArgs, NoteArgs, OutputFormat, RetryArgs, RunActionArgs, RunArgs,
    RunCommand, RunsArgs, StatusArgs,
};
use self::client::{segment, Client};
use crate::commands::{fleet_warnings, load_manifest, print_warnings, read_file};
use crate::output::Table;
use crate::CliError;

/// What a remote command is.
#[derive(Debug)]
pub enum Remote {
    Apply(ApplyArgs),
    Get(GetArgs),
    Runs(RunsArgs),
    Run(RunArgs),
    Retry(RetryArgs),
    Approve(RunActionArgs),
    Reject(RunActionArgs),
    Pause(NoteArgs),
    Resume(NoteArgs),
    Backfill(BackfillArgs),
    Status(StatusArgs),
}

pub fn run(command: Remote) -> Result<ExitCode, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::msg(format!("REMOTE_RUNTIME: {e}")))?;
    runtime.block_on(dispatch(command))
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn print(format: OutputFormat, body: &Value, table: impl FnOnce(&Value) -> String) {
    match format {
        OutputFormat::Json => {
            println!("{}", serde_json::to_string_pretty(body).unwrap_or_default())
        }
        OutputFormat::Table => print!("{}", table(body)),
    }
}

fn note(n: &Option<String>) -> Value {
    json!({ "note": n })
}

async fn dispatch(command: Remote) -> Result<ExitCode, CliError> {
    match command {
        Remote::Apply(a) => apply(a).await,
        Remote::Get(a) => get(a).await,
        Remote::Runs(a) => runs(a).await,
        Remote::Run(RunArgs {
            command: RunCommand::Now(a),
        }) => {
            let client = Client::connect(&a.remote).await?;
            let key = a.idempotency_key.clone().unwrap_or_else(fresh_key);
            let body = json!({"mode": a.mode, "scheduled_for": a.scheduled_for, "note": a.note});
            let path = format!("/v1/schedules/{}/runs", segment(&a.schedule));
            let out = client
                .ok(
                    Method::POST,
                    &path,
                    Some(&body),
                    &[("Idempotency-Key", key)],
                )
                .await?;
            print(a.remote.format, &out, |b| {
                format!(
                    "{} run {} ({}){}\n",
                    if b["created"] == true {
                        "created"
                    } else {
                        "existing"
                    },
                    s(&b["run"]["run_id"]),
                    s(&b["run"]["status"]),
                    if b["reused"] == true {
                        ", reused for its window"
                    } else {
                        ""
                    }
                )
            });
            Ok(ExitCode::SUCCESS)
        }
        Remote::Retry(a) => {
            let definition = if a.current_definition {
                "current"
            } else {
                "original"
            };
            let body = json!({"note": a.action.note, "definition": definition});
            run_action(a.action, "retry", body).await
        }
        Remote::Approve(a) => {
            let body = note(&a.note);
            run_action(a, "approve", body).await
        }
        Remote::Reject(a) => {
            let body = note(&a.note);
            run_action(a, "reject", body).await
        }
        Remote::Pause(a) => schedule_action(a, "pause").await,
        Remote::Resume(a) => schedule_action(a, "resume").await,
        Remote::Backfill(a) => backfill::backfill(a).await,
        Remote::Status(a) => status::status(a).await,
    }
}

fn fresh_key() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "cli-{nanos:x}-{:x}",
        RandomState::new().hash_one(std::process::id())
    )
}

fn schedules_table(items: &[Value]) -> String {
    let mut t = Table::new(["ID", "VERSION", "STATE", "CRON", "TIMEZONE", "NEXT RUN"]);
    for i in items {
        t.row([
            s(&i["id"]),
            s(&i["version"]),
            s(&i["state"]),
            s(&i["spec"]["cron"]),
            s(&i["spec"]["timezone"]),
            s(&i["next_run_at"]),
        ]);
    }
    t.to_string()
}

/// Whether a listing asks for each schedule's health (two more reads a schedule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    WithHealth,
    SpecsOnly,
}

/// Every stored schedule, following the pages.
async fn all_schedules(client: &Client, listing: Listing) -> Result<Vec<Value>, CliError> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let first = match listing {
        Listing::WithHealth => "/v1/schedules?limit=200",
        Listing::SpecsOnly => "/v1/schedules?limit=200&health=false",
    };
    loop {
        let path = match &cursor {
            Some(c) => format!("{first}&cursor={c}"),
            None => first.to_string(),
        };
        let page = client.ok(Method::GET, &path, None, &[]).await?;
        items.extend(page["items"].as_array().cloned().unwrap_or_default());
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return Ok(items),
        }
    }
}

async fn get(a: GetArgs) -> Result<ExitCode, CliError> {
    let client = Client::connect(&a.remote).await?;
    let body = match &a.id {
        Some(id) => {
            client
                .ok(
                    Method::GET,
                    &format!("/v1/schedules/{}", segment(id)),
                    None,
                    &[],
                )
                .await?
        }
        None => json!({ "items": all_schedules(&client, Listing::SpecsOnly).await? }),
    };
    print(a.remote.format, &body, |b| match b["items"].as_array() {
        Some(items) => schedules_table(items),
        None => format!(
            "{}{}\n",
            schedules_table(std::slice::from_ref(b)),
            serde_json::to_string_pretty(&b["spec"]).unwrap_or_default()
        ),
    });
    Ok(ExitCode::SUCCESS)
}

async fn runs(a: RunsArgs) -> Result<ExitCode, CliError> {
    let client = Client::connect(&a.remote).await?;
    if let Some(run) = &a.run {
        let path = format!(
            "/v1/schedules/{}/runs/{}",
            segment(&a.schedule),
            segment(run)
        );
        let body = client.ok(Method::GET, &path, None, &[]).await?;
        print(a.remote.format, &body, one_run);
        return Ok(ExitCode::SUCCESS);
    }
    let mut path = format!(
        "/v1/schedules/{}/runs?limit={}",
        segment(&a.schedule),
        a.limit
    );
    if let Some(st) = &a.status {
        path.push_str(&format!("&status={}", segment(st)));
    }
    if let Some(tr) = &a.trigger {
        path.push_str(&format!("&trigger={}", segment(tr)));
    }
    let body = client.ok(Method::GET, &path, None, &[]).await?;
    print(a.remote.format, &body, |b| {
        let mut t = Table::new([
            "RUN",
            "TRIGGER",
            "STATUS",
            "REASON",
            "ATTEMPTS",
            "WINDOW START",
            "WINDOW END",
        ]);
        for r in b["items"].as_array().into_iter().flatten() {
            t.row([
                s(&r["run_id"]),
                s(&r["trigger"]),
                s(&r["status"]),
                s(&r["reason"]),
                s(&r["attempts"]),
                s(&r["window_start"]),
                s(&r["window_end"]),
            ]);
        }
        t.to_string()
    });
    Ok(ExitCode::SUCCESS)
}

/// One run for people: what it is, then a line per attempt.
fn one_run(r: &Value) -> String {
    let mut out = format!(
        "run {} of {}: {} {}{} (trigger {}, lane {})\nwindow {} .. {}  key {}\n",
        s(&r["run_id"]),
        s(&r["schedule"]),
        s(&r["status"]),
        s(&r["reason"]),
        r["forced"]
            .as_bool()
            .filter(|f| *f)
            .map(|_| " forced")
            .unwrap_or(""),
        s(&r["trigger"]),
        s(&r["lane"]),
        s(&r["window_start"]),
        s(&r["window_end"]),
        s(&r["idempotency_key"]),
    );
    out.push_str(&format!("attempts: {}\n", s(&r["attempts"])));
    if r["children"].is_object() {
        let c = &r["children"];
        out.push_str(&format!(
            "children: {} total, {} succeeded, {} failed, {} running\n",
            s(&c["total"]),
            s(&c["succeeded"]),
            s(&c["failed"]),
            s(&c["running"])
        ));
    }
    for (field, title) in [("upstream", "runs after"), ("downstream", "runs before")] {
        let related: Vec<String> = r[field]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| format!("{} ({})", s(&x["schedule"]), s(&x["status"])))
            .collect();
        if !related.is_empty() {
            out.push_str(&format!("{title}: {}\n", related.join(", ")));
        }
    }
    if let Some(steps) = r["steps"].as_array().filter(|s| !s.is_empty()) {
        let mut t = Table::new(["STEP", "STATUS", "ATTEMPTS", "STARTED", "ENDED", "ERROR"]);
        for step in steps {
            t.row([
                s(&step["name"]),
                s(&step["status"]),
                s(&step["attempts"]),
                s(&step["started_at"]),
                s(&step["ended_at"]),
                s(&step["error_code"]),
            ]);
        }
        out.push_str(&t.to_string());
    }
    let mut t = Table::new([
        "#", "OUTCOME", "STARTED", "FINISHED", "DURATION", "WORKER", "ERROR",
    ]);
    for a in r["attempt_history"].as_array().into_iter().flatten() {
        let error = match (&a["error"]["code"], &a["error"]["message"]) {
            (Value::Null, Value::Null) => "-".to_string(),
            (code, message) => format!("{}: {}", s(code), s(message)),
        };
        t.row([
            s(&a["number"]),
            a["outcome"].as_str().unwrap_or("RUNNING").to_string(),
            s(&a["started_at"]),
            s(&a["finished_at"]),
            a["duration_ms"]
                .as_i64()
                .map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
                .unwrap_or_else(|| "-".into()),
            s(&a["worker"]),
            error,
        ]);
    }
    out.push_str(&t.to_string());
    if let Some(n) = r["attempts_unlisted"].as_u64().filter(|n| *n > 0) {
        out.push_str(&format!("({n} earlier attempts not listed)\n"));
    }
    out
}

async fn run_action(a: RunActionArgs, action: &str, body: Value) -> Result<ExitCode, CliError> {
    let client = Client::connect(&a.remote).await?;
    let path = format!(
        "/v1/schedules/{}/runs/{}/{action}",
        segment(&a.schedule),
        segment(&a.run)
    );
    let body = client.ok(Method::POST, &path, Some(&body), &[]).await?;
    print(a.remote.format, &body, |b| {
        let run = if b["run"].is_object() { &b["run"] } else { b };
        let mut line = format!(
            "{action}: run {} is {}\n",
            s(&run["run_id"]),
            s(&run["status"])
        );
        if let Some(id) = b["backfill"]["id"].as_str() {
            line.push_str(&format!("its windows became backfill {id}\n"));
        }
        line
    });
    Ok(ExitCode::SUCCESS)
}

async fn schedule_action(a: NoteArgs, action: &str) -> Result<ExitCode, CliError> {
    let client = Client::connect(&a.remote).await?;
    let path = format!("/v1/schedules/{}/{action}", segment(&a.id));
    let body = client
        .ok(Method::POST, &path, Some(&note(&a.note)), &[])
        .await?;
    print(a.remote.format, &body, |b| {
        schedules_table(std::slice::from_ref(b))
    });
    Ok(ExitCode::SUCCESS)
}

/// One step of an apply plan.
enum Step {
    Create(Value),
    Update {
        id: String,
        version: u64,
        doc: Value,
        risk: Value,
    },
    Archive {
        id: String,
        version: u64,
    },
}

async fn apply(a: ApplyArgs) -> Result<ExitCode, CliError> {
    let now = chrono::Utc::now();
    // Validate locally first (same rules as the api), then read the file as plain documents;
    // the validated specs (defaults filled in) are what the api stores, so they compare.
    let validated = load_manifest(&a.file, now)?;
    // Upstreams first: the api checks a schedule's `after` against the stored schedules (and
    // a dependent without `cron` inherits its grid from them), and an upstream always has
    // fewer schedules upstream of it than its dependents.
    let upstream_count: BTreeMap<String, usize> = validated
        .iter()
        .map(|spec| (spec.id.clone(), chain(&validated, &spec.id).upstream.len()))
        .collect();
    let warnings = fleet_warnings(&validated, now);
    print_warnings(&warnings);
    let specs: BTreeMap<String, Value> = validated
        .into_iter()
        .map(|spec| {
            (
                spec.id.clone(),
                serde_json::to_value(&spec).unwrap_or_default(),
            )
        })
        .collect();
    let doc = cronledger_core::spec::parse_document(&read_file(&a.file)?)?;
    let wanted: BTreeMap<String, Value> = doc["schedules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["id"].as_str().map(|id| (id.to_string(), d.clone())))
        .collect();
    let client = Client::connect(&a.remote).await?;
    let stored: BTreeMap<String, Value> = all_schedules(&client, Listing::SpecsOnly)
        .await?
        .into_iter()
        .filter_map(|s| s["id"].as_str().map(|id| (id.to_string(), s.clone())))
        .collect();
    let mut in_order: Vec<(&String, &Value)> = wanted.iter().collect();
    in_order.sort_by_key(|(id, _)| upstream_count.get(*id).copied().unwrap_or(0));
    let mut steps = Vec::new();
    for (id, doc) in in_order {
        match stored.get(id) {
            None => steps.push(Step::Create(doc.clone())),
            // An archived schedule never changes again.
            Some(current) if current["state"] == "ARCHIVED" => {}
            Some(current) if specs.get(id) == Some(&current["spec"]) => {}
            Some(current) => {
                let risk = client
                    .ok(
                        Method::POST,
                        &format!("/v1/schedules/{}/diff", segment(id)),
                        Some(doc),
                        &[],
                    )
                    .await?;
                steps.push(Step::Update {
                    id: id.clone(),
                    version: current["version"].as_u64().unwrap_or(0),
                    doc: doc.clone(),
                    risk: risk["report"].clone(),
                });
            }
        }
    }
    let gone: BTreeSet<&String> = stored
        .keys()
        .filter(|id| !wanted.contains_key(*id) && stored[*id]["state"] != "ARCHIVED")
        .collect();
    if a.prune {
        for id in &gone {
            steps.push(Step::Archive {
                id: (*id).clone(),
                version: stored[*id]["version"].as_u64().unwrap_or(0),
            });
        }
    }
    let plan: Vec<Value> = steps
        .iter()
        .map(|step| match step {
            Step::Create(doc) => json!({"action": "create", "id": doc["id"]}),
            Step::Update {
                id, version, risk, ..
            } => json!({"action": "update", "id": id, "version": version, "risk": risk}),
            Step::Archive { id, version } => {
                json!({"action": "archive", "id": id, "version": version})
            }
        })
        .collect();
    let out = json!({"plan": plan, "not_in_file": gone, "applied": false, "warnings": warnings});
    if a.remote.format == OutputFormat::Table {
        let mut t = Table::new(["ACTION", "SCHEDULE", "VERSION", "RISK", "FINDINGS"]);
        for p in &plan {
            t.row([
                s(&p["action"]),
                s(&p["id"]),
                s(&p["version"]),
                s(&p["risk"]["level"]),
                p["risk"]["findings"]
                    .as_array()
                    .map(|f| f.iter().map(s).collect::<Vec<_>>().join("; "))
                    .unwrap_or_default(),
            ]);
        }
        print!("{t}");
        if !a.prune && !gone.is_empty() {
            println!(
                "not in the file (archived only with --prune): {}",
                gone.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if steps.is_empty() {
        if a.remote.format == OutputFormat::Json {
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        } else {
            println!("nothing to change");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !a.yes && !confirm()? {
        if a.remote.format == OutputFormat::Json {
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
        eprintln!("not applied (confirm, or pass --yes)");
        return Ok(ExitCode::from(1));
    }
    let reason = format!("cronledger apply -f {}", a.file.display());
    let mut results = Vec::new();
    for step in steps {
        let result = match step {
            Step::Create(doc) => {
                client
                    .ok(
                        Method::POST,
                        "/v1/schedules",
                        Some(&doc),
                        &[("Cronledger-Note", reason.clone())],
                    )
                    .await?
            }
            Step::Update {
                id,
                version,
                doc,
                risk,
            } => {
                let mut headers = vec![
                    ("If-Match", format!("\"{version}\"")),
                    ("Cronledger-Note", reason.clone()),
                ];
                // The plan showed this risk and the user (or --yes) accepted it: say so, as
                // the api refuses an unconfirmed HIGH-risk change.
                if risk["level"] == "HIGH" {
                    headers.push(("X-Cronledger-Confirm", "high-risk".to_string()));
                }
                client
                    .ok(
                        Method::PUT,
                        &format!("/v1/schedules/{}", segment(&id)),
                        Some(&doc),
                        &headers,
                    )
                    .await?
            }
            Step::Archive { id, version } => {
                client
                    .ok(
                        Method::POST,
                        &format!("/v1/schedules/{}/archive", segment(&id)),
                        Some(&json!({"note": reason})),
                        &[("If-Match", format!("\"{version}\""))],
                    )
                    .await?
            }
        };
        if a.remote.format == OutputFormat::Table {
            println!(
                "{} at version {} ({})",
                s(&result["id"]),
                s(&result["version"]),
                s(&result["state"])
            );
        }
        results.push(result);
    }
    if a.remote.format == OutputFormat::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"plan": plan, "applied": true, "results": results})
            )
            .unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn confirm() -> Result<bool, CliError> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    print!("apply these changes? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError::msg(format!("REMOTE_STDIN: {e}")))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}
