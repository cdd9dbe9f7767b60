//! cronledger's function logic. Each Lambda binary in `functions/` is a thin `main` around one
//! of these handlers; the local runner and the simulator call the very same code.

pub mod alerting;
pub mod api;
pub mod audit;
pub mod auditor;
pub mod backfill;
pub mod backoff;
pub mod cascade;
pub mod clock;
pub mod cost;
pub mod dependents;
pub mod deployment;
pub mod faults;
pub mod jobs;
pub mod kill_switch;
pub mod local;
pub mod logging;
pub mod metrics;
pub mod operator;
pub mod outcomes;
pub mod overlap;
pub mod pinned;
pub mod reconciler;
pub mod repair;
pub mod replay;
pub mod runs;
pub mod simulate;
pub mod sqs_event;
pub mod ticker;
pub mod wiring;
pub mod worker;
