//! Which runs the simulated handlers "crash" on.
//!
//! Each named point crashes the first run that reaches it, then every `every`-th distinct run
//! after that (1st, 1+every-th, ...), and only on that run's first pass through the point, so
//! every crashed run has a chance to recover the way it would in production (the reconciler's
//! stuck-run rules, or the message coming back). Crashes happen only up to the end of the
//! simulated range; the settle phase after it runs without them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use cronledger_core::RunKey;

use super::time::VirtualTime;

use crate::faults::{CrashPoint, Faults};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crash {
    pub point: CrashPoint,
    pub run: RunKey,
    pub attempt: u32,
}

pub struct SimFaults {
    points: BTreeSet<CrashPoint>,
    every: usize,
    time: VirtualTime,
    until: DateTime<Utc>,
    seen: Mutex<BTreeMap<CrashPoint, BTreeSet<RunKey>>>,
    crashed: Mutex<Vec<Crash>>,
}

impl SimFaults {
    pub fn new(
        points: impl IntoIterator<Item = CrashPoint>,
        every: u32,
        time: VirtualTime,
        until: DateTime<Utc>,
    ) -> SimFaults {
        SimFaults {
            points: points.into_iter().collect(),
            every: every.max(1) as usize,
            time,
            until,
            seen: Mutex::default(),
            crashed: Mutex::default(),
        }
    }

    pub fn crashes(&self) -> Vec<Crash> {
        self.crashed
            .lock()
            .map(|c| c.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }
}

impl Faults for SimFaults {
    fn crash_at(&self, point: CrashPoint, run: &RunKey, attempt: u32) -> bool {
        if !self.points.contains(&point) || self.time.now() > self.until {
            return false;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let runs = seen.entry(point).or_default();
        let nth = runs.len();
        if !runs.insert(run.clone()) || !nth.is_multiple_of(self.every) {
            return false;
        }
        let crash = Crash {
            point,
            run: run.clone(),
            attempt,
        };
        tracing::info!(point = point.name(), run = %run, attempt, "simulated crash");
        self.crashed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(crash);
        true
    }
}
