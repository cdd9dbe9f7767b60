//! The five lanes on SQS: one queue per lane, each with its own dead-letter queue that SQS
//! moves a message to after `max_receive_count` receives.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName};
use aws_sdk_sqs::Client;
use cronledger_core::Lane;

use crate::error::LaneError;
use crate::lanes::envelope::LaneMessage;
use crate::meter::metered;

/// Message attributes a dead-lettered poison message carries, saying why.
pub const ERROR_CODE_ATTRIBUTE: &str = "cronledger-error-code";
pub const ERROR_DETAIL_ATTRIBUTE: &str = "cronledger-error-detail";

/// SQS caps a message delay at 15 minutes.
pub(super) const MAX_DELAY: Duration = Duration::from_secs(900);

/// What the functions need from the lanes.
#[async_trait]
pub trait LaneQueue: Send + Sync {
    /// Sends a message to its lane, visible after `delay` (capped at 15 minutes).
    /// Returns the SQS message id (the run's `job_id`).
    async fn send(&self, message: &LaneMessage, delay: Duration) -> Result<String, LaneError>;

    /// Sends many messages, each to its lane and visible after its delay; one result per
    /// message, in order, so a failed entry fails alone (its sender handles it as a failed
    /// [`Self::send`]). One by one unless the lanes batch them (SQS: 10 a request).
    async fn send_many(
        &self,
        messages: &[(LaneMessage, Duration)],
    ) -> Vec<Result<String, LaneError>> {
        let mut sent = Vec::with_capacity(messages.len());
        for (message, delay) in messages {
            sent.push(self.send(message, *delay).await);
        }
        sent
    }

    /// Puts a message that can never be processed straight into the lane's DLQ, with the
    /// reason as message attributes, instead of letting it be received again and again.
    async fn dead_letter(
        &self,
        lane: Lane,
        body: &str,
        code: &str,
        detail: &str,
    ) -> Result<(), LaneError>;

    /// Hides a received message for `timeout` more (heartbeats, retry backoff).
    async fn extend_visibility(
        &self,
        lane: Lane,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), LaneError>;
}

/// Redrive and visibility settings for creating the queues (the template has the same).
#[derive(Debug, Clone, Copy)]
pub struct LaneSettings {
    pub max_receive_count: u32,
    pub visibility_timeout: Duration,
}

impl Default for LaneSettings {
    fn default() -> Self {
        LaneSettings {
            max_receive_count: 5,
            visibility_timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneUrls {
    pub queue: String,
    pub dlq: String,
}

/// A message as received (for the local poller and tests; Lambda hands these over itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    pub receive_count: u32,
    pub attributes: BTreeMap<String, String>,
}

/// A queue's approximate message counts (`GetQueueAttributes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Waiting to be received.
    pub visible: u64,
    /// Received and not yet deleted.
    pub in_flight: u64,
    /// Sent with a delay that has not passed.
    pub delayed: u64,
}

/// Queue and DLQ names of a lane under a prefix: `{prefix}-{lane}` and `{prefix}-{lane}-dlq`.
pub fn queue_names(prefix: &str, lane: Lane) -> (String, String) {
    let queue = format!("{prefix}-{lane}");
    let dlq = format!("{queue}-dlq");
    (queue, dlq)
}

#[derive(Debug, Clone)]
pub struct SqsLanes {
    pub(super) client: Client,
    urls: BTreeMap<Lane, LaneUrls>,
}

impl SqsLanes {
    pub fn new(client: Client, urls: BTreeMap<Lane, LaneUrls>) -> SqsLanes {
        SqsLanes { client, urls }
    }

    /// Finds the existing queues of every lane under `prefix`.
    pub async fn resolve(client: Client, prefix: &str) -> Result<SqsLanes, LaneError> {
        // Concurrently: this runs in every function's init, where each round trip is cold-start
        // time (ten lookups one after another were most of it).
        metered("resolve_lanes", async {
            let lookups = Lane::ALL.iter().map(|&lane| {
                let (queue, dlq) = queue_names(prefix, lane);
                let client = &client;
                async move {
                    let (queue, dlq) = futures_util::future::try_join(
                        queue_url(client, &queue),
                        queue_url(client, &dlq),
                    )
                    .await?;
                    Ok::<_, LaneError>((lane, LaneUrls { queue, dlq }))
                }
            });
            let urls: BTreeMap<Lane, LaneUrls> = futures_util::future::try_join_all(lookups)
                .await?
                .into_iter()
                .collect();
            Ok(SqsLanes { client, urls })
        })
        .await
    }

    /// Creates every lane's DLQ and queue under `prefix` (local stacks and tests; deployed
    /// stacks get them from the template).
    pub async fn create(
        client: Client,
        prefix: &str,
        settings: LaneSettings,
    ) -> Result<SqsLanes, LaneError> {
        metered("create_lanes", async {
            let mut urls = BTreeMap::new();
            for &lane in Lane::ALL {
                let (queue, dlq) = queue_names(prefix, lane);
                let dlq_url = create_queue(&client, &dlq, BTreeMap::new()).await?;
                let redrive = serde_json::json!({
                    "deadLetterTargetArn": queue_arn(&client, &dlq_url).await?,
                    "maxReceiveCount": settings.max_receive_count.to_string(),
                });
                let attributes = BTreeMap::from([
                    (QueueAttributeName::RedrivePolicy, redrive.to_string()),
                    (
                        QueueAttributeName::VisibilityTimeout,
                        settings.visibility_timeout.as_secs().to_string(),
                    ),
                ]);
                let queue_url = create_queue(&client, &queue, attributes).await?;
                urls.insert(
                    lane,
                    LaneUrls {
                        queue: queue_url,
                        dlq: dlq_url,
                    },
                );
            }
            Ok(SqsLanes { client, urls })
        })
        .await
    }

    pub async fn delete_all(&self) -> Result<(), LaneError> {
        metered("delete_lanes", async {
            for urls in self.urls.values() {
                for url in [&urls.queue, &urls.dlq] {
                    self.client
                        .delete_queue()
                        .queue_url(url)
                        .send()
                        .await
                        .map_err(|e| LaneError::request("DeleteQueue", e))?;
                }
            }
            Ok(())
        })
        .await
    }

    pub fn urls(&self, lane: Lane) -> Result<&LaneUrls, LaneError> {
        self.urls
            .get(&lane)
            .ok_or_else(|| LaneError::NotConfigured(lane.to_string()))
    }

    /// Receives up to `max` messages from a lane's queue (or its DLQ).
    pub async fn receive(
        &self,
        lane: Lane,
        from_dlq: bool,
        max: u32,
        wait: Duration,
    ) -> Result<Vec<Received>, LaneError> {
        let urls = self.urls(lane)?;
        let url = if from_dlq { &urls.dlq } else { &urls.queue };
        metered("receive", async {
            let out = self
                .client
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(max.clamp(1, 10) as i32)
                .wait_time_seconds(wait.as_secs().min(20) as i32)
                .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
                .message_attribute_names("All")
                .send()
                .await
                .map_err(|e| LaneError::request("ReceiveMessage", e))?;
            Ok(out.messages().iter().map(received).collect())
        })
        .await
    }

    /// The approximate depth of a lane's queue (or its DLQ): one `GetQueueAttributes`.
    pub async fn depth(&self, lane: Lane, dlq: bool) -> Result<QueueDepth, LaneError> {
        let urls = self.urls(lane)?;
        let url = if dlq { &urls.dlq } else { &urls.queue };
        metered("depth", async {
            let out = self
                .client
                .get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
                .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
                .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
                .send()
                .await
                .map_err(|e| LaneError::request("GetQueueAttributes", e))?;
            let count = |name: QueueAttributeName| {
                out.attributes()
                    .and_then(|a| a.get(&name))
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            Ok(QueueDepth {
                visible: count(QueueAttributeName::ApproximateNumberOfMessages),
                in_flight: count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
                delayed: count(QueueAttributeName::ApproximateNumberOfMessagesDelayed),
            })
        })
        .await
    }

    pub async fn delete(&self, lane: Lane, receipt_handle: &str) -> Result<(), LaneError> {
        let url = &self.urls(lane)?.queue;
        metered("delete", async {
            self.client
                .delete_message()
                .queue_url(url)
                .receipt_handle(receipt_handle)
                .send()
                .await
                .map_err(|e| LaneError::request("DeleteMessage", e))?;
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl LaneQueue for SqsLanes {
    async fn send(&self, message: &LaneMessage, delay: Duration) -> Result<String, LaneError> {
        let url = &self.urls(message.lane)?.queue;
        metered("send", async {
            let out = self
                .client
                .send_message()
                .queue_url(url)
                .message_body(message.to_body())
                .delay_seconds(whole_seconds(delay.min(MAX_DELAY)) as i32)
                .send()
                .await
                .map_err(|e| LaneError::request("SendMessage", e))?;
            Ok(out.message_id().unwrap_or_default().to_string())
        })
        .await
    }

    async fn send_many(
        &self,
        messages: &[(LaneMessage, Duration)],
    ) -> Vec<Result<String, LaneError>> {
        self.send_batched(messages).await
    }

    async fn dead_letter(
        &self,
        lane: Lane,
        body: &str,
        code: &str,
        detail: &str,
    ) -> Result<(), LaneError> {
        let url = &self.urls(lane)?.dlq;
        // SQS refuses empty bodies; keep the evidence readable.
        let body = if body.is_empty() { "<empty>" } else { body };
        let detail: String = detail.chars().take(1024).collect();
        metered("dead_letter", async {
            self.client
                .send_message()
                .queue_url(url)
                .message_body(body)
                .message_attributes(ERROR_CODE_ATTRIBUTE, string_attribute(code)?)
                .message_attributes(ERROR_DETAIL_ATTRIBUTE, string_attribute(&detail)?)
                .send()
                .await
                .map_err(|e| LaneError::request("SendMessage", e))?;
            Ok(())
        })
        .await
    }

    /// Hides a received message for `timeout` more (heartbeats, retry backoff).
    async fn extend_visibility(
        &self,
        lane: Lane,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), LaneError> {
        let url = &self.urls(lane)?.queue;
        metered("extend_visibility", async {
            self.client
                .change_message_visibility()
                .queue_url(url)
                .receipt_handle(receipt_handle)
                .visibility_timeout(whole_seconds(timeout).min(43_200) as i32)
                .send()
                .await
                .map_err(|e| LaneError::request("ChangeMessageVisibility", e))?;
            Ok(())
        })
        .await
    }
}

/// SQS takes whole seconds: round up, so a backoff or a delay is never cut short (0.7 s
/// must not become "visible now", and a run delayed to its second must not start before it).
pub(super) fn whole_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn string_attribute(value: &str) -> Result<MessageAttributeValue, LaneError> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(if value.is_empty() { "-" } else { value })
        .build()
        .map_err(|e| LaneError::request("MessageAttributeValue", e))
}

fn received(m: &aws_sdk_sqs::types::Message) -> Received {
    let receive_count = m
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let attributes = m
        .message_attributes()
        .map(|attrs| {
            attrs
                .iter()
                .filter_map(|(k, v)| v.string_value().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Received {
        message_id: m.message_id().unwrap_or_default().to_string(),
        receipt_handle: m.receipt_handle().unwrap_or_default().to_string(),
        body: m.body().unwrap_or_default().to_string(),
        receive_count,
        attributes,
    }
}

async fn queue_url(client: &Client, name: &str) -> Result<String, LaneError> {
    let out = client
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
        .map_err(|e| LaneError::request("GetQueueUrl", e))?;
    out.queue_url()
        .map(str::to_string)
        .ok_or_else(|| LaneError::NotConfigured(name.to_string()))
}

async fn create_queue(
    client: &Client,
    name: &str,
    attributes: BTreeMap<QueueAttributeName, String>,
) -> Result<String, LaneError> {
    let out = client
        .create_queue()
        .queue_name(name)
        .set_attributes((!attributes.is_empty()).then(|| attributes.into_iter().collect()))
        .send()
        .await
        .map_err(|e| LaneError::request("CreateQueue", e))?;
    out.queue_url()
        .map(str::to_string)
        .ok_or_else(|| LaneError::NotConfigured(name.to_string()))
}

async fn queue_arn(client: &Client, url: &str) -> Result<String, LaneError> {
    let out = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| LaneError::request("GetQueueAttributes", e))?;
    out.attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .cloned()
        .ok_or_else(|| LaneError::NotConfigured(format!("no ARN for {url}")))
}
