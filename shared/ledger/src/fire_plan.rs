//! The ticker's writes, planned once (see `subjects::fire` for why they are two plain writes):
//! the run put where no item is, the schedule's `next_run_at` moved on, and the run taken
//! back when an edit, a pause or an archive got between them. Both stores apply these
//! [`Expr`]s: DynamoDB renders them, the memory store evaluates them on its items.

use chrono::{DateTime, Utc};
use cronledger_core::Run;

use crate::codec::run as run_codec;
use crate::codec::schedule as codec;
use crate::expr::Expr;
use crate::item::{n, s, time};
use crate::keys::{self, GSI1PK, GSI1SK, PK};
use crate::ledger::{Fire, ScheduleState};

/// A run's creation: its item, put only where no item is.
pub fn create() -> Expr {
    let mut absent = Expr::new();
    absent.not_exists(PK);
    absent
}

/// Moves schedule `id`'s `next_run_at` (and its `due` index key with it) from `expected` to
/// `next`, if it is still `expected` and the schedule ACTIVE. The index key is rewritten
/// anyway: it also moves the schedule to the shard `shards` gives it, so after a
/// shard-count increase every schedule has moved by its next fire.
pub fn advance(
    id: &str,
    expected: DateTime<Utc>,
    next: Option<DateTime<Utc>>,
    shards: u32,
) -> Expr {
    let mut expr = Expr::new();
    match next {
        Some(next) => {
            let shard = keys::shard_of(id, shards);
            expr.set(codec::NEXT_RUN_AT, time(next))
                .set(codec::SHARD, n(shard))
                .set(GSI1PK, s(keys::due_pk(shard)))
                .set(GSI1SK, s(keys::due_sk(next, id)))
        }
        None => expr
            .remove(codec::NEXT_RUN_AT)
            .remove(GSI1PK)
            .remove(GSI1SK),
    };
    expr.eq(codec::NEXT_RUN_AT, time(expected))
        .eq(codec::STATE, s(ScheduleState::Active.as_str()));
    expr
}

/// The fire's move of its schedule: [`advance`], and only while the schedule is at the
/// version its run was planned under.
pub fn advance_fired(fire: &Fire, shards: u32) -> Expr {
    let run = &fire.run;
    let mut expr = advance(
        &run.key.schedule_id,
        fire.expected_next_run_at,
        fire.next_run_at,
        shards,
    );
    expr.eq(codec::VERSION, n(run.schedule_version));
    expr
}

/// The delete that takes a fire's run back: only while it is as the fire wrote it (its
/// status, never leased, at the fire's version).
pub fn take_back(run: &Run) -> Expr {
    let mut cond = Expr::new();
    cond.eq(run_codec::STATUS, s(run.status.as_str()))
        .eq(run_codec::LEASE_EPOCH, n(0))
        .eq(run_codec::SCHEDULE_VERSION, n(run.schedule_version));
    cond
}
