//! The SQS event source, locally: receive a batch of up to 10, hand it to the worker (which
//! handles its messages concurrently), delete what the worker finished in one request, leave
//! the rest for SQS to redeliver (its visibility timeout, or the one the worker set for a
//! retry's backoff).

use std::sync::Arc;
use std::time::Duration;

use cronledger_aws::lanes::{MessageOutcome, SqsRecord};
use cronledger_aws::SqsLanes;
use cronledger_core::Lane;
use tokio::sync::watch;

use crate::worker::Worker;

/// How the poller batches, like an event source mapping's `BatchSize`.
#[derive(Debug, Clone, Copy)]
pub struct PollerConfig {
    pub batch_size: u32,
    pub wait: Duration,
}

impl Default for PollerConfig {
    fn default() -> Self {
        PollerConfig {
            batch_size: 10,
            wait: Duration::from_secs(1),
        }
    }
}

/// Counts of what one poll did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollOutcome {
    pub received: usize,
    pub done: usize,
    pub retried: usize,
    pub dead_lettered: usize,
}

/// Receives one batch from `lane` and processes it as Lambda would.
pub async fn poll_once(
    lanes: &SqsLanes,
    worker: &Worker,
    lane: Lane,
    config: PollerConfig,
) -> Result<PollOutcome, cronledger_aws::LaneError> {
    if worker.kill_switch_engaged().await {
        // As a disabled event source mapping: the lane keeps its messages.
        tokio::time::sleep(config.wait).await;
        return Ok(PollOutcome::default());
    }
    let received = lanes
        .receive(lane, false, config.batch_size, config.wait)
        .await?;
    let mut outcome = PollOutcome {
        received: received.len(),
        ..PollOutcome::default()
    };
    if received.is_empty() {
        return Ok(outcome);
    }
    let records: Vec<SqsRecord> = received.iter().map(SqsRecord::from).collect();
    let report = worker.handle_batch(lane, &records).await;
    // Locally nothing ships EMF lines to CloudWatch: drop them so a long session stays flat.
    drop(worker.metrics().drain("worker", chrono::Utc::now()));
    let mut finished = Vec::new();
    for ((_, result), record) in report.outcomes.iter().zip(&records) {
        match result {
            MessageOutcome::Done => outcome.done += 1,
            MessageOutcome::DeadLettered { .. } => outcome.dead_lettered += 1,
            MessageOutcome::Retry(_) | MessageOutcome::DeadLetterFailed { .. } => {
                outcome.retried += 1;
                continue;
            }
        }
        finished.push(record.receipt_handle.clone());
    }
    // One request per batch, as the event source mapping deletes what the answer does not list.
    if let Err(e) = lanes.delete_batch(lane, &finished).await {
        tracing::warn!(%lane, error = %e, "could not delete finished messages");
    }
    Ok(outcome)
}

/// Polls `lane` until `stop` turns true.
pub async fn run_poller(
    lanes: Arc<SqsLanes>,
    worker: Arc<Worker>,
    lane: Lane,
    config: PollerConfig,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        tokio::select! {
            result = poll_once(&lanes, &worker, lane, config) => {
                if let Err(e) = result {
                    tracing::warn!(%lane, error = %e, "poll failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            _ = stop.changed() => return,
        }
    }
}
