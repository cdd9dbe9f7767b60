//! An SNS topic of its own for a test, with SQS queues subscribed to it (the envelope kept:
//! raw message delivery off), all deleted on drop.

use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use cronledger_aws::AwsClients;
use serde_json::Value;

use crate::{cleanup, clients, unique_name};

pub struct TestTopic {
    pub clients: AwsClients,
    pub arn: String,
    queues: Vec<String>,
}

/// One SNS notification as an SQS subscriber receives it (the JSON envelope).
#[derive(Debug, Clone)]
pub struct Delivered {
    pub subject: Option<String>,
    /// The message body, parsed as JSON.
    pub body: Value,
    /// Message attributes by name: their `Value`.
    pub attributes: serde_json::Map<String, Value>,
}

impl Delivered {
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.get(name).and_then(Value::as_str)
    }
}

impl TestTopic {
    pub async fn new() -> TestTopic {
        let clients = clients().await;
        let name = unique_name("cl-alerts");
        let arn = clients
            .sns
            .create_topic()
            .name(&name)
            .send()
            .await
            .expect("creating the test topic")
            .topic_arn
            .expect("a topic ARN");
        TestTopic {
            clients,
            arn,
            queues: Vec::new(),
        }
    }

    /// A fresh queue subscribed to the topic, through `filter_policy` (JSON) when given.
    /// Returns the queue's URL.
    pub async fn subscribe_queue(&mut self, filter_policy: Option<&str>) -> String {
        let sqs = &self.clients.sqs;
        let url = sqs
            .create_queue()
            .queue_name(unique_name("cl-alerts-sub"))
            .send()
            .await
            .expect("creating the subscriber queue")
            .queue_url
            .expect("a queue URL");
        self.queues.push(url.clone());
        let arn = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .expect("the queue's attributes")
            .attributes
            .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
            .expect("a queue ARN");
        let mut subscribe = self
            .clients
            .sns
            .subscribe()
            .topic_arn(&self.arn)
            .protocol("sqs")
            .endpoint(arn)
            .attributes("RawMessageDelivery", "false");
        if let Some(policy) = filter_policy {
            subscribe = subscribe.attributes("FilterPolicy", policy);
        }
        subscribe.send().await.expect("subscribing the queue");
        url
    }

    /// The notifications on `queue`: waits until `expected` arrived or `wait` passed, then
    /// reads once more briefly so that extra ones are seen too.
    pub async fn received(&self, queue: &str, expected: usize, wait: Duration) -> Vec<Delivered> {
        let deadline = Instant::now() + wait;
        let mut delivered = Vec::new();
        loop {
            let enough = delivered.len() >= expected;
            let out = self
                .clients
                .sqs
                .receive_message()
                .queue_url(queue)
                .max_number_of_messages(10)
                .wait_time_seconds(if enough { 0 } else { 1 })
                .send()
                .await
                .expect("receiving from the subscriber queue");
            let batch = out.messages.unwrap_or_default();
            let empty = batch.is_empty();
            for message in batch {
                let body = message.body.expect("a message body");
                delivered.push(envelope(&body));
            }
            if (enough && empty) || Instant::now() >= deadline {
                return delivered;
            }
        }
    }
}

fn envelope(text: &str) -> Delivered {
    let envelope: Value = serde_json::from_str(text).expect("an SNS envelope");
    let message = envelope["Message"].as_str().expect("a Message string");
    let attributes = envelope["MessageAttributes"]
        .as_object()
        .map(|attributes| {
            attributes
                .iter()
                .map(|(name, v)| (name.clone(), v["Value"].clone()))
                .collect()
        })
        .unwrap_or_default();
    Delivered {
        subject: envelope["Subject"].as_str().map(str::to_string),
        body: serde_json::from_str(message).expect("the message is JSON"),
        attributes,
    }
}

impl Drop for TestTopic {
    fn drop(&mut self) {
        let (arn, queues) = (self.arn.clone(), self.queues.clone());
        cleanup(move |clients| async move {
            let _ = clients.sns.delete_topic().topic_arn(arn).send().await;
            for queue in queues {
                let _ = clients.sqs.delete_queue().queue_url(queue).send().await;
            }
        });
    }
}
