//! The auditor's daily pass as EventBridge Scheduler invokes it: at each time the auditor's
//! `daily_at` names (read with the core's timing code, in UTC), with that time as the event's.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::auditor::{AuditEvent, AuditOutcome, Auditor};
use crate::clock::Clock;
use crate::metrics::Function;

/// Runs `auditor`'s daily pass at each of its times on `clock` until `stop` changes. Its
/// metric is dropped after each pass (nothing ships EMF lines locally); its alerts go out.
pub async fn audit_daily(auditor: Auditor, clock: Arc<dyn Clock>, mut stop: watch::Receiver<bool>) {
    let timing = match auditor.config().daily_timing() {
        Ok(timing) => timing,
        Err(e) => {
            tracing::error!(target: "local", code = e.code(), error = %e, "no daily audit");
            return;
        }
    };
    loop {
        let now = clock.now();
        let Some(next) = timing.next_after(now) else {
            return;
        };
        let wait = (next - now).to_std().unwrap_or(Duration::ZERO);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        // The pass logs its own line; a failed one is logged by it too and tried next day.
        if let Ok(AuditOutcome::Held(_)) = auditor.run(&AuditEvent::Daily { time: next }).await {
            tracing::warn!(target: "local", "kill switch engaged: no audit pass");
        }
        drop(auditor.metrics().drain(Function::Auditor.name(), next));
    }
}
