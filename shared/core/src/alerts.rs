//! Alerts: what the scheduler tells people, and when.
//!
//! Pure rules. Each takes the facts a component already holds where the state changes (a
//! run's end, a reconciler pass) and answers the alert, or none. Every alert carries the
//! `subject` that makes it one condition: the same kind and subject are the same alert, which
//! the store records once (a conditional put) before it is published, so racing writers and
//! redeliveries publish it once.

use std::fmt;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::planner::{late_start, LateStart};
use crate::window::utc_text;
use crate::{Priority, Reason, Run, RunStatus, Schedule, ScheduleSpec, Span, Trigger, Window};

/// What an alert is about. The wire names are the JSON body's `kind` and the SNS
/// `kind` attribute subscribers filter on.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AlertKind {
    MissedWindows,
    ConsecutiveFailures,
    DeadlineMissed,
    AwaitingApproval,
    BackfillPaused,
    Recovered,
    PausedOnFailure,
    LedgerIncomplete,
    SuspectResult,
    SlowRun,
}

impl AlertKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::MissedWindows => "MISSED_WINDOWS",
            AlertKind::ConsecutiveFailures => "CONSECUTIVE_FAILURES",
            AlertKind::DeadlineMissed => "DEADLINE_MISSED",
            AlertKind::AwaitingApproval => "AWAITING_APPROVAL",
            AlertKind::BackfillPaused => "BACKFILL_PAUSED",
            AlertKind::Recovered => "RECOVERED",
            AlertKind::PausedOnFailure => "PAUSED_ON_FAILURE",
            AlertKind::LedgerIncomplete => "LEDGER_INCOMPLETE",
            AlertKind::SuspectResult => "SUSPECT_RESULT",
            AlertKind::SlowRun => "SLOW_RUN",
        }
    }
}

impl fmt::Display for AlertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How loud an alert is: `critical` pages, `warning` goes to a channel, `info` is a record.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }

    /// Graded by the schedule's criticality: a LOW job never pages, a CRITICAL job's
    /// problem is never only a record.
    pub fn graded(self, priority: Priority) -> Severity {
        match priority {
            Priority::Low => self.min(Severity::Warning),
            Priority::Critical => self.max(Severity::Warning),
            Priority::High | Priority::Normal => self,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `alerts:` on a schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertSettings {
    /// Failures in a row that alert; unset: by priority (CRITICAL 1, HIGH 2, NORMAL 3, LOW
    /// 3); 0: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_failures: Option<u32>,
    /// How long work may wait for approval before a reminder (default 4h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_after: Option<Span>,
    /// An SNS topic ARN for this schedule's alerts instead of the stack's topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Failures in a row after which the schedule pauses itself (unset: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_failures: Option<u32>,
}

/// The default reminder for work awaiting approval.
pub const DEFAULT_REMIND_AFTER: Span = Span::hours(4);

impl AlertSettings {
    pub fn is_default(&self) -> bool {
        *self == AlertSettings::default()
    }

    /// Failures in a row that alert, `None` when failures never alert. A LOW schedule's
    /// failures alert too, at most as a warning (see [`Severity::graded`]).
    pub fn failure_threshold(&self, priority: Priority) -> Option<u32> {
        let n = self.after_failures.unwrap_or(match priority {
            Priority::Critical => 1,
            Priority::High => 2,
            Priority::Normal | Priority::Low => 3,
        });
        (n > 0).then_some(n)
    }

    pub fn remind_after(&self) -> Span {
        self.remind_after.unwrap_or(DEFAULT_REMIND_AFTER)
    }
}

/// `slo:` on a schedule: the share of windows that should finish within `within` of their
/// `scheduled_for`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FreshnessSlo {
    pub within: Span,
    /// Percent, in (0, 100].
    #[serde(with = "percent_text")]
    #[schemars(schema_with = "crate::schema::percent_or_number")]
    pub target: f64,
}

/// `95%` in manifests and JSON; a bare number is read as percent too.
pub mod percent_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(p: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{p}%"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Text {
            Number(f64),
            Text(String),
        }
        match Text::deserialize(d)? {
            Text::Number(n) => Ok(n),
            Text::Text(t) => parse(&t).map_err(serde::de::Error::custom),
        }
    }

    pub fn parse(text: &str) -> Result<f64, String> {
        text.trim()
            .trim_end_matches('%')
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("`{text}` is not a percentage like 95% or 99.9%"))
    }
}

/// One alert: the SNS message's JSON body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Alert {
    pub kind: AlertKind,
    pub severity: Severity,
    pub schedule: String,
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub window: Option<Window>,
    /// The run it concerns (`{schedule}/RUN#...`), when one run.
    #[serde(default)]
    pub run: Option<String>,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console_url: Option<String>,
    /// When the condition was seen.
    pub at: DateTime<Utc>,
    /// What makes it one condition within its kind and schedule: the run, the gap, the
    /// backfill pause, the reminder.
    pub subject: String,
}

impl Alert {
    /// Its identity: the same key is the same alert, recorded and published once.
    pub fn key(&self) -> String {
        format!("{}#{}", self.kind, self.subject)
    }

    /// The SNS subject: one line of printable ASCII under 100 characters (SNS's limits).
    pub fn headline(&self) -> String {
        let text = format!(
            "[cronledger {}] {} {}: {}",
            self.severity, self.kind, self.schedule, self.message
        );
        let ascii: String = text
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() || c == ' ' {
                    c
                } else {
                    ' '
                }
            })
            .collect();
        if ascii.len() <= 99 {
            ascii
        } else {
            format!("{}...", &ascii[..96])
        }
    }
}

/// Who the alert is for, and what it is about: the fields every rule fills the same way.
#[derive(Debug, Clone)]
pub struct About<'a> {
    pub schedule: &'a str,
    pub owner: Option<&'a str>,
    pub priority: Priority,
}

impl<'a> About<'a> {
    /// What the alerts of `spec`'s schedule name.
    pub fn of(spec: &'a ScheduleSpec) -> About<'a> {
        About {
            schedule: &spec.id,
            owner: spec.owner.as_deref(),
            priority: spec.priority,
        }
    }

    fn alert(
        &self,
        kind: AlertKind,
        severity: Severity,
        subject: String,
        message: String,
        at: DateTime<Utc>,
    ) -> Alert {
        Alert {
            kind,
            severity: severity.graded(self.priority),
            schedule: self.schedule.to_string(),
            owner: self.owner.map(str::to_string),
            window: None,
            run: None,
            message,
            console_url: None,
            at,
            subject,
        }
    }
}

/// A run's identity and window, for the rules about one run.
#[derive(Debug, Clone)]
pub struct RunRef<'a> {
    /// `{schedule}/RUN#...`
    pub key: &'a str,
    pub window: Window,
}

fn about_run(mut alert: Alert, run: &RunRef<'_>) -> Alert {
    alert.window = Some(run.window);
    alert.run = Some(run.key.to_string());
    alert
}

/// A run ended FAILED and the schedule has now failed `streak` times in a row (this one
/// included). Alerts at the threshold N (warning) and at 2N (critical), once each: the runs
/// in between and after add nothing until the schedule recovers.
pub fn failures_in_a_row(
    about: &About<'_>,
    settings: &AlertSettings,
    streak: u32,
    run: &RunRef<'_>,
    at: DateTime<Utc>,
) -> Option<Alert> {
    let n = settings.failure_threshold(about.priority)?;
    let severity = if streak == n {
        Severity::Warning
    } else if streak == n.saturating_mul(2) {
        Severity::Critical
    } else {
        return None;
    };
    let alert = about.alert(
        AlertKind::ConsecutiveFailures,
        severity,
        run.key.to_string(),
        format!("failed {streak} times in a row (alerts at {n})"),
        at,
    );
    Some(about_run(alert, run))
}

/// A run succeeded after `previous_streak` failures in a row: the failure alert's all-clear,
/// when there was a failure alert.
pub fn recovered(
    about: &About<'_>,
    settings: &AlertSettings,
    previous_streak: u32,
    run: &RunRef<'_>,
    at: DateTime<Utc>,
) -> Option<Alert> {
    let n = settings.failure_threshold(about.priority)?;
    if previous_streak < n {
        return None;
    }
    let mut alert = about.alert(
        AlertKind::Recovered,
        Severity::Info,
        run.key.to_string(),
        format!("succeeded after {previous_streak} failures in a row"),
        at,
    );
    // An all-clear is never a page, whatever the schedule's priority.
    alert.severity = Severity::Info;
    Some(about_run(alert, run))
}

/// Whether `streak` failures in a row pause the schedule (`alerts.pause_after_failures`).
pub fn pauses_on_failure(settings: &AlertSettings, streak: u32) -> bool {
    settings
        .pause_after_failures
        .is_some_and(|n| n > 0 && streak >= n)
}

/// The schedule paused itself after `streak` failures in a row.
pub fn paused_on_failure(
    about: &About<'_>,
    streak: u32,
    run: &RunRef<'_>,
    at: DateTime<Utc>,
) -> Alert {
    let alert = about.alert(
        AlertKind::PausedOnFailure,
        Severity::Critical,
        run.key.to_string(),
        format!("paused itself after {streak} failures in a row; resume it once the job is fixed"),
        at,
    );
    about_run(alert, run)
}

/// `deadline:` on a schedule: a run not finished by `scheduled_for + deadline`. `ended_at`
/// is when it ended, `None` while it has not.
pub fn deadline_missed(
    about: &About<'_>,
    deadline: Option<Span>,
    run: &RunRef<'_>,
    ended_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<Alert> {
    let deadline = deadline?;
    let due = run.window.end + deadline.as_delta();
    let late = match ended_at {
        Some(ended) => ended > due,
        None => now > due,
    };
    if !late {
        return None;
    }
    let message = match ended_at {
        Some(ended) => format!(
            "finished at {}, after its deadline {} ({} after the window)",
            utc_text(ended),
            utc_text(due),
            deadline.humanized()
        ),
        None => format!(
            "not finished by its deadline {} ({} after the window)",
            utc_text(due),
            deadline.humanized()
        ),
    };
    let alert = about.alert(
        AlertKind::DeadlineMissed,
        Severity::Warning,
        run.key.to_string(),
        message,
        now,
    );
    Some(about_run(alert, run))
}

/// A run succeeded SUSPECT (its `count` outside its schedule's `expect` band, see
/// [`crate::quality`]): once per run. Its dependents' windows wait for an operator.
pub fn suspect_result(
    about: &About<'_>,
    run: &RunRef<'_>,
    count: Option<u64>,
    reason: crate::quality::QualityReason,
    at: DateTime<Utc>,
) -> Alert {
    let count = count.map_or_else(|| "no count".to_string(), |c| format!("count {c}"));
    let alert = about.alert(
        AlertKind::SuspectResult,
        Severity::Warning,
        run.key.to_string(),
        format!("succeeded with a suspect result: {count}, {reason}; its dependents wait"),
        at,
    );
    about_run(alert, run)
}

/// A run took `duration_ms`, past `threshold_ms` (twice the p95 of the schedule's recent
/// successes, see [`crate::quality::slow`]): once per run.
pub fn slow_run(
    about: &About<'_>,
    run: &RunRef<'_>,
    duration_ms: u64,
    threshold_ms: u64,
    at: DateTime<Utc>,
) -> Alert {
    let alert = about.alert(
        AlertKind::SlowRun,
        Severity::Warning,
        run.key.to_string(),
        format!(
            "took {duration_ms} ms, over {threshold_ms} ms (twice the p95 of its recent successes)"
        ),
        at,
    );
    about_run(alert, run)
}

/// The reconciler recorded missed windows: one alert per gap (`gap_id`, its replay group),
/// with the count, the policy's decision and what awaits approval.
#[derive(Debug, Clone)]
pub struct Gap<'a> {
    pub gap_id: &'a str,
    pub missed: u32,
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    /// What the misfire policy decided, in words (the planner's alert text when it has one).
    pub decision: String,
    /// Windows held for an operator.
    pub held: u32,
}

/// A gap's MISSED_WINDOWS: a warning, critical when some of it is held for an operator (a
/// LOW schedule's at most a warning). A CRITICAL schedule's gap that comes within
/// `remind_after` of its previous one is critical too (see [`repeated_gap`]).
pub fn missed_windows(about: &About<'_>, gap: &Gap<'_>, now: DateTime<Utc>) -> Option<Alert> {
    if gap.missed == 0 {
        return None;
    }
    let severity = if gap.held > 0 {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let mut message = format!(
        "{} missed window(s) from {} to {}: {}",
        gap.missed,
        utc_text(gap.first),
        utc_text(gap.last),
        gap.decision
    );
    if gap.held > 0 {
        message.push_str(&format!("; {} await approval", gap.held));
    }
    let mut alert = about.alert(
        AlertKind::MissedWindows,
        severity,
        gap.gap_id.to_string(),
        message,
        now,
    );
    alert.window = Some(Window::new(gap.first, gap.last));
    Some(alert)
}

/// Whether a schedule's gaps escalate when they repeat: a CRITICAL schedule's first gap is a
/// warning, and another within `alerts.remind_after` of it is critical. Other priorities'
/// gaps are judged alone.
pub fn escalates_repeated_gaps(priority: Priority) -> bool {
    priority == Priority::Critical
}

/// The MISSED_WINDOWS of a gap that came within `remind_after` of its schedule's previous
/// gap, for a schedule that [`escalates_repeated_gaps`]: critical, saying why. Any other
/// alert is returned as it is.
pub fn repeated_gap(mut alert: Alert, remind_after: Span) -> Alert {
    if alert.kind != AlertKind::MissedWindows {
        return alert;
    }
    alert.severity = Severity::Critical;
    alert.message.push_str(&format!(
        "; another gap within {} before it",
        remind_after.humanized()
    ));
    alert
}

/// Reasons a window waits for an operator because it was late: the misfire policy's hold
/// of a missed or late window (MANUAL, a gap too long, side effects, the catch-up cap).
/// Such holds belong to the outage that made them late (see [`outage_group`]).
pub fn held_for_lateness(reason: Option<Reason>) -> bool {
    matches!(
        reason,
        Some(Reason::PolicyManual | Reason::GapTooLong | Reason::SideEffects | Reason::CapExceeded)
    )
}

/// The one AWAITING_APPROVAL group of the holds of one outage of one schedule, named by the
/// outage's first late window: the window a worker found late and held, and the windows
/// the reconciler found missing after it, are one request to the operator (one alert, one
/// reminder series), whichever of them is told first.
pub fn outage_group(schedule: &str, first_late: DateTime<Utc>) -> String {
    format!("outage:{schedule}:{}", utc_text(first_late))
}

/// Where the outage of a gap whose first missing window is `gap_first` began, from the runs
/// the reconciler read: the windows just before the gap whose live runs were held for being
/// late, or still wait for their first start past their grace (their worker holds them when
/// it takes them), belong to it. Answers the outage's first late window and how many such
/// runs precede the gap (0: the outage begins with the gap).
pub fn outage_start(
    schedule: &Schedule,
    gap_first: DateTime<Utc>,
    runs: &[Run],
    now: DateTime<Utc>,
) -> (DateTime<Utc>, u32) {
    let late_in_outage = |run: &Run| {
        if run.trigger != Trigger::Scheduled || run.range_end.is_some() {
            return false;
        }
        match run.status {
            RunStatus::ManualRequired => held_for_lateness(run.reason),
            RunStatus::Pending | RunStatus::Queued => {
                run.attempts == 0
                    && matches!(
                        late_start(schedule, run.key.scheduled_for, now),
                        LateStart::Hold { .. }
                    )
            }
            _ => false,
        }
    };
    let (mut first, mut before) = (gap_first, 0u32);
    while let Some(previous) = schedule.prev_before(first) {
        let Some(run) = runs
            .iter()
            .find(|r| r.key.scheduled_for == previous && late_in_outage(r))
        else {
            break;
        };
        first = previous;
        before = before.saturating_add(run.count.max(1));
    }
    (first, before)
}

/// Work waiting for an operator since `since` (a held gap, a paused catch-up, a backfill
/// started paused, a run held MANUAL_REQUIRED): one alert when it starts waiting, then one
/// reminder per `remind_after` while it still waits. `group` is what waits (a replay group,
/// a backfill id or a run key).
pub fn awaiting_approval(
    about: &About<'_>,
    settings: &AlertSettings,
    group: &str,
    waiting: u32,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<Alert> {
    if waiting == 0 || now < since {
        return None;
    }
    let reminder = (now - since).num_seconds() / reminder_every(settings);
    let (subject, message) = if reminder == 0 {
        (
            group.to_string(),
            format!("{waiting} run(s) of {group} await an operator's approval"),
        )
    } else {
        (
            format!("{group}#reminder-{reminder}"),
            format!(
                "{waiting} run(s) of {group} still await approval, since {}",
                utc_text(since)
            ),
        )
    };
    Some(about.alert(
        AlertKind::AwaitingApproval,
        Severity::Warning,
        subject,
        message,
        now,
    ))
}

/// Seconds between reminders: `remind_after`, at least a minute (one reconciler pass).
fn reminder_every(settings: &AlertSettings) -> i64 {
    i64::try_from(settings.remind_after().as_secs())
        .unwrap_or(i64::MAX)
        .max(60)
}

/// When the first reminder after `now` is due for work waiting since `since`: the next
/// multiple of `remind_after` from `since`, so a late pass does not shift later reminders.
pub fn next_reminder(
    settings: &AlertSettings,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let every = reminder_every(settings);
    let elapsed = (now - since).num_seconds().max(0);
    since + TimeDelta::seconds((elapsed / every + 1).saturating_mul(every))
}

/// A backfill or a catch-up release paused by a live signal (`cause`), since `paused_at`.
pub fn backfill_paused(
    about: &About<'_>,
    what: &str,
    cause: &str,
    paused_at: DateTime<Utc>,
) -> Alert {
    about.alert(
        AlertKind::BackfillPaused,
        Severity::Warning,
        format!("{what}#{}", utc_text(paused_at)),
        format!("{what} paused: {cause}"),
        paused_at,
    )
}

/// What the auditor found wrong with one schedule's ledger over an audited range: counts,
/// and the first few windows of each kind (oldest first).
#[derive(Debug, Clone)]
pub struct Incompleteness<'a> {
    /// The audited range `[start, end)`.
    pub range: Window,
    /// Expected windows with no ledger entry.
    pub missing: u64,
    pub missing_sample: &'a [DateTime<Utc>],
    /// Windows run (or executed) more than once.
    pub duplicates: u64,
    pub duplicate_sample: &'a [DateTime<Utc>],
    /// Entries no version of the schedule explains.
    pub unexplained: u64,
    pub unexplained_sample: &'a [DateTime<Utc>],
}

impl Incompleteness<'_> {
    pub fn is_complete(&self) -> bool {
        self.missing == 0 && self.duplicates == 0 && self.unexplained == 0
    }
}

/// The audited range as an alert's subject: one alert per schedule per range, whoever
/// audits it (the daily pass, an operator's run, a retried invocation).
pub fn audit_subject(range: &Window) -> String {
    format!("audit:{}/{}", utc_text(range.start), utc_text(range.end))
}

/// The auditor found a schedule's ledger wrong over a range: windows missing, run twice, or
/// entries no version explains (invariant 23). Critical, graded by priority: the ledger is
/// the record, and nothing else checks it. `None` when the schedule's ledger is complete.
pub fn ledger_incomplete(
    about: &About<'_>,
    found: &Incompleteness<'_>,
    at: DateTime<Utc>,
) -> Option<Alert> {
    if found.is_complete() {
        return None;
    }
    let part = |count: u64, what: &str, sample: &[DateTime<Utc>]| {
        let mut text = format!("{count} {what}");
        if !sample.is_empty() {
            let listed: Vec<String> = sample.iter().map(|t| utc_text(*t)).collect();
            let more = if count > sample.len() as u64 {
                ", ..."
            } else {
                ""
            };
            text.push_str(&format!(" ({}{more})", listed.join(", ")));
        }
        text
    };
    let message = format!(
        "ledger audit of {}/{}: windows {}; {}; {}",
        utc_text(found.range.start),
        utc_text(found.range.end),
        part(found.missing, "missing", found.missing_sample),
        part(found.duplicates, "duplicated", found.duplicate_sample),
        part(found.unexplained, "unexplained", found.unexplained_sample),
    );
    let mut alert = about.alert(
        AlertKind::LedgerIncomplete,
        Severity::Critical,
        audit_subject(&found.range),
        message,
        at,
    );
    alert.window = Some(found.range);
    Some(alert)
}

/// Failures in a row at the end of `statuses` (newest last), counting only runs that ended:
/// SUCCESS or PARTIAL_SUCCESS ends the streak; SKIPPED, COALESCED and runs still in flight
/// neither count nor end it.
pub fn failure_streak<I>(statuses: I) -> u32
where
    I: IntoIterator<Item = crate::RunStatus>,
    I::IntoIter: DoubleEndedIterator,
{
    use crate::RunStatus as S;
    let mut streak = 0;
    for status in statuses.into_iter().rev() {
        match status {
            S::Failed => streak += 1,
            S::Success | S::PartialSuccess => break,
            _ => {}
        }
    }
    streak
}

#[cfg(test)]
mod tests;
