//! Ticker Lambda: parse the EventBridge event, tick, report. The logic is `cronledger_app::ticker`.

use std::sync::Arc;

use cronledger_app::deployment::Deployment;
use cronledger_app::ticker::{TickEvent, TickerConfig};
use cronledger_app::wiring::{Components, Deps};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    cronledger_app::logging::init_function_logs();
    let deployment = Deployment::from_env()?;
    let connected = deployment.connect().await?;
    let config = TickerConfig {
        shards: deployment.shards,
        ..TickerConfig::default()
    };
    // Records the approval alerts of `approval: every_run` windows; the reconciler publishes.
    let ticker = Arc::new(Components::build(Deps::deployed(&connected)).ticker(config));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let ticker = ticker.clone();
        async move {
            let tick = TickEvent::from_json(&event.payload)
                .map_err(|e| format!("TICK_EVENT_INVALID: {e}"))?;
            let report = ticker.tick(&tick).await;
            ticker.metrics().flush("ticker", tick.time);
            tracing::info!(time = %tick.time, report = ?report, "tick done");
            if !report.errors.is_empty() {
                // A failed tick is retried by EventBridge Scheduler; every write it made is
                // conditional, so the retry cannot duplicate anything.
                return Err(Error::from(format!(
                    "TICK_PARTIAL: {}",
                    report.errors.join("; ")
                )));
            }
            Ok::<Value, Error>(serde_json::to_value(&report)?)
        }
    }))
    .await
}
