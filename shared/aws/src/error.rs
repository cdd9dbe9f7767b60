//! Typed errors of the adapters, each with a stable code (part of the API and log contract:
//! add codes, never rename them). The ledger's own are the port's ([`StoreError`]).

use std::error::Error as StdError;

use aws_smithy_types::error::display::DisplayErrorContext;
pub use cronledger_ledger::error::StoreError;

/// A ledger request the AWS SDK failed, with the SDK's full error context.
pub(crate) fn store_request(operation: &'static str, err: impl StdError + 'static) -> StoreError {
    StoreError::Request {
        operation,
        message: DisplayErrorContext(&err).to_string(),
    }
}

/// Everything a lane operation can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LaneError {
    /// The envelope's `v` is not one this code reads. Permanent: retrying cannot help.
    #[error("LANE_MESSAGE_UNKNOWN_VERSION: message version {0} is not supported")]
    UnknownVersion(String),

    /// The envelope's `v` is a later version than this code reads: a later release sent it.
    /// Not poison: the message is left in its lane (a batch item failure), for a worker of
    /// that release, and reaches the DLQ intact only after the lane's receive count.
    #[error("LANE_MESSAGE_SCHEMA_UNSUPPORTED: message version {version} is later than this release reads (up to {current})")]
    SchemaUnsupported { version: u64, current: u64 },

    /// The body is not a lane envelope. Permanent: retrying cannot help.
    #[error("LANE_MESSAGE_MALFORMED: {0}")]
    Malformed(String),

    #[error("LANE_NOT_CONFIGURED: no queue is known for lane `{0}`")]
    NotConfigured(String),

    #[error("LANE_REQUEST_FAILED: {operation}: {message}")]
    Request {
        operation: &'static str,
        message: String,
    },
}

impl LaneError {
    pub fn code(&self) -> &'static str {
        match self {
            LaneError::UnknownVersion(_) => "LANE_MESSAGE_UNKNOWN_VERSION",
            LaneError::SchemaUnsupported { .. } => "LANE_MESSAGE_SCHEMA_UNSUPPORTED",
            LaneError::Malformed(_) => "LANE_MESSAGE_MALFORMED",
            LaneError::NotConfigured(_) => "LANE_NOT_CONFIGURED",
            LaneError::Request { .. } => "LANE_REQUEST_FAILED",
        }
    }

    /// Poison: the message can never be processed, so it goes straight to the DLQ.
    pub fn is_permanent(&self) -> bool {
        matches!(self, LaneError::UnknownVersion(_) | LaneError::Malformed(_))
    }

    pub(crate) fn request(operation: &'static str, err: impl StdError + 'static) -> LaneError {
        LaneError::Request {
            operation,
            message: DisplayErrorContext(&err).to_string(),
        }
    }
}
