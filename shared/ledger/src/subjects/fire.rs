//! The ticker's fire, written once over the item engine: the window's run, then the
//! schedule moved on, as two plain conditional writes. A transaction would make them atomic
//! at twice the write units of each item and each index entry; the order and one
//! compensating delete keep what the transaction kept:
//!
//! - The run is written first. A ticker that dies before the schedule moves leaves a run
//!   the next tick finds (its fire loses to the run, then advances the schedule): never an
//!   advanced schedule without its window's run.
//! - The schedule moves only if `next_run_at` is where the ticker read it, the schedule is
//!   ACTIVE and still at the run's version. When another ticker or the reconciler moved it,
//!   the run stands: it is the window's one record.
//! - When an edit (a new version), a pause or an archive got between the two writes, the
//!   run was planned under a definition that no longer holds: it is taken back (deleted
//!   while still PENDING and unsent, before anything else can see it as work), as the
//!   transaction would never have written it.

use cronledger_core::Run;
use futures_util::stream::{self, StreamExt};

use super::runs::{self, run_item_key};
use super::schedules::{self, schedule_key};
use crate::engine::{ItemEngine, Returning, Write};
use crate::error::StoreError;
use crate::fire_plan;
use crate::ledger::{check_fire_batch, fire_still_planned, Created, Fire, FireOutcome};

/// Fires of one batch in flight at once.
const FIRES_AT_ONCE: usize = 8;

pub async fn fire<E: ItemEngine + ?Sized>(
    engine: &E,
    fire: &Fire,
) -> Result<FireOutcome, StoreError> {
    let run = &fire.run;
    if let Created::Existing(existing) = runs::create(engine, run).await? {
        return Ok(FireOutcome::Lost {
            existing: Some(Box::new(existing)),
            schedule_moved: false,
        });
    }
    let id = &run.key.schedule_id;
    let advance = fire_plan::advance_fired(fire, engine.shards());
    if engine.update_if(schedule_key(id), &advance).await? {
        return Ok(FireOutcome::Created);
    }
    let still_planned = fire_still_planned(schedules::get(engine, id).await, fire)?;
    if still_planned || !take_back_run(engine, &fire.run).await? {
        // Moved on by another writer (or already taken up): the run is the window's.
        return Ok(FireOutcome::Created);
    }
    Ok(FireOutcome::Lost {
        existing: None,
        schedule_moved: true,
    })
}

/// Several fires, each for a different schedule, side by side.
pub async fn fire_all<E: ItemEngine + ?Sized>(
    engine: &E,
    fires: &[Fire],
) -> Result<Vec<FireOutcome>, StoreError> {
    check_fire_batch(fires)?;
    // A few at a time: a batch is up to 50 fires and several tickers may race, and a store
    // answering one request at a time (DynamoDB Local) stalls under hundreds at once. The
    // futures are made first: a closure mapping a stream would make the ticker's future too
    // general to be `Send`.
    let firing: Vec<_> = fires.iter().map(|f| fire(engine, f)).collect();
    stream::iter(firing)
        .buffered(FIRES_AT_ONCE)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// Deletes a ticker's run if it is still as the ticker wrote it (its status, never leased,
/// at its version). `false` when it had moved on.
pub async fn take_back_run<E: ItemEngine + ?Sized>(
    engine: &E,
    run: &Run,
) -> Result<bool, StoreError> {
    let delete = Write::Delete {
        key: run_item_key(&run.key),
        cond: fire_plan::take_back(run),
    };
    let taken = engine
        .write(delete, Returning::Nothing, false)
        .await?
        .applied();
    if taken {
        tracing::debug!(run = %run.key, "run taken back: its schedule changed under the fire");
    }
    Ok(taken)
}
