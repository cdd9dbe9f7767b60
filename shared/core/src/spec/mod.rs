//! The schedule spec (manifest format) and its validation.
//!
//! Validation reads the document as plain data first and checks every field on its own,
//! so one pass reports every problem with its own code instead of stopping at the first.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::alerts::{AlertSettings, FreshnessSlo};
use crate::error::{Code, Invalid, Issue};
use crate::http_target::{check_auth, check_http_url, redact_url_credentials, HttpAuth};
use crate::named_enum;
use crate::policy::{MisfirePolicy, OverlapPolicy, Priority};
use crate::span::Span;
use crate::timing::Timing;
use crate::tolerance;

mod alerting;
mod field_reader;
mod job_check;
mod upstreams;

use field_reader::FieldReader;
use job_check::validate_job;

/// Catch-up gap tiers: where "recent" ends and "history" begins (DESIGN catch-up table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    },
}

/// A destructive job's limit: before each execution the job is dry-run, and a run whose
/// dry run reports more than `max_affected` items waits for an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

    pub fn payload(&self) -> &Value {
        match self {
            JobSpec::Http { payload, .. }
            | JobSpec::Lambda { payload, .. }
            | JobSpec::Handler { payload, .. }
            | JobSpec::Noop { payload, .. } => payload,
        }
    }

    /// The destructive-job guard, when the job declares one.
    pub fn guard(&self) -> Option<&JobGuard> {
        match self {
            JobSpec::Http { guard, .. }
            | JobSpec::Lambda { guard, .. }
            | JobSpec::Handler { guard, .. }
            | JobSpec::Noop { guard, .. } => guard.as_ref(),
        }
    }

    /// The spec as a viewer may see it: an http url's `user:password@` (stored before such
    /// urls were refused) is redacted.
    pub fn redacted(&self) -> JobSpec {
        let mut job = self.clone();
        if let JobSpec::Http { url, .. } = &mut job {
            *url = redact_url_credentials(url);
        }
        job
    }

    /// `payload.tenant`, which becomes part of the idempotency key.
    pub fn tenant(&self) -> Option<&str> {
        self.payload().get("tenant").and_then(Value::as_str)
    }
}

/// A validated schedule: the rule, not its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub cron: String,
    #[serde(with = "tz_name")]
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

const KNOWN_FIELDS: &[&str] = &[
    "id",
    "name",
    "cron",
    "timezone",
    "enabled",
    "misfire",
    "overlap",
    "grace",
    "max_auto_catch_up",
    "max_runtime",
    "priority",
    "side_effects",
    "idempotent",
    "max_attempts",
    "owner",
    "catch_up",
    "approval",
    "approval_timeout",
    "jitter",
    "retention",
    "alerts",
    "deadline",
    "slo",
    "after",
    "accept_partial",
    "job",
];

/// Parses a manifest (`schedules:` and a list), YAML or JSON, and validates every schedule.
/// `now` anchors the calendar checks ("can this ever fire again?").
pub fn parse_manifest(
    text: &str,
    rules: &ValidationRules,
    now: DateTime<Utc>,
) -> Result<Vec<ScheduleSpec>, Invalid> {
    let doc = parse_document(text)?;
    let Some(list) = doc.get("schedules").and_then(Value::as_array) else {
        return Err(Invalid::one(Issue::new(
            Code::ManifestInvalid,
            "schedules",
            "a manifest is `schedules:` followed by a list of schedules",
        )));
    };
    let mut issues = Vec::new();
    if let Some(obj) = doc.as_object() {
        for key in obj.keys().filter(|k| *k != "schedules") {
            issues.push(Issue::new(
                Code::ManifestInvalid,
                key.clone(),
                format!("unknown top-level key `{key}`"),
            ));
        }
    }
    let mut specs = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, item) in list.iter().enumerate() {
        let prefix = format!("schedules[{i}]");
        match validate_schedule(item, &prefix, rules, now) {
            Ok(spec) => specs.push(spec),
            Err(mut found) => issues.append(&mut found),
        }
        // Read the id from the raw item so a duplicate is reported even when the schedule
        // that repeats it has other problems too.
        if let Some(id) = item.get("id").and_then(Value::as_str) {
            if !seen.insert(id.to_string()) {
                issues.push(Issue::new(
                    Code::ScheduleDuplicateId,
                    format!("{prefix}.id"),
                    format!("id `{id}` is used twice"),
                ));
            }
        }
    }
    let position: BTreeMap<&str, usize> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let after_field = |id: &str| {
        position
            .get(id)
            .map_or_else(|| "after".to_string(), |i| format!("schedules[{i}].after"))
    };
    if issues.is_empty() {
        // Across schedules, once each is valid (an invalid one would read as unknown).
        issues.extend(crate::dependency::check_graph(&specs, &after_field));
    }
    if issues.is_empty() {
        Ok(specs)
    } else {
        Err(Invalid(issues))
    }
}

/// Parses YAML or JSON text into a JSON value.
pub fn parse_document(text: &str) -> Result<Value, Invalid> {
    let parsed: Result<Value, String> = if text.trim_start().starts_with(['{', '[']) {
        serde_json::from_str(text).map_err(|e| e.to_string())
    } else {
        serde_norway::from_str(text).map_err(|e| e.to_string())
    };
    parsed.map_err(|e| {
        Invalid::one(Issue::new(
            Code::ManifestInvalid,
            "",
            format!("not valid YAML or JSON: {e}"),
        ))
    })
}

/// Validates one schedule given as plain data; `prefix` names it in field paths.
pub fn validate_schedule(
    value: &Value,
    prefix: &str,
    rules: &ValidationRules,
    now: DateTime<Utc>,
) -> Result<ScheduleSpec, Vec<Issue>> {
    let field = |name: &str| {
        if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        }
    };
    let Some(obj) = value.as_object() else {
        return Err(vec![Issue::new(
            Code::ManifestInvalid,
            prefix,
            "a schedule must be a mapping of fields",
        )]);
    };
    let mut issues = Vec::new();
    for key in obj.keys() {
        if !KNOWN_FIELDS.contains(&key.as_str()) {
            issues.push(Issue::new(
                Code::ScheduleUnknownField,
                field(key),
                format!("unknown field `{key}`"),
            ));
        }
    }
    let mut reader = FieldReader {
        obj,
        issues: &mut issues,
        field: &field,
    };

    let id = reader.required_str("id");
    if let Some(id) = &id {
        if !valid_id(id) {
            reader.issues.push(Issue::new(
                Code::ScheduleInvalidId,
                field("id"),
                format!("id `{id}` must match [a-z0-9-]{{1,64}}"),
            ));
        }
    }
    let name = reader.optional_str("name");
    let owner = reader.optional_str("owner");
    let cron = reader.required_str("cron");
    let timezone = reader.required_str("timezone").and_then(|name| {
        name.parse::<Tz>().ok().or_else(|| {
            reader.issues.push(Issue::new(
                Code::ScheduleUnknownTimezone,
                field("timezone"),
                format!("unknown time zone `{name}`; use an IANA name such as Asia/Seoul"),
            ));
            None
        })
    });
    let enabled = reader.bool_or("enabled", defaults::enabled());
    let side_effects = reader.bool_or("side_effects", defaults::side_effects());
    let idempotent = reader.bool_or("idempotent", false);
    let misfire = reader.policy("misfire", defaults::misfire());
    let overlap = reader.policy("overlap", defaults::overlap());
    let priority = reader.policy("priority", defaults::priority());
    let grace = reader.span_or("grace", defaults::grace());
    let max_runtime = reader.span_or("max_runtime", defaults::max_runtime());
    let max_auto_catch_up = reader.u32_or("max_auto_catch_up", defaults::max_auto_catch_up());
    let max_attempts = reader.u32_or("max_attempts", defaults::max_attempts());
    let approval = reader.named("approval", Approval::None);
    let approval_timeout = reader.span_or("approval_timeout", defaults::approval_timeout());
    let jitter = reader.optional_span("jitter");
    let retention = reader.span_or("retention", defaults::retention());
    reader
        .issues
        .extend(crate::retention::check(retention, &field("retention")));
    if approval_timeout == Span::ZERO {
        reader.issues.push(Issue::new(
            Code::ScheduleInvalidField,
            field("approval_timeout"),
            "approval_timeout must be longer than 0s",
        ));
    }
    if max_attempts == 0 {
        reader.issues.push(Issue::new(
            Code::ScheduleInvalidField,
            field("max_attempts"),
            "max_attempts must be at least 1",
        ));
    }
    if max_runtime == Span::ZERO {
        reader.issues.push(Issue::new(
            Code::ScheduleInvalidField,
            field("max_runtime"),
            "max_runtime must be longer than 0s",
        ));
    }
    let catch_up = match obj.get("catch_up") {
        None => CatchUpTiers::default(),
        Some(v) => match serde_json::from_value::<CatchUpTiers>(v.clone()) {
            Ok(t) if t.immediate <= t.serial && t.serial <= t.backfill => t,
            Ok(_) => {
                issues.push(Issue::new(
                    Code::ScheduleInvalidField,
                    field("catch_up"),
                    "catch_up tiers must grow: immediate <= serial <= backfill",
                ));
                CatchUpTiers::default()
            }
            Err(e) => {
                issues.push(Issue::new(
                    Code::ScheduleInvalidDuration,
                    field("catch_up"),
                    format!("catch_up: {e}"),
                ));
                CatchUpTiers::default()
            }
        },
    };
    let alerting = alerting::read(obj, &field, &mut issues);
    let upstreams = upstreams::read(obj, id.as_deref(), &field, &mut issues);
    let job = validate_job(obj.get("job"), &field("job"), rules, &mut issues);
    let requested = tolerance::Requested {
        grace,
        max_runtime,
        job: job.as_ref(),
    };
    tolerance::check(&requested, rules, &field, &mut issues);

    if let Some(cron) = &cron {
        // Without a valid zone the calendar checks cannot run, but the syntax still can:
        // report both problems at once.
        match Timing::parse(cron, timezone.unwrap_or(Tz::UTC)) {
            Err(mut issue) => {
                issue.field = field("cron");
                issues.push(issue);
            }
            Ok(timing) if timezone.is_some() => {
                let min_gap =
                    check_calendar(&timing, job.as_ref(), rules, now, &field, &mut issues);
                if let Some(jitter) = jitter {
                    issues.extend(crate::jitter::check(jitter, min_gap, &field("jitter")));
                }
            }
            Ok(_) => {}
        }
    }

    match (id, cron, timezone, job) {
        (Some(id), Some(cron), Some(timezone), Some(job)) if issues.is_empty() => {
            Ok(ScheduleSpec {
                id,
                name,
                cron,
                timezone,
                enabled,
                misfire,
                overlap,
                grace,
                max_auto_catch_up,
                max_runtime,
                priority,
                side_effects,
                idempotent,
                max_attempts,
                owner,
                catch_up,
                approval,
                approval_timeout,
                jitter,
                retention,
                alerts: alerting.alerts,
                deadline: alerting.deadline,
                slo: alerting.slo,
                after: upstreams.after,
                accept_partial: upstreams.accept_partial,
                job,
            })
        }
        _ => Err(issues),
    }
}

/// Validates only an expression and a zone (`cronledger validate --cron ... --tz ...`).
pub fn validate_timing(
    cron: &str,
    timezone: &str,
    rules: &ValidationRules,
    now: DateTime<Utc>,
) -> Result<Timing, Vec<Issue>> {
    let Ok(tz) = timezone.parse::<Tz>() else {
        let mut issues = vec![Issue::new(
            Code::ScheduleUnknownTimezone,
            "timezone",
            format!("unknown time zone `{timezone}`; use an IANA name such as Asia/Seoul"),
        )];
        // The syntax can still be checked without the zone.
        issues.extend(Timing::parse(cron, Tz::UTC).err());
        return Err(issues);
    };
    let timing = Timing::parse(cron, tz).map_err(|i| vec![i])?;
    let mut issues = Vec::new();
    check_calendar(
        &timing,
        None,
        rules,
        now,
        &|f: &str| f.to_string(),
        &mut issues,
    );
    if issues.is_empty() {
        Ok(timing)
    } else {
        Err(issues)
    }
}

/// Checks that the expression fires again, and not more often than the floor; returns its
/// shortest interval between occurrences (when it fires twice within the horizon).
fn check_calendar(
    timing: &Timing,
    job: Option<&JobSpec>,
    rules: &ValidationRules,
    now: DateTime<Utc>,
    field: &dyn Fn(&str) -> String,
    issues: &mut Vec<Issue>,
) -> Option<Span> {
    if timing.next_after(now).is_none() {
        issues.push(Issue::new(
            Code::ScheduleNeverFires,
            field("cron"),
            format!(
                "`{}` never fires after {}",
                timing.source(),
                now.to_rfc3339()
            ),
        ));
        return None;
    }
    let floor = job
        .and_then(|j| rules.min_interval_by_type.get(j.type_name()))
        .copied()
        .unwrap_or(rules.min_interval)
        .max(rules.min_interval);
    let stats = timing.calendar_stats(now, rules.horizon_days);
    if let Some(gap) = stats.min_gap.filter(|g| *g < floor) {
        issues.push(Issue::new(
            Code::ScheduleIntervalTooShort,
            field("cron"),
            format!(
                "`{}` fires {gap} apart at its closest; the floor{} is {floor}",
                timing.source(),
                job.map(|j| format!(" for {} jobs", j.type_name()))
                    .unwrap_or_default()
            ),
        ));
    }
    stats.min_gap
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
