//! Every error answer: `{code, message, details}`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An error answer. `code` is stable (SCREAMING_SNAKE_CASE); `details` carries what the code
/// needs (`issues` of a validation, `current_version` of a stale If-Match, `request_id` of a
/// 5xx, whose cause is in the log under it), `null` when there is nothing more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    pub details: Option<Value>,
}
