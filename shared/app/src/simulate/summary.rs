//! What the simulation did to each schedule's windows, counted from the ledger (range records
//! expanded) and from the record of job executions.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use cronledger_core::{Run, RunKey, RunStatus, Schedule, Trigger};
use serde::Serialize;

use super::job::Execution;

/// Per schedule, over the windows in `(from, to]`. Every window is counted once under its
/// entry's outcome: `ran + skipped + coalesced + manual + failed + unfinished + unaccounted
/// = expected` when nothing is a duplicate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScheduleSummary {
    pub schedule: String,
    pub misfire: String,
    /// Windows the schedule has in the range.
    pub expected: u32,
    /// Windows whose run succeeded (SUCCESS or PARTIAL_SUCCESS).
    pub ran: u32,
    /// Of `ran`, windows run late by the reconciler (trigger CATCH_UP).
    pub caught_up: u32,
    pub skipped: u32,
    pub coalesced: u32,
    /// Awaiting an operator (MANUAL_REQUIRED).
    pub manual: u32,
    pub failed: u32,
    /// Still PENDING, QUEUED, RUNNING, RETRY_PENDING, STALLED or CANCELLED when the
    /// simulation stopped.
    pub unfinished: u32,
    /// Windows with no ledger entry at all.
    pub unaccounted: u32,
    /// Windows with more than one ledger entry, or whose job was run again after a call of
    /// it had succeeded, whatever the cause (a redelivery, a crash, a lost completion write).
    /// A retry after a call that failed is not a second execution. 0 unless a completion
    /// write was lost (see `reexecuted_after_lost_completion`): an idempotent job then runs
    /// again, which only its idempotency key absorbs.
    pub duplicates: u32,
    /// Job attempts that ran (failed attempts and re-executions included).
    pub executions: u32,
    /// Of `duplicates`, windows executed again because an injected crash (or a heartbeat cut
    /// off, its lease taken over) lost the completion write of an attempt that had succeeded.
    pub reexecuted_after_lost_completion: u32,
}

/// The windows an entry accounts for: its own, or a range record's whole span.
pub fn windows_of(schedule: &Schedule, run: &Run) -> Vec<DateTime<Utc>> {
    let first = run.key.scheduled_for;
    match run.range_end {
        Some(last) => {
            let mut w = vec![first];
            w.extend(schedule.between(first, last));
            w
        }
        None => vec![first],
    }
}

/// The window each entry of `runs` accounts for, in `(from, to]`.
fn accounted(
    schedule: &Schedule,
    runs: &[Run],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> BTreeMap<DateTime<Utc>, Vec<usize>> {
    let mut seen: BTreeMap<DateTime<Utc>, Vec<usize>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        for w in windows_of(schedule, run) {
            if w > from && w <= to {
                seen.entry(w).or_default().push(i);
            }
        }
    }
    seen
}

/// Every window of every schedule has an entry and none is still in flight.
pub fn settled(
    schedules: &[Schedule],
    entries: &[Vec<Run>],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> bool {
    schedules.iter().zip(entries).all(|(schedule, runs)| {
        let seen = accounted(schedule, runs, from, to);
        let all_there = schedule.between(from, to).all(|w| seen.contains_key(&w));
        all_there && runs.iter().all(|r| !in_flight(r.status))
    })
}

fn in_flight(status: RunStatus) -> bool {
    status.is_active() || matches!(status, RunStatus::Stalled)
}

pub fn summarize(
    schedule: &Schedule,
    runs: &[Run],
    executions: &BTreeMap<String, Vec<Execution>>,
    lost_completions: &BTreeSet<(RunKey, u32)>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> ScheduleSummary {
    let mut s = ScheduleSummary {
        schedule: schedule.id().to_string(),
        misfire: schedule.spec.misfire.to_string(),
        ..ScheduleSummary::default()
    };
    let expected: Vec<DateTime<Utc>> = schedule.between(from, to).collect();
    s.expected = expected.len() as u32;
    let seen = accounted(schedule, runs, from, to);
    let mut duplicated: BTreeSet<DateTime<Utc>> = BTreeSet::new();
    for w in &expected {
        let Some(entries) = seen.get(w) else {
            s.unaccounted += 1;
            continue;
        };
        if entries.len() > 1 {
            duplicated.insert(*w);
        }
        let run = &runs[entries[0]];
        match run.status {
            st if st.is_success() => {
                s.ran += 1;
                if run.trigger == Trigger::CatchUp {
                    s.caught_up += 1;
                }
            }
            RunStatus::Skipped => s.skipped += 1,
            RunStatus::Coalesced => s.coalesced += 1,
            RunStatus::ManualRequired => s.manual += 1,
            RunStatus::Failed => s.failed += 1,
            _ => s.unfinished += 1,
        }
    }
    for attempts in executions.values() {
        let Some(first) = attempts.first() else {
            continue;
        };
        let w = first.run.scheduled_for;
        if first.run.schedule_id != s.schedule || w <= from || w > to {
            continue;
        }
        s.executions += attempts.len() as u32;
        let succeeded: Vec<&Execution> = attempts.iter().filter(|e| e.succeeded).collect();
        if succeeded.len() > 1 {
            duplicated.insert(w);
            let lost = |e: &Execution| lost_completions.contains(&(e.run.clone(), e.attempt));
            if succeeded.iter().any(|e| lost(e)) {
                s.reexecuted_after_lost_completion += 1;
            }
        }
    }
    s.duplicates = duplicated.len() as u32;
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronledger_core::spec::validate_schedule;
    use cronledger_core::ValidationRules;

    fn t(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    /// Every five minutes; one SUCCESS entry at 00:05 whose job was called as `calls` say
    /// (attempt, succeeded), with the attempts in `lost` having lost their completion write.
    fn summary_of(calls: &[(u32, bool)], lost: &[u32]) -> ScheduleSummary {
        let doc = serde_json::json!({
            "id": "five", "cron": "*/5 * * * *", "timezone": "UTC", "job": {"type": "noop"}
        });
        let from = t("2026-03-01T00:00:00Z");
        let spec = validate_schedule(&doc, "", &ValidationRules::default(), from).unwrap();
        let schedule = Schedule::new(spec).unwrap();
        let mut run = crate::runs::new_run(
            &schedule,
            1,
            t("2026-03-01T00:05:00Z"),
            Trigger::Scheduled,
            from,
        );
        run.status = RunStatus::Success;
        let executions = calls
            .iter()
            .map(|&(attempt, succeeded)| Execution {
                step: None,
                run: run.key.clone(),
                attempt,
                succeeded,
            })
            .collect();
        let executions = BTreeMap::from([(run.idempotency_key.to_string(), executions)]);
        let lost = lost.iter().map(|a| (run.key.clone(), *a)).collect();
        summarize(
            &schedule,
            &[run],
            &executions,
            &lost,
            from,
            t("2026-03-01T00:05:00Z"),
        )
    }

    #[test]
    fn a_window_run_again_after_a_success_is_a_duplicate_whatever_the_cause() {
        let once = summary_of(&[(1, true)], &[]);
        assert_eq!((once.executions, once.duplicates), (1, 0));
        // A retry after a failed call is the retry the job asked for.
        let retried = summary_of(&[(1, false), (2, true)], &[]);
        assert_eq!((retried.executions, retried.duplicates), (2, 0));
        // A redelivery that ran the job again.
        let redelivered = summary_of(&[(1, true), (2, true)], &[]);
        assert_eq!(redelivered.duplicates, 1);
        assert_eq!(redelivered.reexecuted_after_lost_completion, 0);
        // The completion write of attempt 1 was lost: counted, and said why.
        let lost = summary_of(&[(1, true), (2, true)], &[1]);
        assert_eq!(lost.duplicates, 1);
        assert_eq!(lost.reexecuted_after_lost_completion, 1);
    }
}
