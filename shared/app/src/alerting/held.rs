//! Work held for an operator (MANUAL_REQUIRED): one AWAITING_APPROVAL when it starts
//! waiting, then a reminder each `alerts.remind_after` while it still waits.
//!
//! Whoever holds the work (the ticker for an `approval: every_run` window, the worker for an
//! unknown outcome or a guard over its limit, the reconciler for a held gap or a stalled
//! run) raises the first alert and starts a tracker keyed by (schedule, group). Each pass
//! asks the store for the trackers whose reminder is due (one query, empty on most
//! passes), looks whether their work still waits, and reminds or drops them.

use chrono::{DateTime, Utc};
use cronledger_aws::{Awaiting, HeldWork, LedgerStore, StoreError};
use cronledger_core::alerts::{self, About, Alert};
use cronledger_core::{Run, RunStatus, ScheduleSpec};
use serde::Serialize;

use super::Alerter;

/// Trackers looked at per pass.
const TRACKERS_PER_PASS: u32 = 100;

/// Held work that starts waiting: what its first alert says and what its reminders follow.
#[derive(Debug, Clone)]
pub struct Held<'a> {
    pub spec: &'a ScheduleSpec,
    /// What the alerts name as waiting: a replay group or the run's key.
    pub group: String,
    pub work: HeldWork,
    /// Runs (windows) waiting.
    pub waiting: u32,
    pub since: DateTime<Utc>,
}

impl<'a> Held<'a> {
    /// One run held for an operator.
    pub fn run(spec: &'a ScheduleSpec, run: &Run, since: DateTime<Utc>) -> Held<'a> {
        Held {
            spec,
            group: run.key.to_string(),
            work: HeldWork::Run {
                key: run.key.clone(),
            },
            waiting: run.count.max(1),
            since,
        }
    }

    /// The first AWAITING_APPROVAL (`None` when nothing waits).
    pub fn alert(&self) -> Option<Alert> {
        approval_alert(
            self.spec,
            &self.group,
            &self.work,
            self.waiting,
            self.since,
            self.since,
        )
    }

    /// The tracker of its reminders.
    pub fn tracker(&self) -> Awaiting {
        Awaiting {
            schedule: self.spec.id.clone(),
            group: self.group.clone(),
            held: self.work.clone(),
            since: self.since,
            remind_at: alerts::next_reminder(&self.spec.alerts, self.since, self.since),
        }
    }
}

/// What one reminder pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReminderReport {
    /// Trackers whose work still waited: reminded.
    pub reminded: u32,
    /// Trackers whose work no longer waits (approved, rejected, expired): dropped.
    pub dropped: u32,
    pub errors: u32,
}

impl Alerter {
    /// Raises `held`'s first AWAITING_APPROVAL and starts its reminders.
    pub async fn hold(&self, held: &Held<'_>) {
        let Some(alert) = held.alert() else {
            return;
        };
        self.raise(&alert, held.spec.alerts.topic.as_deref()).await;
        self.track(&held.tracker()).await;
    }

    /// Records `held`'s first AWAITING_APPROVAL without publishing it (the reconciler's
    /// outbox pass does, a minute later) and starts its reminders: for the ticker, whose
    /// tick must not wait on a publish.
    pub async fn record_hold(&self, held: &Held<'_>) {
        let Some(alert) = held.alert() else {
            return;
        };
        if let Err(e) = self.store.record_alert(&alert, alert.at).await {
            tracing::warn!(alert = %alert.key(), error = %e, "could not record the approval alert");
        }
        self.track(&held.tracker()).await;
    }

    /// Starts a tracker of held work's reminders (the one there, if any, is kept).
    pub async fn track(&self, tracker: &Awaiting) {
        if let Err(e) = self.store.track_awaiting(tracker, tracker.since).await {
            tracing::warn!(group = %tracker.group, error = %e, "could not start the approval reminders");
        }
    }

    /// The reminders due at `now`: each tracker's work still waiting is reminded (the next
    /// AWAITING_APPROVAL reminder, once per period whoever races) and its next reminder set;
    /// work no longer waiting drops its tracker.
    pub async fn remind_held(
        &self,
        ledger: &dyn LedgerStore,
        now: DateTime<Utc>,
    ) -> ReminderReport {
        let mut report = ReminderReport::default();
        let due = match self.store.awaiting_due(now, TRACKERS_PER_PASS).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the approval reminders");
                report.errors += 1;
                return report;
            }
        };
        for tracker in due {
            match self.remind_one(ledger, &tracker, now).await {
                Ok(true) => report.reminded += 1,
                Ok(false) => report.dropped += 1,
                Err(e) => {
                    report.errors += 1;
                    tracing::warn!(group = %tracker.group, error = %e, "approval reminder failed; the next pass tries again");
                }
            }
        }
        report
    }

    /// `true`: reminded; `false`: nothing waits any more, the tracker is gone.
    async fn remind_one(
        &self,
        ledger: &dyn LedgerStore,
        tracker: &Awaiting,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let stored = match ledger.get_schedule(&tracker.schedule).await {
            Ok(stored) => stored,
            Err(StoreError::ScheduleNotFound(_)) => {
                self.store.remind_awaiting(tracker, None).await?;
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        let waiting = still_waiting(ledger, tracker).await?;
        let spec = &stored.spec;
        let Some(alert) = approval_alert(
            spec,
            &tracker.group,
            &tracker.held,
            waiting,
            tracker.since,
            now,
        ) else {
            self.store.remind_awaiting(tracker, None).await?;
            return Ok(false);
        };
        self.raise(&alert, spec.alerts.topic.as_deref()).await;
        let next = alerts::next_reminder(&spec.alerts, tracker.since, now);
        self.store.remind_awaiting(tracker, Some(next)).await?;
        Ok(true)
    }
}

/// The AWAITING_APPROVAL for `group` at `now` (its first when `now` is `since`, else the
/// reminder due), naming the run when one run waits. `None` when nothing waits.
fn approval_alert(
    spec: &ScheduleSpec,
    group: &str,
    work: &HeldWork,
    waiting: u32,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<Alert> {
    let mut alert =
        alerts::awaiting_approval(&About::of(spec), &spec.alerts, group, waiting, since, now)?;
    if let HeldWork::Run { key } = work {
        alert.run = Some(key.to_string());
    }
    Some(alert)
}

/// Runs (windows) of the tracker's work still MANUAL_REQUIRED.
async fn still_waiting(ledger: &dyn LedgerStore, tracker: &Awaiting) -> Result<u32, StoreError> {
    let held = |run: &Run| run.status == RunStatus::ManualRequired;
    Ok(match &tracker.held {
        HeldWork::Run { key } => match ledger.get_run(key).await {
            Ok(run) => u32::from(held(&run)) * run.count.max(1),
            Err(StoreError::RunNotFound(_)) => 0,
            Err(e) => return Err(e),
        },
        HeldWork::Windows { first, last } => ledger
            .runs_between(&tracker.schedule, *first, *last)
            .await?
            .iter()
            .filter(|run| held(run))
            .map(|run| run.count.max(1))
            .sum(),
    })
}
