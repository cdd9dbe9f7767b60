//! The remote commands: they call the api (`CRONLEDGER_API_URL`), print tables for people and
//! JSON (`--format json`) for scripts.

mod apply;
pub mod args;
mod audit;
mod backfill;
mod calendars;
pub mod client;
pub mod replay;
pub mod sigv4;
mod status;

use std::process::ExitCode;

use cronledger_contract::{
    ApprovalOutcome, BackfillView, Definition, Mode, Note, RetryRequest, RunNowRequest, RunOutcome,
    RunPage, RunView, SchedulePage, ScheduleView,
};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use self::args::{
    ApplyArgs, BackfillArgs, GetArgs, NoteArgs, OutputFormat, RetryArgs, RunActionArgs, RunArgs,
    RunCommand, RunsArgs, StatusArgs,
};
use self::client::{segment, Client};
use crate::commands::instant;
use crate::output::Table;
use crate::CliError;

/// What a remote command is.
#[derive(Debug)]
pub enum Remote {
    Apply(ApplyArgs),
    Get(GetArgs),
    Calendars(args::CalendarsArgs),
    Runs(RunsArgs),
    Run(RunArgs),
    Retry(RetryArgs),
    Approve(RunActionArgs),
    Reject(RunActionArgs),
    Pause(NoteArgs),
    Resume(NoteArgs),
    Backfill(BackfillArgs),
    Replays(replay::ReplaysArgs),
    Status(StatusArgs),
    Audit(args::AuditArgs),
}

pub fn run(command: Remote) -> Result<ExitCode, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::msg(format!("REMOTE_RUNTIME: {e}")))?;
    runtime.block_on(dispatch(command))
}

/// A field of an answer as a table shows it: as the answer writes it (a string bare), `-`
/// for `null` or none.
fn cell<T: Serialize + ?Sized>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::Null) | Err(_) => "-".into(),
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
    }
}

/// What a dry run says of a plan that would wait for an admin (empty when it would not).
fn would_wait<T: Serialize>(required: bool, reasons: &[T]) -> String {
    if !required {
        return String::new();
    }
    let reasons: Vec<String> = reasons.iter().map(cell).collect();
    format!(
        "; it would wait PAUSED for an admin's approval ({})",
        reasons.join(", ")
    )
}

/// An answer as JSON (`--format json`, keys in order as before) or as `table` draws it.
fn print<T: Serialize>(format: OutputFormat, answer: &T, table: impl FnOnce(&T) -> String) {
    match format {
        OutputFormat::Json => {
            let value = serde_json::to_value(answer).unwrap_or_default();
            println!(
                "{}",
                serde_json::to_string_pretty(&value).unwrap_or_default()
            )
        }
        OutputFormat::Table => print!("{}", table(answer)),
    }
}

fn note(n: &Option<String>) -> Note {
    Note { note: n.clone() }
}

/// `--mode`: reuse or new.
fn mode(text: &str) -> Result<Mode, CliError> {
    serde_json::from_value(Value::String(text.to_string())).map_err(|_| {
        CliError::msg(format!(
            "INVALID_ARGUMENT: --mode `{text}` is not reuse or new"
        ))
    })
}

async fn dispatch(command: Remote) -> Result<ExitCode, CliError> {
    match command {
        Remote::Apply(a) => apply::apply(a).await,
        Remote::Get(a) => get(a).await,
        Remote::Calendars(a) => calendars::calendars(a).await,
        Remote::Runs(mut a) => match a.command.take() {
            Some(replay::RunsCommand::Replay(r)) => replay::replay(r, &a.remote).await,
            None => runs(a).await,
        },
        Remote::Run(RunArgs {
            command: RunCommand::Now(a),
        }) => {
            let client = Client::connect(&a.remote).await?;
            let key = a.idempotency_key.clone().unwrap_or_else(fresh_key);
            let body = RunNowRequest {
                mode: mode(&a.mode)?,
                scheduled_for: a
                    .scheduled_for
                    .as_deref()
                    .map(|t| instant("scheduled-for", t))
                    .transpose()?,
                note: a.note.clone(),
            };
            let path = format!("/v1/schedules/{}/runs", segment(&a.schedule));
            let out: RunOutcome = client
                .send(Method::POST, &path, &body, &[("Idempotency-Key", key)])
                .await?;
            print(a.remote.format, &out, |o| {
                format!(
                    "{} run {} ({}){}\n",
                    if o.created { "created" } else { "existing" },
                    o.run.run_id,
                    cell(&o.run.status),
                    if o.reused {
                        ", reused for its window"
                    } else {
                        ""
                    }
                )
            });
            Ok(ExitCode::SUCCESS)
        }
        Remote::Retry(a) => {
            let body = RetryRequest {
                note: a.action.note.clone(),
                definition: if a.current_definition {
                    Definition::Current
                } else {
                    Definition::Original
                },
                cascade: !a.no_cascade,
            };
            run_action(a.action, "retry", &body, |r: &RunView| {
                acted("retry", r, None)
            })
            .await
        }
        Remote::Approve(a) => {
            let body = note(&a.note);
            run_action(a, "approve", &body, |o: &ApprovalOutcome| {
                acted("approve", &o.run, o.backfill.as_ref())
            })
            .await
        }
        Remote::Reject(a) => {
            let body = note(&a.note);
            run_action(a, "reject", &body, |r: &RunView| acted("reject", r, None)).await
        }
        Remote::Pause(a) => schedule_action(a, "pause").await,
        Remote::Resume(a) => schedule_action(a, "resume").await,
        Remote::Backfill(a) => backfill::backfill(a).await,
        Remote::Replays(a) => replay::replays(a).await,
        Remote::Status(a) => status::status(a).await,
        Remote::Audit(a) => audit::audit(a).await,
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

fn schedules_table(items: &[ScheduleView]) -> String {
    let mut t = Table::new(["ID", "VERSION", "STATE", "CRON", "TIMEZONE", "NEXT RUN"]);
    for i in items {
        t.row([
            i.id.clone(),
            i.version.to_string(),
            cell(&i.state),
            i.spec.cron.clone(),
            i.spec.timezone.name().to_string(),
            cell(&i.next_run_at),
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
async fn all_schedules(client: &Client, listing: Listing) -> Result<Vec<ScheduleView>, CliError> {
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
        let page: SchedulePage = client.get(&path).await?;
        items.extend(page.items);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(items),
        }
    }
}

/// `get` without an id, as JSON: every schedule.
#[derive(Serialize)]
struct Listed {
    items: Vec<ScheduleView>,
}

async fn get(a: GetArgs) -> Result<ExitCode, CliError> {
    let client = Client::connect(&a.remote).await?;
    match &a.id {
        Some(id) => {
            let one: ScheduleView = client
                .get(&format!("/v1/schedules/{}", segment(id)))
                .await?;
            print(a.remote.format, &one, |v| {
                format!(
                    "{}{}\n",
                    schedules_table(std::slice::from_ref(v)),
                    serde_json::to_string_pretty(&v.spec).unwrap_or_default()
                )
            });
        }
        None => {
            let items = all_schedules(&client, Listing::SpecsOnly).await?;
            print(a.remote.format, &Listed { items }, |l| {
                schedules_table(&l.items)
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn runs(a: RunsArgs) -> Result<ExitCode, CliError> {
    let client = Client::connect(&a.remote).await?;
    let Some(schedule) = &a.schedule else {
        return Err(CliError::msg(
            "INVALID_ARGUMENT: name a schedule (`runs SCHEDULE`) or `runs replay`",
        ));
    };
    if let Some(run) = &a.run {
        let path = format!("/v1/schedules/{}/runs/{}", segment(schedule), segment(run));
        let one: RunView = client.get(&path).await?;
        print(a.remote.format, &one, one_run);
        return Ok(ExitCode::SUCCESS);
    }
    let mut path = format!("/v1/schedules/{}/runs?limit={}", segment(schedule), a.limit);
    if let Some(st) = &a.status {
        path.push_str(&format!("&status={}", segment(st)));
    }
    if let Some(tr) = &a.trigger {
        path.push_str(&format!("&trigger={}", segment(tr)));
    }
    let page: RunPage = client.get(&path).await?;
    print(a.remote.format, &page, |p| {
        let mut t = Table::new([
            "RUN",
            "TRIGGER",
            "STATUS",
            "REASON",
            "ATTEMPTS",
            "QUALITY",
            "WINDOW START",
            "WINDOW END",
        ]);
        for r in &p.items {
            t.row([
                r.run_id.clone(),
                cell(&r.trigger),
                cell(&r.status),
                cell(&r.reason),
                r.attempts.to_string(),
                quality(r).unwrap_or_else(|| "-".into()),
                cell(&r.window_start),
                cell(&r.window_end),
            ]);
        }
        t.to_string()
    });
    Ok(ExitCode::SUCCESS)
}

/// A SUSPECT run's quality and why (`SUSPECT (BELOW_MIN)`); `None` for any other run.
fn quality(r: &RunView) -> Option<String> {
    r.quality
        .map(|q| format!("{} ({})", cell(&q), cell(&r.quality_reason)))
}

/// One run for people: what it is, then a line per attempt.
fn one_run(r: &RunView) -> String {
    let mut out = format!(
        "run {} of {}: {} {}{} (trigger {}, lane {})\nwindow {} .. {}  key {}\n",
        r.run_id,
        r.schedule,
        cell(&r.status),
        cell(&r.reason),
        if r.forced { " forced" } else { "" },
        cell(&r.trigger),
        cell(&r.lane),
        cell(&r.window_start),
        cell(&r.window_end),
        r.idempotency_key,
    );
    out.push_str(&format!("attempts: {}\n", r.attempts));
    if let Some(q) = quality(r) {
        out.push_str(&format!("quality: {q}\n"));
    }
    if let Some(c) = &r.children {
        out.push_str(&format!(
            "children: {} total, {} succeeded, {} failed, {} running\n",
            c.total, c.succeeded, c.failed, c.running
        ));
    }
    for (related, title) in [(&r.upstream, "runs after"), (&r.downstream, "runs before")] {
        let related: Vec<String> = related
            .iter()
            .flatten()
            .map(|x| format!("{} ({})", x.schedule, cell(&x.status)))
            .collect();
        if !related.is_empty() {
            out.push_str(&format!("{title}: {}\n", related.join(", ")));
        }
    }
    if !r.steps.is_empty() {
        let mut t = Table::new(["STEP", "STATUS", "ATTEMPTS", "STARTED", "ENDED", "ERROR"]);
        for step in &r.steps {
            t.row([
                step.name.clone(),
                cell(&step.status),
                step.attempts.to_string(),
                cell(&step.started_at),
                cell(&step.ended_at),
                cell(&step.error_code),
            ]);
        }
        out.push_str(&t.to_string());
    }
    let mut t = Table::new([
        "#", "OUTCOME", "STARTED", "FINISHED", "DURATION", "WORKER", "ERROR",
    ]);
    for a in r.attempt_history.iter().flatten() {
        let error = match &a.error {
            Some(e) if e.code.is_some() || e.message.is_some() => {
                format!("{}: {}", cell(&e.code), cell(&e.message))
            }
            _ => "-".to_string(),
        };
        t.row([
            a.number.to_string(),
            a.outcome
                .as_ref()
                .map_or_else(|| "RUNNING".to_string(), cell),
            cell(&a.started_at),
            cell(&a.finished_at),
            a.duration_ms
                .map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
                .unwrap_or_else(|| "-".into()),
            cell(&a.worker),
            error,
        ]);
    }
    out.push_str(&t.to_string());
    if let Some(n) = r.attempts_unlisted.filter(|n| *n > 0) {
        out.push_str(&format!("({n} earlier attempts not listed)\n"));
    }
    out
}

/// What a run action did, for people.
fn acted(action: &str, run: &RunView, backfill: Option<&BackfillView>) -> String {
    let mut line = format!("{action}: run {} is {}\n", run.run_id, cell(&run.status));
    if let Some(b) = backfill {
        line.push_str(&format!("its windows became backfill {}\n", b.id));
    }
    line
}

/// A run's lever (retry, approve, reject), its answer `T` printed with `line`.
async fn run_action<T: DeserializeOwned + Serialize>(
    a: RunActionArgs,
    action: &str,
    body: &impl Serialize,
    line: impl FnOnce(&T) -> String,
) -> Result<ExitCode, CliError> {
    let client = Client::connect(&a.remote).await?;
    let path = format!(
        "/v1/schedules/{}/runs/{}/{action}",
        segment(&a.schedule),
        segment(&a.run)
    );
    let answer: T = client.send(Method::POST, &path, body, &[]).await?;
    print(a.remote.format, &answer, line);
    Ok(ExitCode::SUCCESS)
}

async fn schedule_action(a: NoteArgs, action: &str) -> Result<ExitCode, CliError> {
    let client = Client::connect(&a.remote).await?;
    let path = format!("/v1/schedules/{}/{action}", segment(&a.id));
    let view: ScheduleView = client
        .send(Method::POST, &path, &note(&a.note), &[])
        .await?;
    print(a.remote.format, &view, |v| {
        schedules_table(std::slice::from_ref(v))
    });
    Ok(ExitCode::SUCCESS)
}
