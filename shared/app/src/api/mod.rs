//! The control plane: one axum router behind API Gateway (the `api` Lambda) and on the local
//! runner's port. JSON in and out; every error is `{code, message, details}`.
//!
//! Every route is declared once, in [`routes`], with its method, path, the role it needs, its
//! request and answer shapes and its handler: the router and the OpenAPI document
//! (`GET /openapi.json`) are both built from that table, so the document cannot drift from
//! what is served.

pub mod answer_log;
pub mod audit;
pub mod audit_runs;
pub mod auth;
pub mod backfills;
pub mod calendars;
mod chain;
pub mod console;
pub mod cursor;
mod dependencies;
pub mod error;
pub mod extract;
pub mod health;
pub mod ids;
mod next_run;
pub mod openapi;
pub mod paging;
pub mod replays;
pub mod request;
pub mod runs;
pub mod schedules;
pub mod system;
pub(crate) mod views;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put, MethodRouter};
use axum::Router;
use chrono::{DateTime, Utc};
use cronledger_aws::{HealthStore, LaneQueue, LedgerStore, OpsStore};
use cronledger_contract::schemas::{name_of, SCHEDULE_DOCUMENT};
use cronledger_contract::{
    ApprovalOutcome, AuditLog, BackfillList, BackfillPlan, BackfillRequest, BackfillView,
    CalendarAuditLog, CalendarDeleted, CalendarList, CalendarView, ChangeDiff, KillSwitchRequest,
    Note, Preview, PreviewRequest, RetryRequest, RunAtOutcome, RunAtRequest, RunNowRequest,
    RunOutcome, RunPage, RunView, SchedulePage, ScheduleView, SystemAudit, SystemStatus,
    Verification, WhoAmI,
};
use cronledger_contract::{ReplayPlan, ReplayRequest, ReplayView};
use cronledger_core::{Span, ValidationRules};
use schemars::JsonSchema;

use crate::clock::Clock;
use crate::reconciler::Signals;

pub use auth::{AuthConfig, Caller, Role};
pub use console::ConsoleAuth;
pub use cursor::CursorKey;
pub use error::{ApiError, ApiResult};
pub use extract::Actor;
pub use request::RequestId;
pub use system::{RunAtEvent, SystemControl};

/// Limits and defaults of the api.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Largest request body, in bytes (413 past it).
    pub body_limit: usize,
    pub rules: ValidationRules,
    /// How long an `Idempotency-Key` is remembered.
    pub idempotency_ttl: Span,
    /// Most fire times a preview or diff shows.
    pub preview_max: usize,
    /// Most items per page of a listing.
    pub page_max: u32,
    /// Most windows one backfill may cover.
    pub backfill_max_windows: u64,
    /// The key listing cursors are signed with ([`CursorKey::from_env`] in a deployment).
    pub cursor_key: CursorKey,
    /// A side-effecting schedule's backfill of more windows than this waits PAUSED for an
    /// admin's approval (`CRONLEDGER_BACKFILL_APPROVAL_OVER`).
    pub backfill_approval_over: u64,
    /// How the console signs in (`/console/config.json`).
    pub console: ConsoleAuth,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            body_limit: 64 * 1024,
            rules: ValidationRules::default(),
            idempotency_ttl: Span::hours(24),
            preview_max: 100,
            page_max: 200,
            backfill_max_windows: 100_000,
            cursor_key: CursorKey::default(),
            backfill_approval_over: 1_000,
            // The local runner and the tests; a deployment reads it ([`ApiConfig::from_lookup`]).
            console: ConsoleAuth::Local,
        }
    }
}

/// Set by the template to the worker function's timeout, in seconds: the api refuses a
/// `max_runtime` or http `timeout` that the deployed worker cannot honour.
pub const WORKER_TIMEOUT_VARIABLE: &str = "CRONLEDGER_WORKER_TIMEOUT_SECONDS";

/// A setting in the environment the api cannot use.
#[derive(Debug, thiserror::Error)]
#[error("{name} must be {expected}, found `{value}`")]
pub struct InvalidApiSetting {
    pub name: &'static str,
    pub expected: &'static str,
    pub value: String,
}

/// The window count over which a side-effecting backfill waits for an admin.
pub const BACKFILL_APPROVAL_VARIABLE: &str = "CRONLEDGER_BACKFILL_APPROVAL_OVER";

impl ApiConfig {
    /// The defaults, with the worker's timeout read through `get` when it is set (unset: the
    /// template's 900 s, which `cronledger validate` assumes too), and the console's sign-in.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<ApiConfig, InvalidApiSetting> {
        let whole = |name: &'static str| -> Result<Option<u64>, InvalidApiSetting> {
            get(name)
                .map(|value| {
                    value.trim().parse::<u64>().map_err(|_| InvalidApiSetting {
                        name,
                        expected: "a whole number",
                        value,
                    })
                })
                .transpose()
        };
        let mut config = ApiConfig::default();
        if let Some(seconds) = whole(WORKER_TIMEOUT_VARIABLE)? {
            config.rules.worker_timeout = Span::seconds(seconds);
        }
        if let Some(windows) = whole(BACKFILL_APPROVAL_VARIABLE)? {
            config.backfill_approval_over = windows;
        }
        config.console = ConsoleAuth::from_lookup(&get)?;
        Ok(config)
    }
}

/// What the api works with.
#[derive(Clone)]
pub struct ApiDeps {
    pub store: Arc<dyn LedgerStore>,
    pub ops: Arc<dyn OpsStore>,
    /// The outcome counters schedules' health is read from; `None` (the simulator's
    /// levers): schedules answer with `"health": null`.
    pub health: Option<Arc<dyn HealthStore>>,
    pub lanes: Arc<dyn LaneQueue>,
    pub clock: Arc<dyn Clock>,
    /// The kill switch and one-off runs (EventBridge Scheduler); `None` where there is none
    /// (the local runner): those routes answer 409 SYSTEM_CONTROL_UNAVAILABLE.
    pub system: Option<Arc<dyn SystemControl>>,
    /// Pause signals for backfill status (realtime backlog, alarms).
    pub signals: Option<Arc<dyn Signals>>,
    /// On-demand audits (`POST /v1/audit/runs`), published as the auditor function's are;
    /// `None`: that route answers 409 AUDITOR_UNAVAILABLE.
    pub auditor: Option<Arc<crate::auditor::Auditor>>,
    pub auth: AuthConfig,
    pub config: ApiConfig,
}

/// The router's state.
#[derive(Clone)]
pub struct Api(Arc<ApiDeps>);

impl Api {
    pub fn new(deps: ApiDeps) -> Api {
        Api(Arc::new(deps))
    }

    pub fn deps(&self) -> &ApiDeps {
        &self.0
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.0.clock.now()
    }

    /// The operator's levers on these dependencies (what the lever routes call).
    pub fn operator(&self) -> crate::operator::Operator {
        crate::operator::Operator::of(self)
    }

    pub(crate) fn cursors(&self) -> &CursorKey {
        &self.0.config.cursor_key
    }

    /// The router with every route, the body limit and JSON fallbacks.
    pub fn router(&self) -> Router {
        let mut router: Router<Api> = Router::new();
        for route in routes() {
            let guarded = match route.doc.role {
                Some(role) => route.handler.route_layer(middleware::from_fn_with_state(
                    (self.clone(), role),
                    authorize,
                )),
                None => route.handler,
            };
            router = router.route(route.doc.path, guarded);
        }
        router
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed)
            .layer(DefaultBodyLimit::max(self.0.config.body_limit))
            .layer(middleware::from_fn(request::scope))
            .with_state(self.clone())
    }
}

/// Admits the caller if it has `role`, handing the handler an [`Actor`].
async fn authorize(
    State((api, role)): State<(Api, Role)>,
    mut req: Request,
    next: Next,
) -> Response {
    let caller = req.extensions().get::<Caller>().cloned();
    match api.0.auth.require(caller.as_ref(), role) {
        Ok(has) => {
            if let Some(caller) = caller {
                req.extensions_mut().insert(Actor { caller, role: has });
            }
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("ROUTE_NOT_FOUND", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
        "this route does not take that method",
    )
}

/// What the OpenAPI document says about a route.
#[derive(Debug, Clone)]
pub struct RouteDoc {
    pub method: Method,
    pub path: &'static str,
    pub summary: &'static str,
    /// `None`: open to any caller API Gateway let through (the document itself).
    pub role: Option<Role>,
    /// The request body's schema (see [`openapi::schemas`]).
    pub body: Option<BodyDoc>,
    pub query: &'static [(&'static str, &'static str)],
    pub headers: &'static [(&'static str, &'static str)],
    /// Each success status and its answer's schema name.
    pub ok: Vec<(u16, String)>,
    /// The error statuses the route can answer besides 400/401/403/413/422.
    pub errors: &'static [u16],
}

/// A request body: its schema's name, and whether it may be left out.
#[derive(Debug, Clone)]
pub struct BodyDoc {
    pub schema: String,
    pub required: bool,
}

pub struct Route {
    pub doc: RouteDoc,
    pub handler: MethodRouter<Api>,
}

fn route(
    method: Method,
    path: &'static str,
    role: Option<Role>,
    summary: &'static str,
    handler: MethodRouter<Api>,
) -> Route {
    Route {
        doc: RouteDoc {
            method,
            path,
            summary,
            role,
            body: None,
            query: &[],
            headers: &[],
            ok: Vec::new(),
            errors: &[],
        },
        handler,
    }
}

impl Route {
    /// A body the route needs.
    fn body<T: JsonSchema>(self) -> Route {
        self.body_named(name_of::<T>().into_owned(), true)
    }
    /// A body that may be left out (every field has a default).
    fn optional_body<T: JsonSchema>(self) -> Route {
        self.body_named(name_of::<T>().into_owned(), false)
    }
    fn body_named(mut self, schema: String, required: bool) -> Route {
        self.doc.body = Some(BodyDoc { schema, required });
        self
    }
    fn query(mut self, q: &'static [(&'static str, &'static str)]) -> Route {
        self.doc.query = q;
        self
    }
    fn headers(mut self, h: &'static [(&'static str, &'static str)]) -> Route {
        self.doc.headers = h;
        self
    }
    /// A success answer of the contract type `T`.
    fn ok<T: JsonSchema>(self, status: u16) -> Route {
        self.ok_named(status, &name_of::<T>())
    }
    fn ok_named(mut self, status: u16, schema: &str) -> Route {
        self.doc.ok.push((status, schema.to_string()));
        self
    }
    fn errors(mut self, e: &'static [u16]) -> Route {
        self.doc.errors = e;
        self
    }
}

const PAGE: &[(&str, &str)] = &[
    ("limit", "items per page (1-200, default 50)"),
    (
        "cursor",
        "the `next` of the previous page (bound to this query: another's is 400 CURSOR_INVALID)",
    ),
];
const SCHEDULE_LIST: &[(&str, &str)] = &[
    PAGE[0],
    PAGE[1],
    (
        "health",
        "false: leave each schedule's health out (no reads beyond the listing)",
    ),
];

/// Every route of the api, in one table.
pub fn routes() -> Vec<Route> {
    use Method as M;
    use Role::{Admin, Operator, Viewer};
    let (v, o, a) = (Some(Viewer), Some(Operator), Some(Admin));
    vec![
        route(M::GET, "/openapi.json", None, "This document", get(openapi::serve))
            .ok_named(200, openapi::OPENAPI_DOCUMENT),
        // The console's static shell, its files and its sign-in config: public (they hold no
        // data; every page reads through the routes below with the caller's identity).
        route(M::GET, "/console", None, "The operator console (HTML shell)", get(console::shell))
            .ok_named(200, openapi::CONSOLE_FILE),
        route(M::GET, "/console/{*path}", None, "The console's files (assets/NAME), its sign-in config (config.json: auth jwt|iam|local) and, for any other path, the shell", get(console::path))
            .ok_named(200, openapi::CONSOLE_FILE)
            .errors(&[404]),
        route(M::GET, "/v1/whoami", v, "The caller's principal, role and groups (the console shows the buttons the role may use)", get(console::whoami))
            .ok::<WhoAmI>(200),
        // Schedules.
        route(M::POST, "/v1/schedules", a, "Create a schedule (validated; audited)", post(schedules::create))
            .body_named(SCHEDULE_DOCUMENT.into(), true)
            .headers(&[("Cronledger-Note", "why (audit reason)")])
            .ok::<ScheduleView>(201)
            .errors(&[409]),
        route(M::GET, "/v1/schedules", v, "List schedules, each with its health (two bounded reads a schedule)", get(schedules::list))
            .query(SCHEDULE_LIST)
            .ok::<SchedulePage>(200),
        route(M::GET, "/v1/schedules/{id}", v, "One schedule with its health (ETag = version)", get(schedules::get))
            .ok::<ScheduleView>(200)
            .errors(&[404]),
        route(M::PUT, "/v1/schedules/{id}", a, "Replace a schedule's spec; If-Match: its version (stale: 412 with the current one); a HIGH-risk change (see diff) needs confirm=high-risk or X-Cronledger-Confirm: high-risk (else 428 SCHEDULE_CHANGE_NEEDS_CONFIRMATION); the audit entry records the risk", put(schedules::update))
            .body_named(SCHEDULE_DOCUMENT.into(), true)
            .query(&[(schedules::CONFIRM_QUERY, "high-risk: confirms a HIGH-risk change")])
            .headers(&[("If-Match", "required: the version the change is based on"), ("Cronledger-Note", "why"), (schedules::CONFIRM_HEADER, "high-risk: confirms a HIGH-risk change")])
            .ok::<ScheduleView>(200)
            .errors(&[404, 409, 412, 428]),
        route(M::POST, "/v1/schedules/{id}/pause", a, "Pause a schedule with a note", post(schedules::lifecycle::<{ schedules::PAUSE }>))
            .optional_body::<Note>()
            .headers(&[("If-Match", "optional version")])
            .ok::<ScheduleView>(200)
            .errors(&[404, 409, 412]),
        route(M::POST, "/v1/schedules/{id}/resume", a, "Resume a paused schedule with a note", post(schedules::lifecycle::<{ schedules::RESUME }>))
            .optional_body::<Note>()
            .headers(&[("If-Match", "optional version")])
            .ok::<ScheduleView>(200)
            .errors(&[404, 409, 412]),
        route(M::POST, "/v1/schedules/{id}/archive", a, "Archive a schedule (never fires again; runs stay)", post(schedules::lifecycle::<{ schedules::ARCHIVE }>))
            .optional_body::<Note>()
            .headers(&[("If-Match", "optional version")])
            .ok::<ScheduleView>(200)
            .errors(&[404, 409, 412]),
        route(M::POST, "/v1/preview", v, "Next N fire times of a schedule document, with DST notes (nothing saved)", post(schedules::preview_document))
            .body::<PreviewRequest>()
            .ok::<Preview>(200),
        route(M::GET, "/v1/schedules/{id}/preview", v, "Next N fire times of a stored schedule, with DST notes", get(schedules::preview_stored))
            .query(&[("count", "how many (default 10)"), ("after", "RFC3339 instant (default now)")])
            .ok::<Preview>(200)
            .errors(&[404]),
        route(M::POST, "/v1/schedules/{id}/diff", v, "Risk report of a proposed spec against the stored one (nothing saved)", post(schedules::diff))
            .body_named(SCHEDULE_DOCUMENT.into(), true)
            .query(&[("count", "fire times before and after (default 5)")])
            .ok::<ChangeDiff>(200)
            .errors(&[404]),
        route(M::GET, "/v1/schedules/{id}/audit", v, "A schedule's audit log, oldest first: its versioned changes and operators' actions on its runs and backfills (with their notes)", get(schedules::audit))
            .query(&[("limit", "entries per page (1-200, default 200)"), ("cursor", "the `next` of the previous page")])
            .ok::<AuditLog>(200)
            .errors(&[404]),
        // Runs.
        route(M::GET, "/v1/schedules/{id}/runs", v, "Run history, newest first, paginated; filter by status and trigger", get(runs::history))
            .query(&[("limit", "items per page (1-200, default 50)"), ("cursor", "the `next` of the previous page"), ("status", "e.g. FAILED"), ("trigger", "SCHEDULED | CATCH_UP | MANUAL | BACKFILL")])
            .ok::<RunPage>(200)
            .errors(&[404]),
        route(M::POST, "/v1/schedules/{id}/runs", o, "Run now (trigger MANUAL); Idempotency-Key makes a double click one run; mode reuse|new", post(runs::run_now))
            .optional_body::<RunNowRequest>()
            .headers(&[("Idempotency-Key", "same key and body, same run (remembered 24 h); another body: 409 IDEMPOTENCY_KEY_REUSED")])
            .ok::<RunOutcome>(201).ok::<RunOutcome>(200)
            .errors(&[404, 409]),
        route(M::GET, "/v1/schedules/{id}/runs/{run}", v, "One run with its attempts", get(runs::get_one))
            .ok::<RunView>(200)
            .errors(&[404]),
        route(M::POST, "/v1/schedules/{id}/runs/{run}/retry", o, "Retry a FAILED (or STALLED) run: a new attempt of the same run, with its own version's job (definition: current re-pins it to the current one)", post(runs::retry))
            .optional_body::<RetryRequest>()
            .ok::<RunView>(200)
            .errors(&[404, 409]),
        route(M::POST, "/v1/schedules/{id}/runs/{run}/approve", o, "Approve a MANUAL_REQUIRED run (manual lane); a range record becomes a backfill", post(runs::approve))
            .optional_body::<Note>()
            .ok::<ApprovalOutcome>(200)
            .errors(&[404, 409]),
        route(M::POST, "/v1/schedules/{id}/runs/{run}/reject", o, "Reject a MANUAL_REQUIRED run", post(runs::close::<{ runs::REJECT }>))
            .optional_body::<Note>()
            .ok::<RunView>(200)
            .errors(&[404, 409]),
        route(M::POST, "/v1/schedules/{id}/runs/{run}/cancel", o, "Cancel a run that has not started (PENDING, QUEUED, RETRY_PENDING, MANUAL_REQUIRED, STALLED)", post(runs::close::<{ runs::CANCEL }>))
            .optional_body::<Note>()
            .ok::<RunView>(200)
            .errors(&[404, 409]),
        route(M::POST, "/v1/schedules/{id}/run-at", o, "A one-off MANUAL run at a future instant (EventBridge Scheduler at(...), deleted after it fires)", post(system::run_at))
            .body::<RunAtRequest>()
            .ok::<RunAtOutcome>(201)
            .errors(&[404, 409]),
        // Backfills.
        route(M::POST, "/v1/schedules/{id}/backfills", o, "Create a backfill over a range (or dry_run: the plan and its size)", post(backfills::create))
            .body::<BackfillRequest>()
            .ok::<BackfillView>(201).ok::<BackfillPlan>(200)
            .errors(&[404, 409]),
        route(M::GET, "/v1/backfills", v, "Open backfills (RUNNING or PAUSED)", get(backfills::list))
            .query(&[("limit", "items per page (1-200, default 200)"), ("cursor", "the `next` of the previous page")])
            .ok::<BackfillList>(200),
        route(M::GET, "/v1/backfills/{backfill}", v, "Backfill progress: total, queued, running, succeeded, failed, skipped, rate, ETA", get(backfills::progress))
            .ok::<BackfillView>(200)
            .errors(&[404]),
        route(M::POST, "/v1/backfills/{backfill}/pause", o, "Pause a backfill", post(backfills::pause_resume::<{ backfills::PAUSE }>))
            .optional_body::<Note>()
            .ok::<BackfillView>(200)
            .errors(&[404, 409]),
        route(M::POST, "/v1/backfills/{backfill}/resume", o, "Resume a paused backfill (one held for approval: 409 BACKFILL_APPROVAL_REQUIRED)", post(backfills::pause_resume::<{ backfills::RESUME }>))
            .optional_body::<Note>()
            .ok::<BackfillView>(200)
            .errors(&[404, 409]),
        route(M::POST, "/v1/backfills/{backfill}/approve", a, "Approve a backfill held for approval (a side-effecting schedule's backfill over the window limit or before the schedule's creation) and start it; note required; audited", post(backfills::approve))
            .optional_body::<Note>()
            .ok::<BackfillView>(200)
            .errors(&[404, 409]),
        route(M::POST, "/v1/backfills/{backfill}/cancel", o, "Cancel a backfill (its runs not yet started are cancelled)", post(backfills::cancel))
            .optional_body::<Note>()
            .ok::<BackfillView>(200)
            .errors(&[404, 409]),
        route(M::GET, "/v1/backfills/{backfill}/verify", v, "Expected windows against the ledger, with reported counts and checksums; every count, and a page of the missing or failed windows and of the reported ones (next_cursor)", get(backfills::verify))
            .query(&[("limit", "windows per page of each list (1-1000, default 1000)"), ("cursor", "the `next_cursor` of the previous page")])
            .ok::<Verification>(200)
            .errors(&[404]),
        // Replays.
        route(M::POST, "/v1/runs/replay", o, "Replay by filter: retry every FAILED or STALLED run of a schedule (or of an owner's schedules) scheduled in [from, to), on the correction lane at the backfill throttle (or dry_run: the runs, the non-idempotent ones left out, the estimate); held for an admin when it retries side-effecting runs", post(replays::create))
            .body::<ReplayRequest>()
            .ok::<ReplayView>(201).ok::<ReplayPlan>(200)
            .errors(&[404, 409]),
        route(M::GET, "/v1/replays/{replay}", v, "Replay progress: total, released, in flight, succeeded, failed, skipped, remaining, rate, ETA", get(replays::progress))
            .ok::<ReplayView>(200)
            .errors(&[404]),
        route(M::POST, "/v1/replays/{replay}/approve", a, "Approve a replay held for approval (it retries side-effecting or every_run schedules' runs) and start it; note required; audited", post(replays::approve))
            .optional_body::<Note>()
            .ok::<ReplayView>(200)
            .errors(&[404, 409]),
        route(M::POST, "/v1/replays/{replay}/cancel", o, "Cancel a replay (runs not yet retried stay as they are; retried ones finish)", post(replays::cancel))
            .optional_body::<Note>()
            .ok::<ReplayView>(200)
            .errors(&[404, 409]),
        // Calendars.
        route(M::GET, "/v1/calendars", v, "Every calendar, by name (one read; next is always null)", get(calendars::list))
            .ok::<CalendarList>(200),
        route(M::GET, "/v1/calendars/{calendar}", v, "One calendar (ETag = version)", get(calendars::get))
            .ok::<CalendarView>(200)
            .errors(&[404]),
        route(M::PUT, "/v1/calendars/{calendar}", o, "Create a calendar (no If-Match; a taken name is 409 CALENDAR_ALREADY_EXISTS) or replace it (If-Match: its version; stale: 412 with the current one); audited. An edit changes the future only", put(calendars::put))
            .body_named(calendars::CALENDAR_DOCUMENT.into(), true)
            .headers(&[("If-Match", "the version a replace is based on (none: a create)"), ("Cronledger-Note", "why (audit note)")])
            .ok::<CalendarView>(201).ok::<CalendarView>(200)
            .errors(&[404, 409, 412]),
        route(M::DELETE, "/v1/calendars/{calendar}", o, "Delete a calendar (409 CALENDAR_IN_USE while a schedule that is not archived names it); audited", delete(calendars::delete))
            .headers(&[("If-Match", "optional version"), ("Cronledger-Note", "why (audit note)")])
            .ok::<CalendarDeleted>(200)
            .errors(&[400, 404, 409, 412]),
        route(M::GET, "/v1/calendars/{calendar}/audit", v, "A calendar's audit log, oldest first (kept after a delete)", get(calendars::audit))
            .ok::<CalendarAuditLog>(200)
            .errors(&[404]),
        // System.
        route(M::GET, "/v1/system", v, "Whether automatic firing is on (ticker and reconciler schedules)", get(system::status))
            .ok::<SystemStatus>(200)
            .errors(&[409]),
        route(M::POST, "/v1/system/kill-switch", a, "Stop (engaged: true) or restart all automatic firing, with a note; audited", post(system::kill_switch))
            .body::<KillSwitchRequest>()
            .ok::<SystemStatus>(200)
            .errors(&[409]),
        route(M::GET, "/v1/system/audit", v, "System-wide operator actions (the kill switch), newest first; actions on a schedule's runs and backfills are in its audit log", get(system::audit))
            .query(&[("limit", "entries (default 50)")])
            .ok::<SystemAudit>(200),
        // The ledger's completeness.
        route(M::GET, "/v1/audit/completeness", v, "The completeness audit of [from, to) (every schedule with a window or a finding there, or one): each schedule's expected windows (versions, bounds, pauses) against its ledger entries; missing windows (a page of each list), duplicated runs or executions, entries no version explains; the fleet's share of windows accounted for exactly once. Reads only", get(audit::completeness))
            .query(&[("from", "RFC3339 instant (required)"), ("to", "RFC3339 instant (required): after from, at most 31 days later, not after now (else 400 AUDIT_RANGE_INVALID or AUDIT_RANGE_TOO_LONG)"), ("schedule", "one schedule (default: every one)"), ("max_missing", "missing windows listed per schedule (1-1000, default 1000; the counts are whole)"), ("cursor", "the `next` of the previous page")])
            .ok::<cronledger_contract::CompletenessReport>(200)
            .errors(&[404]),
        // The ledger's audit.
        route(M::POST, "/v1/audit/runs", o, "Audit [from, to) now (every schedule, or one): the completeness report, published as the auditor's daily pass is (LedgerCompleteness, LEDGER_INCOMPLETE per schedule whose ledger is wrong, once per range); `to` not after now, at most 31 days", post(audit_runs::run))
            .body::<audit_runs::AuditRunRequest>()
            .ok::<audit_runs::CompletenessReport>(200)
            .errors(&[404, 409]),
    ]
}

/// A fresh id: `{prefix}{millis}{random}` in lowercase hex, safe in paths, keys and
/// EventBridge schedule names.
pub fn new_id(prefix: &str) -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = RandomState::new().hash_one((std::process::id(), n)) & 0xff_ffff_ffff;
    format!("{prefix}{:x}{random:010x}", Utc::now().timestamp_millis())
}
