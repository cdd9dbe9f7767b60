//! When the scheduler's own functions run in virtual time: a tick at minute boundaries and a
//! reconciler pass every 5 minutes, as EventBridge Scheduler would invoke them. Ticks that
//! could find nothing due are skipped: after an empty tick the next one is the minute the
//! earliest `next_run_at` comes into the ticker's lookahead (nothing moves a `next_run_at`
//! earlier during a simulation: only tickers and the reconciler's fence move it, forward).

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use cronledger_aws::{LedgerStore, StoreError};

pub(super) const MINUTE: TimeDelta = TimeDelta::minutes(1);
pub(super) const PASS_EVERY: TimeDelta = TimeDelta::minutes(5);

pub(super) struct Agenda {
    pub next_tick: DateTime<Utc>,
    pub next_pass: DateTime<Utc>,
}

impl Agenda {
    pub fn new(from: DateTime<Utc>) -> Agenda {
        Agenda {
            next_tick: ceil_to(from, MINUTE),
            next_pass: ceil_to(from, PASS_EVERY),
        }
    }

    pub fn next(&self) -> DateTime<Utc> {
        self.next_tick.min(self.next_pass)
    }

    /// After a tick at `t` that found nothing due: the next tick is when the earliest
    /// schedule's `next_run_at` enters the lookahead (never later than `until`).
    pub async fn skip_idle_ticks(
        &mut self,
        store: &dyn LedgerStore,
        shards: u32,
        lookahead: TimeDelta,
        until: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut earliest: Option<DateTime<Utc>> = None;
        for shard in 0..shards {
            let first = store.due_schedules(shard, until, 1).await?;
            earliest = earliest
                .into_iter()
                .chain(first.iter().filter_map(|s| s.next_run_at))
                .min();
        }
        let at = earliest.map_or(until, |next| ceil_to(next - lookahead, MINUTE));
        self.next_tick = self.next_tick.max(at.min(until));
        Ok(())
    }
}

pub(super) fn ceil_to(t: DateTime<Utc>, step: TimeDelta) -> DateTime<Utc> {
    match t.duration_trunc(step) {
        Ok(floor) if floor == t => t,
        Ok(floor) => floor + step,
        Err(_) => t,
    }
}
