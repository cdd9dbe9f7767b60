//! Schedule routes: create, read, list, update under `If-Match` (a HIGH-risk one only when
//! confirmed), pause/resume/archive with a note, preview and risk diff without saving, the
//! audit log.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use cronledger_contract::{
    AuditLog, ChangeDiff, Note, Preview, PreviewRequest, PreviewTime, SchedulePage, ScheduleView,
};
use cronledger_core::health::Health;
use cronledger_core::risk::assess_change;
use cronledger_core::ScheduleSpec;
use cronledger_ledger::ledger::{ChangeMeta, Page, StoredSchedule};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::extract::{Actor, ApiJson, ApiPath, ApiQuery, IfMatch};
use super::paging::{offset_page, store_page};
use super::{views, Api};
use crate::operator::ScheduleChange;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

impl Api {
    pub(crate) fn limit(&self, asked: Option<u32>) -> u32 {
        asked.unwrap_or(50).clamp(1, self.deps().config.page_max)
    }

    /// A page size for a list computed whole (default: the most a page holds).
    pub(crate) fn limit_or_max(&self, asked: Option<u32>) -> usize {
        self.limit(asked.or(Some(self.deps().config.page_max))) as usize
    }

    pub(crate) fn meta(&self, actor: &Actor, reason: String) -> ChangeMeta {
        ChangeMeta {
            actor: actor.name().to_string(),
            reason,
            at: self.now(),
            details: None,
        }
    }

    pub(crate) fn check_job_type(&self, actor: &Actor, spec: &ScheduleSpec) -> ApiResult<()> {
        let job_type = spec.job.type_name();
        if self.deps().auth.may_use_job_type(&actor.caller, job_type) {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "`{}` may not create or change schedules of job type `{job_type}`",
                actor.name()
            ))
            .with_details(json!({"job_type": job_type})))
        }
    }
}

pub(crate) fn header_note(headers: &HeaderMap, default: &str) -> String {
    Note {
        note: headers
            .get("cronledger-note")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    }
    .text(default)
}

/// `stored` as people see it: its next run as its health found it (the earliest window not
/// started yet, see [`super::next_run`]); without health (none read) its next fire time after
/// `now` (no fire moves the stored one).
fn as_shown(
    mut stored: StoredSchedule,
    now: chrono::DateTime<chrono::Utc>,
    health: Option<&Health>,
) -> StoredSchedule {
    stored.next_run_at = match health {
        Some(health) => health.next_run_at,
        None => stored.next_fire_after(now),
    };
    // Past its bounds an active schedule shows ENDED (never stored: a later `end_at` or a
    // larger `max_runs` brings it back).
    let ended = stored
        .schedule()
        .is_ok_and(|schedule| schedule.has_ended(now));
    if stored.state == cronledger_ledger::ledger::ScheduleState::Active && ended {
        stored.state = cronledger_ledger::ledger::ScheduleState::Ended;
        stored.next_run_at = None;
    }
    stored
}

/// A schedule's view with `ETag: "{version}"`.
fn etagged(status: StatusCode, body: ScheduleView) -> Response {
    let version = body.version;
    let mut resp = (status, Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp
}

pub async fn create(
    State(api): State<Api>,
    actor: Actor,
    headers: HeaderMap,
    ApiJson(doc): ApiJson<Value>,
) -> ApiResult<Response> {
    let note = header_note(&headers, "created through the api");
    let created = api.operator().create_schedule(&actor, &doc, note).await?;
    Ok(etagged(StatusCode::CREATED, created))
}

/// The query identity of the schedule listing's cursors.
const SCHEDULES_SCOPE: &str = "schedules";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    pub limit: Option<u32>,
    pub cursor: Option<String>,
    /// `false`: the schedules without their health (no reads beyond the listing).
    pub health: Option<bool>,
}

pub async fn list(
    State(api): State<Api>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<SchedulePage>> {
    let start = api
        .cursors()
        .open_given(SCHEDULES_SCOPE, q.cursor.as_deref())?;
    let with_health = q.health != Some(false);
    let read = |limit: u32, start: Option<String>| {
        let api = api.clone();
        async move {
            let page = api
                .deps()
                .store
                .list_schedules(limit, start.as_deref())
                .await?;
            let mut health = if with_health {
                api.health_of_all(&page.items).await?
            } else {
                Vec::new()
            };
            health.resize(page.items.len(), None);
            Ok(Page {
                items: page.items.into_iter().zip(health).collect(),
                next: page.next,
            })
        }
    };
    let now = api.now();
    let view = |(s, health): &(StoredSchedule, Option<Health>)| {
        let s = &as_shown(s.clone(), now, health.as_ref());
        if with_health {
            views::schedule_with_health(s, health.as_ref())
        } else {
            views::schedule(s)
        }
    };
    let (items, next) = store_page(api.limit(q.limit), start, read, view).await?;
    Ok(Json(SchedulePage {
        items,
        next: api.cursors().seal_next(SCHEDULES_SCOPE, next),
    }))
}

pub async fn get(State(api): State<Api>, ApiPath(id): ApiPath<String>) -> ApiResult<Response> {
    let stored = api.deps().store.get_schedule(&id).await?;
    let health = api.health_of(&stored).await?;
    let shown = as_shown(stored.clone(), api.now(), health.as_ref());
    let body = views::schedule_with_health(&shown, health.as_ref());
    Ok(etagged(StatusCode::OK, body))
}

/// The query parameter and the header that confirm a HIGH-risk update, and their value.
pub const CONFIRM_QUERY: &str = "confirm";
pub const CONFIRM_HEADER: &str = "X-Cronledger-Confirm";
pub const CONFIRM_VALUE: &str = "high-risk";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmQuery {
    pub confirm: Option<String>,
}

/// Whether the request confirms a HIGH-risk change; any other confirmation value is refused
/// rather than ignored.
fn confirmed(query: &ConfirmQuery, headers: &HeaderMap) -> ApiResult<bool> {
    let header =
        match headers.get(CONFIRM_HEADER) {
            None => None,
            Some(v) => Some(v.to_str().map_err(|_| {
                ApiError::malformed(format!("{CONFIRM_HEADER} is not readable text"))
            })?),
        };
    let mut confirmed = false;
    for (given, place) in [
        (query.confirm.as_deref(), CONFIRM_QUERY),
        (header, CONFIRM_HEADER),
    ] {
        match given.map(str::trim) {
            None => {}
            Some(CONFIRM_VALUE) => confirmed = true,
            Some(other) => {
                return Err(ApiError::invalid(
                    "REQUEST_INVALID",
                    format!(
                        "{place} `{other}` is not a confirmation; the value is `{CONFIRM_VALUE}`"
                    ),
                )
                .with_details(json!({"field": place})))
            }
        }
    }
    Ok(confirmed)
}

pub async fn update(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    IfMatch(version): IfMatch,
    ApiQuery(confirm): ApiQuery<ConfirmQuery>,
    headers: HeaderMap,
    ApiJson(doc): ApiJson<Value>,
) -> ApiResult<Response> {
    let Some(version) = version else {
        return Err(ApiError::malformed(
            "an update needs If-Match with the version it is based on",
        )
        .with_details(json!({"header": "If-Match"})));
    };
    let change = ScheduleChange {
        document: doc,
        version,
        confirmed: confirmed(&confirm, &headers)?,
        note: header_note(&headers, "updated through the api"),
    };
    let updated = api.operator().update_schedule(&actor, &id, change).await?;
    Ok(etagged(StatusCode::OK, updated))
}

pub const PAUSE: u8 = 0;
pub const RESUME: u8 = 1;
pub const ARCHIVE: u8 = 2;

/// Pause, resume or archive (`W`), with a note and an optional `If-Match`.
pub async fn lifecycle<const W: u8>(
    State(api): State<Api>,
    actor: Actor,
    ApiPath(id): ApiPath<String>,
    IfMatch(version): IfMatch,
    ApiJson(note): ApiJson<Note>,
) -> ApiResult<Response> {
    let operator = api.operator();
    let changed = match W {
        PAUSE => operator.pause(&actor, &id, note, version).await?,
        RESUME => operator.resume(&actor, &id, note, version).await?,
        _ => operator.archive(&actor, &id, note, version).await?,
    };
    Ok(etagged(StatusCode::OK, changed))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewQuery {
    pub count: Option<usize>,
    pub after: Option<DateTime<Utc>>,
}

/// The next fire times of `schedule` (its bounds, DST choice and jitter), each marked
/// excluded when its calendars or `exclude` leave its date out.
async fn preview(
    api: &Api,
    schedule: &cronledger_core::Schedule,
    count: Option<usize>,
    after: Option<DateTime<Utc>>,
) -> ApiResult<Json<Preview>> {
    let spec = &schedule.spec;
    let timing = schedule.timing();
    let count = count.unwrap_or(10).clamp(1, api.deps().config.preview_max);
    let after = after.unwrap_or_else(|| api.now());
    // `jitter`: each occurrence fires this much later (its window and key stay).
    let offset = schedule.fire_offset();
    let calendars = if spec.calendars.is_empty() {
        cronledger_core::calendar::CalendarSet::default()
    } else {
        api.deps().store.calendars().await?
    };
    let fire_times = std::iter::successors(schedule.next_after(after), |t| schedule.next_after(*t))
        .take(count)
        .map(|t| {
            let note = timing.dst_note(t);
            PreviewTime {
                at: t,
                local: t
                    .with_timezone(&spec.timezone)
                    .format("%Y-%m-%d %H:%M:%S %Z")
                    .to_string(),
                dst: note,
                // Names the rule that applied (the schedule's choice or the default).
                dst_note: note.map(|n| timing.describe_dst_note(n)),
                fire_at: t + offset,
                excluded: schedule.excluded_by(&calendars, t),
            }
        })
        .collect();
    Ok(Json(Preview {
        schedule: spec.id.clone(),
        cron: spec.cron.clone(),
        timezone: spec.timezone.name().to_string(),
        describe: timing.describe(),
        after,
        jitter_offset_seconds: offset.num_seconds(),
        fire_times,
    }))
}

pub async fn preview_document(
    State(api): State<Api>,
    ApiJson(req): ApiJson<PreviewRequest>,
) -> ApiResult<Json<Preview>> {
    let spec = api.validate(&req.schedule).await?;
    let schedule = cronledger_core::Schedule::new(spec).map_err(|i| ApiError::issues(&[i]))?;
    preview(&api, &schedule, req.count, req.after).await
}

pub async fn preview_stored(
    State(api): State<Api>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PreviewQuery>,
) -> ApiResult<Json<Preview>> {
    let stored = api.deps().store.get_schedule(&id).await?;
    let schedule = stored.schedule().map_err(|i| ApiError::issues(&[i]))?;
    preview(&api, &schedule, q.count, q.after).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffQuery {
    pub count: Option<usize>,
}

pub async fn diff(
    State(api): State<Api>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<DiffQuery>,
    ApiJson(mut doc): ApiJson<Value>,
) -> ApiResult<Json<ChangeDiff>> {
    if let Some(obj) = doc.as_object_mut() {
        obj.entry("id").or_insert_with(|| json!(id));
    }
    let proposed = api.validate(&doc).await?;
    let stored = api.deps().store.get_schedule(&id).await?;
    let count = q.count.unwrap_or(5).clamp(1, api.deps().config.preview_max);
    let report = assess_change(&stored.spec, &proposed, api.now(), None, count)
        .map_err(|i| ApiError::issues(&[i]))?;
    Ok(Json(ChangeDiff {
        schedule: id,
        version: stored.version,
        report,
    }))
}

/// A schedule's audit log, a page at a time (oldest first; `next` continues it).
pub async fn audit(
    State(api): State<Api>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Json<AuditLog>> {
    let scope = format!("audit|{id}");
    let offset = api.cursors().open_offset(&scope, q.cursor.as_deref())?;
    let entries = api.deps().store.audit_log(&id).await?;
    if entries.is_empty() {
        // Every schedule has its CREATE entry: none means no such schedule.
        api.deps().store.get_schedule(&id).await?;
    }
    let limit = api.limit_or_max(q.limit);
    let (items, next) = offset_page(&entries, offset, limit, views::audit);
    Ok(Json(AuditLog {
        next: api.cursors().seal_next(&scope, next.map(|n| n.to_string())),
        schedule: id,
        entries: items,
        total: entries.len() as u64,
    }))
}
