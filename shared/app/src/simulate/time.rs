//! Virtual time for the simulator: a [`ManualClock`] every handler reads, timers that jobs
//! sleep on, and a count of the tasks still doing real work, so the simulator knows when
//! everything that can happen "now" has happened and the clock may jump to the next event.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::{oneshot, watch};

use crate::clock::{Clock, ManualClock};

#[derive(Clone)]
pub struct VirtualTime {
    clock: ManualClock,
    inner: Arc<Mutex<Timers>>,
    busy: Arc<watch::Sender<usize>>,
}

#[derive(Default)]
struct Timers {
    heap: BinaryHeap<Reverse<(DateTime<Utc>, u64)>>,
    waiting: std::collections::BTreeMap<u64, oneshot::Sender<()>>,
    next_id: u64,
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

    /// Sleeps `by` of virtual time. Must be called from a task counted with [`enter`].
    pub async fn sleep(&self, by: TimeDelta) {
        let until = self.now() + by;
        let (tx, rx) = oneshot::channel();
        {
            let mut timers = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let id = timers.next_id;
            timers.next_id += 1;
            timers.heap.push(Reverse((until, id)));
            timers.waiting.insert(id, tx);
        }
        self.leave();
        // The waker counts this task busy again before it wakes it.
        let _ = rx.await;
    }

    /// The earliest pending timer.
    pub fn next_timer(&self) -> Option<DateTime<Utc>> {
        let timers = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        timers.heap.peek().map(|Reverse((t, _))| *t)
    }

    /// Wakes every sleeper whose time has come; returns how many.
    pub fn wake_due(&self) -> usize {
        let now = self.now();
        let mut woken = 0;
        let mut timers = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(Reverse((t, id))) = timers.heap.peek().copied() {
            if t > now {
                break;
            }
            timers.heap.pop();
            if let Some(tx) = timers.waiting.remove(&id) {
                self.enter();
                if tx.send(()).is_err() {
                    self.leave();
                } else {
                    woken += 1;
                }
            }
        }
        woken
    }
}
