//! The lanes: SQS queues with their own DLQs, the message envelope, and batch handling.

pub mod batch;
mod bulk;
pub mod envelope;
pub mod sqs;

pub use batch::{
    process_batch, BatchReport, HandlerFailure, MessageOutcome, SqsBatchResponse, SqsEvent,
    SqsMessage, SqsRecord, BATCH_CONCURRENCY,
};
pub use envelope::{ChildRef, LaneMessage};
pub use sqs::{queue_names, LaneQueue, LaneSettings, LaneUrls, QueueDepth, Received, SqsLanes};
