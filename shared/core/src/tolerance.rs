//! Time tolerances a schedule asks for, checked against what the system can honour.
//!
//! - `grace` has a floor: the ticker fires once a minute, so a window it fires a few seconds
//!   late is the normal case, and a grace under about half a tick would skip or hold windows
//!   that were merely one tick-jitter late.
//! - `max_runtime` must end inside one worker invocation with room for the worker's own
//!   bookkeeping (admission reads, the attempt's writes, the outcome's write):
//!   `max_runtime + margin <= worker timeout`. Past the Lambda timeout the worker is killed
//!   mid-attempt and the run can only end STALLED, never FAILED (MAX_RUNTIME_EXCEEDED) cleanly.
//! - an http job's `timeout` must fit in the same budget, and in `max_runtime` itself: a call
//!   allowed longer than the attempt is cut by `max_runtime` first, so the timeout would lie.

use crate::error::{Code, Issue};
use crate::span::Span;
use crate::spec::{JobSpec, ValidationRules};

/// What one schedule asks for.
pub struct Requested<'a> {
    pub grace: Span,
    pub max_runtime: Span,
    pub job: Option<&'a JobSpec>,
}

/// Appends an issue for every tolerance that cannot be honoured under `rules`; `field`
/// turns a top-level field name into its path.
pub fn check(
    requested: &Requested<'_>,
    rules: &ValidationRules,
    field: &dyn Fn(&str) -> String,
    issues: &mut Vec<Issue>,
) {
    if requested.grace < rules.min_grace {
        issues.push(Issue::new(
            Code::ScheduleGraceTooShort,
            field("grace"),
            format!(
                "grace {} is under the floor {}: the ticker fires once a minute, so windows a few seconds late are normal",
                requested.grace, rules.min_grace
            ),
        ));
    }
    let budget = worker_budget(rules);
    if requested.max_runtime > budget {
        issues.push(Issue::new(
            Code::ScheduleMaxRuntimeOverWorkerTimeout,
            field("max_runtime"),
            format!(
                "max_runtime {} cannot be honoured: the worker's timeout is {} and it keeps {} for its own writes, so at most {budget}",
                requested.max_runtime, rules.worker_timeout, rules.worker_margin
            ),
        ));
    }
    if let Some(JobSpec::Http { timeout, .. }) = requested.job {
        let path = format!("{}.timeout", field("job"));
        if *timeout > budget {
            issues.push(Issue::new(
                Code::ScheduleHttpTimeoutOverWorkerTimeout,
                path,
                format!(
                    "timeout {timeout} cannot be honoured: the worker's timeout is {} and it keeps {} for its own writes, so at most {budget}",
                    rules.worker_timeout, rules.worker_margin
                ),
            ));
        } else if *timeout > requested.max_runtime {
            issues.push(Issue::new(
                Code::ScheduleHttpTimeoutOverMaxRuntime,
                path,
                format!(
                    "timeout {timeout} is longer than max_runtime {}: the attempt would be cut before the call times out",
                    requested.max_runtime
                ),
            ));
        }
    }
}

/// The longest a job may run in one worker invocation.
pub fn worker_budget(rules: &ValidationRules) -> Span {
    Span::seconds(
        rules
            .worker_timeout
            .as_secs()
            .saturating_sub(rules.worker_margin.as_secs()),
    )
}
