//! The lane message envelope: what a worker needs to find and run one attempt of a run.
//!
//! JSON with a schema version `v` (every release so far, 0.1.0 included, writes 1). A later
//! version is refused and left in its lane for a release that reads it
//! (`LANE_MESSAGE_SCHEMA_UNSUPPORTED`); anything else unknown, or anything that does not
//! parse, is a permanent failure with its own code.

use cronledger_core::{IdempotencyKey, Lane, Run, RunKey, Window};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::LaneError;

/// The envelope version this code writes and reads.
pub const VERSION: u64 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaneMessage {
    pub v: u64,
    pub run: RunKey,
    pub idempotency_key: IdempotencyKey,
    pub window: Window,
    pub lane: Lane,
    /// The attempt the sender expects this to be; the ledger's count is the truth.
    pub attempt: u32,
    /// Set on a child's message: which child of the run (see `cronledger_core::children`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<ChildRef>,
}

/// One child of a run: the step that answered it and its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildRef {
    pub step: u32,
    pub index: u32,
}

impl LaneMessage {
    pub fn new(
        run: RunKey,
        idempotency_key: IdempotencyKey,
        window: Window,
        lane: Lane,
        attempt: u32,
    ) -> LaneMessage {
        LaneMessage {
            v: VERSION,
            run,
            idempotency_key,
            window,
            lane,
            attempt,
            child: None,
        }
    }

    /// The message for `run`'s next attempt on `lane`: the same identity (run key,
    /// idempotency key, window) whoever sends it, and however often.
    pub fn next_attempt(run: &Run, lane: Lane) -> LaneMessage {
        LaneMessage::new(
            run.key.clone(),
            run.idempotency_key.clone(),
            run.window,
            lane,
            run.attempts + 1,
        )
    }

    /// The message of one child of `run`, on `lane`.
    pub fn for_child(run: &Run, lane: Lane, step: u32, index: u32) -> LaneMessage {
        LaneMessage {
            child: Some(ChildRef { step, index }),
            ..LaneMessage::new(
                run.key.clone(),
                run.idempotency_key.clone(),
                run.window,
                lane,
                1,
            )
        }
    }

    pub fn to_body(&self) -> String {
        // Plain data with string keys: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a message body: the version first, so an unknown version is reported as such
    /// even when the rest of its shape changed too.
    pub fn parse(body: &str) -> Result<LaneMessage, LaneError> {
        let value: Value = serde_json::from_str(body)
            .map_err(|e| LaneError::Malformed(format!("not JSON: {e}")))?;
        match value.get("v") {
            Some(Value::Number(v)) if v.as_u64() == Some(VERSION) => {}
            Some(Value::Number(v)) if v.as_u64().is_some_and(|v| v > VERSION) => {
                return Err(LaneError::SchemaUnsupported {
                    version: v.as_u64().unwrap_or_default(),
                    current: VERSION,
                })
            }
            Some(other) => return Err(LaneError::UnknownVersion(other.to_string())),
            None => return Err(LaneError::Malformed("no `v` field".to_string())),
        }
        serde_json::from_value(value)
            .map_err(|e| LaneError::Malformed(format!("not a v{VERSION} envelope: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};

    fn sample() -> LaneMessage {
        let end: DateTime<Utc> = "2026-03-01T02:00:00Z".parse().unwrap();
        let start: DateTime<Utc> = "2026-02-28T02:00:00Z".parse().unwrap();
        let window = Window::new(start, end);
        LaneMessage::new(
            RunKey::expected("daily", end),
            IdempotencyKey::for_window("daily", &window, None),
            window,
            Lane::Realtime,
            1,
        )
    }

    #[test]
    fn round_trips() {
        let msg = sample();
        assert_eq!(LaneMessage::parse(&msg.to_body()).unwrap(), msg);
    }

    #[test]
    fn unknown_version_and_garbage_are_permanent_with_their_codes() {
        let mut v2: Value = serde_json::from_str(&sample().to_body()).unwrap();
        v2["v"] = Value::from(2);
        let err = LaneMessage::parse(&v2.to_string()).unwrap_err();
        assert_eq!(err.code(), "LANE_MESSAGE_SCHEMA_UNSUPPORTED");
        assert!(
            !err.is_permanent(),
            "a later release's message is kept, not poison"
        );

        for unknown in [
            Value::from(0),
            Value::from(-1),
            Value::from(1.5),
            Value::from("1"),
        ] {
            v2["v"] = unknown;
            let err = LaneMessage::parse(&v2.to_string()).unwrap_err();
            assert_eq!(err.code(), "LANE_MESSAGE_UNKNOWN_VERSION", "{err}");
            assert!(err.is_permanent());
        }

        for body in [
            "",
            "not json",
            "{}",
            r#"{"v":"1"}"#,
            r#"{"v":1,"run":3}"#,
            "[1]",
        ] {
            let err = LaneMessage::parse(body).unwrap_err();
            assert!(err.is_permanent(), "{body}: {err}");
            assert!(err.code().starts_with("LANE_MESSAGE_"), "{body}: {err}");
        }
    }
}
