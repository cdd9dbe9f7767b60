//! Validation of schedules: a manifest (`schedules:` and a list) or one schedule, read as
//! plain data so one pass reports every problem with its own code, and the calendar checks
//! ("can this ever fire again?", the shortest gap between fires).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::Value;

use super::field_reader::FieldReader;
use super::job_check::validate_job;
use super::upstreams::{Inherited, UpstreamGrid};
use super::*;
use crate::calendar::{read_calendar, unknown_calendars, CalendarSet};
use crate::children::FailureBudget;
use crate::error::{Code, Invalid, Issue};
use crate::timing::Timing;
use crate::tolerance;

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
    "accept_suspect",
    "expect",
    "verify",
    "max_failed_children",
    "batch_lane",
    "calendars",
    "exclude",
    "start_at",
    "end_at",
    "max_runs",
    "dst",
    "job",
];

/// A manifest as read: its calendars, by name, and its schedules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    pub calendars: CalendarSet,
    pub schedules: Vec<ScheduleSpec>,
}

/// Parses a manifest (`schedules:` and a list, and `calendars:` beside it), YAML or JSON, and
/// validates every schedule; a schedule may name only the calendars the manifest defines.
/// `now` anchors the calendar checks ("can this ever fire again?").
pub fn parse_manifest(
    text: &str,
    rules: &ValidationRules,
    now: DateTime<Utc>,
) -> Result<Vec<ScheduleSpec>, Invalid> {
    read_manifest(text, rules, now, &|_| false).map(|m| m.schedules)
}

/// Parses a manifest with its calendars. `stored` says which calendars exist where it is
/// applied (the api's, for `cronledger apply`): a schedule naming a calendar neither the
/// manifest defines nor `stored` has is CALENDAR_UNKNOWN.
pub fn read_manifest(
    text: &str,
    rules: &ValidationRules,
    now: DateTime<Utc>,
    stored: &dyn Fn(&str) -> bool,
) -> Result<Manifest, Invalid> {
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
        for key in obj.keys().filter(|k| !TOP_LEVEL.contains(&k.as_str())) {
            issues.push(Issue::new(
                Code::ManifestInvalid,
                key.clone(),
                format!("unknown top-level key `{key}`"),
            ));
        }
    }
    // A schedule is named by its id in field paths when the id is valid and used once;
    // by its position otherwise.
    let mut id_uses: BTreeMap<&str, usize> = BTreeMap::new();
    for item in list {
        if let Some(id) = item.get("id").and_then(Value::as_str) {
            *id_uses.entry(id).or_default() += 1;
        }
    }
    let usable_id = |i: usize| {
        list[i]
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| valid_id(id) && id_uses.get(id) == Some(&1))
    };
    let prefixes: Vec<String> = (0..list.len())
        .map(|i| match usable_id(i) {
            Some(id) => format!("schedules[{id}]"),
            None => format!("schedules[{i}]"),
        })
        .collect();
    let inherited = upstreams::inherit_manifest_grids(list, &prefixes);
    let (calendars, defined) = read_calendars(doc.get("calendars"), &mut issues);
    let known = |name: &str| defined.contains(name) || stored(name);
    let mut specs = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, (item, inherited)) in list.iter().zip(inherited).enumerate() {
        let prefix = &prefixes[i];
        let id = usable_id(i);
        match validate_inherited(item, prefix, rules, now, inherited) {
            Ok(spec) => {
                let unknown = unknown_calendars(&spec.calendars, &known, prefix);
                issues.extend(unknown.into_iter().map(|u| u.in_schedule(id, Some(i))));
                specs.push(spec)
            }
            Err(found) => issues.extend(found.into_iter().map(|f| f.in_schedule(id, Some(i)))),
        }
        // Read the id from the raw item so a duplicate is reported even when the schedule
        // that repeats it has other problems too.
        if let Some(id) = item.get("id").and_then(Value::as_str) {
            if !seen.insert(id.to_string()) {
                issues.push(
                    Issue::new(
                        Code::ScheduleDuplicateId,
                        format!("{prefix}.id"),
                        format!("id `{id}` is used twice"),
                    )
                    .in_schedule(None, Some(i)),
                );
            }
        }
    }
    if issues.is_empty() {
        // Across schedules, once each is valid (an invalid one would read as unknown); then
        // every schedule has a spec at its own position and an id that names it.
        let after_field = |id: &str| format!("schedules[{id}].after");
        let located: BTreeMap<String, (&str, usize)> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| (after_field(&s.id), (s.id.as_str(), i)))
            .collect();
        for issue in crate::dependency::check_graph(&specs, &after_field) {
            let at = located.get(&issue.field).copied();
            issues.push(issue.in_schedule(at.map(|(id, _)| id), at.map(|(_, i)| i)));
        }
    }
    if issues.is_empty() {
        Ok(Manifest {
            calendars,
            schedules: specs,
        })
    } else {
        Err(Invalid(issues))
    }
}

/// The keys a manifest has at its top.
const TOP_LEVEL: &[&str] = &["schedules", "calendars"];

/// A manifest's `calendars:` (a mapping of names to `{exclude: [...]}`), each read with the
/// core's codes, and every name it defines: a schedule naming a calendar written wrong is
/// told about the calendar, not that it is unknown.
fn read_calendars(
    value: Option<&Value>,
    issues: &mut Vec<Issue>,
) -> (CalendarSet, BTreeSet<String>) {
    let mut set = CalendarSet::default();
    let mut defined = BTreeSet::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, doc) in map {
                defined.insert(name.clone());
                match read_calendar(name, doc, &format!("calendars.{name}")) {
                    Ok(spec) => {
                        set.0.insert(name.clone(), spec);
                    }
                    Err(found) => issues.extend(found),
                }
            }
        }
        Some(other) => issues.push(Issue::new(
            Code::CalendarInvalid,
            "calendars",
            format!(
                "`calendars` maps names to `{{exclude: [DATE | \"DATE..DATE\"]}}`, found {other}"
            ),
        )),
    }
    (set, defined)
}

/// Validates one schedule that may leave `cron` and `timezone` out when it has `after`:
/// each one left out is its upstreams' (`grid_of` tells an upstream's grid), and they must
/// share one grid. The api settles a schedule against the stored ones this way.
pub fn validate_with_upstreams(
    value: &Value,
    prefix: &str,
    rules: &ValidationRules,
    now: DateTime<Utc>,
    grid_of: &mut dyn FnMut(&str) -> UpstreamGrid,
) -> Result<ScheduleSpec, Vec<Issue>> {
    let field = |name: &str| field_path(prefix, name);
    let inherited = upstreams::inherit_grid(value, &field, grid_of);
    validate_inherited(value, prefix, rules, now, inherited)
}

/// Validates a schedule once its grid is settled: as written, with the grid it inherits,
/// or, when it cannot inherit one, for its other problems beside why.
fn validate_inherited(
    value: &Value,
    prefix: &str,
    rules: &ValidationRules,
    now: DateTime<Utc>,
    inherited: Inherited,
) -> Result<ScheduleSpec, Vec<Issue>> {
    match inherited {
        Inherited::AsWritten => validate_schedule(value, prefix, rules, now),
        Inherited::Filled(doc) => validate_schedule(&doc, prefix, rules, now),
        Inherited::Failed(mut issues) => {
            // The missing grid is told by why it could not be inherited.
            let grid_fields = [field_path(prefix, "cron"), field_path(prefix, "timezone")];
            let others = validate_schedule(value, prefix, rules, now).err();
            issues.extend(others.into_iter().flatten().filter(|i| {
                !(i.code == Code::ScheduleMissingField && grid_fields.contains(&i.field))
            }));
            Err(issues)
        }
    }
}

/// `prefix.name`, or `name` alone for a schedule given on its own.
fn field_path(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
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
    let field = |name: &str| field_path(prefix, name);
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
    let bounds = bounds::read(obj, &field, &mut issues);
    if let Some(tz) = timezone {
        bounds::check_order(&bounds, tz, &field, &mut issues);
    }
    let upstreams = upstreams::read(obj, id.as_deref(), &field, &mut issues);
    let expect = crate::quality::read_expect(obj.get("expect"), &field("expect"), &mut issues);
    let accept_suspect = match obj.get("accept_suspect") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) if *b && upstreams.after.is_empty() => {
            issues.push(Issue::new(
                Code::ScheduleInvalidExpect,
                field("accept_suspect"),
                "applies to upstream results: it needs `after`",
            ));
            false
        }
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            issues.push(Issue::new(
                Code::ScheduleInvalidExpect,
                field("accept_suspect"),
                "must be true or false",
            ));
            false
        }
    };
    let job = validate_job(obj.get("job"), &field("job"), rules, &mut issues);
    let verify = match obj.get("verify") {
        None | Some(Value::Null) => None,
        Some(value) if value.get("type").and_then(Value::as_str) == Some("steps") => {
            issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                field("verify"),
                "a verify source is one http, lambda or noop target, not steps",
            ));
            None
        }
        Some(value) => validate_job(Some(value), &field("verify"), rules, &mut issues),
    };
    for (i, step) in job
        .as_ref()
        .and_then(JobSpec::steps)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if step.max_runtime.is_some_and(|limit| limit > max_runtime) {
            issues.push(Issue::new(
                Code::ScheduleInvalidJob,
                format!("{}.steps[{i}].max_runtime", field("job")),
                format!("a step's max_runtime may not pass the schedule's ({max_runtime})"),
            ));
        }
    }
    let max_failed_children = match obj.get("max_failed_children") {
        None | Some(Value::Null) => None,
        Some(v) => match serde_json::from_value::<FailureBudget>(v.clone()) {
            Ok(budget) => Some(budget),
            Err(_) => {
                issues.push(Issue::new(
                    Code::ScheduleInvalidField,
                    field("max_failed_children"),
                    format!("`max_failed_children` must be a whole count like 5 or a share like \"2%\", found {v}"),
                ));
                None
            }
        },
    };
    let batch_lane = match obj.get("batch_lane") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => match name.parse::<crate::policy::Lane>() {
            Ok(lane) => Some(lane),
            Err(e) => {
                issues.push(Issue::new(
                    Code::ScheduleInvalidField,
                    field("batch_lane"),
                    e,
                ));
                None
            }
        },
        Some(_) => {
            issues.push(Issue::new(
                Code::ScheduleInvalidField,
                field("batch_lane"),
                "`batch_lane` must name a lane (realtime, normal, correction, backfill, manual)",
            ));
            None
        }
    };
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
            Ok(timing) => match timing.with_checked_dst(bounds.dst) {
                Err(mut issue) => {
                    issue.field = field("dst");
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
            },
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
                accept_suspect,
                expect,
                verify,
                max_failed_children,
                batch_lane,
                calendars: bounds.calendars,
                exclude: bounds.exclude,
                start_at: bounds.start_at,
                end_at: bounds.end_at,
                max_runs: bounds.max_runs,
                dst: bounds.dst,
                job,
            })
        }
        _ => Err(issues),
    }
}

/// Validates one target on its own, as a schedule's `verify` is checked (a backfill's own
/// `verify` source): an http, lambda, handler or noop target; never steps.
pub fn validate_target(
    value: &Value,
    field: &str,
    rules: &ValidationRules,
) -> Result<JobSpec, Vec<Issue>> {
    let mut issues = Vec::new();
    if value.get("type").and_then(Value::as_str) == Some("steps") {
        issues.push(Issue::new(
            Code::ScheduleInvalidJob,
            field,
            "a verify source is one http, lambda or noop target, not steps",
        ));
        return Err(issues);
    }
    match validate_job(Some(value), field, rules, &mut issues) {
        Some(job) if issues.is_empty() => Ok(job),
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
