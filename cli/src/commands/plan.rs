use std::process::ExitCode;

use chrono::{DateTime, Utc};
use cronledger_app::cost;
use cronledger_aws::BackfillLimits;
use cronledger_core::dependency::{chain, Chain};
use cronledger_core::estimate::{self, Estimate};
use cronledger_core::planner::{Action, Plan, Release};
use cronledger_core::run::LedgerEntry;
use cronledger_core::window::utc_text;
use cronledger_core::{plan, Coverage, Lane, PlanInput, PlannerConfig, Schedule, Span};
use serde::{Deserialize, Serialize};

use super::{instant, load_local, read_file, DEFAULT_LOCAL_URL};
use crate::args::{Format, PlanArgs};
use crate::output::Table;
use crate::CliError;

/// One planned ledger write: the stable ledger entry plus how it would be released.
#[derive(Serialize)]
struct PlannedLedgerEntry {
    #[serde(flatten)]
    entry: LedgerEntry,
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<Lane>,
    #[serde(skip_serializing_if = "Option::is_none")]
    release: Option<Release>,
}

#[derive(Serialize)]
struct PlanReport<'a> {
    schedule: &'a str,
    watermark: String,
    now: String,
    through: String,
    gap: Option<Span>,
    tier: Option<cronledger_core::planner::GapTier>,
    replay_group_id: &'a Option<String>,
    entries: Vec<PlannedLedgerEntry>,
    alerts: &'a [cronledger_core::planner::Alert],
    backfill: &'a Option<cronledger_core::planner::BackfillProposal>,
    totals: &'a cronledger_core::planner::PlanTotals,
    /// What the windows it would run (fired and held for approval) would cost, priced at
    /// the schedule's `max_runtime` (plan reads no ledger history) and released with a
    /// backfill's default limits; absent when it runs none.
    #[serde(skip_serializing_if = "Option::is_none")]
    estimate: Option<Estimate>,
    /// Its place among the manifest's dependencies, when it has one. A schedule with
    /// upstreams is not planned from its cron: its windows follow its upstreams' outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    chain: Option<Chain>,
}

/// An entry of `--existing`: an instant, or anything with `scheduled_for` (a ledger entry).
#[derive(Deserialize)]
#[serde(untagged)]
enum Existing {
    At(DateTime<Utc>),
    Entry {
        #[serde(default)]
        schedule: Option<String>,
        scheduled_for: DateTime<Utc>,
        #[serde(default)]
        range_end: Option<DateTime<Utc>>,
    },
}

pub fn run(args: PlanArgs) -> Result<ExitCode, CliError> {
    let watermark = instant("watermark", &args.watermark)?;
    let now = instant("now", &args.now)?;
    let settle: Span = args
        .settle
        .parse()
        .map_err(|e| CliError::msg(format!("INVALID_ARGUMENT: --settle: {e}")))?;
    let manifest = load_local(&args.file, now, DEFAULT_LOCAL_URL)?;
    let specs = manifest.schedules;
    let existing: Vec<Existing> = match &args.existing {
        None => Vec::new(),
        Some(path) => serde_json::from_str(&read_file(path)?).map_err(|e| {
            CliError::msg(format!(
                "INVALID_ARGUMENT: {}: expected a JSON list of RFC3339 instants or ledger entries ({e})",
                path.display()
            ))
        })?,
    };
    let selected: Vec<_> = specs
        .iter()
        .filter(|s| args.schedule.as_deref().is_none_or(|id| s.id == id))
        .cloned()
        .collect();
    if selected.is_empty() {
        return Err(CliError::msg(format!(
            "SCHEDULE_NOT_FOUND: no schedule `{}` in {}",
            args.schedule.unwrap_or_default(),
            args.file.display()
        )));
    }

    let config = PlannerConfig {
        settle,
        ..PlannerConfig::default()
    };
    let mut reports = Vec::new();
    let mut plans = Vec::new();
    for spec in selected {
        // The ticker never fires a schedule with upstreams and no window of it is missed:
        // nothing to plan from its cron.
        let from = if spec.after.is_empty() {
            watermark
        } else {
            now
        };
        // The manifest's calendars: their windows are planned SKIPPED (EXCLUDED).
        let schedule = Schedule::new(spec)?.with_calendars(&manifest.calendars);
        let coverage = coverage_for(schedule.id(), &existing);
        let plan = plan(PlanInput {
            schedule: &schedule,
            watermark: from,
            now,
            existing: &coverage,
            pauses: &[],
            config,
        })?;
        plans.push((schedule, plan));
    }
    for (schedule, plan) in &plans {
        let mut r = report(schedule, plan, watermark, now);
        let found = chain(&specs, schedule.id());
        r.chain = (!found.upstream.is_empty() || !found.downstream.is_empty()).then_some(found);
        reports.push(r);
    }
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&reports).map_err(|e| CliError::msg(e.to_string()))?
        ),
        Format::Text | Format::Table => {
            for r in &reports {
                print_table(r);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn coverage_for(schedule_id: &str, existing: &[Existing]) -> Coverage {
    let mut coverage = Coverage::new();
    for item in existing {
        match item {
            Existing::At(t) => coverage.add(*t),
            Existing::Entry {
                schedule,
                scheduled_for,
                range_end,
            } if schedule.as_deref().is_none_or(|s| s == schedule_id) => match range_end {
                Some(end) => coverage.add_range(*scheduled_for, *end),
                None => coverage.add(*scheduled_for),
            },
            Existing::Entry { .. } => {}
        }
    }
    coverage
}

fn report<'a>(
    schedule: &'a Schedule,
    plan: &'a Plan,
    watermark: DateTime<Utc>,
    now: DateTime<Utc>,
) -> PlanReport<'a> {
    let entries = plan
        .entries
        .iter()
        .map(|e| {
            let (action, lane, release) = match e.action {
                Action::Fire { lane, release } => ("FIRE", Some(lane), Some(release)),
                Action::Skip { .. } => ("SKIP", None, None),
                Action::Coalesce { .. } => ("COALESCE", None, None),
                Action::Hold { .. } => ("MANUAL_REQUIRED", None, None),
            };
            PlannedLedgerEntry {
                entry: plan.to_run(schedule, e, now, 0).ledger_entry(),
                action,
                lane,
                release,
            }
        })
        .collect();
    PlanReport {
        schedule: schedule.id(),
        watermark: utc_text(watermark),
        now: utc_text(now),
        through: utc_text(plan.through),
        gap: plan.gap,
        tier: plan.tier,
        replay_group_id: &plan.replay_group_id,
        entries,
        alerts: &plan.alerts,
        backfill: &plan.backfill,
        totals: &plan.totals,
        estimate: recovery_estimate(schedule, plan, now),
        chain: None,
    }
}

/// See [`PlanReport::estimate`].
fn recovery_estimate(schedule: &Schedule, plan: &Plan, now: DateTime<Utc>) -> Option<Estimate> {
    let runs = u64::from(plan.totals.fire) + u64::from(plan.totals.manual);
    (runs > 0).then(|| {
        let job = cost::estimate::job_cost(&schedule.spec, &[]);
        let throttle = cost::estimate::throttle(&BackfillLimits::default());
        estimate::estimate(runs, &job, &cost::estimate::pricing(), &throttle, now)
    })
}

fn print_table(r: &PlanReport<'_>) {
    if let Some(c) = &r.chain {
        let list = |ids: &[String]| {
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.join(", ")
            }
        };
        println!(
            "schedule {}: runs after {}; runs before {}",
            r.schedule,
            list(&c.upstream),
            list(&c.downstream)
        );
        if !c.upstream.is_empty() {
            println!(
                "  its windows follow its upstreams' outcomes; none is planned from its cron\n"
            );
            return;
        }
    }
    println!(
        "schedule {}: windows after {} through {}{}",
        r.schedule,
        r.watermark,
        r.through,
        match (r.gap, r.tier) {
            (Some(gap), Some(tier)) =>
                format!(", oldest missed {} ago ({tier:?} tier)", gap.humanized()),
            _ => String::new(),
        }
    );
    let mut table = Table::new([
        "scheduled_for",
        "count",
        "action",
        "status",
        "reason",
        "lane",
    ]);
    for e in &r.entries {
        table.row([
            match &e.entry.range_end {
                Some(end) => format!("{} .. {end}", e.entry.scheduled_for),
                None => e.entry.scheduled_for.clone(),
            },
            e.entry.count.unwrap_or(1).to_string(),
            e.action.to_string(),
            e.entry.status.to_string(),
            e.entry.reason.map(|r| r.to_string()).unwrap_or_default(),
            e.lane.map(|l| l.to_string()).unwrap_or_default(),
        ]);
    }
    print!("{table}");
    let t = r.totals;
    println!(
        "expected {} | already recorded {} | fire {} | skipped {} | coalesced {} | awaiting approval {}",
        t.expected, t.recorded, t.fire, t.skipped, t.coalesced, t.manual
    );
    if let Some(b) = r.backfill {
        println!(
            "backfill: {} window(s) {} .. {}, {}",
            b.windows,
            utc_text(b.first),
            utc_text(b.last),
            if b.start_paused {
                "created PAUSED (approval needed)"
            } else {
                "started throttled"
            }
        );
    }
    if let Some(e) = &r.estimate {
        println!("estimate: {e}");
    }
    for alert in r.alerts {
        println!(
            "alert{}: {}",
            alert
                .owner
                .as_deref()
                .map(|o| format!(" to {o}"))
                .unwrap_or_default(),
            alert.message
        );
    }
    println!();
}
