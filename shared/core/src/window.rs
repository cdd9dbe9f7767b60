//! Business windows and the idempotency key derived from them (DESIGN invariant 3).

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// The data interval a run covers, `[start, end)`. `end` is the run's `scheduled_for`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub struct Window {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Window {
    pub fn new(start: DateTime<Utc>, end: DateTime<Utc>) -> Window {
        Window { start, end }
    }
}

/// Formats an instant the one way cronledger stores and prints it: RFC3339 UTC, `Z`,
/// whole seconds unless the instant has a fraction.
pub fn utc_text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// `{schedule_id}:{window_start}/{window_end}` (+ `:{tenant}`): the same for every attempt,
/// retry, catch-up or manual reuse of one window, never derived from when it ran.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn for_window(schedule_id: &str, window: &Window, tenant: Option<&str>) -> IdempotencyKey {
        let mut key = format!(
            "{schedule_id}:{}/{}",
            utc_text(window.start),
            utc_text(window.end)
        );
        if let Some(tenant) = tenant {
            key.push(':');
            key.push_str(tenant);
        }
        IdempotencyKey(key)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Wraps a key read back from storage.
    pub fn from_stored(key: String) -> IdempotencyKey {
        IdempotencyKey(key)
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
