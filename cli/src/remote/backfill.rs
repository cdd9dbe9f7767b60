//! The backfill commands: create (or dry-run), status (with --watch), pause, resume,
//! approve, cancel, verify.

use std::io::Write;
use std::process::ExitCode;

use reqwest::Method;
use serde_json::{json, Value};

use super::args::{BackfillArgs, BackfillCommand, NoteArgs, OutputFormat};
use super::client::{segment, Client};
use super::{note, print, s};
use crate::commands::instant;
use crate::output::Table;
use crate::CliError;

fn backfill_line(b: &Value) -> String {
    let total = b["total"].as_u64().unwrap_or(0).max(1);
    let done = b["succeeded"].as_u64().unwrap_or(0) + b["failed"].as_u64().unwrap_or(0);
    let width = 30usize;
    let filled = ((done as f64 / total as f64) * width as f64).round() as usize;
    format!(
        "{} {} [{}{}] {done}/{} queued {} running {} ok {} failed {} skipped {} rate {}/min eta {}{}\n",
        s(&b["id"]),
        s(&b["state"]),
        "#".repeat(filled.min(width)),
        "-".repeat(width - filled.min(width)),
        s(&b["total"]),
        s(&b["queued"]),
        s(&b["running"]),
        s(&b["succeeded"]),
        s(&b["failed"]),
        s(&b["skipped"]),
        s(&b["rate_per_minute"]),
        s(&b["eta"]),
        b["held"].as_str().map(|h| format!(" held: {h}")).unwrap_or_default(),
    )
}

pub(super) async fn backfill(a: BackfillArgs) -> Result<ExitCode, CliError> {
    match a.command {
        BackfillCommand::Create(c) => {
            let client = Client::connect(&c.remote).await?;
            let from = instant("from", &c.from)?;
            let to = instant("to", &c.to)?;
            let body = json!({
                "from": from, "to": to, "reprocess": c.reprocess,
                "concurrency": c.concurrency, "batch_size": c.batch_size,
                "rate_per_minute": c.rate_per_minute,
                "pause_when": {"realtime_backlog": c.pause_backlog, "error_rate": c.pause_error_rate, "alarms": c.pause_alarms},
                "dry_run": c.dry_run, "note": c.note, "cascade": c.cascade,
            });
            let path = format!("/v1/schedules/{}/backfills", segment(&c.schedule));
            let out = client.ok(Method::POST, &path, Some(&body), &[]).await?;
            print(c.remote.format, &out, |b| {
                if b["dry_run"] == true {
                    let approval = if b["approval_required"] == true {
                        let reasons: Vec<String> = b["approval_reasons"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(s)
                            .collect();
                        format!(
                            "; it would wait PAUSED for an admin's approval ({})",
                            reasons.join(", ")
                        )
                    } else {
                        String::new()
                    };
                    format!(
                        "dry run: {} of {} windows would run ({}){approval}; nothing written\n",
                        s(&b["size"]),
                        s(&b["total_windows"]),
                        s(&b["reprocess"])
                    )
                } else {
                    backfill_line(b)
                }
            });
        }
        BackfillCommand::Status(st) => {
            let client = Client::connect(&st.remote).await?;
            let path = format!("/v1/backfills/{}", segment(&st.id));
            loop {
                let b = client.ok(Method::GET, &path, None, &[]).await?;
                if st.watch && st.remote.format == OutputFormat::Table {
                    print!("\r{}", backfill_line(&b).trim_end());
                    let _ = std::io::stdout().flush();
                } else {
                    print(st.remote.format, &b, backfill_line);
                }
                let open = matches!(b["state"].as_str(), Some("RUNNING" | "PAUSED"));
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
            let v = client.ok(Method::GET, &path, None, &[]).await?;
            print(n.remote.format, &v, |v| {
                let mut out = format!(
                    "{} expected windows: {} succeeded, {} missing, {} failed, {} not run, {} in flight, {} mismatched, {} unverified; reported count total {}\n",
                    s(&v["expected_windows"]),
                    s(&v["succeeded"]),
                    s(&v["missing"]),
                    s(&v["failed"]),
                    s(&v["not_run"]),
                    s(&v["in_flight"]),
                    s(&v["mismatched"]),
                    s(&v["unverified"]),
                    s(&v["reported_count_total"])
                );
                let mut t = Table::new(["WINDOW", "PROBLEM", "STATUSES", "EXPECTED", "REPORTED"]);
                let results = |r: &serde_json::Value| {
                    if r.is_null() {
                        String::new()
                    } else {
                        format!("count {} checksum {}", s(&r["count"]), s(&r["checksum"]))
                    }
                };
                for p in v["problems"].as_array().into_iter().flatten() {
                    t.row([
                        s(&p["scheduled_for"]),
                        s(&p["problem"]),
                        s(&p["statuses"]),
                        results(&p["expected"]),
                        results(&p["reported"]),
                    ]);
                }
                out.push_str(&t.to_string());
                // The api lists one page of problem windows; the counts above cover all.
                if v["truncated"] == true {
                    let listed = v["problems"].as_array().map_or(0, Vec::len);
                    out.push_str(&format!(
                        "(first {listed} of {} problem windows listed)\n",
                        s(&v["problems_total"])
                    ));
                }
                out
            });
            if v["complete"] != true {
                return Ok(ExitCode::from(3));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn backfill_action(n: NoteArgs, action: &str) -> Result<ExitCode, CliError> {
    let client = Client::connect(&n.remote).await?;
    let path = format!("/v1/backfills/{}/{action}", segment(&n.id));
    let b = client
        .ok(Method::POST, &path, Some(&note(&n.note)), &[])
        .await?;
    print(n.remote.format, &b, backfill_line);
    Ok(ExitCode::SUCCESS)
}
