//! How long the ledger keeps a finished run: the table's TTL attribute (`expires_at`).
//!
//! A run gets a TTL only once nothing moves it any more (a terminal status), counted from
//! when it ended: the schedule's `retention` (default 90 days). What explains trouble is
//! kept longer, [`KEPT_LONGER`]: FAILED runs (an operator may still retry them), missed-window
//! records (SKIPPED MISSED or GRACE_EXPIRED) and range records (one item per outage, the only
//! trace of it). Audit entries, schedules and backfills never expire. A run waiting for
//! anyone (PENDING … MANUAL_REQUIRED, STALLED) carries no TTL, and a run that leaves a
//! terminal status (an operator's retry of a FAILED run) loses it.

use chrono::{DateTime, Utc};

use crate::error::{Code, Issue};
use crate::run::{Reason, Run, RunStatus};
use crate::span::Span;

/// Default `retention`.
pub const DEFAULT_RETENTION: Span = Span::days(90);
/// Shortest `retention`: a week to look at a run, and to outlast a reconciler outage (it
/// reads the runs after its watermark, which must still be there).
pub const MIN_RETENTION: Span = Span::days(7);
/// How long failures, missed windows and range records stay; also the longest `retention`,
/// so nothing ordinary outlives what explains it (and a year-over-year look works).
pub const KEPT_LONGER: Span = Span::days(400);

/// The validation rule: `MIN_RETENTION <= retention <= KEPT_LONGER`.
pub fn check(retention: Span, field: &str) -> Option<Issue> {
    (retention < MIN_RETENTION || retention > KEPT_LONGER).then(|| {
        Issue::new(
            Code::ScheduleInvalidRetention,
            field,
            format!(
                "retention {retention} must be from {MIN_RETENTION} to {KEPT_LONGER} (failures, missed windows and range records are kept {KEPT_LONGER})"
            ),
        )
    })
}

/// Whether a run ending in `status` for `reason` is kept [`KEPT_LONGER`] whatever its
/// retention (range records are marked so when they are created: see [`Run::retention`]).
pub fn kept_longer(status: RunStatus, reason: Option<Reason>) -> bool {
    status == RunStatus::Failed || matches!(reason, Some(Reason::Missed | Reason::GraceExpired))
}

/// The retention a new entry gets: the schedule's, or [`KEPT_LONGER`] for a range record.
pub fn for_entry(schedule_retention: Span, range_record: bool) -> Span {
    if range_record {
        KEPT_LONGER
    } else {
        schedule_retention
    }
}

impl Run {
    /// When the ledger may forget this run (the TTL): `None` while it is not terminal.
    pub fn expires_at(&self) -> Option<DateTime<Utc>> {
        if !self.status.is_terminal() {
            return None;
        }
        let ended = self.completed_at.unwrap_or(self.updated_at);
        let keep = if kept_longer(self.status, self.reason) {
            KEPT_LONGER.max(self.retention)
        } else {
            self.retention
        };
        Some(ended + keep.as_delta())
    }
}
