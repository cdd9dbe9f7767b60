//! Running the real handlers on one machine: an SQS poller standing in for Lambda's event
//! source mapping, and a webhook receiver as the default job target. Nothing here decides
//! anything about scheduling; it only feeds events to the handlers Lambda runs.

pub mod auditor;
pub mod poller;
pub mod receiver;
pub mod summary;

use std::sync::Arc;

use cronledger_aws::{LaneQueue, Notifier};

use crate::clock::SystemClock;
use crate::wiring::{Components, Deps, LedgerStores};

/// The components as `cronledger local` runs them: wired as deployed (kill switch, alerts,
/// health, backfills) on the local table and lanes, on the system clock.
pub fn components<S: LedgerStores>(
    ledger: Arc<S>,
    lanes: Arc<dyn LaneQueue>,
    notifier: Arc<dyn Notifier>,
) -> Components {
    Components::build(Deps::on(ledger, lanes, notifier, Arc::new(SystemClock)))
}
