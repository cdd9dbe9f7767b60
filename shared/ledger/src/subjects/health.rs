//! The outcome counters (see [`crate::health`] and [`crate::codec::health`]), written once
//! over the item engine: one UpdateItem an add, one Query a range.

use chrono::NaiveDate;

use crate::codec::health as codec;
use crate::engine::{query_all, ItemEngine};
use crate::error::StoreError;
use crate::expr::Expr;
use crate::health::{DayTally, Outcome};
use crate::item::s;
use crate::keys::{self, PK, SK};

pub async fn count<E: ItemEngine + ?Sized>(
    engine: &E,
    schedule: &str,
    day: NaiveDate,
    outcome: Outcome,
    count: u64,
) -> Result<(), StoreError> {
    if count == 0 {
        return Ok(());
    }
    let expr = codec::count(outcome, count, day);
    engine
        .update_if(codec::key_of(schedule, day), &expr)
        .await?;
    Ok(())
}

/// The counters of `schedule` from `from` through `through`, oldest first.
pub async fn days<E: ItemEngine + ?Sized>(
    engine: &E,
    schedule: &str,
    from: NaiveDate,
    through: NaiveDate,
) -> Result<Vec<DayTally>, StoreError> {
    if from > through {
        return Ok(Vec::new());
    }
    let mut cond = Expr::new();
    cond.eq(PK, s(keys::schedule_pk(schedule))).between(
        SK,
        s(keys::health_sk(from)),
        s(keys::health_sk(through)),
    );
    query_all(engine, None, &cond)
        .await?
        .iter()
        .map(codec::decode)
        .collect()
}
