//! Virtual time for the simulator: a [`ManualClock`] every handler reads, timers that jobs
//! sleep on and heartbeats beat on, and a count of the tasks still doing real work, so the
//! simulator knows when everything that can happen "now" has happened and the clock may jump
//! to the next event.
//!
//! A delivery is counted busy from its start to its end, except while its job sleeps. A job's
//! heartbeat runs beside the job in the same delivery: it is counted from its start and from
//! each beat to its next wait, so the clock moves on once both wait. The beats due at an
//! instant are woken after the jobs due then have done what they can.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::{oneshot, watch};

use crate::clock::{Clock, ManualClock, Pace};

#[derive(Clone)]
pub struct VirtualTime {
    clock: ManualClock,
    inner: Arc<Mutex<Timers>>,
    busy: Arc<watch::Sender<usize>>,
}

/// Timers by due instant, earliest (then first set) on top.
type TimerHeap = BinaryHeap<Reverse<(DateTime<Utc>, u64)>>;

#[derive(Default)]
struct Timers {
    /// Sleepers' timers (jobs), and heartbeats' beats: woken after the sleepers of the same
    /// instant, so a job that ends at a beat's instant has ended before the beat.
    heaps: [TimerHeap; 2],
    waiting: std::collections::BTreeMap<u64, oneshot::Sender<Busy>>,
    next_id: u64,
}

/// Which of [`Timers::heaps`] a timer goes on.
#[derive(Debug, Clone, Copy)]
enum Waiter {
    Sleeper = 0,
    Beat = 1,
}

impl VirtualTime {
    pub fn new(start: DateTime<Utc>) -> VirtualTime {
        VirtualTime {
            clock: ManualClock::new(start),
            inner: Arc::new(Mutex::new(Timers::default())),
            busy: Arc::new(watch::channel(0).0),
        }
    }

    pub fn clock(&self) -> ManualClock {
        self.clock.clone()
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub fn set(&self, t: DateTime<Utc>) {
        self.clock.set(t);
    }

    /// A task starts doing real work (the simulator waits for it before moving the clock).
    pub fn enter(&self) {
        self.busy.send_modify(|n| *n += 1);
    }

    /// The task is done (or about to wait on virtual time).
    pub fn leave(&self) {
        self.busy.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Waits until no task is doing real work.
    pub async fn idle(&self) {
        let mut rx = self.busy.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// The clock a worker reads: this virtual time, with heartbeats paced on it.
    pub fn worker_clock(&self) -> VirtualClock {
        VirtualClock(self.clone())
    }

    /// Sleeps `by` of virtual time. Must be called from a task counted with [`enter`]: the
    /// task is not busy while it sleeps, and is again once woken, or at once when the sleep
    /// is dropped unfinished (the task went on with another branch of a select).
    pub async fn sleep(&self, by: TimeDelta) {
        let woken = self.timer(by, Waiter::Sleeper);
        // Declared after `woken`, so dropped before it: the task counts busy again before a
        // wake it never saw is taken back.
        let lent = Counted::lent(self.clone());
        if let Ok(busy) = woken.await {
            busy.keep();
            lent.keep();
        }
    }

    /// A timer `by` from now; when it fires the receiver gets the woken work's busy count.
    fn timer(&self, by: TimeDelta, waiter: Waiter) -> oneshot::Receiver<Busy> {
        let until = self.now() + by;
        let (tx, rx) = oneshot::channel();
        let mut timers = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let id = timers.next_id;
        timers.next_id += 1;
        timers.heaps[waiter as usize].push(Reverse((until, id)));
        timers.waiting.insert(id, tx);
        rx
    }

    /// The earliest pending timer.
    pub fn next_timer(&self) -> Option<DateTime<Utc>> {
        let timers = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        timers
            .heaps
            .iter()
            .filter_map(|heap| heap.peek().map(|Reverse((t, _))| *t))
            .min()
    }

    /// Wakes every sleeper whose time has come, then every heartbeat's beat, each time
    /// waiting until the woken work has done what it can.
    pub async fn wake_due(&self) {
        for waiter in [Waiter::Sleeper, Waiter::Beat] {
            self.wake(waiter);
            self.idle().await;
        }
    }

    /// Wakes the `waiter` timers due now.
    fn wake(&self, waiter: Waiter) {
        let now = self.now();
        let mut timers = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let timers = &mut *timers;
        let heap = &mut timers.heaps[waiter as usize];
        while let Some(Reverse((t, id))) = heap.peek().copied() {
            if t > now {
                break;
            }
            heap.pop();
            if let Some(tx) = timers.waiting.remove(&id) {
                // Counted busy before it is woken; a waiter that went away leaves again.
                let _ = tx.send(Counted::busy(self.clone()));
            }
        }
    }
}

/// A change to the busy count that is undone when dropped, unless it is kept.
struct Counted {
    time: Option<VirtualTime>,
    undo: fn(&VirtualTime),
}

/// One unit of the busy count, left when dropped (the woken work is done, or never ran).
type Busy = Counted;

impl Counted {
    fn busy(time: VirtualTime) -> Busy {
        time.enter();
        Counted {
            time: Some(time),
            undo: VirtualTime::leave,
        }
    }

    /// A sleeping task's unit, lent while it sleeps: taken back (entered) if the sleep is
    /// dropped before its wake.
    fn lent(time: VirtualTime) -> Counted {
        time.leave();
        Counted {
            time: Some(time),
            undo: VirtualTime::enter,
        }
    }

    /// The change stands: a woken sleeper's unit is its task's own again, a lent unit was
    /// given back by the wake.
    fn keep(mut self) {
        self.time = None;
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(time) = self.time.take() {
            (self.undo)(&time);
        }
    }
}

/// The simulator's worker clock: virtual now, and heartbeats beating on virtual time.
#[derive(Clone)]
pub struct VirtualClock(VirtualTime);

impl Clock for VirtualClock {
    fn now(&self) -> DateTime<Utc> {
        self.0.now()
    }

    fn pace(&self, every: Duration) -> Box<dyn Pace> {
        Box::new(VirtualPace {
            time: self.0.clone(),
            every: TimeDelta::from_std(every).unwrap_or(TimeDelta::MAX),
            // Counted from now to its first wait: the job's branch may wait first.
            beat: Some(Counted::busy(self.0.clone())),
        })
    }
}

/// A heartbeat's beats on virtual time. The heartbeat runs beside its job: counted busy from
/// its start and from each beat until it waits for the next one.
struct VirtualPace {
    time: VirtualTime,
    every: TimeDelta,
    /// The current beat's busy unit, held until the next wait (or until the pace is dropped).
    beat: Option<Busy>,
}

#[async_trait]
impl Pace for VirtualPace {
    async fn next(&mut self) {
        // The next beat's timer is set before this beat's unit is left: the clock may move
        // on as soon as it is, and must see the timer.
        let woken = self.time.timer(self.every, Waiter::Beat);
        self.beat = None;
        self.beat = woken.await.ok();
    }
}
