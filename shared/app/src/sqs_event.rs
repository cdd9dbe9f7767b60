//! The SQS event Lambda's event source mapping delivers (`aws_lambda_events`' types), and the
//! lane it came from.

use cronledger_aws::lanes::queue_names;
use cronledger_core::Lane;

pub use cronledger_aws::lanes::{SqsBatchResponse, SqsEvent, SqsMessage};

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
    use cronledger_aws::lanes::SqsRecord;

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
        let record = SqsRecord::from(&event.records[0]);
        assert_eq!(
            (record.message_id.as_str(), record.receive_count),
            ("m1", 3)
        );
        let arn = event.records[0].event_source_arn.as_deref().unwrap();
        assert_eq!(lane_of_queue(arn, "prod-cronledger"), Some(Lane::Realtime));
        assert_eq!(
            lane_of_queue("arn:aws:sqs:r:a:other-queue", "prod-cronledger"),
            None
        );
    }
}
