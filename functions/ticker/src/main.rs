//! Ticker Lambda: parse the EventBridge event, tick, report. The logic is `cronledger_app::ticker`.

use std::sync::Arc;

use cronledger_app::alerting::Alerter;
use cronledger_app::deployment::Deployment;
use cronledger_app::kill_switch::KillSwitchCheck;
use cronledger_app::ticker::{TickEvent, Ticker, TickerConfig};
use cronledger_aws::notify::notifier_from_env;
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
    let kill_switch = Arc::new(KillSwitchCheck::new(connected.ledger.clone()));
    // Records the approval alerts of `approval: every_run` windows; the reconciler publishes.
    let alerter = Arc::new(Alerter::new(
        connected.ledger.clone(),
        notifier_from_env(&connected.clients),
    ));
    let ticker = Arc::new(
        Ticker::new(connected.ledger, connected.lanes, config)
            .with_kill_switch(kill_switch)
            .with_alerts(alerter),
    );
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
