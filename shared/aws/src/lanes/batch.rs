//! Turns one SQS batch into per-message results (Lambda's partial batch response), so one
//! poison message never fails or delays its batch-mates.

use futures_util::StreamExt;
use std::future::Future;
use tracing::Instrument;

pub use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use cronledger_core::Lane;

use crate::lanes::envelope::LaneMessage;
use crate::lanes::sqs::{LaneQueue, Received};

/// The part of an SQS event record the lanes need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsRecord {
    pub message_id: String,
    /// For extending the message's visibility (heartbeats, retry backoff).
    pub receipt_handle: String,
    pub body: String,
    /// SQS's `ApproximateReceiveCount`: 1 on the first delivery.
    pub receive_count: u32,
}

/// A record of the SQS event Lambda's event source mapping delivers.
impl From<&SqsMessage> for SqsRecord {
    fn from(m: &SqsMessage) -> SqsRecord {
        SqsRecord {
            message_id: m.message_id.clone().unwrap_or_default(),
            receipt_handle: m.receipt_handle.clone().unwrap_or_default(),
            body: m.body.clone().unwrap_or_default(),
            receive_count: m
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|c| c.parse().ok())
                .unwrap_or(1),
        }
    }
}

impl From<&Received> for SqsRecord {
    fn from(m: &Received) -> SqsRecord {
        SqsRecord {
            message_id: m.message_id.clone(),
            receipt_handle: m.receipt_handle.clone(),
            body: m.body.clone(),
            receive_count: m.receive_count,
        }
    }
}

/// How a handler ended with one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerFailure {
    /// Worth trying again: the message becomes visible again after its timeout, and SQS
    /// moves it to the DLQ after the lane's receive count.
    Retry(String),
    /// Can never succeed: straight to the DLQ.
    Permanent { code: String, detail: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageOutcome {
    Done,
    Retry(String),
    DeadLettered {
        code: String,
    },
    /// Poison, but the DLQ send failed: reported as a failure so SQS redrives it later.
    DeadLetterFailed {
        code: String,
        error: String,
    },
}

impl MessageOutcome {
    /// Whether SQS must keep the message (it is listed in the batch response).
    pub fn keeps_message(&self) -> bool {
        matches!(
            self,
            MessageOutcome::Retry(_) | MessageOutcome::DeadLetterFailed { .. }
        )
    }
}

/// Every message of a batch with what happened to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    pub outcomes: Vec<(String, MessageOutcome)>,
}

impl BatchReport {
    /// Lambda's partial batch response: the messages SQS must keep (`batchItemFailures`);
    /// every other message of the batch is deleted.
    pub fn response(&self) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        response.set_failures(
            self.outcomes
                .iter()
                .filter(|(_, outcome)| outcome.keeps_message())
                .map(|(id, _)| id.clone()),
        );
        response
    }
}

/// How many messages of one batch are handled at once: a whole SQS batch (its maximum is
/// 10), so a batch takes as long as its slowest message, not the sum of all of them.
pub const BATCH_CONCURRENCY: usize = 10;

/// Parses and handles each record on its own, up to [`BATCH_CONCURRENCY`] at once; the
/// report lists the records in their batch order. Poison (unknown version, malformed, or a
/// handler's permanent failure) goes to the lane's DLQ at once and is acknowledged; a later
/// release's message (`LANE_MESSAGE_SCHEMA_UNSUPPORTED`) is kept, untouched.
/// The handler gets the record too (receipt handle, receive count).
///
/// Each message is handled inside one `message` span (message id, schedule, run, the
/// invocation's `request_id` when known, and the `attempt` the handler records): the one
/// span a log line about the message needs, so lines need not carry the whole span list.
/// `done` hears of each message as soon as it is finished, before its batch-mates are.
pub async fn process_batch<'r, H, Fut>(
    lane: Lane,
    records: &'r [SqsRecord],
    queue: &dyn LaneQueue,
    request_id: Option<&str>,
    handler: H,
    done: &(dyn Fn(&SqsRecord, &MessageOutcome) + Sync),
) -> BatchReport
where
    H: Fn(LaneMessage, &'r SqsRecord) -> Fut,
    Fut: Future<Output = Result<(), HandlerFailure>>,
{
    // The futures are made first (they start only when polled): a closure mapping a stream
    // would make the batch's future too general to be `Send`.
    let handling: Vec<_> = records
        .iter()
        .map(|record| process_one(lane, record, queue, request_id, &handler, done))
        .collect();
    let outcomes = futures_util::stream::iter(handling)
        .buffered(BATCH_CONCURRENCY)
        .collect()
        .await;
    BatchReport { outcomes }
}

async fn process_one<'r, H, Fut>(
    lane: Lane,
    record: &'r SqsRecord,
    queue: &dyn LaneQueue,
    request_id: Option<&str>,
    handler: &H,
    done: &(dyn Fn(&SqsRecord, &MessageOutcome) + Sync),
) -> (String, MessageOutcome)
where
    H: Fn(LaneMessage, &'r SqsRecord) -> Fut,
    Fut: Future<Output = Result<(), HandlerFailure>>,
{
    let outcome = process_record(lane, record, queue, request_id, handler).await;
    done(record, &outcome);
    (record.message_id.clone(), outcome)
}

async fn process_record<'r, H, Fut>(
    lane: Lane,
    record: &'r SqsRecord,
    queue: &dyn LaneQueue,
    request_id: Option<&str>,
    handler: &H,
) -> MessageOutcome
where
    H: Fn(LaneMessage, &'r SqsRecord) -> Fut,
    Fut: Future<Output = Result<(), HandlerFailure>>,
{
    match LaneMessage::parse(&record.body) {
        Ok(message) => {
            let run = message.run.clone();
            let span = tracing::info_span!(
                "message",
                message_id = %record.message_id,
                schedule = %run.schedule_id,
                run = %run,
                request_id,
                attempt = tracing::field::Empty,
                step = tracing::field::Empty,
            );
            async {
                match handler(message, record).await {
                    Ok(()) => MessageOutcome::Done,
                    Err(HandlerFailure::Retry(reason)) => {
                        tracing::info!(%lane, %reason, "message left for redelivery");
                        MessageOutcome::Retry(reason)
                    }
                    Err(HandlerFailure::Permanent { code, detail }) => {
                        dead_letter(queue, lane, &record.body, code, &detail).await
                    }
                }
            }
            .instrument(span)
            .await
        }
        Err(err) if !err.is_permanent() => {
            // A later release's message: left as it is, for a worker that reads it.
            let detail = err.to_string();
            tracing::warn!(message_id = %record.message_id, %lane, error = %detail, "message of a later release left in its lane");
            MessageOutcome::Retry(detail)
        }
        Err(err) => {
            let detail = err.to_string();
            tracing::warn!(message_id = %record.message_id, %lane, error = %detail, "unreadable message");
            dead_letter(queue, lane, &record.body, err.code().to_string(), &detail).await
        }
    }
}

async fn dead_letter(
    queue: &dyn LaneQueue,
    lane: Lane,
    body: &str,
    code: String,
    detail: &str,
) -> MessageOutcome {
    match queue.dead_letter(lane, body, &code, detail).await {
        Ok(()) => {
            tracing::warn!(%lane, %code, detail, "message sent to the lane's DLQ");
            MessageOutcome::DeadLettered { code }
        }
        Err(e) => {
            tracing::error!(%lane, %code, error = %e, "DLQ send failed; the message is redelivered");
            MessageOutcome::DeadLetterFailed {
                code,
                error: e.to_string(),
            }
        }
    }
}
