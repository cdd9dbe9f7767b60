//! Where "now" comes from outside the pure core: the wall clock in Lambda and the local
//! runner, a virtual clock in the simulator and tests.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};

pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;

    /// Paces a running job's heartbeats, one beat every `every` on this clock's time: the
    /// machine's timer unless the clock keeps its own (the simulator's virtual clock).
    fn pace(&self, every: Duration) -> Box<dyn Pace> {
        Box::new(TimerPace(every))
    }
}

/// The beats of one attempt's heartbeat (see [`Clock::pace`]).
#[async_trait]
pub trait Pace: Send {
    /// Returns at the next beat.
    async fn next(&mut self);
}

/// Beats on the machine's timer.
struct TimerPace(Duration);

#[async_trait]
impl Pace for TimerPace {
    async fn next(&mut self) {
        tokio::time::sleep(self.0).await;
    }
}

/// The machine's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> ManualClock {
        ManualClock(Arc::new(Mutex::new(start)))
    }

    pub fn set(&self, t: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = t;
    }

    pub fn advance(&self, by: TimeDelta) {
        let mut now = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
