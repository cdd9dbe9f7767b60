//! Stable error codes and the validation problem type.
//!
//! Codes are part of the public contract (CLI output, API error bodies, logs):
//! add new ones, never rename.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A stable, machine-readable error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Code {
    /// The document is not valid YAML/JSON or not shaped like a manifest.
    ManifestInvalid,
    /// Two schedules in one manifest share an id.
    ScheduleDuplicateId,
    ScheduleInvalidId,
    ScheduleMissingField,
    ScheduleUnknownField,
    ScheduleInvalidField,
    ScheduleInvalidCron,
    ScheduleUnknownTimezone,
    ScheduleNeverFires,
    ScheduleIntervalTooShort,
    SchedulePayloadTooLarge,
    SchedulePayloadSecret,
    ScheduleUnknownPolicy,
    ScheduleInvalidDuration,
    ScheduleInvalidJob,
    /// `grace` under the floor the ticker's cadence makes meaningful (30 s).
    ScheduleGraceTooShort,
    /// `max_runtime` plus the worker's margin does not fit in the worker's timeout.
    ScheduleMaxRuntimeOverWorkerTimeout,
    /// An http job's `timeout` plus the worker's margin does not fit in the worker's timeout.
    ScheduleHttpTimeoutOverWorkerTimeout,
    /// An http job's `timeout` is longer than the schedule's `max_runtime`.
    ScheduleHttpTimeoutOverMaxRuntime,
    /// An http job's url carries `user:password@`.
    HttpUrlHasCredentials,
    /// An http job's url names a loopback, link-local or unspecified address.
    HttpTargetForbidden,
    /// An http job's `auth.type` is not one cronledger knows.
    HttpAuthUnknownType,
    /// An http job's `auth` is malformed (no secret, a bad header, no signing service).
    HttpAuthInvalid,
    /// An http job's `auth.secret` is outside the names the worker may read.
    HttpAuthSecretOutsidePrefix,
    /// A run status change that the transition table does not allow.
    RunInvalidTransition,
    /// A planner input that cannot be planned (for example `now` before the watermark).
    PlanInvalidInput,
    /// `jitter` is zero, over an hour, or not shorter than the schedule's shortest interval.
    ScheduleInvalidJitter,
    /// `retention` is outside 7 to 400 days.
    ScheduleInvalidRetention,
    /// A warning, never an error: many schedules fire on the same minute without `jitter`.
    Herd,
    /// `alerts` is malformed (an unknown key, a bad number or duration, a bad topic ARN).
    ScheduleInvalidAlerts,
    /// `deadline` is zero or over a week.
    ScheduleInvalidDeadline,
    /// `slo` is malformed: `within` zero or over a week, `target` outside (0, 100] percent.
    ScheduleInvalidSlo,
    /// `after` is not a list of up to ten distinct schedule ids other than its own, or
    /// `accept_partial` is not a boolean or has no `after` to apply to.
    ScheduleInvalidAfter,
    /// `after` names a schedule that does not exist.
    DependencyUnknownUpstream,
    /// `after` edges go round in a cycle.
    DependencyCycle,
    /// A schedule and an upstream it runs after fire on different grids (cron or zone).
    DependencyGridMismatch,
    /// A calendar is malformed (a bad name, a date that is not a date, a range backwards).
    CalendarInvalid,
    /// A schedule names a calendar that does not exist.
    CalendarUnknown,
    /// A calendar is still named by schedules and cannot be deleted.
    CalendarInUse,
    /// `exclude` is not a list of dates or date ranges.
    ScheduleInvalidExclude,
    /// `start_at`/`end_at` are malformed or out of order, or `max_runs` is out of range.
    ScheduleInvalidBounds,
    /// `dst` is not `{gap: next_valid | skip, fold: first | both}`.
    ScheduleInvalidDst,
    /// `expect` is malformed: not a mapping of `min_count`, `max_count` (whole numbers, min
    /// not above max) and `learned`, or none of them; or `accept_suspect` is not a boolean
    /// or has no `after` to apply to.
    ScheduleInvalidExpect,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::ManifestInvalid => "MANIFEST_INVALID",
            Code::ScheduleDuplicateId => "SCHEDULE_DUPLICATE_ID",
            Code::ScheduleInvalidId => "SCHEDULE_INVALID_ID",
            Code::ScheduleMissingField => "SCHEDULE_MISSING_FIELD",
            Code::ScheduleUnknownField => "SCHEDULE_UNKNOWN_FIELD",
            Code::ScheduleInvalidField => "SCHEDULE_INVALID_FIELD",
            Code::ScheduleInvalidCron => "SCHEDULE_INVALID_CRON",
            Code::ScheduleUnknownTimezone => "SCHEDULE_UNKNOWN_TIMEZONE",
            Code::ScheduleNeverFires => "SCHEDULE_NEVER_FIRES",
            Code::ScheduleIntervalTooShort => "SCHEDULE_INTERVAL_TOO_SHORT",
            Code::SchedulePayloadTooLarge => "SCHEDULE_PAYLOAD_TOO_LARGE",
            Code::SchedulePayloadSecret => "SCHEDULE_PAYLOAD_SECRET",
            Code::ScheduleUnknownPolicy => "SCHEDULE_UNKNOWN_POLICY",
            Code::ScheduleInvalidDuration => "SCHEDULE_INVALID_DURATION",
            Code::ScheduleInvalidJob => "SCHEDULE_INVALID_JOB",
            Code::ScheduleGraceTooShort => "SCHEDULE_GRACE_TOO_SHORT",
            Code::ScheduleMaxRuntimeOverWorkerTimeout => "SCHEDULE_MAX_RUNTIME_OVER_WORKER_TIMEOUT",
            Code::ScheduleHttpTimeoutOverWorkerTimeout => {
                "SCHEDULE_HTTP_TIMEOUT_OVER_WORKER_TIMEOUT"
            }
            Code::ScheduleHttpTimeoutOverMaxRuntime => "SCHEDULE_HTTP_TIMEOUT_OVER_MAX_RUNTIME",
            Code::HttpUrlHasCredentials => "HTTP_URL_HAS_CREDENTIALS",
            Code::HttpTargetForbidden => "HTTP_TARGET_FORBIDDEN",
            Code::HttpAuthUnknownType => "HTTP_AUTH_UNKNOWN_TYPE",
            Code::HttpAuthInvalid => "HTTP_AUTH_INVALID",
            Code::HttpAuthSecretOutsidePrefix => "HTTP_AUTH_SECRET_OUTSIDE_PREFIX",
            Code::RunInvalidTransition => "RUN_INVALID_TRANSITION",
            Code::PlanInvalidInput => "PLAN_INVALID_INPUT",
            Code::ScheduleInvalidJitter => "SCHEDULE_INVALID_JITTER",
            Code::ScheduleInvalidRetention => "SCHEDULE_INVALID_RETENTION",
            Code::Herd => "HERD",
            Code::ScheduleInvalidAlerts => "SCHEDULE_INVALID_ALERTS",
            Code::ScheduleInvalidDeadline => "SCHEDULE_INVALID_DEADLINE",
            Code::ScheduleInvalidSlo => "SCHEDULE_INVALID_SLO",
            Code::ScheduleInvalidAfter => "SCHEDULE_INVALID_AFTER",
            Code::DependencyUnknownUpstream => "DEPENDENCY_UNKNOWN_UPSTREAM",
            Code::DependencyCycle => "DEPENDENCY_CYCLE",
            Code::DependencyGridMismatch => "DEPENDENCY_GRID_MISMATCH",
            Code::CalendarInvalid => "CALENDAR_INVALID",
            Code::CalendarUnknown => "CALENDAR_UNKNOWN",
            Code::CalendarInUse => "CALENDAR_IN_USE",
            Code::ScheduleInvalidExclude => "SCHEDULE_INVALID_EXCLUDE",
            Code::ScheduleInvalidBounds => "SCHEDULE_INVALID_BOUNDS",
            Code::ScheduleInvalidDst => "SCHEDULE_INVALID_DST",
            Code::ScheduleInvalidExpect => "SCHEDULE_INVALID_EXPECT",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One validation problem: which field, which rule, in words.
#[derive(
    Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error, schemars::JsonSchema,
)]
#[error("{code}: {message}")]
pub struct Issue {
    pub code: Code,
    /// Dotted path of the offending field, e.g. `schedules[nightly].job.payload.password`
    /// (the schedule named by its id, or by its position when it has no usable id).
    pub field: String,
    pub message: String,
    /// The schedule the problem is in, when it has a usable id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The schedule's position in a manifest's `schedules` list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
}

impl Issue {
    pub fn new(code: Code, field: impl Into<String>, message: impl Into<String>) -> Issue {
        Issue {
            code,
            field: field.into(),
            message: message.into(),
            id: None,
            index: None,
        }
    }

    /// The issue placed in one schedule: its id (when usable) and its manifest position.
    pub fn in_schedule(mut self, id: Option<&str>, index: Option<usize>) -> Issue {
        self.id = id.map(str::to_string);
        self.index = index;
        self
    }
}

/// Every problem found in one input, never just the first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} problem(s): {}", .0.len(), summary(.0))]
pub struct Invalid(pub Vec<Issue>);

fn summary(issues: &[Issue]) -> String {
    issues
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

impl Invalid {
    pub fn one(issue: Issue) -> Invalid {
        Invalid(vec![issue])
    }
}
