//! The SQS event source mapping, played by the test: polls one lane, hands each batch to the
//! worker function as the exact SQS event Lambda builds, and keeps Lambda's
//! `ReportBatchItemFailures` contract:
//!
//! - the messages the answer does not list in `batchItemFailures` are deleted;
//! - the listed ones stay, and come back when their visibility timeout ends (the worker may
//!   have changed it for its backoff);
//! - a function error (or an answer that cannot be read) fails the whole batch: nothing is
//!   deleted;
//! - the queue's redrive policy moves a message to the DLQ after `maxReceiveCount` receives
//!   (the emulator applies it on receive, as SQS does).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName, QueueAttributeName};
use cronledger_aws::lanes::SqsBatchResponse;
use cronledger_aws::SqsLanes;
use cronledger_core::Lane;
use serde_json::{json, Value};

use crate::lock;
use crate::runtime_api::Function;

/// One batch handed to the worker and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub lane: Lane,
    /// `(message id, ApproximateReceiveCount)` of every record, in order.
    pub records: Vec<(String, u32)>,
    /// The bodies, in order.
    pub bodies: Vec<String>,
    /// Listed in `batchItemFailures`: left on the queue.
    pub failed: Vec<String>,
    /// Deleted (acknowledged).
    pub deleted: Vec<String>,
    /// The invocation failed as a whole (function error, timeout): nothing deleted.
    pub function_error: Option<String>,
}

pub struct EventSource {
    sqs: aws_sdk_sqs::Client,
    lanes: SqsLanes,
    lane: Lane,
    queue_url: String,
    queue_arn: String,
    region: String,
    batch_size: i32,
    /// How long one ReceiveMessage long-polls.
    wait: Duration,
    deliveries: Mutex<Vec<Delivery>>,
}

impl EventSource {
    /// The mapping of one lane's queue, with Lambda's default batch size of 10.
    pub async fn new(
        sqs: aws_sdk_sqs::Client,
        lanes: SqsLanes,
        lane: Lane,
    ) -> Result<EventSource, String> {
        let queue_url = lanes.urls(lane).map_err(|e| e.to_string())?.queue.clone();
        let attributes = sqs
            .get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| format!("GetQueueAttributes {queue_url}: {e}"))?;
        let queue_arn = attributes
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn))
            .cloned()
            .ok_or_else(|| format!("no QueueArn for {queue_url}"))?;
        // arn:aws:sqs:REGION:ACCOUNT:NAME
        let region = queue_arn
            .split(':')
            .nth(3)
            .filter(|r| !r.is_empty())
            .unwrap_or("us-east-1")
            .to_string();
        Ok(EventSource {
            sqs,
            lanes,
            lane,
            queue_url,
            queue_arn,
            region,
            batch_size: 10,
            wait: Duration::from_secs(1),
            deliveries: Mutex::new(Vec::new()),
        })
    }

    pub fn with_batch_size(mut self, size: u32) -> EventSource {
        self.batch_size = size.clamp(1, 10) as i32;
        self
    }

    pub fn lane(&self) -> Lane {
        self.lane
    }

    /// Every batch delivered so far.
    pub fn deliveries(&self) -> Vec<Delivery> {
        lock(&self.deliveries).clone()
    }

    /// One poll: receives a batch and, if anything came, delivers it to `worker`.
    pub async fn poll_once(&self, worker: &Function) -> Result<Option<Delivery>, String> {
        let received = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(self.batch_size)
            .wait_time_seconds(self.wait.as_secs() as i32)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| format!("ReceiveMessage {}: {e}", self.queue_url))?;
        let messages = received.messages();
        if messages.is_empty() {
            return Ok(None);
        }
        let event = json!({
            "Records": messages.iter().map(|m| self.record(m)).collect::<Vec<_>>()
        });
        let ids: Vec<String> = messages
            .iter()
            .map(|m| m.message_id().unwrap_or_default().to_string())
            .collect();
        let mut delivery = Delivery {
            lane: self.lane,
            records: messages
                .iter()
                .map(|m| {
                    (
                        m.message_id().unwrap_or_default().to_string(),
                        receive_count(m),
                    )
                })
                .collect(),
            bodies: messages
                .iter()
                .map(|m| m.body().unwrap_or_default().to_string())
                .collect(),
            failed: Vec::new(),
            deleted: Vec::new(),
            function_error: None,
        };
        let failed = match worker.invoke(event).await {
            Ok(answer) => failures(&answer, &ids),
            Err(e) => Err(e.to_string()),
        };
        match failed {
            Ok(failed) => {
                for (message, id) in messages.iter().zip(&ids) {
                    if failed.contains(id) {
                        delivery.failed.push(id.clone());
                        continue;
                    }
                    let receipt = message.receipt_handle().unwrap_or_default();
                    self.lanes
                        .delete(self.lane, receipt)
                        .await
                        .map_err(|e| format!("DeleteMessage {id}: {e}"))?;
                    delivery.deleted.push(id.clone());
                }
            }
            Err(error) => {
                delivery.failed = ids;
                delivery.function_error = Some(error);
            }
        }
        lock(&self.deliveries).push(delivery.clone());
        Ok(Some(delivery))
    }

    /// Polls until `stop` turns true, like the mapping does while enabled. A batch being
    /// delivered is finished first (at most one long poll and one invocation later).
    pub fn spawn(
        self: Arc<Self>,
        worker: Arc<Function>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while !*stop.borrow() {
                if let Err(e) = self.poll_once(&worker).await {
                    println!("event source of {}: {e}", self.lane);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        })
    }

    /// The record Lambda builds for one message.
    fn record(&self, m: &Message) -> Value {
        let attributes: BTreeMap<String, String> = m
            .attributes()
            .map(|a| {
                a.iter()
                    .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let message_attributes: serde_json::Map<String, Value> = m
            .message_attributes()
            .map(|attrs| {
                attrs
                    .iter()
                    .map(|(name, v)| {
                        (
                            name.clone(),
                            json!({
                                "stringValue": v.string_value(),
                                "stringListValues": [],
                                "binaryListValues": [],
                                "dataType": v.data_type(),
                            }),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        json!({
            "messageId": m.message_id().unwrap_or_default(),
            "receiptHandle": m.receipt_handle().unwrap_or_default(),
            "body": m.body().unwrap_or_default(),
            "attributes": attributes,
            "messageAttributes": message_attributes,
            "md5OfBody": m.md5_of_body().unwrap_or_default(),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": self.region,
        })
    }
}

/// The ids an answer lists in `batchItemFailures`. An answer Lambda cannot read, or one
/// naming a message that was not in the batch, fails the whole batch.
fn failures(answer: &Value, ids: &[String]) -> Result<BTreeSet<String>, String> {
    if answer.is_null() {
        return Ok(BTreeSet::new());
    }
    let response: SqsBatchResponse = serde_json::from_value(answer.clone())
        .map_err(|e| format!("unreadable batch response {answer}: {e}"))?;
    let failed: BTreeSet<String> = response
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect();
    match failed.iter().find(|id| !ids.contains(id)) {
        Some(unknown) => Err(format!(
            "batchItemFailures names {unknown}, not in the batch"
        )),
        None => Ok(failed),
    }
}

fn receive_count(m: &Message) -> u32 {
    m.attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}
