//! What a simulation replays: the range, the outages and faults, and the operator's levers
//! (pauses, resumes, the kill switch, approvals), with the checks that refuse a bad one
//! before anything runs.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use cronledger_core::{ScheduleSpec, Span};
use serde::Serialize;

use crate::faults::CrashPoint;

use super::SimulateError;

/// A window of virtual time `[from, to)`: a scheduler outage (nothing of the scheduler runs),
/// a worker outage, or the kill switch being on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Outage {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

impl Outage {
    /// `FROM..TO`, both RFC3339.
    pub fn parse(text: &str) -> Result<Outage, SimulateError> {
        Outage::parse_as("outage", text)
    }

    /// `FROM..TO` for a window named `what` in the error (`outage`, `kill switch`).
    pub fn parse_as(what: &str, text: &str) -> Result<Outage, SimulateError> {
        let invalid = |why: String| {
            SimulateError::Invalid(format!(
                "{what} `{text}` {why}; write FROM..TO, e.g. 2026-03-01T02:00:00Z..2026-03-01T08:00:00Z"
            ))
        };
        let (a, b) = text
            .split_once("..")
            .ok_or_else(|| invalid("has no `..`".into()))?;
        let instant = |s: &str| {
            DateTime::parse_from_rfc3339(s.trim())
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| invalid(format!("has a bad instant `{s}` ({e})")))
        };
        let outage = Outage {
            from: instant(a)?,
            to: instant(b)?,
        };
        if outage.to <= outage.from {
            return Err(invalid("ends before it starts".into()));
        }
        Ok(outage)
    }

    /// Whether `t` is inside `[from, to)`.
    pub fn covers(&self, t: DateTime<Utc>) -> bool {
        self.from <= t && t < self.to
    }
}

/// An operator's action on one schedule at a virtual instant: `ID@T` (`--pause`, `--resume`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleAt {
    pub schedule: String,
    pub at: DateTime<Utc>,
}

impl ScheduleAt {
    /// `ID@T`, T RFC3339; `flag` names the option in the error.
    pub fn parse(flag: &str, text: &str) -> Result<ScheduleAt, SimulateError> {
        let invalid = |why: String| {
            SimulateError::Invalid(format!(
                "--{flag} `{text}` {why}; write ID@T, e.g. nightly@2026-03-01T02:00:00Z"
            ))
        };
        let (id, at) = text
            .rsplit_once('@')
            .ok_or_else(|| invalid("has no `@`".into()))?;
        if id.trim().is_empty() {
            return Err(invalid("names no schedule".into()));
        }
        let at = DateTime::parse_from_rfc3339(at.trim())
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| invalid(format!("has a bad instant `{at}` ({e})")))?;
        Ok(ScheduleAt {
            schedule: id.trim().to_string(),
            at,
        })
    }
}

/// A lever's instant (`--approve-all-at T`), RFC3339; `flag` names the option in the error.
pub fn parse_instant(flag: &str, text: &str) -> Result<DateTime<Utc>, SimulateError> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            SimulateError::Invalid(format!(
                "--{flag} `{text}` is not an RFC3339 instant like 2026-03-01T02:00:00Z ({e})"
            ))
        })
}

/// An operator's backfill asked at a virtual instant, through the operator service (as the
/// api creates one): refused ones (BACKFILL_OVER_BUDGET, say) are errors of the report.
#[derive(Debug, Clone, Serialize)]
pub struct BackfillAt {
    pub at: DateTime<Utc>,
    pub schedule: String,
    pub request: cronledger_contract::BackfillRequest,
}

impl BackfillAt {
    /// `ID@T=REQUEST`: at T (RFC3339) an operator asks for a backfill of schedule ID, the
    /// request as the api takes it (JSON: `from`, `to`, `max_cost_usd`, ...).
    pub fn parse(text: &str) -> Result<BackfillAt, SimulateError> {
        let (at, body) = text.split_once('=').ok_or_else(|| {
            SimulateError::Invalid(format!(
                "--backfill `{text}` has no `=`; write ID@T={{\"from\": ..., \"to\": ...}}"
            ))
        })?;
        let when = ScheduleAt::parse("backfill", at)?;
        let request = serde_json::from_str(body).map_err(|e| {
            SimulateError::Invalid(format!(
                "--backfill `{text}`: the request is not a backfill request ({e})"
            ))
        })?;
        Ok(BackfillAt {
            at: when.at,
            schedule: when.schedule,
            request,
        })
    }
}

#[derive(Debug, Clone)]
pub struct SimulationConfig {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub outages: Vec<Outage>,
    /// Worker outages: the ticker and the reconciler run, no worker takes a message (a
    /// broken deploy, a downstream the jobs cannot reach), so the lanes fill up.
    pub worker_outages: Vec<Outage>,
    /// Windows the global kill switch is on: no tick, no reconciler pass (so no catch-up or
    /// backfill release), no delivery; messages stay in their lanes until it is off.
    pub kill_switches: Vec<Outage>,
    /// Schedules paused at an instant, through the operator service, as the api pauses them.
    pub pauses: Vec<ScheduleAt>,
    /// Schedules resumed at an instant (each after a pause of it).
    pub resumes: Vec<ScheduleAt>,
    /// Instants at which an operator approves every MANUAL_REQUIRED run and resumes every
    /// paused backfill, through the operator service (the api handlers call the same).
    pub approve_all_at: Vec<DateTime<Utc>>,
    /// Backfills an operator asks for.
    pub backfills: Vec<BackfillAt>,
    /// Tickers invoked at once on every tick (racing for the same windows).
    pub tickers: u32,
    pub crashes: Vec<CrashPoint>,
    /// Each crash point hits the 1st run reaching it, then every `crash_every`-th.
    pub crash_every: u32,
    /// Every message is sent twice.
    pub duplicate_deliveries: bool,
    /// How long past `to` the system may run to settle the range's windows.
    pub settle_limit: Span,
    /// The manifest's calendars, stored before its schedules (as `cronledger local` and
    /// `apply` store them).
    pub calendars: cronledger_core::calendar::CalendarSet,
}

impl SimulationConfig {
    pub fn new(from: DateTime<Utc>, to: DateTime<Utc>) -> SimulationConfig {
        SimulationConfig {
            from,
            to,
            outages: Vec::new(),
            worker_outages: Vec::new(),
            kill_switches: Vec::new(),
            pauses: Vec::new(),
            resumes: Vec::new(),
            approve_all_at: Vec::new(),
            backfills: Vec::new(),
            tickers: 1,
            crashes: Vec::new(),
            crash_every: 10,
            duplicate_deliveries: false,
            settle_limit: Span::hours(24),
            calendars: Default::default(),
        }
    }

    /// The longest range one simulation covers.
    pub const MAX_RANGE: Span = Span::days(31);

    /// Refuses a configuration that cannot run against `specs`: a bad range or knob, a lever
    /// outside the range or naming a schedule the file does not have, a resume with no pause
    /// of that schedule before it.
    pub fn check(&self, specs: &[ScheduleSpec]) -> Result<(), SimulateError> {
        let invalid = |m: &str| Err(SimulateError::Invalid(m.to_string()));
        if self.to <= self.from {
            return invalid("--to must be after --from");
        }
        if self.to - self.from > SimulationConfig::MAX_RANGE.as_delta() {
            return invalid("the range is longer than 31 days");
        }
        if !(1..=32).contains(&self.tickers) {
            return invalid("--tickers must be between 1 and 32");
        }
        if self.crash_every == 0 {
            return invalid("--crash-every must be at least 1");
        }
        if self.settle_limit > Span::days(7) {
            return invalid("the settle limit is longer than 7 days");
        }
        self.check_levers(specs)
    }

    fn check_levers(&self, specs: &[ScheduleSpec]) -> Result<(), SimulateError> {
        let range = format!(
            "the range {}..{}",
            self.from.to_rfc3339(),
            self.to.to_rfc3339()
        );
        let in_range = |t: DateTime<Utc>| self.from <= t && t <= self.to;
        for k in &self.kill_switches {
            if !in_range(k.from) || !in_range(k.to) {
                return Err(SimulateError::Invalid(format!(
                    "--kill-switch {}..{} is not inside {range}",
                    k.from.to_rfc3339(),
                    k.to.to_rfc3339()
                )));
            }
        }
        for at in &self.approve_all_at {
            if !in_range(*at) {
                return Err(SimulateError::Invalid(format!(
                    "--approve-all-at {} is not inside {range}",
                    at.to_rfc3339()
                )));
            }
        }
        let known: BTreeSet<&str> = specs.iter().map(|s| s.id.as_str()).collect();
        // A lever on a schedule names one of the file's, inside the range.
        let placed = |flag: &str, schedule: &str, at: DateTime<Utc>| {
            let named = format!("--{flag} {schedule}@{}", at.to_rfc3339());
            if !known.contains(schedule) {
                return Err(SimulateError::Invalid(format!(
                    "{named}: the file has no schedule `{schedule}`"
                )));
            }
            if !in_range(at) {
                return Err(SimulateError::Invalid(format!(
                    "{named}: the instant is not inside {range}"
                )));
            }
            Ok(())
        };
        for b in &self.backfills {
            placed("backfill", &b.schedule, b.at)?;
        }
        // Per schedule, its pauses (true) and resumes (false) in time order.
        let mut by_schedule: BTreeMap<&str, Vec<(DateTime<Utc>, bool)>> = BTreeMap::new();
        let levers = self
            .pauses
            .iter()
            .map(|p| ("pause", p, true))
            .chain(self.resumes.iter().map(|r| ("resume", r, false)));
        for (flag, lever, pause) in levers {
            placed(flag, &lever.schedule, lever.at)?;
            by_schedule
                .entry(lever.schedule.as_str())
                .or_default()
                .push((lever.at, pause));
        }
        for (id, mut levers) in by_schedule {
            levers.sort();
            let mut paused = false;
            for (i, &(at, pause)) in levers.iter().enumerate() {
                let at_text = at.to_rfc3339();
                if levers.get(i + 1).is_some_and(|next| next.0 == at) {
                    return Err(SimulateError::Invalid(format!(
                        "`{id}` is paused or resumed twice at {at_text}; give each lever its own instant"
                    )));
                }
                if pause && paused {
                    return Err(SimulateError::Invalid(format!(
                        "--pause {id}@{at_text}: `{id}` is already paused then (resume it first)"
                    )));
                }
                if !pause && !paused {
                    return Err(SimulateError::Invalid(format!(
                        "--resume {id}@{at_text}: `{id}` is not paused then (no --pause of it before)"
                    )));
                }
                paused = pause;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronledger_core::spec::validate_schedule;
    use cronledger_core::ValidationRules;

    fn t(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn specs() -> Vec<ScheduleSpec> {
        let doc = serde_json::json!({
            "id": "nightly", "cron": "0 2 * * *", "timezone": "UTC", "job": {"type": "noop"}
        });
        let rules = ValidationRules::default();
        vec![validate_schedule(&doc, "", &rules, t("2026-03-01T00:00:00Z")).unwrap()]
    }

    fn config() -> SimulationConfig {
        SimulationConfig::new(t("2026-03-01T00:00:00Z"), t("2026-03-02T00:00:00Z"))
    }

    fn at(text: &str) -> ScheduleAt {
        let (id, at) = text.split_once('@').unwrap();
        ScheduleAt {
            schedule: id.into(),
            at: t(at),
        }
    }

    fn refusal(config: &SimulationConfig) -> String {
        match config.check(&specs()) {
            Err(SimulateError::Invalid(m)) => m,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_lever_is_id_at_an_instant() {
        assert_eq!(
            ScheduleAt::parse("pause", "nightly@2026-03-01T02:00:00Z").unwrap(),
            at("nightly@2026-03-01T02:00:00Z")
        );
        for (text, says) in [
            ("nightly", "has no `@`"),
            ("@2026-03-01T02:00:00Z", "names no schedule"),
            ("nightly@2am", "has a bad instant `2am`"),
        ] {
            let e = ScheduleAt::parse("pause", text).unwrap_err();
            assert_eq!(e.code(), "SIMULATE_INVALID");
            assert!(e.to_string().contains(says), "{e}");
            assert!(e.to_string().contains(&format!("--pause `{text}`")), "{e}");
        }
        let e = parse_instant("approve-all-at", "noon").unwrap_err();
        assert!(e.to_string().contains("--approve-all-at `noon`"), "{e}");
    }

    #[test]
    fn pauses_and_resumes_alternate_per_schedule() {
        let mut ok = config();
        ok.pauses = vec![
            at("nightly@2026-03-01T01:00:00Z"),
            at("nightly@2026-03-01T05:00:00Z"),
        ];
        ok.resumes = vec![at("nightly@2026-03-01T03:00:00Z")];
        assert!(ok.check(&specs()).is_ok());

        let mut unknown = config();
        unknown.pauses = vec![at("daily@2026-03-01T01:00:00Z")];
        assert!(refusal(&unknown).contains("no schedule `daily`"));

        let mut early = config();
        early.pauses = vec![at("nightly@2026-03-01T03:00:00Z")];
        early.resumes = vec![at("nightly@2026-03-01T01:00:00Z")];
        assert!(refusal(&early).contains("not paused then (no --pause of it before)"));

        let mut twice = config();
        twice.pauses = vec![
            at("nightly@2026-03-01T01:00:00Z"),
            at("nightly@2026-03-01T02:00:00Z"),
        ];
        assert!(refusal(&twice).contains("already paused"));

        let mut same = config();
        same.pauses = vec![at("nightly@2026-03-01T01:00:00Z")];
        same.resumes = vec![at("nightly@2026-03-01T01:00:00Z")];
        assert!(refusal(&same).contains("twice at"));

        let mut outside = config();
        outside.pauses = vec![at("nightly@2026-03-03T01:00:00Z")];
        assert!(refusal(&outside).contains("not inside the range"));
    }

    #[test]
    fn kill_switches_and_approvals_stay_inside_the_range() {
        let mut ok = config();
        ok.kill_switches =
            vec![
                Outage::parse_as("kill switch", "2026-03-01T00:00:00Z..2026-03-02T00:00:00Z")
                    .unwrap(),
            ];
        ok.approve_all_at = vec![t("2026-03-02T00:00:00Z")];
        assert!(ok.check(&specs()).is_ok());

        let mut late = config();
        late.kill_switches =
            vec![
                Outage::parse_as("kill switch", "2026-03-01T20:00:00Z..2026-03-02T01:00:00Z")
                    .unwrap(),
            ];
        assert!(refusal(&late).starts_with("--kill-switch"));

        let mut early = config();
        early.approve_all_at = vec![t("2026-02-28T00:00:00Z")];
        assert!(refusal(&early).starts_with("--approve-all-at"));

        let e = Outage::parse_as("kill switch", "2026-03-01T02:00:00Z").unwrap_err();
        assert!(
            e.to_string().starts_with("SIMULATE_INVALID: kill switch `"),
            "{e}"
        );
    }
}
