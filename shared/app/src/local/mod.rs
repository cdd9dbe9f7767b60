//! Running the real handlers on one machine: an SQS poller standing in for Lambda's event
//! source mapping, and a webhook receiver as the default job target. Nothing here decides
//! anything about scheduling; it only feeds events to the handlers Lambda runs.

pub mod poller;
pub mod receiver;
pub mod summary;
