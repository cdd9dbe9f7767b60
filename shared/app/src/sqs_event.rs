//! The SQS event Lambda's event source mapping delivers, reduced to what the worker reads.

use cronledger_aws::lanes::queue_names;
use cronledger_aws::lanes::SqsRecord;
use cronledger_core::Lane;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct SqsEvent {
    #[serde(rename = "Records", default)]
    pub records: Vec<SqsEventRecord>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SqsEventRecord {
    #[serde(rename = "messageId")]
    pub message_id: String,
    #[serde(rename = "receiptHandle", default)]
    pub receipt_handle: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub attributes: SqsAttributes,
    #[serde(rename = "eventSourceARN", default)]
    pub event_source_arn: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct SqsAttributes {
    #[serde(rename = "ApproximateReceiveCount", default)]
    pub approximate_receive_count: Option<String>,
}

impl SqsEventRecord {
    pub fn to_record(&self) -> SqsRecord {
        SqsRecord {
            message_id: self.message_id.clone(),
            receipt_handle: self.receipt_handle.clone(),
            body: self.body.clone(),
            receive_count: self
                .attributes
                .approximate_receive_count
                .as_deref()
                .and_then(|c| c.parse().ok())
                .unwrap_or(1),
        }
    }
}

/// The lane a queue belongs to, from its ARN (`arn:aws:sqs:region:account:{prefix}-{lane}`).
/// The lane comes from the queue, not the message, so an unreadable message still reaches
/// the right DLQ.
pub fn lane_of_queue(arn: &str, prefix: &str) -> Option<Lane> {
    let name = arn.rsplit(':').next()?;
    Lane::ALL
        .iter()
        .copied()
        .find(|&lane| queue_names(prefix, lane).0 == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_real_event_and_its_lane() {
        let event: SqsEvent = serde_json::from_str(
            r#"{"Records":[{"messageId":"m1","receiptHandle":"rh","body":"{}",
            "attributes":{"ApproximateReceiveCount":"3","SentTimestamp":"1"},
            "messageAttributes":{},"md5OfBody":"x","eventSource":"aws:sqs",
            "eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:prod-cronledger-realtime",
            "awsRegion":"us-east-1"}]}"#,
        )
        .unwrap();
        let record = event.records[0].to_record();
        assert_eq!(record.receive_count, 3);
        assert_eq!(
            lane_of_queue(&event.records[0].event_source_arn, "prod-cronledger"),
            Some(Lane::Realtime)
        );
        assert_eq!(
            lane_of_queue("arn:aws:sqs:r:a:other-queue", "prod-cronledger"),
            None
        );
    }
}
