//! The backfill commands: create (or dry-run), status (with --watch), pause, resume,
//! approve, cancel, verify.

use std::io::Write;
use std::process::ExitCode;

use cronledger_contract::{BackfillPlan, BackfillRequest, BackfillView, Problem, Verification};
use cronledger_ledger::ops::{BackfillState, PauseConditions, Reprocess};
use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;

use super::args::{BackfillArgs, BackfillCommand, NoteArgs, OutputFormat};
use super::client::{segment, Client};
use super::{cell, note, print, would_wait};
use crate::commands::instant;
use crate::output::Table;
use crate::CliError;

fn backfill_line(b: &BackfillView) -> String {
    let total = b.total.max(1);
    let done = b.succeeded + b.failed;
    let width = 30usize;
    let filled = ((done as f64 / total as f64) * width as f64).round() as usize;
    format!(
        "{} {} [{}{}] {done}/{} queued {} running {} ok {} failed {} skipped {} rate {}/min eta {}{}\n",
        b.id,
        cell(&b.state),
        "#".repeat(filled.min(width)),
        "-".repeat(width - filled.min(width)),
        b.total,
        b.queued,
        b.running,
        b.succeeded,
        b.failed,
        b.skipped,
        cell(&b.rate_per_minute),
        cell(&b.eta),
        b.held.as_ref().map(|h| format!(" held: {h}")).unwrap_or_default(),
    )
}

fn plan_line(p: &BackfillPlan) -> String {
    let approval = would_wait(p.approval_required, &p.approval_reasons);
    let over = if p.over_budget.is_empty() {
        String::new()
    } else {
        let caps: Vec<String> = p.over_budget.iter().map(cell).collect();
        format!("; OVER BUDGET ({}): it would be refused", caps.join(", "))
    };
    format!(
        "dry run: {} of {} windows would run ({}){approval}; nothing written\nestimate: {}{over}\n",
        p.size,
        p.total_windows,
        cell(&p.reprocess),
        p.estimate,
    )
}

/// The estimate, the measured spend and the caps of a backfill, on a line of their own.
fn budget_line(b: &BackfillView) -> String {
    let mut parts = Vec::new();
    if let Some(e) = &b.estimate {
        parts.push(format!("estimate: {e}"));
    }
    if let Some(s) = &b.spent {
        parts.push(format!("spent: {s}"));
    }
    if let Some(usd) = b.budget.max_cost_usd {
        parts.push(format!("max_cost_usd ${usd:.4}"));
    }
    if let Some(calls) = b.budget.max_target_calls {
        parts.push(format!("max_target_calls {calls}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("  {}\n", parts.join("; "))
    }
}

/// `--reprocess`: missing, failed or all.
fn reprocess(text: &str) -> Result<Reprocess, CliError> {
    serde_json::from_value(Value::String(text.to_string())).map_err(|_| {
        CliError::msg(format!(
            "INVALID_ARGUMENT: --reprocess `{text}` is not missing, failed or all"
        ))
    })
}

pub(super) async fn backfill(a: BackfillArgs) -> Result<ExitCode, CliError> {
    match a.command {
        BackfillCommand::Create(c) => {
            let client = Client::connect(&c.remote).await?;
            let body = BackfillRequest {
                from: instant("from", &c.from)?,
                to: instant("to", &c.to)?,
                reprocess: Some(reprocess(&c.reprocess)?),
                concurrency: c.concurrency,
                batch_size: c.batch_size,
                rate_per_minute: c.rate_per_minute,
                pause_when: Some(PauseConditions {
                    realtime_backlog: c.pause_backlog,
                    error_rate: c.pause_error_rate,
                    alarms: c.pause_alarms,
                }),
                dry_run: c.dry_run,
                cascade: c.cascade,
                verify: None,
                max_cost_usd: c.max_cost_usd,
                max_target_calls: c.max_target_calls,
                note: c.note,
            };
            let path = format!("/v1/schedules/{}/backfills", segment(&c.schedule));
            // A dry run answers its plan (200), a backfill its progress (201).
            if c.dry_run {
                let plan: BackfillPlan = client.send(Method::POST, &path, &body, &[]).await?;
                print(c.remote.format, &plan, plan_line);
            } else {
                let created: BackfillView = client.send(Method::POST, &path, &body, &[]).await?;
                print(c.remote.format, &created, |b| {
                    format!("{}{}", backfill_line(b), budget_line(b))
                });
            }
        }
        BackfillCommand::Status(st) => {
            let client = Client::connect(&st.remote).await?;
            let path = format!("/v1/backfills/{}", segment(&st.id));
            loop {
                let b: BackfillView = client.get(&path).await?;
                if st.watch && st.remote.format == OutputFormat::Table {
                    print!("\r{}", backfill_line(&b).trim_end());
                    let _ = std::io::stdout().flush();
                } else {
                    print(st.remote.format, &b, |b| {
                        format!("{}{}", backfill_line(b), budget_line(b))
                    });
                }
                let open = matches!(b.state, BackfillState::Running | BackfillState::Paused);
                if !st.watch || !open {
                    if st.watch {
                        println!();
                    }
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_secs(st.every.max(1))).await;
            }
        }
        BackfillCommand::Pause(n) => return backfill_action(n, "pause").await,
        BackfillCommand::Resume(n) => return backfill_action(n, "resume").await,
        BackfillCommand::Approve(n) => return backfill_action(n, "approve").await,
        BackfillCommand::Cancel(n) => return backfill_action(n, "cancel").await,
        BackfillCommand::Verify(n) => {
            let client = Client::connect(&n.remote).await?;
            let path = format!("/v1/backfills/{}/verify", segment(&n.id));
            let v: Verification = client.get(&path).await?;
            let rows = v
                .problems
                .iter()
                .map(problem_row)
                .collect::<Result<Vec<_>, _>>()?;
            print(n.remote.format, &v, |v| verification(v, rows));
            if !v.complete {
                return Ok(ExitCode::from(3));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn verification(v: &Verification, rows: Vec<[String; 5]>) -> String {
    let mut out = format!(
        "{} expected windows: {} succeeded, {} missing, {} failed, {} not run, {} in flight, {} mismatched, {} unverified; reported count total {}\n",
        v.expected_windows,
        v.succeeded,
        v.missing,
        v.failed,
        v.not_run,
        v.in_flight,
        v.mismatched,
        v.unverified,
        v.reported_count_total
    );
    let mut t = Table::new(["WINDOW", "PROBLEM", "STATUSES", "EXPECTED", "REPORTED"]);
    for row in rows {
        t.row(row);
    }
    out.push_str(&t.to_string());
    // The api lists one page of problem windows; the counts above cover all.
    if v.truncated {
        out.push_str(&format!(
            "(first {} of {} problem windows listed)\n",
            v.problems.len(),
            v.problems_total
        ));
    }
    out
}

/// A MISMATCH window's `expected` and `reported` results (the contract keeps them as JSON).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Results {
    count: Option<u64>,
    checksum: Option<String>,
}

fn problem_row(p: &Problem) -> Result<[String; 5], CliError> {
    let results = |r: &Option<Value>, field: &str| -> Result<String, CliError> {
        let Some(r) = r else {
            return Ok(String::new());
        };
        let r: Results = serde_json::from_value(r.clone()).map_err(|e| {
            CliError::msg(format!(
                "REMOTE_ANSWER_UNREADABLE: a verification's problems[].{field} is not {{count, checksum}}: {e}"
            ))
        })?;
        Ok(format!(
            "count {} checksum {}",
            cell(&r.count),
            cell(&r.checksum)
        ))
    };
    Ok([
        cell(&p.scheduled_for),
        p.problem.clone(),
        cell(&p.statuses),
        results(&p.expected, "expected")?,
        results(&p.reported, "reported")?,
    ])
}

async fn backfill_action(n: NoteArgs, action: &str) -> Result<ExitCode, CliError> {
    let client = Client::connect(&n.remote).await?;
    let path = format!("/v1/backfills/{}/{action}", segment(&n.id));
    let b: BackfillView = client
        .send(Method::POST, &path, &note(&n.note), &[])
        .await?;
    print(n.remote.format, &b, backfill_line);
    Ok(ExitCode::SUCCESS)
}
