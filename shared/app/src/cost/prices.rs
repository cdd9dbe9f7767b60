//! The unit prices the cost model uses: AWS's published on-demand prices in us-east-1, past
//! every free tier (a fleet at scale is past them). Each carries its unit and its source, and
//! `cronledger simulate` prints the table beside the figures it priced.

use serde::Serialize;

/// One unit price.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Price {
    pub usd: f64,
    pub unit: &'static str,
    pub source: &'static str,
}

/// When the prices below were read from their pages.
pub const PRICES_AS_OF: &str = "2026-12-01";

const DYNAMODB: &str =
    "https://aws.amazon.com/dynamodb/pricing/on-demand/ (us-east-1; on-demand halved 2024-11-01)";
const DYNAMODB_PROVISIONED: &str =
    "https://aws.amazon.com/dynamodb/pricing/provisioned/ (us-east-1, standard table class)";
const SQS: &str = "https://aws.amazon.com/sqs/pricing/ (standard queues, us-east-1)";
const LAMBDA: &str = "https://aws.amazon.com/lambda/pricing/ (us-east-1, arm64, first tier)";
const CLOUDWATCH: &str =
    "https://aws.amazon.com/cloudwatch/pricing/ (us-east-1, standard logs, first tier)";
const SCHEDULER: &str = "https://aws.amazon.com/eventbridge/pricing/ (Scheduler, us-east-1)";

/// The price table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prices {
    pub as_of: &'static str,
    pub dynamodb_write_request_unit: Price,
    pub dynamodb_read_request_unit: Price,
    pub dynamodb_storage: Price,
    /// A write capacity unit provisioned for an hour (table or index).
    pub dynamodb_provisioned_wcu_hour: Price,
    /// A read capacity unit provisioned for an hour (table or index).
    pub dynamodb_provisioned_rcu_hour: Price,
    pub sqs_request: Price,
    pub lambda_request: Price,
    pub lambda_gb_second: Price,
    pub logs_ingestion: Price,
    pub logs_storage: Price,
    pub custom_metric: Price,
    pub alarm: Price,
    pub scheduler_invocation: Price,
}

impl Prices {
    /// us-east-1's published prices.
    pub fn us_east_1() -> Prices {
        let price = |usd, unit, source| Price { usd, unit, source };
        Prices {
            as_of: PRICES_AS_OF,
            dynamodb_write_request_unit: price(0.625e-6, "write request unit", DYNAMODB),
            dynamodb_read_request_unit: price(0.125e-6, "read request unit", DYNAMODB),
            dynamodb_storage: price(0.25, "GB-month", DYNAMODB),
            dynamodb_provisioned_wcu_hour: price(0.00065, "WCU-hour", DYNAMODB_PROVISIONED),
            dynamodb_provisioned_rcu_hour: price(0.00013, "RCU-hour", DYNAMODB_PROVISIONED),
            sqs_request: price(0.40e-6, "request (64 KB chunk)", SQS),
            lambda_request: price(0.20e-6, "invocation", LAMBDA),
            lambda_gb_second: price(0.0000133334, "GB-second", LAMBDA),
            logs_ingestion: price(0.50, "GB ingested", CLOUDWATCH),
            logs_storage: price(0.03, "GB-month stored", CLOUDWATCH),
            custom_metric: price(0.30, "metric-month (pro-rated hourly)", CLOUDWATCH),
            alarm: price(0.10, "standard alarm-month", CLOUDWATCH),
            scheduler_invocation: price(1.00e-6, "invocation", SCHEDULER),
        }
    }
}
