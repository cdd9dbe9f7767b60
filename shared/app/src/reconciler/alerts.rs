//! The alerts a pass raises: missed windows (one per gap), work awaiting approval (one per
//! gap or backfill, then a reminder per `alerts.remind_after`), runs past their `deadline`,
//! catch-up release paused by a live signal; then the outbox of alerts whose publish failed.
//! Decided during the pass, raised once at its end (see [`crate::alerting`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cronledger_aws::Awaiting;
use cronledger_core::alerts::{self, About, Alert, AlertKind, Gap, RunRef};
use cronledger_core::planner::{Action, Plan};
use cronledger_core::window::utc_text;
use cronledger_core::{Lane, Priority, Run, Schedule, ScheduleSpec, Span};

use super::{ReconcileReport, Reconciler};
use crate::alerting::{gap_watch, is_gap_watch, Held};
use crate::metrics::Metric;

/// What a lane-wide alert names as its schedule: no one schedule's owner gets it by an
/// owner filter, every subscriber without one does.
fn lane_subject(lane: Lane) -> String {
    format!("lane:{lane}")
}

/// A live signal paused the catch-up release of `lane` (its backfills and catch-up runs).
pub(super) fn release_paused(lane: Lane, cause: Option<&str>, now: DateTime<Utc>) -> Alert {
    let subject = lane_subject(lane);
    let about = About {
        schedule: &subject,
        owner: None,
        priority: Priority::Normal,
    };
    alerts::backfill_paused(
        &about,
        &format!("catch-up release on the {lane} lane"),
        cause.unwrap_or("a live signal"),
        now,
    )
}

impl Reconciler {
    /// A gap of `missed` windows: MISSED_WINDOWS with the policy's decision (and, for a
    /// schedule whose repeated gaps escalate, its gap watch), and AWAITING_APPROVAL when
    /// some of it is held for an operator: one group with the late runs just before it in
    /// `read` (the runs the pass read, at `now`), which their worker holds for the same
    /// outage.
    pub(super) fn gap_alerts(
        &self,
        schedule: &Schedule,
        plan: &Plan,
        missed: u32,
        read: &[Run],
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) {
        let spec = &schedule.spec;
        let (Some(first), Some(last)) = (plan.entries.first(), plan.entries.last()) else {
            return;
        };
        let gap_id = plan
            .replay_group_id
            .clone()
            .unwrap_or_else(|| format!("gap:{}:{}", spec.id, utc_text(first.scheduled_for)));
        let holds: Vec<_> = plan
            .entries
            .iter()
            .filter(|e| matches!(e.action, Action::Hold { .. }))
            .collect();
        let held: u32 = holds.iter().map(|e| e.count).sum();
        let t = &plan.totals;
        let decision = plan.alerts.first().map_or_else(
            || {
                format!(
                    "{} to run, {} skipped, {} coalesced, {} held ({})",
                    t.fire, t.skipped, t.coalesced, t.manual, spec.misfire
                )
            },
            |a| a.message.clone(),
        );
        let last_window = last.range_end.unwrap_or(last.scheduled_for);
        let gap = Gap {
            gap_id: &gap_id,
            missed,
            first: first.scheduled_for,
            last: last_window,
            decision,
            held,
        };
        let topic = spec.alerts.topic.clone();
        let about = About::of(spec);
        if let Some(alert) = alerts::missed_windows(&about, &gap, plan.through) {
            if alerts::escalates_repeated_gaps(spec.priority) {
                report.to_track.push(gap_watch(
                    spec,
                    first.scheduled_for,
                    last_window,
                    plan.through,
                ));
            }
            report.to_raise.push((alert, topic.clone()));
        }
        if plan.backfill.as_ref().is_some_and(|b| b.start_paused) {
            // The held windows wait as one paused backfill: its reminders follow it.
            return;
        }
        let Some(last_held) = holds.last() else {
            return;
        };
        let (outage_first, late_before) =
            alerts::outage_start(schedule, first.scheduled_for, read, now);
        let held = Held::outage(
            spec,
            outage_first,
            last_held.range_end.unwrap_or(last_held.scheduled_for),
            held.saturating_add(late_before),
            plan.through,
        );
        if let Some(alert) = held.alert() {
            report.to_raise.push((alert, topic));
            report.to_track.push(held.tracker());
        }
    }

    /// Active runs of schedules with a `deadline` that have not finished by it.
    pub(super) fn deadline_alerts(
        &self,
        deadlines: &BTreeMap<String, ScheduleSpec>,
        active: &[Run],
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) {
        for run in active.iter().filter(|r| !r.status.is_terminal()) {
            let Some(spec) = deadlines.get(&run.key.schedule_id) else {
                continue;
            };
            let key = run.key.to_string();
            let run_ref = RunRef {
                key: &key,
                window: run.window,
            };
            if let Some(alert) =
                alerts::deadline_missed(&About::of(spec), spec.deadline, &run_ref, None, now)
            {
                report.to_raise.push((alert, spec.alerts.topic.clone()));
            }
        }
    }

    /// Backfills waiting for an operator's approval: one alert when they start waiting, a
    /// reminder per `alerts.remind_after` while they still do.
    pub(super) async fn approval_reminders(
        &self,
        now: DateTime<Utc>,
        report: &mut ReconcileReport,
    ) {
        let Some(ops) = &self.backfills else {
            return;
        };
        let open = match ops.open_backfills().await {
            Ok(open) => open,
            Err(e) => return report.error("open backfills", &e.into()),
        };
        for backfill in open.iter().filter(|b| b.awaiting_approval()) {
            let Ok(stored) = self.store.get_schedule(&backfill.schedule_id).await else {
                continue;
            };
            let spec = &stored.spec;
            let waiting = backfill.total_windows.min(u64::from(u32::MAX)) as u32;
            if let Some(alert) = alerts::awaiting_approval(
                &About::of(spec),
                &spec.alerts,
                &format!("backfill:{}", backfill.id),
                waiting.max(1),
                backfill.created_at,
                now,
            ) {
                report.to_raise.push((alert, spec.alerts.topic.clone()));
            }
        }
    }

    /// Raises what the pass decided, then publishes the outbox. The due reminders go
    /// first: they drop the gap watches whose `remind_after` is over, so a gap after that
    /// is a first one again.
    pub(super) async fn raise_alerts(&self, now: DateTime<Utc>, report: &mut ReconcileReport) {
        let decided = std::mem::take(&mut report.to_raise);
        let (mut watches, trackers): (Vec<_>, Vec<_>) = std::mem::take(&mut report.to_track)
            .into_iter()
            .partition(is_gap_watch);
        let Some(alerter) = &self.alerter else {
            for (alert, _) in &decided {
                tracing::warn!(kind = %alert.kind, schedule = %alert.schedule, key = %alert.key(), message = %alert.message, "alert (no alert topic configured)");
            }
            return;
        };
        let reminders = alerter.remind_held(self.store.as_ref(), now).await;
        report.approval_reminders += reminders.reminded;
        for (alert, topic) in decided {
            let alert = match take_watch(&mut watches, &alert) {
                Some(watch) if !alerter.first_gap_within(&watch, now).await => {
                    alerts::repeated_gap(alert, Span::from_delta(watch.remind_at - watch.since))
                }
                _ => alert,
            };
            if alerter.raise(&alert, topic.as_deref()).await
                == crate::alerting::AlertFate::Published
            {
                report.alerts_published += 1;
            }
        }
        for tracker in trackers {
            alerter.track(&tracker).await;
        }
        let outbox = alerter.publish_outbox(self.store.as_ref(), now).await;
        report.alerts_from_outbox += outbox.published;
        self.metrics.count(
            Metric::AlertsPublishedFromOutbox,
            u64::from(outbox.published),
        );
    }
}

/// The gap watch of `alert`'s gap, when it is a MISSED_WINDOWS with one: each gap's alert
/// takes its own, oldest first.
fn take_watch(watches: &mut Vec<Awaiting>, alert: &Alert) -> Option<Awaiting> {
    if alert.kind != AlertKind::MissedWindows {
        return None;
    }
    let at = watches.iter().position(|w| w.schedule == alert.schedule)?;
    Some(watches.remove(at))
}
