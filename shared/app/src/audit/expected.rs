//! The pure part of the completeness audit: a schedule's versions as its audit log recorded
//! them, the windows they expected in a range, and what the ledger's entries say about each
//! one. Timing is the core's [`Schedule`] alone; nothing here asks the planner, the rule book,
//! the ticker, the reconciler or the worker what they would have done.
//!
//! A version's windows are the ones strictly after the change that made it, up to and
//! including the next change's instant: a new schedule's first window is the first one after
//! its creation, and the windows up to an edit are the old expression's (as written, never
//! as the writers happen to judge them).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_contract::audit::{DuplicateWindow, UnexplainedEntry};
use cronledger_core::run::Origin;
use cronledger_core::{Attempt, AttemptOutcome, Run, RunKey, Schedule, ScheduleSpec};
use cronledger_ledger::{keys, AuditAction, AuditEntry, ScheduleState, StoreError};

/// Why a window is a duplicate.
pub const WHY_RUNS: &str = "RUNS";
pub const WHY_EXECUTIONS: &str = "EXECUTIONS";
pub const WHY_ENTRIES: &str = "ENTRIES";
/// Why an entry is unexplained.
pub const WHY_NOT_A_WINDOW: &str = "NOT_A_WINDOW_OF_ITS_VERSION";
pub const WHY_UNKNOWN_VERSION: &str = "UNKNOWN_VERSION";

/// One version of a schedule: the spec and state a change produced, and when it took effect.
#[derive(Debug, Clone)]
pub struct Version {
    pub number: u64,
    pub effective_at: DateTime<Utc>,
    /// The version's spec, its `max_runs` anchored at the schedule's creation.
    pub schedule: Schedule,
    pub state: ScheduleState,
}

impl Version {
    /// Whether the version has windows: enabled and not archived. A paused one has (the
    /// writers record them SKIPPED, reason PAUSED).
    pub fn expects(&self) -> bool {
        self.schedule.spec.enabled && self.state != ScheduleState::Archived
    }
}

/// The changes that make a version (operators' actions on runs and backfills do not).
fn makes_version(action: AuditAction) -> bool {
    matches!(
        action,
        AuditAction::Create
            | AuditAction::Update
            | AuditAction::Pause
            | AuditAction::Resume
            | AuditAction::Archive
    )
}

/// The state a change leaves the schedule in, when its entry does not say.
fn state_after(action: AuditAction) -> ScheduleState {
    match action {
        AuditAction::Pause => ScheduleState::Paused,
        AuditAction::Archive => ScheduleState::Archived,
        _ => ScheduleState::Active,
    }
}

/// A schedule's versions, oldest first.
#[derive(Debug, Clone, Default)]
pub struct History {
    versions: Vec<Version>,
}

impl History {
    /// The versions in `entries` (a schedule's audit log), anchored at `created_at`. An entry
    /// whose recorded spec does not read is `STORE_MALFORMED_ITEM`.
    pub fn from_log(
        id: &str,
        entries: &[AuditEntry],
        created_at: DateTime<Utc>,
    ) -> Result<History, StoreError> {
        let mut versions = Vec::new();
        for entry in entries.iter().filter(|e| makes_version(e.action)) {
            let malformed = |problem: String| StoreError::Malformed {
                pk: keys::schedule_pk(id),
                sk: keys::audit_sk(entry.version),
                attribute: "after".into(),
                problem,
            };
            let spec = entry
                .after
                .get("spec")
                .cloned()
                .ok_or_else(|| malformed("records no spec".into()))?;
            let spec: ScheduleSpec = serde_json::from_value(spec)
                .map_err(|e| malformed(format!("holds a spec that does not read: {e}")))?;
            let state = match entry.after.get("state").and_then(|s| s.as_str()) {
                Some(text) => text
                    .parse()
                    .map_err(|_| malformed(format!("holds an unknown state `{text}`")))?,
                None => state_after(entry.action),
            };
            let schedule = Schedule::new(spec)
                .map_err(|i| malformed(format!("holds a spec that does not compile: {i}")))?
                .anchored(created_at);
            versions.push(Version {
                number: entry.version,
                effective_at: entry.at,
                schedule,
                state,
            });
        }
        Ok(History::new(versions))
    }

    /// `versions` in order of their numbers; an instant earlier than the one before it (a
    /// clock that went back) takes effect with the one before.
    pub fn new(mut versions: Vec<Version>) -> History {
        versions.sort_by_key(|v| v.number);
        versions.dedup_by_key(|v| v.number);
        let mut latest: Option<DateTime<Utc>> = None;
        for v in &mut versions {
            if let Some(latest) = latest.filter(|l| v.effective_at < *l) {
                v.effective_at = latest;
            }
            latest = Some(v.effective_at);
        }
        History { versions }
    }

    pub fn versions(&self) -> &[Version] {
        &self.versions
    }

    /// The version numbered `number`, if the log has it.
    pub fn version(&self, number: u64) -> Option<&Version> {
        self.versions
            .binary_search_by_key(&number, |v| v.number)
            .ok()
            .and_then(|i| self.versions.get(i))
    }

    /// The version whose windows `t` would be: the last one that took effect before `t`.
    pub fn in_force_at(&self, t: DateTime<Utc>) -> Option<&Version> {
        let after = self.versions.partition_point(|v| v.effective_at < t);
        after.checked_sub(1).and_then(|i| self.versions.get(i))
    }

    /// The windows expected in `[from, to)`, oldest first: each version's windows in its
    /// stretch `(effective_at, next effective_at]`, none for a disabled or archived one.
    pub fn expected(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        if to <= from {
            return out;
        }
        let tick = TimeDelta::nanoseconds(1);
        for (i, version) in self.versions.iter().enumerate() {
            if !version.expects() {
                continue;
            }
            let after = version.effective_at.max(from - tick);
            let until = match self.versions.get(i + 1) {
                Some(next) => next.effective_at.min(to - tick),
                None => to - tick,
            };
            if until > after {
                out.extend(version.schedule.between(after, until));
            }
        }
        out
    }

    /// Whether the job `run` executes may start again after an attempt that may have acted:
    /// the `idempotent` of the version it names (else of the one in force at its window). A
    /// version the log lacks is taken as not idempotent.
    fn idempotent(&self, run: &Run) -> bool {
        self.version(run.schedule_version)
            .or_else(|| self.in_force_at(run.key.scheduled_for))
            .is_some_and(|v| v.schedule.spec.idempotent)
    }

    /// Why an automatic entry at `t` naming `number` is not one its schedule could have made;
    /// `None` when it is. A window of the version it names explains it, and so does a window
    /// of the earlier version in force at `t` (a writer records a window before an edit under
    /// the version current when it writes).
    fn unexplained(&self, t: DateTime<Utc>, number: u64) -> Option<&'static str> {
        let Some(named) = self.version(number) else {
            return Some(WHY_UNKNOWN_VERSION);
        };
        if named.schedule.is_occurrence(t) {
            return None;
        }
        match self.in_force_at(t) {
            Some(then) if then.number < number && then.schedule.is_occurrence(t) => None,
            _ => Some(WHY_NOT_A_WINDOW),
        }
    }
}

/// What one schedule's audit found over a range, whole (before a page lists it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    pub expected: u64,
    /// Expected windows with an automatic entry or covered by a range record.
    pub accounted: u64,
    /// Accounted windows that are not duplicates.
    pub exactly_once: u64,
    pub missing: Vec<DateTime<Utc>>,
    pub duplicates: Vec<DuplicateWindow>,
    pub unexplained: Vec<UnexplainedEntry>,
}

impl Findings {
    /// Whether there is anything to list besides counts.
    pub fn any(&self) -> bool {
        !(self.missing.is_empty() && self.duplicates.is_empty() && self.unexplained.is_empty())
    }
}

/// An attempt's end after which another attempt is no second execution: the job said it
/// failed, or it only dry-ran (a guarded job held over its limit).
fn did_not_act(outcome: AttemptOutcome) -> bool {
    matches!(
        outcome,
        AttemptOutcome::FailedRetryable | AttemptOutcome::Failed | AttemptOutcome::Held
    )
}

/// How a run's attempts divide into the executions of one piece of work: a `steps` job's
/// attempts by step (steps run in order, each to its end before the next), else all of them.
fn attempt_groups(run: &Run) -> Vec<u32> {
    let by_step: u32 = run.steps.iter().map(|s| s.attempts).sum();
    if !run.steps.is_empty() && by_step == run.attempts {
        run.steps.iter().map(|s| s.attempts).collect()
    } else {
        vec![run.attempts]
    }
}

/// The runs whose attempts must be read to tell whether a job not declared idempotent was
/// started again after an attempt that may have acted.
pub fn to_read(history: &History, runs: &[Run]) -> Vec<RunKey> {
    runs.iter()
        .filter(|r| r.range_end.is_none() && r.attempts > 1 && !history.idempotent(r))
        .filter(|r| attempt_groups(r).iter().any(|n| *n > 1))
        .map(|r| r.key.clone())
        .collect()
}

/// Whether the run started an attempt of the same work after one whose end is not a
/// reported failure or a dry run: a success, a stall, a lease taken over, no end recorded,
/// or an attempt the history no longer keeps (what cannot be shown not to have acted counts).
pub fn acted_again(run: &Run, attempts: &[Attempt]) -> bool {
    let by_number: HashMap<u64, &Attempt> = attempts.iter().map(|a| (a.number, a)).collect();
    let mut first = 1u64;
    for n in attempt_groups(run) {
        let n = u64::from(n);
        for number in (first + 1)..(first + n) {
            let previous_quiet = by_number
                .get(&(number - 1))
                .and_then(|a| a.end.as_ref())
                .is_some_and(|end| did_not_act(end.outcome));
            if !previous_quiet {
                return true;
            }
        }
        first += n;
    }
    false
}

/// What a window's runs did.
#[derive(Default)]
struct Executed {
    runs: u32,
    attempts: u32,
    again: bool,
}

/// The audit of one schedule over `[from, to)`: `runs` are its ledger entries there (and any
/// range record from before `from` reaching into it), `again` the runs [`acted_again`].
pub fn audit(
    history: &History,
    runs: &[Run],
    again: &HashSet<RunKey>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Findings {
    let expected = history.expected(from, to);
    let mut singles: HashMap<DateTime<Utc>, u32> = HashMap::new();
    let mut ranges: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    let mut executed: HashMap<DateTime<Utc>, Executed> = HashMap::new();
    let mut unexplained = Vec::new();
    for run in runs {
        let t = run.key.scheduled_for;
        let automatic = run.key.origin == Origin::Expected;
        match run.range_end {
            Some(last) if automatic => ranges.push((t, last)),
            Some(_) => {}
            None if automatic => *singles.entry(t).or_default() += 1,
            None => {}
        }
        if run.range_end.is_none() && run.attempts > 0 {
            let e = executed.entry(t).or_default();
            e.runs += 1;
            e.attempts += run.attempts;
            e.again |= again.contains(&run.key);
        }
        if automatic && from <= t && t < to {
            if let Some(why) = history.unexplained(t, run.schedule_version) {
                unexplained.push(UnexplainedEntry {
                    scheduled_for: t,
                    trigger: run.trigger.to_string(),
                    status: run.status.to_string(),
                    schedule_version: run.schedule_version,
                    why: why.into(),
                });
            }
        }
    }
    unexplained.sort_by_key(|u| u.scheduled_for);
    ranges.sort_unstable();

    let mut findings = Findings {
        expected: expected.len() as u64,
        unexplained,
        ..Findings::default()
    };
    let mut next_range = 0;
    let mut covering: BinaryHeap<Reverse<DateTime<Utc>>> = BinaryHeap::new();
    for t in expected {
        while let Some(&(_, last)) = ranges.get(next_range).filter(|(first, _)| *first <= t) {
            covering.push(Reverse(last));
            next_range += 1;
        }
        while covering.peek().is_some_and(|Reverse(last)| *last < t) {
            covering.pop();
        }
        let entries = singles.get(&t).copied().unwrap_or(0) + covering.len() as u32;
        let ran = executed.get(&t);
        let why = match ran {
            Some(e) if e.runs > 1 => Some(WHY_RUNS),
            Some(e) if e.again => Some(WHY_EXECUTIONS),
            _ if entries > 1 => Some(WHY_ENTRIES),
            _ => None,
        };
        if entries == 0 {
            findings.missing.push(t);
        } else {
            findings.accounted += 1;
            if why.is_none() {
                findings.exactly_once += 1;
            }
        }
        if let Some(why) = why {
            findings.duplicates.push(DuplicateWindow {
                scheduled_for: t,
                runs: ran.map_or(0, |e| e.runs),
                executions: ran.map_or(0, |e| e.attempts),
                why: why.into(),
            });
        }
    }
    findings
}

#[cfg(test)]
mod tests;
