//! A child's change, planned once: its own update, conditioned on the status and epoch the
//! caller read, and, when it ends the child or reopens a failed one, the parent run's
//! counters in the same transaction, conditioned on the parent being RUNNING (each child's
//! end is counted exactly once). Both stores apply these [`Expr`]s.

use cronledger_core::children::ChildStatus;
use cronledger_core::RunStatus;

use crate::codec::child as codec;
use crate::codec::run as run_codec;
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{n, s, time};
use crate::keys::PK;
use crate::ledger::ChildChange;

/// The child's own update, conditioned on the status and epoch the caller read.
/// A start (`start_until`: a new epoch and lease) leads to RUNNING only: a start into
/// PENDING or an end would both set and remove the lease, which DynamoDB refuses as one
/// expression; it is refused here, before any request, on both stores.
pub fn change(change: &ChildChange) -> Result<Expr, StoreError> {
    if change.start_until.is_some() && change.to != ChildStatus::Running {
        return Err(StoreError::InvalidRequest(format!(
            "a child's start leads to RUNNING, not {}",
            change.to
        )));
    }
    let mut e = Expr::new();
    e.set(codec::STATUS, s(change.to.as_str()))
        .set(codec::UPDATED_AT, time(change.at));
    if let Some(until) = change.start_until {
        e.set(codec::LEASE_EPOCH, n(change.epoch + 1))
            .increment(codec::ATTEMPTS, 1)
            .set(codec::LEASE_UNTIL, time(until));
    }
    if change.to.is_terminal() || change.to == ChildStatus::Pending {
        e.remove(codec::LEASE_UNTIL);
    }
    e.set_opt(codec::COUNT, change.count.map(n))
        .set_opt(codec::CHECKSUM, change.checksum.as_deref().map(s))
        .set_opt(codec::ERROR_CODE, change.error_code.as_deref().map(s));
    e.exists(PK)
        .eq(codec::STATUS, s(change.from.as_str()))
        .eq(codec::LEASE_EPOCH, n(change.epoch));
    Ok(e)
}

/// The parent run's counters a change moves, when it ends the child or reopens a failed one.
pub fn parent_counters(change: &ChildChange) -> Option<Expr> {
    let (succeeded, failed, count) = change.counter_delta()?;
    let mut counters = Expr::new();
    counters.set(run_codec::UPDATED_AT, time(change.at));
    if succeeded != 0 {
        counters.increment_signed(run_codec::CHILDREN_SUCCEEDED, succeeded);
    }
    if failed != 0 {
        counters.increment_signed(run_codec::CHILDREN_FAILED, failed);
    }
    if count > 0 {
        counters.increment(run_codec::RESULT_COUNT, count);
    }
    counters.eq(run_codec::STATUS, s(RunStatus::Running.as_str()));
    Some(counters)
}
