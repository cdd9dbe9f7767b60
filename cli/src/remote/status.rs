//! `cronledger status`: every schedule's health, one line each, worst first.

use std::process::ExitCode;

use cronledger_app::api::health::ScheduleHealth;
use cronledger_core::health::Health;
use cronledger_core::window::utc_text;

use super::args::{OutputFormat, StatusArgs};
use super::client::Client;
use super::{all_schedules, Listing};
use crate::output::Table;
use crate::CliError;

pub async fn status(a: StatusArgs) -> Result<ExitCode, CliError> {
    let client = Client::connect(&a.remote).await?;
    let mut items: Vec<ScheduleHealth> = all_schedules(&client, Listing::WithHealth)
        .await?
        .into_iter()
        .map(|s| ScheduleHealth {
            id: s.id,
            state: s.state,
            health: s.health.flatten(),
        })
        .collect();
    items.sort_by(ScheduleHealth::worst_first);
    match a.remote.format {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&items).unwrap_or_default()
        ),
        OutputFormat::Table => print!("{}", table(&items)),
    }
    Ok(ExitCode::SUCCESS)
}

fn table(items: &[ScheduleHealth]) -> String {
    let mut t = Table::new([
        "SCHEDULE",
        "STATE",
        "LAST",
        "ENDED",
        "NEXT RUN",
        "7D OK",
        "FRESHNESS",
        "FAILS IN A ROW",
        "AWAITING APPROVAL",
        "DURATION P50/P95",
    ]);
    for item in items {
        let mut row = vec![item.id.clone(), item.state.as_str().to_string()];
        match &item.health {
            Some(h) => row.extend(health_cells(h)),
            None => row.extend(std::iter::repeat_n("-".to_string(), 8)),
        }
        t.row(row);
    }
    t.to_string()
}

fn health_cells(h: &Health) -> [String; 8] {
    let last = h.last_run.as_ref();
    [
        last.map(|l| l.status.as_str().to_string())
            .unwrap_or_else(|| "-".into()),
        // Milliseconds are enough to read; the JSON keeps the stored precision.
        last.map(|l| {
            l.ended_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        })
        .unwrap_or_else(|| "-".into()),
        h.next_run_at.map(utc_text).unwrap_or_else(|| "-".into()),
        h.success_rate_7d.map(percent).unwrap_or_else(|| "-".into()),
        freshness(h),
        h.consecutive_failures.to_string(),
        h.awaiting_approval.to_string(),
        durations(h),
    ]
}

/// `1.2s / 4.0s`: the successes' p50 and p95 durations; `-` before a success.
fn durations(h: &Health) -> String {
    match (h.duration_p50_ms, h.duration_p95_ms) {
        (Some(p50), Some(p95)) => format!("{} / {}", seconds(p50), seconds(p95)),
        _ => "-".into(),
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// `97.5% >= 95.0%` (met), `40.0% < 95.0%` (missed), `- (95.0%)` (nothing measured yet),
/// `-` (no `slo`).
fn freshness(h: &Health) -> String {
    let Some(f) = h.freshness else {
        return "-".into();
    };
    let target = percent(f.target);
    match f.attainment_30d {
        Some(a) if f.met == Some(true) => format!("{} >= {target}", percent(a)),
        Some(a) => format!("{} < {target}", percent(a)),
        None => format!("- ({target})"),
    }
}

fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}
