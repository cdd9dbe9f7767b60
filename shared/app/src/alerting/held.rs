//! Work held for an operator (MANUAL_REQUIRED): one AWAITING_APPROVAL when it starts
//! waiting, then a reminder each `alerts.remind_after` while it still waits.
//!
//! Whoever holds the work (the ticker for an `approval: every_run` window, the worker for an
//! unknown outcome, a guard over its limit or a late window, the reconciler for a held gap
//! or a stalled run) raises the first alert and starts a tracker keyed by (schedule, group).
//! The holds of one outage (the late window a worker held, the gap's windows the reconciler
//! held) are one group named by the outage ([`alerts::outage_group`]), so whichever is told
//! second is recorded once and not published again. Each pass asks the store for the
//! trackers whose reminder is due (one query, empty on most passes), looks whether their
//! work still waits, and reminds or drops them.

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::{Awaiting, HeldWork, LedgerStore, StoreError};
use cronledger_core::alerts::{self, About, Alert};
use cronledger_core::{Run, RunStatus, ScheduleSpec};
use serde::Serialize;

use super::Alerter;

/// Trackers looked at per pass.
const TRACKERS_PER_PASS: u32 = 100;

/// The group of a schedule's gap watch: a tracker that remembers its last gap for
/// `remind_after` (see [`gap_watch`]). Never a held group: those are run keys, replay
/// groups, backfills and outages.
const GAP_WATCH_GROUP: &str = "gap-watch";

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
    /// One run held for an operator. A run held for being late (its worker found it past
    /// its grace and its policy holds it) is the first of its outage's holds: its group is
    /// the outage's, and its reminders follow every window held from it up to `since` (the
    /// gap the reconciler finds after it is held in that stretch).
    pub fn run(spec: &'a ScheduleSpec, run: &Run, since: DateTime<Utc>) -> Held<'a> {
        let waiting = run.count.max(1);
        if alerts::held_for_lateness(run.reason) {
            return Held::outage(spec, run.key.scheduled_for, since, waiting, since);
        }
        Held {
            spec,
            group: run.key.to_string(),
            work: HeldWork::Run {
                key: run.key.clone(),
            },
            waiting,
            since,
        }
    }

    /// `waiting` windows held for an operator in `[first, last]` by one outage whose first
    /// late window is `first`.
    pub fn outage(
        spec: &'a ScheduleSpec,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
        waiting: u32,
        since: DateTime<Utc>,
    ) -> Held<'a> {
        Held {
            spec,
            group: alerts::outage_group(&spec.id, first),
            work: HeldWork::Windows { first, last },
            waiting,
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

/// The tracker that tells a schedule's gap in `[first, last]`, seen at `seen`, from one
/// within `remind_after` of the previous (see [`alerts::escalates_repeated_gaps`]): one
/// conditional put per gap ([`Alerter::first_gap_within`]), and the reminder pass drops it
/// once `remind_after` is over. A gap that finds it still there repeats the one before.
pub fn gap_watch(
    spec: &ScheduleSpec,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    seen: DateTime<Utc>,
) -> Awaiting {
    Awaiting {
        schedule: spec.id.clone(),
        group: GAP_WATCH_GROUP.to_string(),
        held: HeldWork::Windows { first, last },
        since: seen,
        remind_at: seen + spec.alerts.remind_after().as_delta(),
    }
}

/// Whether `tracker` is a gap watch rather than held work.
pub fn is_gap_watch(tracker: &Awaiting) -> bool {
    tracker.group == GAP_WATCH_GROUP
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

    /// Starts `watch` (see [`gap_watch`]) from `now`, the pass's time (the watch lasts its
    /// `remind_after` from when it is written): `true` when the schedule had no gap
    /// within its `remind_after` (this gap is its first), `false` when the watch of an
    /// earlier one was still there. A store that cannot answer counts it a first gap: a
    /// missed escalation is better than a page for nothing. (Two reconcilers passing over
    /// one gap at the same moment may each see the other's watch; the gap's alert is still
    /// recorded once, at the severity of whichever records it first.)
    pub async fn first_gap_within(&self, watch: &Awaiting, now: DateTime<Utc>) -> bool {
        let remind_after = (watch.remind_at - watch.since).max(TimeDelta::zero());
        let started = Awaiting {
            since: now,
            remind_at: now + remind_after,
            ..watch.clone()
        };
        match self.store.track_awaiting(&started, now).await {
            Ok(first) => first,
            Err(e) => {
                tracing::warn!(schedule = %watch.schedule, error = %e, "could not watch for a repeated gap");
                true
            }
        }
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
        if is_gap_watch(tracker) {
            // Its `remind_after` is over: the schedule's next gap is a first one again.
            self.store.remind_awaiting(tracker, None).await?;
            return Ok(false);
        }
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
