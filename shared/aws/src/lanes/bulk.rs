//! The SQS batch calls (up to 10 entries a request): an event source deletes what a batch
//! finished, and sends or uncovers many messages, with one request per 10 instead of one
//! each. SQS answers a batch entry by entry; a failed entry is reported as an error naming
//! its code, the entries that succeeded stay done.

use cronledger_core::Lane;

use aws_sdk_sqs::types::{
    BatchResultErrorEntry, ChangeMessageVisibilityBatchRequestEntry,
    DeleteMessageBatchRequestEntry, SendMessageBatchRequestEntry,
};

use crate::error::LaneError;
use crate::lanes::envelope::LaneMessage;
use crate::lanes::sqs::SqsLanes;
use crate::meter::metered;

/// SQS's limit on entries per batch request.
const BATCH: usize = 10;

impl SqsLanes {
    /// Sends messages of one lane at once, undelayed; returns their message ids in order.
    pub async fn send_batch(
        &self,
        lane: Lane,
        messages: &[LaneMessage],
    ) -> Result<Vec<String>, LaneError> {
        let url = &self.urls(lane)?.queue;
        let mut ids = Vec::with_capacity(messages.len());
        for chunk in messages.chunks(BATCH) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(m.to_body())
                        .build()
                        .map_err(|e| LaneError::request("SendMessageBatch", e))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = metered("send_batch", async {
                self.client
                    .send_message_batch()
                    .queue_url(url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(|e| LaneError::request("SendMessageBatch", e))
            })
            .await?;
            refuse_failures("SendMessageBatch", out.failed())?;
            let mut sent: Vec<(usize, String)> = out
                .successful()
                .iter()
                .map(|e| {
                    (
                        e.id().parse().unwrap_or(usize::MAX),
                        e.message_id().to_string(),
                    )
                })
                .collect();
            sent.sort();
            ids.extend(sent.into_iter().map(|(_, id)| id));
        }
        Ok(ids)
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
