//! The schedule spec (manifest format): its types and documented defaults. Validation is in
//! [`validate`].

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::alerts::{AlertSettings, FreshnessSlo};
use crate::error::{Code, Issue};
use crate::http_target::{check_auth, check_http_url, redact_url_credentials, HttpAuth};
use crate::named_enum;
use crate::policy::{MisfirePolicy, OverlapPolicy, Priority};
use crate::span::Span;

mod alerting;
mod bounds;
mod field_reader;
mod job_check;
mod upstreams;
mod validate;

pub use upstreams::{Grid, UpstreamGrid};
pub use validate::{
    parse_document, parse_manifest, read_manifest, validate_schedule, validate_target,
    validate_timing, validate_with_upstreams, Manifest,
};

/// Catch-up gap tiers: where "recent" ends and "history" begins (DESIGN catch-up table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CatchUpTiers {
    /// Gaps up to this are replayed at once on the correction lane.
    pub immediate: Span,
    /// Gaps up to this are replayed one at a time, oldest first.
    pub serial: Span,
    /// Gaps up to this become a running, throttled backfill; longer ones wait for approval.
    pub backfill: Span,
}

impl Default for CatchUpTiers {
    fn default() -> Self {
        CatchUpTiers {
            immediate: Span::minutes(5),
            serial: Span::hours(1),
            backfill: Span::hours(24),
        }
    }
}

/// What a run executes. Small and secret-free: the payload is stored in every ledger entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum JobSpec {
    /// POST JSON to a URL with an `Idempotency-Key` header.
    Http {
        url: String,
        #[serde(default = "default_http_timeout")]
        timeout: Span,
        #[serde(default, skip_serializing_if = "Value::is_null")]
        payload: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        guard: Option<JobGuard>,
        /// How the call authenticates: a header from Secrets Manager, or SigV4.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<HttpAuth>,
    },
    /// Invoke a Lambda function synchronously.
    Lambda {
        function: String,
        #[serde(default, skip_serializing_if = "Value::is_null")]
        payload: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        guard: Option<JobGuard>,
    },
    /// A handler compiled into the worker, looked up by `name`.
    Handler {
        name: String,
        #[serde(default, skip_serializing_if = "Value::is_null")]
        payload: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        guard: Option<JobGuard>,
    },
    /// Succeeds after `duration`, failing the first `fail_times` attempts (demos, simulation).
    Noop {
        #[serde(default)]
        duration: Span,
        /// Milliseconds on top of `duration`: a sub-second job (a 200 ms webhook's latency
        /// in a cost simulation).
        #[serde(default, skip_serializing_if = "is_zero")]
        duration_ms: u64,
        #[serde(default)]
        fail_times: u32,
        /// Every attempt of a window scheduled before this instant fails for good: a job that
        /// was broken and got fixed (demos, alert simulations).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fail_before: Option<DateTime<Utc>>,
        #[serde(default, skip_serializing_if = "Value::is_null")]
        payload: Value,
        /// What its dry run answers (`None`: it cannot dry-run), so a guard can be simulated.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        affected: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        guard: Option<JobGuard>,
        /// Answers this many children (`{"count": N, "batch": 1}`), each a noop too.
        #[serde(default, skip_serializing_if = "is_zero32")]
        children: u32,
        /// The first this many children fail on every attempt.
        #[serde(default, skip_serializing_if = "is_zero32")]
        fail_children: u32,
        /// The `count` its success reports (a result band can be simulated).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        /// The `count` each run of the schedule reports: the n-th run the n-th value, the
        /// last repeating (before `count`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        count_sequence: Vec<u64>,
    },
    /// Runs its steps in order, each as its own attempt from its own lane message, resuming
    /// at the first that has not succeeded (see [`crate::steps`]).
    Steps { steps: Vec<crate::steps::Step> },
}

/// A destructive job's limit: before each execution the job is dry-run, and a run whose
/// dry run reports more than `max_affected` items waits for an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobGuard {
    pub max_affected: u64,
}

named_enum!(
    /// Whether each window of a schedule waits for an operator before it runs.
    #[derive(Default)]
    Approval {
        /// Windows run when due.
        #[default]
        None => "none",
        /// Every window is recorded MANUAL_REQUIRED (APPROVAL_REQUIRED) when due and runs only
        /// once approved; unapproved past `approval_timeout`, it ends SKIPPED (APPROVAL_TIMEOUT).
        EveryRun => "every_run",
    }
);

impl Approval {
    pub fn is_none(&self) -> bool {
        *self == Approval::None
    }
}

/// A steps job has no payload of its own (each step has its own).
static NO_PAYLOAD: Value = Value::Null;

fn default_http_timeout() -> Span {
    Span::seconds(30)
}

impl JobSpec {
    pub fn type_name(&self) -> &'static str {
        match self {
            JobSpec::Http { .. } => "http",
            JobSpec::Lambda { .. } => "lambda",
            JobSpec::Handler { .. } => "handler",
            JobSpec::Noop { .. } => "noop",
            JobSpec::Steps { .. } => "steps",
        }
    }

    /// How long a noop job waits (`duration` plus `duration_ms`); `None` for other jobs.
    pub fn noop_wait(&self) -> Option<std::time::Duration> {
        match self {
            JobSpec::Noop {
                duration,
                duration_ms,
                ..
            } => Some(duration.as_std() + std::time::Duration::from_millis(*duration_ms)),
            _ => None,
        }
    }

    /// A noop with a `count_sequence`, as the `n`-th run (1 for the first) of its schedule
    /// runs it: `count` is the sequence's n-th value (the last one repeating) and the
    /// sequence is gone. `None` for any other job.
    pub fn noop_count_for(&self, n: usize) -> Option<JobSpec> {
        let JobSpec::Noop { count_sequence, .. } = self else {
            return None;
        };
        let value = count_sequence
            .get(n.saturating_sub(1))
            .or(count_sequence.last())
            .copied()?;
        let mut resolved = self.clone();
        if let JobSpec::Noop {
            count,
            count_sequence,
            ..
        } = &mut resolved
        {
            *count = Some(value);
            count_sequence.clear();
        }
        Some(resolved)
    }

    pub fn payload(&self) -> &Value {
        match self {
            JobSpec::Http { payload, .. }
            | JobSpec::Lambda { payload, .. }
            | JobSpec::Handler { payload, .. }
            | JobSpec::Noop { payload, .. } => payload,
            JobSpec::Steps { .. } => &NO_PAYLOAD,
        }
    }

    /// The destructive-job guard, when the job declares one.
    pub fn guard(&self) -> Option<&JobGuard> {
        match self {
            JobSpec::Http { guard, .. }
            | JobSpec::Lambda { guard, .. }
            | JobSpec::Handler { guard, .. }
            | JobSpec::Noop { guard, .. } => guard.as_ref(),
            JobSpec::Steps { .. } => None,
        }
    }

    /// The spec as a viewer may see it: an http url's `user:password@` (stored before such
    /// urls were refused) is redacted.
    pub fn redacted(&self) -> JobSpec {
        let mut job = self.clone();
        match &mut job {
            JobSpec::Http { url, .. } => *url = redact_url_credentials(url),
            JobSpec::Steps { steps } => {
                for step in steps {
                    step.target = step.target.redacted();
                }
            }
            _ => {}
        }
        job
    }

    /// The steps of a `type: steps` job; `None` for a one-call job.
    pub fn steps(&self) -> Option<&[crate::steps::Step]> {
        match self {
            JobSpec::Steps { steps } => Some(steps),
            _ => None,
        }
    }

    /// `payload.tenant`, which becomes part of the idempotency key.
    pub fn tenant(&self) -> Option<&str> {
        self.payload().get("tenant").and_then(Value::as_str)
    }
}

/// A validated schedule: the rule, not its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub cron: String,
    #[serde(with = "tz_name")]
    #[schemars(schema_with = "crate::schema::time_zone")]
    pub timezone: Tz,
    #[serde(default = "defaults::enabled")]
    pub enabled: bool,
    #[serde(default = "defaults::misfire")]
    pub misfire: MisfirePolicy,
    #[serde(default = "defaults::overlap")]
    pub overlap: OverlapPolicy,
    #[serde(default = "defaults::grace")]
    pub grace: Span,
    #[serde(default = "defaults::max_auto_catch_up")]
    pub max_auto_catch_up: u32,
    #[serde(default = "defaults::max_runtime")]
    pub max_runtime: Span,
    #[serde(default = "defaults::priority")]
    pub priority: Priority,
    #[serde(default = "defaults::side_effects")]
    pub side_effects: bool,
    /// The job tolerates being started again for a window after a crash mid-run.
    #[serde(default)]
    pub idempotent: bool,
    /// Attempts per run before it fails for good (first try included).
    #[serde(default = "defaults::max_attempts")]
    pub max_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default)]
    pub catch_up: CatchUpTiers,
    /// `every_run`: each window waits for an operator's approval.
    #[serde(default, skip_serializing_if = "Approval::is_none")]
    pub approval: Approval,
    /// How long a window waits for approval before it ends SKIPPED (APPROVAL_TIMEOUT).
    #[serde(
        default = "defaults::approval_timeout",
        skip_serializing_if = "defaults::is_approval_timeout"
    )]
    pub approval_timeout: Span,
    /// Each occurrence fires at a fixed offset in `[0, jitter)` after it (see
    /// [`crate::jitter`]); `None`: on the occurrence itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Span>,
    /// How long a finished run stays in the ledger (see [`crate::retention`]).
    #[serde(
        default = "defaults::retention",
        skip_serializing_if = "defaults::is_retention"
    )]
    pub retention: Span,
    /// Who hears about this schedule's problems, and when (see [`crate::alerts`]).
    #[serde(default, skip_serializing_if = "AlertSettings::is_default")]
    pub alerts: AlertSettings,
    /// A run not finished this long after its `scheduled_for` alerts once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Span>,
    /// The freshness objective the schedule's health reports against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<FreshnessSlo>,
    /// Schedules whose run for a business window must succeed before this schedule's run
    /// for that window (see [`crate::dependency`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// An upstream's PARTIAL_SUCCESS counts as success.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_partial: bool,
    /// An upstream's SUSPECT success (see [`crate::quality`]) counts as success; without it
    /// the window waits for an operator, MANUAL_REQUIRED (UPSTREAM_SUSPECT).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_suspect: bool,
    /// The band a success's reported `count` must fall in; outside it the run is SUSPECT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<crate::quality::Expect>,
    /// A source that answers what a window's results should be (`{count, checksum}`),
    /// asked after each successful run and recorded beside what the job reported, so a
    /// verification finds windows whose results differ, not only missing ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<JobSpec>,
    /// How many of a run's children may fail with the run PARTIAL_SUCCESS (a count, or a
    /// share like `2%`); none by default (see [`crate::children`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failed_children: Option<crate::children::FailureBudget>,
    /// The lane children are sent to; the run's own lane when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_lane: Option<crate::policy::Lane>,
    /// Named calendars whose excluded dates this schedule does not run on (see
    /// [`crate::calendar`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calendars: Vec<String>,
    /// Local dates (or inclusive ranges) this schedule does not run on, besides its calendars.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<crate::calendar::DateSel>,
    /// No window before this (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<crate::calendar::Bound>,
    /// No window after this (inclusive); past it the schedule is ENDED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<crate::calendar::Bound>,
    /// The schedule ends after this many windows, counted from `start_at` (or from its
    /// creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs: Option<u32>,
    /// What DST does to its fire times; absent rules are the default (see [`crate::dst`]).
    #[serde(default, skip_serializing_if = "crate::dst::DstChoice::is_default")]
    pub dst: crate::dst::DstChoice,
    pub job: JobSpec,
}

/// Documented defaults for omitted fields (README "Manifest format").
pub mod defaults {
    use super::*;
    pub fn enabled() -> bool {
        true
    }
    pub fn misfire() -> MisfirePolicy {
        MisfirePolicy::RunOnce
    }
    pub fn overlap() -> OverlapPolicy {
        OverlapPolicy::SkipNew
    }
    pub fn grace() -> Span {
        Span::minutes(2)
    }
    pub fn max_auto_catch_up() -> u32 {
        5
    }
    /// The worker's 15-minute timeout less its margin (see [`crate::tolerance`]).
    pub fn max_runtime() -> Span {
        Span::minutes(14)
    }
    pub fn priority() -> Priority {
        Priority::Normal
    }
    pub fn side_effects() -> bool {
        true
    }
    pub fn max_attempts() -> u32 {
        3
    }
    pub fn approval_timeout() -> Span {
        Span::hours(24)
    }
    /// Left out of serialized specs when default, so specs stored before it stay the same.
    pub fn is_approval_timeout(span: &Span) -> bool {
        *span == approval_timeout()
    }
    pub fn retention() -> Span {
        crate::retention::DEFAULT_RETENTION
    }
    /// Left out when default, as `approval_timeout` is.
    pub fn is_retention(span: &Span) -> bool {
        *span == retention()
    }
}

mod tz_name {
    use chrono_tz::Tz;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(tz: &Tz, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(tz.name())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Tz, D::Error> {
        let name = String::deserialize(d)?;
        name.parse()
            .map_err(|_| serde::de::Error::custom(format!("unknown time zone `{name}`")))
    }
}

/// Limits validation enforces. The defaults are the documented product limits.
#[derive(Debug, Clone)]
pub struct ValidationRules {
    /// No schedule may fire more often than this.
    pub min_interval: Span,
    /// Stricter floors per job type (`http`, `lambda`, `noop`).
    pub min_interval_by_type: BTreeMap<String, Span>,
    /// Largest serialized job payload, in bytes.
    pub max_payload_bytes: usize,
    /// Key fragments that mark a payload key as a secret (case-insensitive).
    pub secret_key_markers: Vec<String>,
    /// Days of real calendar examined for interval and rate checks.
    pub horizon_days: u32,
    /// Shortest `grace`: about half the ticker's one-minute cadence.
    pub min_grace: Span,
    /// The worker function's timeout (`infra/template.yaml`; the api reads
    /// `CRONLEDGER_WORKER_TIMEOUT_SECONDS`).
    pub worker_timeout: Span,
    /// What the worker keeps of its timeout for its own reads and writes around a job.
    pub worker_margin: Span,
    /// Http jobs may name a loopback host (the local runner; never in AWS).
    pub allow_loopback_targets: bool,
    /// When set, an http job's `auth.secret` must be named under it (the worker may read
    /// only those secrets).
    pub secret_name_prefix: Option<String>,
}

impl Default for ValidationRules {
    fn default() -> Self {
        ValidationRules {
            min_interval: Span::minutes(1),
            min_interval_by_type: BTreeMap::new(),
            max_payload_bytes: 8 * 1024,
            secret_key_markers: [
                "password",
                "secret",
                "token",
                "api_key",
                "apikey",
                "authorization",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            horizon_days: 366,
            min_grace: Span::seconds(30),
            worker_timeout: Span::seconds(900),
            worker_margin: Span::seconds(60),
            allow_loopback_targets: false,
            secret_name_prefix: None,
        }
    }
}

impl ValidationRules {
    /// Rules on one machine (the CLI's offline checks, the local runner): an http job may
    /// call the machine's own services. A deployed api keeps refusing loopback targets.
    pub fn local() -> ValidationRules {
        ValidationRules {
            allow_loopback_targets: true,
            ..ValidationRules::default()
        }
    }
}

pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero32(n: &u32) -> bool {
    *n == 0
}
