//! Turns one SQS batch into per-message results (Lambda's partial batch response), so one
//! poison message never fails or delays its batch-mates.

use std::future::Future;
use tracing::Instrument;

use cronledger_core::Lane;
use serde::{Deserialize, Serialize};

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

/// Lambda's `SQSBatchResponse` shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchResponse {
    pub batch_item_failures: Vec<BatchItemFailure>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchItemFailure {
    pub item_identifier: String,
}

/// Every message of a batch with what happened to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    pub outcomes: Vec<(String, MessageOutcome)>,
}

impl BatchReport {
    pub fn response(&self) -> BatchResponse {
        BatchResponse {
            batch_item_failures: self
                .outcomes
                .iter()
                .filter(|(_, outcome)| outcome.keeps_message())
                .map(|(id, _)| BatchItemFailure {
                    item_identifier: id.clone(),
                })
                .collect(),
        }
    }
}

/// Parses and handles each record on its own. Poison (unknown version, malformed, or a
/// handler's permanent failure) goes to the lane's DLQ at once and is acknowledged.
/// The handler gets the record too (receipt handle, receive count).
pub async fn process_batch<'r, H, Fut>(
    lane: Lane,
    records: &'r [SqsRecord],
    queue: &dyn LaneQueue,
    handler: H,
) -> BatchReport
where
    H: Fn(LaneMessage, &'r SqsRecord) -> Fut,
    Fut: Future<Output = Result<(), HandlerFailure>>,
{
    let mut report = BatchReport::default();
    for record in records {
        let outcome = match LaneMessage::parse(&record.body) {
            Ok(message) => {
                let run = message.run.clone();
                let span = tracing::info_span!(
                    "message",
                    message_id = %record.message_id,
                    schedule = %run.schedule_id,
                    run = %run,
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
            Err(err) => {
                let detail = err.to_string();
                tracing::warn!(message_id = %record.message_id, %lane, error = %detail, "unreadable message");
                dead_letter(queue, lane, &record.body, err.code().to_string(), &detail).await
            }
        };
        report.outcomes.push((record.message_id.clone(), outcome));
    }
    report
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
