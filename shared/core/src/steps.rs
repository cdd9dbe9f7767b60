//! Multi-step jobs (`job: { type: steps, steps: [...] }`): each step runs as its own attempt
//! from its own lane message, and the run item keeps a checkpoint per step, so a run tried
//! again (by its retry policy or an operator) resumes at the first step that has not
//! succeeded and never executes a succeeded step again.
//!
//! Pure: which step comes next, and the checkpoints each event leaves. The worker writes
//! them with the run's transitions (see `RunEvent::AdvanceStep` and `RunEvent::StartStep`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::named_enum;
use crate::span::Span;
use crate::spec::JobSpec;
use crate::window::IdempotencyKey;

/// Most steps one job may have.
pub const MAX_STEPS: usize = 20;

/// Largest output, serialized, a step may hand to the next (it is stored on the run item).
pub const MAX_STEP_OUTPUT_BYTES: usize = 4 * 1024;

/// The code of a step whose output is over [`MAX_STEP_OUTPUT_BYTES`] (permanent: the same
/// call would answer the same).
pub const STEP_OUTPUT_TOO_LARGE: &str = "STEP_OUTPUT_TOO_LARGE";

/// One step: a target (http, lambda, handler, noop) with its own name, runtime limit and
/// attempts. In a manifest the step's fields sit beside the target's:
/// `{ name: generate, type: lambda, function: gen, max_attempts: 5 }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub name: String,
    /// The step's own limit; the schedule's `max_runtime` when absent.
    pub max_runtime: Option<Span>,
    /// The step's own attempts (first try included); the schedule's `max_attempts` when absent.
    pub max_attempts: Option<u32>,
    pub target: JobSpec,
}

/// The fields a step has beside its target's.
pub const STEP_FIELDS: [&str; 3] = ["name", "max_runtime", "max_attempts"];

impl Serialize for Step {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = match serde_json::to_value(&self.target).map_err(serde::ser::Error::custom)? {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        map.insert("name".into(), Value::String(self.name.clone()));
        if let Some(span) = self.max_runtime {
            map.insert(
                "max_runtime".into(),
                serde_json::to_value(span).map_err(serde::ser::Error::custom)?,
            );
        }
        if let Some(n) = self.max_attempts {
            map.insert("max_attempts".into(), Value::from(n));
        }
        map.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Step, D::Error> {
        use serde::de::Error;
        let mut map = Map::<String, Value>::deserialize(d)?;
        let name = match map.remove("name") {
            Some(Value::String(name)) => name,
            Some(_) => return Err(D::Error::custom("a step's `name` must be text")),
            None => return Err(D::Error::custom("every step needs a `name`")),
        };
        let max_runtime = match map.remove("max_runtime") {
            Some(v) => Some(Span::deserialize(v).map_err(D::Error::custom)?),
            None => None,
        };
        let max_attempts = match map.remove("max_attempts") {
            Some(v) => Some(u32::deserialize(v).map_err(D::Error::custom)?),
            None => None,
        };
        if map.get("type").and_then(Value::as_str) == Some("steps") {
            return Err(D::Error::custom(
                "steps do not nest: a step is http, lambda, handler or noop",
            ));
        }
        let target = JobSpec::deserialize(Value::Object(map)).map_err(D::Error::custom)?;
        Ok(Step {
            name,
            max_runtime,
            max_attempts,
            target,
        })
    }
}

named_enum!(
    /// Where one step of a run stands.
    StepStatus {
        /// Not started in this run yet (or handed over to its own message, not yet taken).
        Pending => "PENDING",
        Running => "RUNNING",
        Success => "SUCCESS",
        /// Its last attempt failed; a retry of the run starts it again.
        Failed => "FAILED",
    }
);

/// What the run item keeps about one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepCheckpoint {
    pub name: String,
    pub status: StepStatus,
    /// Attempts of this step, over the whole run (retries and resumes included).
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    /// What the step answered as `output`, handed to the next step as `previous`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The last failure's code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
}

impl StepCheckpoint {
    fn pending(name: &str) -> StepCheckpoint {
        StepCheckpoint {
            name: name.to_string(),
            status: StepStatus::Pending,
            attempts: 0,
            started_at: None,
            ended_at: None,
            output: None,
            error_code: None,
        }
    }
}

/// The checkpoints of `steps` as stored on a run: one per step, in order, by name (a step
/// the stored list lacks is PENDING).
pub fn checkpoints(steps: &[Step], stored: &[StepCheckpoint]) -> Vec<StepCheckpoint> {
    steps
        .iter()
        .map(|step| {
            stored
                .iter()
                .find(|c| c.name == step.name)
                .cloned()
                .unwrap_or_else(|| StepCheckpoint::pending(&step.name))
        })
        .collect()
}

/// The step a run executes next: the first that has not succeeded. `None` when all have.
pub fn current(steps: &[Step], stored: &[StepCheckpoint]) -> Option<usize> {
    checkpoints(steps, stored)
        .iter()
        .position(|c| c.status != StepStatus::Success)
}

/// The attempts a run's retry limit counts, and that limit: the one rule the worker (the
/// attempt it opens) and the reconciler (whether a lost attempt may be tried again) share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptBudget {
    /// A steps job's current step (`None`: the whole job).
    pub step: Option<usize>,
    /// Attempts made: the current step's, or the run's.
    pub used: u32,
    /// The step's `max_attempts` (else the schedule's), or the schedule's.
    pub limit: u32,
}

impl AttemptBudget {
    /// The budget of `run` executing `job` (its schedule's, or the version it is pinned to)
    /// under the schedule's `max_attempts`.
    pub fn of(job: &JobSpec, max_attempts: u32, run: &crate::Run) -> AttemptBudget {
        let whole = AttemptBudget {
            step: None,
            used: run.attempts,
            limit: max_attempts,
        };
        let Some(list) = job.steps() else {
            return whole;
        };
        let Some(index) = current(list, &run.steps) else {
            return whole;
        };
        AttemptBudget {
            step: Some(index),
            used: checkpoints(list, &run.steps)[index].attempts,
            limit: list[index].max_attempts.unwrap_or(max_attempts),
        }
    }

    /// Whether another attempt may be made.
    pub fn left(&self) -> bool {
        self.used < self.limit
    }
}

/// Whether a RUNNING run is between two steps: its previous step succeeded and handed over
/// to the next step's message, which no worker has taken yet. Such a run is started by that
/// message (or re-sent by the reconciler), never judged as a lost attempt.
pub fn handed_over(stored: &[StepCheckpoint]) -> bool {
    let Some(first_open) = stored.iter().position(|c| c.status != StepStatus::Success) else {
        return false;
    };
    first_open > 0 && stored[first_open].status == StepStatus::Pending
}

/// The checkpoints an attempt of step `index` opens with: that step RUNNING, one more attempt.
pub fn start(
    steps: &[Step],
    stored: &[StepCheckpoint],
    index: usize,
    at: DateTime<Utc>,
) -> Vec<StepCheckpoint> {
    let mut all = checkpoints(steps, stored);
    if let Some(step) = all.get_mut(index) {
        step.status = StepStatus::Running;
        step.attempts += 1;
        step.started_at = Some(at);
        step.ended_at = None;
    }
    all
}

/// The checkpoints step `index`'s attempt ends with: SUCCESS with its output, or FAILED
/// with its code. After a success the next step (if any) is PENDING: handed over.
pub fn end(
    stored: &[StepCheckpoint],
    index: usize,
    at: DateTime<Utc>,
    outcome: Result<Option<Value>, &str>,
) -> Vec<StepCheckpoint> {
    let mut all = stored.to_vec();
    if let Some(step) = all.get_mut(index) {
        step.ended_at = Some(at);
        match outcome {
            Ok(output) => {
                step.status = StepStatus::Success;
                step.output = output;
                step.error_code = None;
            }
            Err(code) => {
                step.status = StepStatus::Failed;
                step.error_code = Some(code.to_string());
            }
        }
    }
    all
}

/// The key a step's target sees: `{run key}#{step name}`, so each step's side effects are
/// deduplicated on their own.
pub fn idempotency_key(run_key: &IdempotencyKey, step: &str) -> IdempotencyKey {
    IdempotencyKey::from_stored(format!("{run_key}#{step}"))
}

/// Whether an output fits on the run item.
pub fn output_fits(output: &Value) -> bool {
    serde_json::to_vec(output).is_ok_and(|b| b.len() <= MAX_STEP_OUTPUT_BYTES)
}

#[cfg(test)]
mod tests;
