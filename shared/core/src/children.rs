//! Child batches (fan-out): a job or step answers `{"children": [payload, ...]}` or
//! `{"children": {"count": N, "batch": K}}`, and each child becomes a ledger item under its
//! run, with its own attempts, sent to the run's lane (or the schedule's `batch_lane`).
//! The run counts its children's ends and ends itself when every child has ended.
//!
//! Pure: reading the answer, the children's payloads, the run's counters and the outcome
//! they add up to under `max_failed_children`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::named_enum;
use crate::window::IdempotencyKey;

/// Most children one run may have.
pub const MAX_CHILDREN: u32 = 10_000;

/// Largest child payload, serialized (each is stored on its own item).
pub const MAX_CHILD_PAYLOAD_BYTES: usize = 4 * 1024;

named_enum!(
    /// Where one child stands.
    ChildStatus {
        Pending => "PENDING",
        Running => "RUNNING",
        /// Failed an attempt; its message comes back after a backoff.
        RetryPending => "RETRY_PENDING",
        Success => "SUCCESS",
        Failed => "FAILED",
    }
);

impl ChildStatus {
    pub fn is_terminal(self) -> bool {
        matches!(self, ChildStatus::Success | ChildStatus::Failed)
    }
}

/// One child of a run, as its item stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Child {
    /// Its place among the run's children, from 0.
    pub index: u32,
    /// The step of a steps job that answered it (0 for a one-call job).
    pub step: u32,
    pub status: ChildStatus,
    pub attempts: u32,
    /// Bumped by every start; every later write is conditioned on it.
    pub lease_epoch: u64,
    pub lease_until: Option<DateTime<Utc>>,
    pub payload: Value,
    pub count: Option<u64>,
    pub checksum: Option<String>,
    pub error_code: Option<String>,
    pub updated_at: DateTime<Utc>,
}

impl Child {
    pub fn new(step: u32, index: u32, payload: Value, at: DateTime<Utc>) -> Child {
        Child {
            index,
            step,
            status: ChildStatus::Pending,
            attempts: 0,
            lease_epoch: 0,
            lease_until: None,
            payload,
            count: None,
            checksum: None,
            error_code: None,
            updated_at: at,
        }
    }
}

/// A run's children as its item counts them: each child's end adds one, in the same
/// transaction as the child's own terminal write, so the counts are exact.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ChildCounts {
    pub total: u32,
    pub succeeded: u32,
    pub failed: u32,
    /// The step that answered them (0 for a one-call job).
    pub step: u32,
}

impl ChildCounts {
    pub fn ended(&self) -> u32 {
        self.succeeded + self.failed
    }

    /// Not yet ended (waiting, running or retrying).
    pub fn running(&self) -> u32 {
        self.total.saturating_sub(self.ended())
    }

    pub fn all_ended(&self) -> bool {
        self.total > 0 && self.ended() >= self.total
    }
}

/// How many children may fail with the run still PARTIAL_SUCCESS: a count (`5`) or a share
/// of the children (`"2%"`). None by default: any failure fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum FailureBudget {
    Count(u32),
    Percent(
        #[serde(with = "percent")]
        #[schemars(schema_with = "crate::schema::percent")]
        f64,
    ),
}

mod percent {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(p: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{p}%"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        let text = String::deserialize(d)?;
        text.strip_suffix('%')
            .and_then(|n| n.trim().parse::<f64>().ok())
            .filter(|p| (0.0..=100.0).contains(p))
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "`{text}` is not a share like 2% (0% to 100%) or a whole count"
                ))
            })
    }
}

impl FailureBudget {
    /// Whether `failed` of `total` children is within the budget.
    pub fn allows(&self, failed: u32, total: u32) -> bool {
        match *self {
            FailureBudget::Count(n) => failed <= n,
            FailureBudget::Percent(p) => f64::from(failed) * 100.0 <= p * f64::from(total),
        }
    }
}

/// What a run whose children all ended ends as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildrenOutcome {
    Success,
    PartialSuccess,
    Failed,
}

/// SUCCESS when every child succeeded, PARTIAL_SUCCESS when the failures are within the
/// budget, FAILED otherwise.
pub fn outcome(counts: &ChildCounts, budget: Option<&FailureBudget>) -> ChildrenOutcome {
    if counts.failed == 0 {
        ChildrenOutcome::Success
    } else if budget.is_some_and(|b| b.allows(counts.failed, counts.total)) {
        ChildrenOutcome::PartialSuccess
    } else {
        ChildrenOutcome::Failed
    }
}

/// Why an answer's `children` cannot become children.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChildrenError {
    #[error("CHILDREN_INVALID: {0}")]
    Invalid(String),
    #[error("CHILDREN_TOO_MANY: {count} children; the limit is {limit}")]
    TooMany { count: u64, limit: u32 },
    #[error("CHILD_PAYLOAD_TOO_LARGE: child {index}'s payload is {bytes} bytes; the limit is {MAX_CHILD_PAYLOAD_BYTES}")]
    PayloadTooLarge { index: usize, bytes: usize },
}

impl ChildrenError {
    pub fn code(&self) -> &'static str {
        match self {
            ChildrenError::Invalid(_) => "CHILDREN_INVALID",
            ChildrenError::TooMany { .. } => "CHILDREN_TOO_MANY",
            ChildrenError::PayloadTooLarge { .. } => "CHILD_PAYLOAD_TOO_LARGE",
        }
    }
}

/// The children's payloads an answer's `children` asks for: the list as given, or a range
/// of `count` items split into batches of `batch` (`{"from": i, "to": j}`, `to` exclusive).
pub fn payloads(children: &Value) -> Result<Vec<Value>, ChildrenError> {
    let list = match children {
        Value::Array(list) => {
            if list.len() as u64 > u64::from(MAX_CHILDREN) {
                return Err(ChildrenError::TooMany {
                    count: list.len() as u64,
                    limit: MAX_CHILDREN,
                });
            }
            list.clone()
        }
        Value::Object(range) => {
            let field = |name: &str| range.get(name).and_then(Value::as_u64);
            let (Some(count), Some(batch)) = (field("count"), field("batch")) else {
                return Err(ChildrenError::Invalid(
                    "`children` must be a list of payloads or {count, batch} (whole numbers)"
                        .into(),
                ));
            };
            if batch == 0 {
                return Err(ChildrenError::Invalid("`batch` must be at least 1".into()));
            }
            let n = count.div_ceil(batch);
            if n > u64::from(MAX_CHILDREN) {
                return Err(ChildrenError::TooMany {
                    count: n,
                    limit: MAX_CHILDREN,
                });
            }
            (0..n)
                .map(|i| json!({"from": i * batch, "to": ((i + 1) * batch).min(count)}))
                .collect()
        }
        _ => {
            return Err(ChildrenError::Invalid(
                "`children` must be a list of payloads or {count, batch}".into(),
            ))
        }
    };
    for (index, payload) in list.iter().enumerate() {
        let bytes = serde_json::to_vec(payload).map_or(usize::MAX, |b| b.len());
        if bytes > MAX_CHILD_PAYLOAD_BYTES {
            return Err(ChildrenError::PayloadTooLarge { index, bytes });
        }
    }
    Ok(list)
}

/// The key a child's target sees: `{run key}#child-{i}`.
pub fn idempotency_key(run_key: &IdempotencyKey, index: u32) -> IdempotencyKey {
    IdempotencyKey::from_stored(format!("{run_key}#child-{index}"))
}

#[cfg(test)]
mod tests;
