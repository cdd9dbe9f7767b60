//! The kill switch as the functions check it: the stored flag (see
//! [`cronledger_aws::KillSwitch`]), read at most once per `ttl` per process.
//!
//! In AWS the switch also disables the ticker's and the reconciler's schedules and the
//! workers' event source mappings, so nothing is invoked while it is on; this check covers
//! what is already in hand when it lands (a batch a worker holds, a tick under way) and
//! the places nothing AWS-side disables (the local runner, the simulator). A worker
//! invocation pays one read per `ttl`, not one per run.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::OpsStore;

/// How long a read of the switch is trusted.
pub const KILL_SWITCH_TTL: TimeDelta = TimeDelta::seconds(5);

pub struct KillSwitchCheck {
    ops: Arc<dyn OpsStore>,
    ttl: TimeDelta,
    last: Mutex<Option<(DateTime<Utc>, bool)>>,
}

impl KillSwitchCheck {
    pub fn new(ops: Arc<dyn OpsStore>) -> KillSwitchCheck {
        KillSwitchCheck::with_ttl(ops, KILL_SWITCH_TTL)
    }

    pub fn with_ttl(ops: Arc<dyn OpsStore>, ttl: TimeDelta) -> KillSwitchCheck {
        KillSwitchCheck {
            ops,
            ttl,
            last: Mutex::new(None),
        }
    }

    /// Whether the switch is on at `now`. When the flag cannot be read, the last value read
    /// stands (off if none): a store that cannot be read stops the work anyway, since every
    /// start is a conditional write to it.
    pub async fn engaged(&self, now: DateTime<Utc>) -> bool {
        let cached = *self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, on)) = cached {
            if at <= now && now - at < self.ttl {
                return on;
            }
        }
        let on = match self.ops.kill_switch().await {
            Ok(state) => state.is_some_and(|s| s.engaged),
            Err(e) => {
                let last = cached.is_some_and(|(_, on)| on);
                tracing::warn!(error = %e, engaged = last, "kill switch unreadable; the last value stands");
                return last;
            }
        };
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some((now, on));
        on
    }

    /// Forgets the cached value (the next check reads the flag).
    pub fn forget(&self) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}
