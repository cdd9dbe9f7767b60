//! What the reconciler reads from outside the ledger, behind small traits so that tests and
//! the simulator can fake it: queue depths and CloudWatch alarms (the catch-up pause
//! conditions), and the ticker's own EventBridge Scheduler schedules.

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_cloudwatch::types::StateValue;
use aws_sdk_scheduler::operation::get_schedule::GetScheduleError;
use aws_sdk_scheduler::types::ScheduleState;
use cronledger_aws::SqsLanes;
use cronledger_core::Lane;

use super::error::ReconcileError;

/// The pause signals.
#[async_trait]
pub trait Signals: Send + Sync {
    /// Messages waiting to be received in a lane's queue.
    async fn visible_backlog(&self, lane: Lane) -> Result<u64, ReconcileError>;
    /// Messages in a lane's dead-letter queue.
    async fn dlq_depth(&self, lane: Lane) -> Result<u64, ReconcileError>;
    /// Those of `names` that are in ALARM now.
    async fn alarms_firing(&self, names: &[String]) -> Result<Vec<String>, ReconcileError>;
}

/// The ticker's EventBridge Scheduler schedules.
#[async_trait]
pub trait TickerSchedules: Send + Sync {
    /// `Some(enabled)` for a schedule that exists, `None` for one that does not.
    async fn enabled(&self, name: &str) -> Result<Option<bool>, ReconcileError>;
}

/// SQS queue attributes and CloudWatch `DescribeAlarms`.
pub struct AwsSignals {
    lanes: Arc<SqsLanes>,
    cloudwatch: aws_sdk_cloudwatch::Client,
}

impl AwsSignals {
    pub fn new(lanes: Arc<SqsLanes>, cloudwatch: aws_sdk_cloudwatch::Client) -> AwsSignals {
        AwsSignals { lanes, cloudwatch }
    }
}

#[async_trait]
impl Signals for AwsSignals {
    async fn visible_backlog(&self, lane: Lane) -> Result<u64, ReconcileError> {
        Ok(self.lanes.depth(lane, false).await?.visible)
    }

    async fn dlq_depth(&self, lane: Lane) -> Result<u64, ReconcileError> {
        let d = self.lanes.depth(lane, true).await?;
        Ok(d.visible + d.in_flight + d.delayed)
    }

    async fn alarms_firing(&self, names: &[String]) -> Result<Vec<String>, ReconcileError> {
        let mut firing = Vec::new();
        // DescribeAlarms takes at most 100 names per call.
        for chunk in names.chunks(100) {
            let out = self
                .cloudwatch
                .describe_alarms()
                .set_alarm_names(Some(chunk.to_vec()))
                .state_value(StateValue::Alarm)
                .send()
                .await
                .map_err(|e| ReconcileError::Signal(format!("DescribeAlarms: {}", display(&e))))?;
            firing.extend(
                out.metric_alarms()
                    .iter()
                    .filter_map(|a| a.alarm_name().map(str::to_string)),
            );
            firing.extend(
                out.composite_alarms()
                    .iter()
                    .filter_map(|a| a.alarm_name().map(str::to_string)),
            );
        }
        Ok(firing)
    }
}

/// EventBridge Scheduler `GetSchedule`.
pub struct SchedulerTickers {
    client: aws_sdk_scheduler::Client,
    group: Option<String>,
}

impl SchedulerTickers {
    pub fn new(client: aws_sdk_scheduler::Client, group: Option<String>) -> SchedulerTickers {
        SchedulerTickers { client, group }
    }
}

#[async_trait]
impl TickerSchedules for SchedulerTickers {
    async fn enabled(&self, name: &str) -> Result<Option<bool>, ReconcileError> {
        let sent = self
            .client
            .get_schedule()
            .name(name)
            .set_group_name(self.group.clone())
            .send()
            .await;
        match sent {
            Ok(out) => Ok(Some(out.state() == Some(&ScheduleState::Enabled))),
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(GetScheduleError::ResourceNotFoundException(_))
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(ReconcileError::Signal(format!(
                "GetSchedule {name}: {}",
                display(&e)
            ))),
        }
    }
}

/// Quiet signals: nothing backs up, no alarm fires (the local runner without CloudWatch).
pub struct QuietSignals;

#[async_trait]
impl Signals for QuietSignals {
    async fn visible_backlog(&self, _lane: Lane) -> Result<u64, ReconcileError> {
        Ok(0)
    }

    async fn dlq_depth(&self, _lane: Lane) -> Result<u64, ReconcileError> {
        Ok(0)
    }

    async fn alarms_firing(&self, _names: &[String]) -> Result<Vec<String>, ReconcileError> {
        Ok(Vec::new())
    }
}

/// An SDK error with its whole source chain (the top level alone says "service error").
pub(crate) fn display(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
