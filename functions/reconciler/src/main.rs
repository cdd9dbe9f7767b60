//! Reconciler Lambda: parse the EventBridge event, reconcile, flush metrics, report. The logic
//! is `cronledger_app::reconciler`.

use std::sync::Arc;

use cronledger_app::deployment::Deployment;
use cronledger_app::reconciler::{
    AwsSignals, ReconcileEvent, ReconcilerConfig, SchedulerTickers, Signals,
};
use cronledger_app::wiring::{Components, Deps};
use cronledger_aws::config::load_sdk_config;
use cronledger_aws::AwsSettings;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    cronledger_app::logging::init_function_logs();
    let deployment = Deployment::from_env()?;
    let connected = deployment.connect().await?;
    let config = ReconcilerConfig::from_env(deployment.shards)?;
    let sdk = load_sdk_config(&AwsSettings::default()).await;
    let signals = AwsSignals::new(
        connected.lanes.clone(),
        aws_sdk_cloudwatch::Client::new(&sdk),
    );
    let tickers = SchedulerTickers::new(
        aws_sdk_scheduler::Client::new(&sdk),
        config.ticker_schedule_group.clone(),
    );
    let signals: Arc<dyn Signals> = Arc::new(signals);
    let components = Components::build(Deps::deployed(&connected));
    // Operators' backfills are released in the same pass, throttled per backfill.
    let backfills = Arc::new(components.backfill_releaser(Some(signals.clone())));
    let reconciler = Arc::new(
        components
            .reconciler(signals, config)
            .with_ticker_check(Arc::new(tickers)),
    );
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let (reconciler, backfills) = (reconciler.clone(), backfills.clone());
        async move {
            let pass = ReconcileEvent::from_json(&event.payload)?;
            let mut report = reconciler.reconcile(&pass).await;
            if !report.kill_switch_engaged {
                let released = backfills.pass(pass.time).await;
                tracing::info!(time = %pass.time, backfills = ?released, "backfill release done");
                report.errors.extend(released.errors);
            }
            reconciler.metrics().flush("reconciler", pass.time);
            tracing::info!(time = %pass.time, report = ?report, "reconcile done");
            if !report.errors.is_empty() {
                // Retried by EventBridge Scheduler; every write is conditional, so a retry
                // cannot duplicate anything.
                return Err(Error::from(format!(
                    "RECONCILE_PARTIAL: {}",
                    report.errors.join("; ")
                )));
            }
            Ok::<Value, Error>(serde_json::to_value(&report)?)
        }
    }))
    .await
}
