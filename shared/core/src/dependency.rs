//! Dependencies between schedules: `after: [A, ...]` runs a schedule's window once every
//! upstream's run for the same business window has succeeded, accounts for it as
//! SKIPPED (UPSTREAM_NOT_SUCCEEDED) when one of them did not, and holds it for an operator
//! (MANUAL_REQUIRED, UPSTREAM_SUSPECT) when one succeeded SUSPECT.
//!
//! Pure: the graph checks a manifest (or the stored schedules) is refused for, the decision
//! for one window from the upstream outcomes known so far, and the chain the api and `plan`
//! show. Where outcomes come from and when the decision is made is the app's.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use chrono::{DateTime, Utc};

use crate::admission::is_catch_up_lane;
use crate::error::{Code, Issue};
use crate::run::Origin;
use crate::{Run, RunStatus, ScheduleSpec, Trigger};

/// Most upstreams one schedule may wait for.
pub const MAX_UPSTREAMS: usize = 10;

/// What a downstream window does, given its upstreams' outcomes for that window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "decision", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Readiness {
    /// Some upstreams have not ended this window yet (named, in `after`'s order).
    Waiting { pending: Vec<String> },
    /// Every upstream succeeded (PARTIAL_SUCCESS counting with `accept_partial`): the
    /// window's run is created, trigger DEPENDENCY.
    Ready,
    /// An upstream ended without succeeding: the window is recorded SKIPPED
    /// (UPSTREAM_NOT_SUCCEEDED), naming the first such upstream in `after`'s order.
    Skip { upstream: String, status: RunStatus },
    /// Every upstream ended, none failed, but one succeeded SUSPECT (its `count` outside its
    /// `expect` band, see [`crate::quality`]) and the dependent does not `accept_suspect`:
    /// the window is recorded MANUAL_REQUIRED (UPSTREAM_SUSPECT) for an operator, naming
    /// the first such upstream in `after`'s order.
    Hold { upstream: String },
}

/// How an upstream's run for a window ended, as readiness judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamOutcome {
    pub status: RunStatus,
    /// It succeeded with `quality: SUSPECT`.
    pub suspect: bool,
}

impl UpstreamOutcome {
    /// The outcome `run` records: its status, and whether its result is SUSPECT.
    pub fn of(run: &Run) -> UpstreamOutcome {
        UpstreamOutcome {
            status: run.status,
            suspect: run.result.as_ref().and_then(|r| r.quality)
                == Some(crate::quality::Quality::Suspect),
        }
    }
}

/// The decision for one window of a schedule that runs `after` its upstreams, from the
/// outcome each upstream's run for that window ended with (absent: not ended yet). A
/// non-terminal status counts as not ended; FAILED counts as ended (an operator's retry
/// of it is a new outcome, which the app decides on again).
pub fn readiness(
    after: &[String],
    accept_partial: bool,
    outcomes: &BTreeMap<String, RunStatus>,
) -> Readiness {
    let outcomes: BTreeMap<String, UpstreamOutcome> = outcomes
        .iter()
        .map(|(id, &status)| {
            let outcome = UpstreamOutcome {
                status,
                suspect: false,
            };
            (id.clone(), outcome)
        })
        .collect();
    readiness_of(after, accept_partial, true, &outcomes)
}

/// [`readiness`] with each upstream's result quality: an upstream's SUSPECT success holds
/// the window ([`Readiness::Hold`]) unless `accept_suspect`. A failure (Skip) comes before
/// a hold, and a hold only once no upstream is still pending.
pub fn readiness_of(
    after: &[String],
    accept_partial: bool,
    accept_suspect: bool,
    outcomes: &BTreeMap<String, UpstreamOutcome>,
) -> Readiness {
    let mut pending = Vec::new();
    let mut suspect = None;
    for upstream in after {
        let outcome = outcomes.get(upstream).copied();
        match outcome.map(|o| o.status) {
            Some(RunStatus::Success) => {}
            Some(RunStatus::PartialSuccess) if accept_partial => {}
            Some(status) if status.is_terminal() => {
                return Readiness::Skip {
                    upstream: upstream.clone(),
                    status,
                }
            }
            _ => {
                pending.push(upstream.clone());
                continue;
            }
        }
        if outcome.is_some_and(|o| o.suspect) && !accept_suspect && suspect.is_none() {
            suspect = Some(upstream.clone());
        }
    }
    match (pending.is_empty(), suspect) {
        (false, _) => Readiness::Waiting { pending },
        (true, Some(upstream)) => Readiness::Hold { upstream },
        (true, None) => Readiness::Ready,
    }
}

/// The outcome an upstream's runs give the window at `at`: the expected occurrence's
/// entry covering it (its own, or a range record's), whatever operators ran beside it.
pub fn outcome_at(runs: &[Run], at: DateTime<Utc>) -> Option<RunStatus> {
    entry_at(runs, at).map(|r| r.status)
}

/// The expected occurrence's entry among `runs` that covers the window at `at`.
pub fn entry_at(runs: &[Run], at: DateTime<Utc>) -> Option<&Run> {
    runs.iter()
        .filter(|r| r.key.origin == Origin::Expected)
        .find(|r| r.key.scheduled_for <= at && at <= r.range_end.unwrap_or(r.key.scheduled_for))
}

/// The moment a dependent's window at `at` is due, from its upstreams' entries for it: its
/// lateness (judged against its own grace) counts from here.
///
/// A dependent window is due when its last upstream ended, so an upstream's own run time
/// never makes it late. It is due at `at` itself (late by all the time since) when the
/// chain already was late: an upstream's entry is a catch-up or backfill run, a late
/// dependent's run (a catch-up lane), a range record, or has no end recorded.
pub fn due_from<'a>(
    at: DateTime<Utc>,
    upstreams: impl IntoIterator<Item = &'a Run>,
) -> DateTime<Utc> {
    let mut due = at;
    for run in upstreams {
        let late = matches!(run.trigger, Trigger::CatchUp | Trigger::Backfill)
            || run.lane.is_some_and(is_catch_up_lane)
            || run.range_end.is_some();
        match run.completed_at {
            Some(ended) if !late => due = due.max(ended),
            _ => return at,
        }
    }
    due
}

/// The decision for each window at `windows` of the schedule `spec` (which runs `after`
/// upstreams), from each upstream's runs over those windows.
pub fn decide_windows(
    spec: &ScheduleSpec,
    windows: &[DateTime<Utc>],
    upstream_runs: &BTreeMap<String, Vec<Run>>,
) -> Vec<(DateTime<Utc>, Readiness)> {
    windows
        .iter()
        .map(|&at| {
            let outcomes: BTreeMap<String, UpstreamOutcome> = spec
                .after
                .iter()
                .filter_map(|u| {
                    let runs = upstream_runs.get(u)?;
                    Some((u.clone(), UpstreamOutcome::of(entry_at(runs, at)?)))
                })
                .collect();
            let ready = readiness_of(
                &spec.after,
                spec.accept_partial,
                spec.accept_suspect,
                &outcomes,
            );
            (at, ready)
        })
        .collect()
}

/// Problems of a set of schedules' dependencies: an `after` naming no schedule of the set
/// (DEPENDENCY_UNKNOWN_UPSTREAM), and every cycle (DEPENDENCY_CYCLE, once per cycle, on
/// the schedule of the cycle that sorts first). `field` names a schedule's `after` in the
/// issues (its position in the manifest, say).
pub fn check_graph(specs: &[ScheduleSpec], field: &dyn Fn(&str) -> String) -> Vec<Issue> {
    let ids: BTreeSet<&str> = specs.iter().map(|s| s.id.as_str()).collect();
    let mut issues = Vec::new();
    for spec in specs {
        for upstream in spec.after.iter().filter(|u| !ids.contains(u.as_str())) {
            issues.push(Issue::new(
                Code::DependencyUnknownUpstream,
                field(&spec.id),
                format!(
                    "`{}` runs after `{upstream}`, which is not a schedule",
                    spec.id
                ),
            ));
        }
    }
    // A downstream window is the upstreams' window of the same fire time, so they share
    // one grid: the same cron in the same zone.
    let by_id: BTreeMap<&str, &ScheduleSpec> = specs.iter().map(|s| (s.id.as_str(), s)).collect();
    for spec in specs {
        for upstream in spec.after.iter().filter_map(|u| by_id.get(u.as_str())) {
            issues.extend(grid_mismatch(spec, upstream, &field(&spec.id)));
        }
    }
    for cycle in cycles(specs) {
        let first = cycle.first().cloned().unwrap_or_default();
        let mut path = cycle.clone();
        path.push(first.clone());
        issues.push(Issue::new(
            Code::DependencyCycle,
            field(&first),
            format!("dependencies go round in a cycle: {}", path.join(" -> ")),
        ));
    }
    issues
}

/// DEPENDENCY_GRID_MISMATCH on `field` when `spec` and `other`, linked by `after`, fire on
/// different grids (cron or zone): a dependent window is its upstreams' window of the same
/// fire time.
pub fn grid_mismatch(spec: &ScheduleSpec, other: &ScheduleSpec, field: &str) -> Option<Issue> {
    (spec.cron != other.cron || spec.timezone != other.timezone).then(|| {
        Issue::new(
            Code::DependencyGridMismatch,
            field,
            format!(
                "`{}` ({} {}) and `{}` ({} {}) are linked by `after`: they share one window \
                 grid, the same cron and time zone",
                spec.id,
                spec.cron,
                spec.timezone.name(),
                other.id,
                other.cron,
                other.timezone.name()
            ),
        )
    })
}

/// Every cycle of the `after` graph, each as its schedules from the one that sorts first,
/// following `after` edges backwards (upstream to downstream); deterministic.
fn cycles(specs: &[ScheduleSpec]) -> Vec<Vec<String>> {
    let downstream = downstream_map(specs);
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for start in downstream.keys() {
        // A depth-first walk from `start` that only visits schedules sorting after it, so
        // each cycle is found once, from its smallest member.
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in downstream.get(&at).into_iter().flatten() {
                if next == start {
                    found.insert(path.clone());
                } else if next > start && !path.contains(next) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    found.into_iter().collect()
}

/// Upstream -> the schedules that run after it, each list sorted.
fn downstream_map(specs: &[ScheduleSpec]) -> BTreeMap<String, BTreeSet<String>> {
    let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for spec in specs {
        for upstream in &spec.after {
            map.entry(upstream.clone())
                .or_default()
                .insert(spec.id.clone());
        }
    }
    map
}

/// A schedule's place in the dependency graph, as the api, `plan` and `preview` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Chain {
    /// Schedules it waits for, directly or through others, nearest first.
    pub upstream: Vec<String>,
    /// Schedules that wait for it, directly or through others, nearest first.
    pub downstream: Vec<String>,
}

/// `id`'s chain among `specs` (breadth first, each schedule once, cycles tolerated).
pub fn chain(specs: &[ScheduleSpec], id: &str) -> Chain {
    let upstream_of: BTreeMap<&str, &[String]> = specs
        .iter()
        .map(|s| (s.id.as_str(), s.after.as_slice()))
        .collect();
    let downstream = downstream_map(specs);
    let walk = |next: &dyn Fn(&str) -> Vec<String>| {
        let mut seen = BTreeSet::from([id.to_string()]);
        let mut order = Vec::new();
        let mut frontier = vec![id.to_string()];
        while !frontier.is_empty() {
            let mut following = Vec::new();
            for at in &frontier {
                for n in next(at) {
                    if seen.insert(n.clone()) {
                        order.push(n.clone());
                        following.push(n);
                    }
                }
            }
            frontier = following;
        }
        order
    };
    Chain {
        upstream: walk(&|at: &str| upstream_of.get(at).map_or_else(Vec::new, |u| u.to_vec())),
        downstream: walk(&|at: &str| {
            downstream
                .get(at)
                .map_or_else(Vec::new, |d| d.iter().cloned().collect())
        }),
    }
}

#[cfg(test)]
mod tests;
