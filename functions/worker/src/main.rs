//! Worker Lambda: one SQS batch of one lane in, partial batch failures out. The logic is
//! `cronledger_app::worker`.

use std::sync::Arc;

use cronledger_app::clock::{Clock, SystemClock};
use cronledger_app::deployment::Deployment;
use cronledger_app::jobs::{HttpJob, HttpOptions, JobTargets, SdkLambdaInvoker};
use cronledger_app::kill_switch::KillSwitchCheck;
use cronledger_app::sqs_event::{lane_of_queue, SqsEvent};
use cronledger_app::worker::{Worker, WorkerConfig};
use cronledger_aws::config::load_sdk_config;
use cronledger_aws::lanes::{BatchResponse, SqsRecord};
use cronledger_aws::AwsSettings;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let deployment = Deployment::from_env()?;
    let connected = deployment.connect().await?;
    let sdk = load_sdk_config(&AwsSettings::default()).await;
    let http = HttpJob::with_options(HttpOptions::from_env(&sdk)?)?;
    let jobs = JobTargets::new(http).with_lambda(Arc::new(SdkLambdaInvoker::new(&sdk)));
    // A batch already in hand when the kill switch lands goes back untouched (the switch
    // also disables this function's event source mappings).
    let kill_switch = Arc::new(KillSwitchCheck::new(connected.ledger.clone()));
    let worker = Arc::new(
        Worker::new(
            connected.ledger,
            connected.lanes,
            jobs,
            Arc::new(SystemClock),
            WorkerConfig::default(),
        )
        .with_kill_switch(kill_switch),
    );
    let prefix = Arc::new(deployment.queue_prefix);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let (worker, prefix) = (worker.clone(), prefix.clone());
        async move {
            let mut response = BatchResponse::default();
            let records = &event.payload.records;
            let Some(first) = records.first() else {
                return Ok::<BatchResponse, Error>(response);
            };
            let Some(lane) = lane_of_queue(&first.event_source_arn, &prefix) else {
                return Err(Error::from(format!(
                    "WORKER_UNKNOWN_QUEUE: {} is not a lane of {prefix}",
                    first.event_source_arn
                )));
            };
            let batch: Vec<SqsRecord> = records.iter().map(|r| r.to_record()).collect();
            let report = worker.handle_batch(lane, &batch).await;
            worker.metrics().flush("worker", SystemClock.now());
            response.batch_item_failures = report.response().batch_item_failures;
            Ok(response)
        }
    }))
    .await
}
