//! Worker Lambda: one SQS batch of one lane in, partial batch failures out. The logic is
//! `cronledger_app::worker`.

use std::sync::Arc;

use cronledger_app::clock::{Clock, SystemClock};
use cronledger_app::deployment::Deployment;
use cronledger_app::jobs::{HttpJob, HttpOptions, JobTargets, SdkLambdaInvoker};
use cronledger_app::sqs_event::{lane_of_queue, SqsBatchResponse, SqsEvent};
use cronledger_app::wiring::{Components, Deps};
use cronledger_app::worker::WorkerConfig;
use cronledger_aws::config::load_sdk_config;
use cronledger_aws::lanes::SqsRecord;
use cronledger_aws::AwsSettings;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    cronledger_app::logging::init_function_logs();
    let deployment = Deployment::from_env()?;
    let connected = deployment.connect().await?;
    let sdk = load_sdk_config(&AwsSettings::default()).await;
    let http = HttpJob::with_options(HttpOptions::from_env(&sdk)?)?;
    let jobs = JobTargets::new(http).with_lambda(Arc::new(SdkLambdaInvoker::new(&sdk)));
    // A batch already in hand when the kill switch lands goes back untouched (the switch
    // also disables this function's event source mappings).
    let worker = Arc::new(
        Components::build(Deps::deployed(&connected)).worker(jobs, WorkerConfig::default()),
    );
    let prefix = Arc::new(deployment.queue_prefix);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let (worker, prefix) = (worker.clone(), prefix.clone());
        async move {
            let records = &event.payload.records;
            let Some(first) = records.first() else {
                return Ok::<SqsBatchResponse, Error>(SqsBatchResponse::default());
            };
            let arn = first.event_source_arn.as_deref().unwrap_or_default();
            let Some(lane) = lane_of_queue(arn, &prefix) else {
                return Err(Error::from(format!(
                    "WORKER_UNKNOWN_QUEUE: {arn} is not a lane of {prefix}"
                )));
            };
            let batch: Vec<SqsRecord> = records.iter().map(SqsRecord::from).collect();
            let report = worker
                .handle_invocation(
                    lane,
                    &batch,
                    Some(event.context.request_id.as_str()),
                    &|_, _| {},
                )
                .await;
            worker.metrics().flush("worker", SystemClock.now());
            Ok(report.response())
        }
    }))
    .await
}
