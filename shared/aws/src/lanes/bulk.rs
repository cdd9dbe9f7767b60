//! The SQS batch calls (up to 10 entries a request): an event source deletes what a batch
//! finished, and sends or uncovers many messages, with one request per 10 instead of one
//! each. SQS answers a batch entry by entry; a failed entry is reported as an error naming
//! its code, the entries that succeeded stay done.

use std::collections::BTreeMap;
use std::time::Duration;

use cronledger_core::Lane;

use aws_sdk_sqs::types::{
    BatchResultErrorEntry, ChangeMessageVisibilityBatchRequestEntry,
    DeleteMessageBatchRequestEntry, SendMessageBatchRequestEntry,
};

use crate::error::LaneError;
use crate::lanes::envelope::LaneMessage;
use crate::lanes::sqs::{whole_seconds, SqsLanes, MAX_DELAY};
use crate::meter::metered;

/// SQS's limit on entries per batch request.
const BATCH: usize = 10;

impl SqsLanes {
    /// Sends messages of one lane at once, undelayed; returns their message ids in order,
    /// or the first entry's failure.
    pub async fn send_batch(
        &self,
        lane: Lane,
        messages: &[LaneMessage],
    ) -> Result<Vec<String>, LaneError> {
        debug_assert!(
            messages.iter().all(|m| m.lane == lane),
            "one lane's messages"
        );
        let undelayed: Vec<(LaneMessage, Duration)> = messages
            .iter()
            .map(|m| (m.clone(), Duration::ZERO))
            .collect();
        self.send_batched(&undelayed).await.into_iter().collect()
    }

    /// `SendMessageBatch` for messages of any lanes: grouped by lane (one queue each), 10
    /// entries a request, each with its own delay. One result per message, in order: an
    /// entry SQS refused, or every entry of a request that failed as a whole, is an error.
    pub(super) async fn send_batched(
        &self,
        messages: &[(LaneMessage, Duration)],
    ) -> Vec<Result<String, LaneError>> {
        let mut sent: Vec<Option<Result<String, LaneError>>> = vec![None; messages.len()];
        let mut by_lane: BTreeMap<Lane, Vec<usize>> = BTreeMap::new();
        for (i, (message, _)) in messages.iter().enumerate() {
            by_lane.entry(message.lane).or_default().push(i);
        }
        for (lane, indexes) in by_lane {
            for chunk in indexes.chunks(BATCH) {
                let results = self.send_chunk(lane, messages, chunk).await;
                for (&i, result) in chunk.iter().zip(results) {
                    sent[i] = Some(result);
                }
            }
        }
        sent.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(unsent())))
            .collect()
    }

    /// One `SendMessageBatch` of up to 10 messages of one lane (`chunk` indexes
    /// `messages`); the entry ids are the positions in the chunk.
    async fn send_chunk(
        &self,
        lane: Lane,
        messages: &[(LaneMessage, Duration)],
        chunk: &[usize],
    ) -> Vec<Result<String, LaneError>> {
        let whole = |e: LaneError| -> Vec<Result<String, LaneError>> {
            chunk.iter().map(|_| Err(e.clone())).collect()
        };
        let url = match self.urls(lane) {
            Ok(urls) => &urls.queue,
            Err(e) => return whole(e),
        };
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(id, &i)| {
                let (message, delay) = &messages[i];
                SendMessageBatchRequestEntry::builder()
                    .id(id.to_string())
                    .message_body(message.to_body())
                    .delay_seconds(whole_seconds((*delay).min(MAX_DELAY)) as i32)
                    .build()
                    .map_err(|e| LaneError::request("SendMessageBatch", e))
            })
            .collect::<Result<Vec<_>, _>>();
        let entries = match entries {
            Ok(entries) => entries,
            Err(e) => return whole(e),
        };
        let call = self
            .client
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send();
        let out = match metered("send_batch", call).await {
            Ok(out) => out,
            Err(e) => return whole(LaneError::request("SendMessageBatch", e)),
        };
        let mut results: Vec<Result<String, LaneError>> =
            chunk.iter().map(|_| Err(unsent())).collect();
        for ok in out.successful() {
            if let Some(slot) = ok
                .id()
                .parse::<usize>()
                .ok()
                .and_then(|i| results.get_mut(i))
            {
                *slot = Ok(ok.message_id().to_string());
            }
        }
        for failed in out.failed() {
            if let Some(slot) = failed
                .id()
                .parse::<usize>()
                .ok()
                .and_then(|i| results.get_mut(i))
            {
                *slot = Err(LaneError::Request {
                    operation: "SendMessageBatch",
                    message: format!("{}: {}", failed.code(), failed.message().unwrap_or("")),
                });
            }
        }
        results
    }

    /// Deletes received messages of one lane.
    pub async fn delete_batch(&self, lane: Lane, receipts: &[String]) -> Result<(), LaneError> {
        self.per_receipt(lane, receipts, ReceiptOp::Delete).await
    }

    /// Makes received messages of one lane visible again at once (visibility timeout 0).
    pub async fn show_batch(&self, lane: Lane, receipts: &[String]) -> Result<(), LaneError> {
        self.per_receipt(lane, receipts, ReceiptOp::Show).await
    }

    async fn per_receipt(
        &self,
        lane: Lane,
        receipts: &[String],
        op: ReceiptOp,
    ) -> Result<(), LaneError> {
        let url = &self.urls(lane)?.queue;
        let operation = op.operation();
        for chunk in receipts.chunks(BATCH) {
            let ids = (0..chunk.len()).map(|i| i.to_string());
            let failed = match op {
                ReceiptOp::Delete => {
                    let entries = ids
                        .zip(chunk)
                        .map(|(id, r)| {
                            DeleteMessageBatchRequestEntry::builder()
                                .id(id)
                                .receipt_handle(r)
                                .build()
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| LaneError::request(operation, e))?;
                    let call = self
                        .client
                        .delete_message_batch()
                        .queue_url(url)
                        .set_entries(Some(entries))
                        .send();
                    let out = metered("delete_batch", call)
                        .await
                        .map_err(|e| LaneError::request(operation, e))?;
                    out.failed().to_vec()
                }
                ReceiptOp::Show => {
                    let entries = ids
                        .zip(chunk)
                        .map(|(id, r)| {
                            ChangeMessageVisibilityBatchRequestEntry::builder()
                                .id(id)
                                .receipt_handle(r)
                                .visibility_timeout(0)
                                .build()
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| LaneError::request(operation, e))?;
                    let call = self
                        .client
                        .change_message_visibility_batch()
                        .queue_url(url)
                        .set_entries(Some(entries))
                        .send();
                    let out = metered("show_batch", call)
                        .await
                        .map_err(|e| LaneError::request(operation, e))?;
                    out.failed().to_vec()
                }
            };
            refuse_failures(operation, &failed)?;
        }
        Ok(())
    }
}

/// The batch calls that act on received messages by receipt handle.
#[derive(Clone, Copy)]
enum ReceiptOp {
    Delete,
    Show,
}

impl ReceiptOp {
    fn operation(self) -> &'static str {
        match self {
            ReceiptOp::Delete => "DeleteMessageBatch",
            ReceiptOp::Show => "ChangeMessageVisibilityBatch",
        }
    }
}

/// An entry SQS's answer did not mention (neither sent nor failed).
fn unsent() -> LaneError {
    LaneError::Request {
        operation: "SendMessageBatch",
        message: "the entry is missing from the answer".into(),
    }
}

fn refuse_failures(
    operation: &'static str,
    failed: &[BatchResultErrorEntry],
) -> Result<(), LaneError> {
    match failed.first() {
        None => Ok(()),
        Some(first) => Err(LaneError::Request {
            operation,
            message: format!(
                "{} of the batch's entries failed, e.g. {}: {}",
                failed.len(),
                first.code(),
                first.message().unwrap_or("")
            ),
        }),
    }
}
