//! A differential property of the two ledger stores: random sequences of store operations,
//! applied to the DynamoDB store (on the emulator) and to the in-memory store, must give
//!
//! 1. the same outcome per operation: equal `Ok` values, or errors with the same `code()`;
//! 2. the same stored state afterwards, read back through the stores' own reads: every run
//!    touched with its attempts, every schedule touched (its item, audit log, run history,
//!    alerts and outcome counters), the children of every parent touched, every backfill
//!    touched, and the case's entries in the `due` and `active` indexes of its shards;
//! 3. the same consumed capacity over the operations and those reads, compared as
//!    `capacity.rs` in the conformance suite compares it: calls per (scope, operation) for
//!    every request; read and write units only for the scopes whose every request is a
//!    plain one on an item in no index (its `PLAIN` list), and only on DynamoDB Local (moto
//!    reports no capacity at all). DynamoDB Local's units for writes of items in an index,
//!    transactions above all, are known to differ from what DynamoDB charges, so the units
//!    of every other scope (runs, schedules' changes, fires, children, backfills, alerts'
//!    records) are left out; their calls are compared. A plain scope is compared by its
//!    calls only in a case where DynamoDB Local reported no capacity for one of them: it
//!    reports none for a conditional write whose condition failed and 0 for a Query that
//!    found nothing, where DynamoDB charges both (see `faithful`).
//!
//! The operations work on a small key space (two schedules, three windows, two origins, two
//! backfills, two idempotency keys, two alert subjects), so collisions, version and status
//! conflicts, stale lease epochs and failed conditions are the common case: schedules
//! created, updated, paused, resumed and archived; the failure streak moved; runs created
//! and fired (alone and in batches); runs moved by any event from the right or a wrong
//! status, at the current or a stale epoch, with or without a lease, lane and catch-up
//! conditions; children stored and changed; outcome counters; backfills created and put;
//! idempotency claims, some past their expiry; alerts recorded and published.
//!
//! All cases share one table: each works under its own schedule ids (`d{case}-a`,
//! `d{case}-b`, and the backfill and claim ids built from them), against a fresh memory
//! store. The index reads (`due_schedules`, `active_runs`) see every case's items on the
//! table: they are filtered to the case's schedules and their requests are not compared
//! (they read other cases' entries), and each case ends by archiving its schedules and
//! ending its active runs on the table, so those indexes stay small.
//!
//! Every generated request is sent to both stores: none is excused. (The first run found
//! one: a child's start into PENDING or an end, which DynamoDB refused as an expression
//! that sets and removes the lease while the memory store applied it; both now refuse it
//! before any request.) A failure shows the case's operations as sent, with both stores'
//! answers, and what differed; proptest shrinks the sequence first.
//!
//! `CRONLEDGER_DIFFERENTIAL_CASES` sets the number of cases (default 200; a nightly run
//! asks for thousands).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Debug, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Duration, NaiveDate, Utc};
use cronledger_aws::keys::shard_of;
use cronledger_aws::ledger::ChildChange;
use cronledger_aws::{
    AlertStore, Backfill, BackfillState, ChangeMeta, Created, Fire, FireOutcome, HealthStore,
    IdempotencyClaim, LedgerStore, MemoryStore, MeterSnapshot, OpsStore, Outcome, RequestMeter,
    RunChange, ScheduleState, StoreError, StoredSchedule, StreakChange, Usage,
};
use cronledger_core::alerts::{Alert, AlertKind, Severity};
use cronledger_core::children::{Child, ChildCounts, ChildStatus};
use cronledger_core::run::{transition, Origin, RunResult};
use cronledger_core::{Lane, Reason, Run, RunEvent, RunKey, RunStatus, ScheduleSpec, Window};
use cronledger_tests::{
    manual_run, running_backfill, scheduled_run, spec, spec_with, t, TestLedger, PLAIN_SCOPES,
    SHARDS,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Cases per run unless `CRONLEDGER_DIFFERENTIAL_CASES` says otherwise.
const DEFAULT_CASES: u32 = 200;
const CASES_VAR: &str = "CRONLEDGER_DIFFERENTIAL_CASES";

const SCHEDULES: usize = 2;
const WINDOWS: usize = 3;
const CRON: &str = "*/5 * * * *";

/// The scopes whose units are compared on DynamoDB Local (the conformance suite's too).
const PLAIN: &[&str] = PLAIN_SCOPES;

/// The reasons a transition may carry: plain ones, and ones that keep a run longer.
const REASONS: &[Reason] = &[
    Reason::Overlap,
    Reason::Missed,
    Reason::HeartbeatLost,
    Reason::WorkerLost,
    Reason::CancelledByOperator,
];

fn t0() -> DateTime<Utc> {
    t("2026-03-01T00:00:00Z")
}

/// The `w`-th window the schedules fire at (every 5 minutes from t0).
fn window(w: usize) -> DateTime<Utc> {
    t0() + Duration::minutes(5 * (w as i64 + 1))
}

/// When the `i`-th operation of a case happens.
fn op_at(i: usize) -> DateTime<Utc> {
    t0() + Duration::seconds(30 * (i as i64 + 1))
}

fn day(d: usize) -> NaiveDate {
    t0().date_naive() + Duration::days(d as i64)
}

fn meta(actor: &str, at: DateTime<Utc>) -> ChangeMeta {
    ChangeMeta {
        actor: actor.into(),
        reason: format!("{actor} did it"),
        at,
        details: None,
    }
}

// ---------------------------------------------------------------------------------------
// The generated operations.

/// One run of the key space: a schedule, a window, the expected occurrence or an operator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct RunRef {
    s: usize,
    w: usize,
    manual: bool,
}

/// The run an operation works on: the `n`-th of the runs the case has stored so far (the
/// common case, so runs move through their lives), or any key of the key space.
#[derive(Debug, Clone, Copy)]
enum Target {
    Stored(usize),
    Key(RunRef),
}

/// The value a request states about what it read: the current one, or another.
#[derive(Debug, Clone, Copy)]
enum Pick<T> {
    Current,
    Other(T),
}

/// A version or lease epoch: the current one, or a stale one.
#[derive(Debug, Clone, Copy)]
enum Counter {
    Current,
    Stale,
}

/// A schedule change's expected version: none, the current, or a stale one.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Unset,
    Current,
    Stale,
}

/// A run's event: the `n`-th of those the table allows from the status sent, or any.
#[derive(Debug, Clone, Copy)]
enum EventPick {
    Allowed(usize),
    Any(RunEvent),
}

#[derive(Debug, Clone)]
struct Move {
    run: Target,
    event: EventPick,
    from: Pick<RunStatus>,
    epoch: Counter,
    lease: bool,
    reason: Option<Reason>,
    result: Option<u64>,
    lane: Option<Lane>,
    lane_was: Option<Lane>,
    catch_up: bool,
    repin: bool,
    children: Option<u32>,
}

#[derive(Debug, Clone)]
enum Op {
    CreateSchedule {
        s: usize,
    },
    /// `cron`: the edit changes the expression (else the owner).
    UpdateSchedule {
        s: usize,
        version: Counter,
        cron: bool,
    },
    Pause {
        s: usize,
        version: Expect,
    },
    Resume {
        s: usize,
        version: Expect,
    },
    Archive {
        s: usize,
        version: Expect,
    },
    Streak {
        s: usize,
        failed: bool,
    },
    CreateRun {
        run: RunRef,
        status: RunStatus,
    },
    /// The ticker's fire of window `w`; `expected`: the `next_run_at` it read (`None`: the
    /// one last seen, else the window's).
    Fire {
        s: usize,
        w: usize,
        expected: Option<usize>,
        version: Counter,
    },
    /// Both schedules fired for window `w` in one batch.
    FireAll {
        w: usize,
    },
    Transition(Box<Move>),
    PutChildren {
        run: Target,
        count: u32,
    },
    ChangeChild {
        run: Target,
        index: u32,
        from: Pick<ChildStatus>,
        epoch: Counter,
        to: ChildStatus,
        start: bool,
    },
    CountOutcome {
        s: usize,
        day: usize,
        outcome: Outcome,
        count: u64,
    },
    CreateBackfill {
        b: usize,
        s: usize,
    },
    PutBackfill {
        b: usize,
        state: BackfillState,
        version: Counter,
    },
    /// `created`: hours after t0 (a claim expires 24 h after it was made).
    Claim {
        s: usize,
        k: usize,
        w: usize,
        created: i64,
    },
    RecordAlert {
        s: usize,
        kind: AlertKind,
        subject: usize,
    },
    AlertPublished {
        s: usize,
        kind: AlertKind,
        subject: usize,
    },
}

/// A schedule of the two: mostly the first, so operations meet on it.
fn schedule() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(0usize), 1 => Just(1usize)]
}

fn run_ref() -> impl Strategy<Value = RunRef> {
    (schedule(), 0..WINDOWS, proptest::bool::weighted(0.2)).prop_map(|(s, w, manual)| RunRef {
        s,
        w,
        manual,
    })
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => (0usize..6).prop_map(Target::Stored),
        1 => run_ref().prop_map(Target::Key),
    ]
}

fn counter() -> impl Strategy<Value = Counter> {
    prop_oneof![3 => Just(Counter::Current), 1 => Just(Counter::Stale)]
}

fn expect() -> impl Strategy<Value = Expect> {
    prop_oneof![
        2 => Just(Expect::Unset),
        2 => Just(Expect::Current),
        1 => Just(Expect::Stale),
    ]
}

fn pick<T: Debug + Clone + 'static>(values: &'static [T]) -> impl Strategy<Value = Pick<T>> {
    prop_oneof![
        3 => Just(Pick::Current),
        1 => proptest::sample::select(values).prop_map(Pick::Other),
    ]
}

fn event_pick() -> impl Strategy<Value = EventPick> {
    prop_oneof![
        7 => (0usize..8).prop_map(EventPick::Allowed),
        1 => proptest::sample::select(RunEvent::ALL).prop_map(EventPick::Any),
    ]
}

fn a_move() -> impl Strategy<Value = Move> {
    let lanes = || proptest::sample::select(&[Lane::Normal, Lane::Realtime][..]);
    (
        (
            target(),
            event_pick(),
            pick(RunStatus::ALL),
            counter(),
            proptest::bool::weighted(0.95),
        ),
        (
            proptest::option::weighted(0.4, proptest::sample::select(REASONS)),
            proptest::option::weighted(0.3, 0u64..4),
            proptest::option::weighted(0.15, lanes()),
            proptest::option::weighted(0.2, lanes()),
            proptest::bool::weighted(0.1),
            proptest::bool::weighted(0.05),
            proptest::option::weighted(0.15, 1u32..4),
        ),
    )
        .prop_map(
            |(
                (run, event, from, epoch, lease),
                (reason, result, lane, lane_was, catch_up, repin, children),
            )| Move {
                run,
                event,
                from,
                epoch,
                lease,
                reason,
                result,
                lane,
                lane_was,
                catch_up,
                repin,
                children,
            },
        )
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Succeeded { fresh: true }),
        Just(Outcome::Succeeded { fresh: false }),
        Just(Outcome::Failed),
        Just(Outcome::Skipped),
    ]
}

fn alert_kind() -> impl Strategy<Value = AlertKind> {
    proptest::sample::select(&[AlertKind::ConsecutiveFailures, AlertKind::MissedWindows][..])
}

fn op() -> impl Strategy<Value = Op> {
    let s = schedule;
    let w = || 0..WINDOWS;
    let backfill_states = &[
        BackfillState::Running,
        BackfillState::Paused,
        BackfillState::Cancelled,
        BackfillState::Done,
    ][..];
    let child_statuses = ChildStatus::ALL;
    prop_oneof![
        3 => s().prop_map(|s| Op::CreateSchedule { s }),
        1 => (s(), counter(), any::<bool>())
            .prop_map(|(s, version, cron)| Op::UpdateSchedule { s, version, cron }),
        1 => (s(), expect()).prop_map(|(s, version)| Op::Pause { s, version }),
        1 => (s(), expect()).prop_map(|(s, version)| Op::Resume { s, version }),
        1 => (s(), expect()).prop_map(|(s, version)| Op::Archive { s, version }),
        1 => (s(), any::<bool>()).prop_map(|(s, failed)| Op::Streak { s, failed }),
        4 => (
            run_ref(),
            prop_oneof![
                5 => Just(RunStatus::Pending),
                1 => Just(RunStatus::ManualRequired),
                1 => Just(RunStatus::Skipped),
                1 => Just(RunStatus::Running),
            ],
        )
            .prop_map(|(run, status)| Op::CreateRun { run, status }),
        2 => (s(), w(), proptest::option::weighted(0.3, w()), counter())
            .prop_map(|(s, w, expected, version)| Op::Fire { s, w, expected, version }),
        1 => w().prop_map(|w| Op::FireAll { w }),
        12 => a_move().prop_map(|m| Op::Transition(Box::new(m))),
        2 => (target(), 1u32..3).prop_map(|(run, count)| Op::PutChildren { run, count }),
        2 => (
            target(),
            0u32..2,
            pick(child_statuses),
            counter(),
            proptest::sample::select(child_statuses),
            any::<bool>(),
        )
            .prop_map(|(run, index, from, epoch, to, start)| Op::ChangeChild {
                run,
                index,
                from,
                epoch,
                to,
                start,
            }),
        1 => (s(), 0usize..2, outcome(), 0u64..3)
            .prop_map(|(s, day, outcome, count)| Op::CountOutcome { s, day, outcome, count }),
        1 => (0usize..2, s()).prop_map(|(b, s)| Op::CreateBackfill { b, s }),
        1 => (0usize..2, proptest::sample::select(backfill_states), counter())
            .prop_map(|(b, state, version)| Op::PutBackfill { b, state, version }),
        1 => (s(), 0usize..2, w(), proptest::sample::select(&[0i64, 1, 24, 25, 49][..]))
            .prop_map(|(s, k, w, created)| Op::Claim { s, k, w, created }),
        1 => (s(), alert_kind(), 0usize..2)
            .prop_map(|(s, kind, subject)| Op::RecordAlert { s, kind, subject }),
        1 => (s(), alert_kind(), 0usize..2)
            .prop_map(|(s, kind, subject)| Op::AlertPublished { s, kind, subject }),
    ]
}

/// What a case mostly begins with, so later operations find something to work on.
fn opening() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => schedule().prop_map(|s| Op::CreateSchedule { s }),
        4 => run_ref().prop_map(|run| Op::CreateRun { run, status: RunStatus::Pending }),
        1 => (run_ref(), 1u32..3).prop_map(|(run, count)| Op::PutChildren {
            run: Target::Key(run),
            count,
        }),
        1 => (schedule(), 0..WINDOWS).prop_map(|(s, w)| Op::Fire {
            s,
            w,
            expected: None,
            version: Counter::Current,
        }),
    ]
}

/// 1 to 12 operations: mostly one or two openings, then any.
fn ops() -> impl Strategy<Value = Vec<Op>> {
    (
        prop_oneof![
            1 => proptest::collection::vec(opening(), 0..=0),
            4 => proptest::collection::vec(opening(), 1..=2),
        ],
        proptest::collection::vec(op(), 1..=10),
    )
        .prop_map(|(mut ops, rest)| {
            ops.extend(rest);
            ops
        })
}

// ---------------------------------------------------------------------------------------
// One case's names, and what the memory store last answered about them.

/// A case's own ids on the shared table.
struct Names {
    case: u64,
}

impl Names {
    fn schedule(&self, s: usize) -> String {
        format!("d{}-{}", self.case, ["a", "b"][s])
    }

    fn spec(&self, s: usize) -> ScheduleSpec {
        spec(&self.schedule(s), CRON)
    }

    fn owns(&self, schedule_id: &str) -> bool {
        (0..SCHEDULES).any(|s| self.schedule(s) == schedule_id)
    }

    fn run_key(&self, r: RunRef) -> RunKey {
        RunKey {
            schedule_id: self.schedule(r.s),
            scheduled_for: window(r.w),
            origin: if r.manual {
                Origin::Manual("req-1".into())
            } else {
                Origin::Expected
            },
        }
    }

    fn backfill(&self, b: usize) -> String {
        format!("d{}-bf{b}", self.case)
    }
}

/// What the memory store last answered, to state the current status, epoch or version (or
/// a stale one) in later requests.
#[derive(Default)]
struct Model {
    schedules: BTreeMap<String, StoredSchedule>,
    runs: BTreeMap<RunKey, Run>,
    children: BTreeMap<(RunKey, u32), Child>,
    backfills: BTreeMap<String, Backfill>,
}

/// Another value than `current`: one below, or one above at 0.
fn stale(current: u64) -> u64 {
    current.checked_sub(1).unwrap_or(current + 1)
}

/// A request as sent to both stores.
#[derive(Debug, Clone)]
enum Request {
    CreateSchedule(ScheduleSpec, ChangeMeta),
    UpdateSchedule(ScheduleSpec, u64, ChangeMeta),
    Pause(String, Option<u64>, ChangeMeta),
    Resume(String, Option<u64>, ChangeMeta),
    Archive(String, Option<u64>, ChangeMeta),
    Streak(String, StreakChange),
    CreateRun(Run),
    Fire(Fire),
    FireAll(Vec<Fire>),
    Transition(RunKey, RunChange),
    PutChildren(RunKey, Vec<Child>),
    ChangeChild(RunKey, ChildChange),
    CountOutcome(String, NaiveDate, Outcome, u64),
    CreateBackfill(Backfill),
    PutBackfill(Backfill),
    Claim(IdempotencyClaim),
    RecordAlert(Alert, DateTime<Utc>),
    AlertPublished(Alert, DateTime<Utc>),
}

impl Request {
    /// The store operation it calls.
    fn operation(&self) -> &'static str {
        match self {
            Request::CreateSchedule(..) => "create_schedule",
            Request::UpdateSchedule(..) => "update_schedule",
            Request::Pause(..) => "pause_schedule",
            Request::Resume(..) => "resume_schedule",
            Request::Archive(..) => "archive_schedule",
            Request::Streak(..) => "count_failure_streak",
            Request::CreateRun(..) => "create_run",
            Request::Fire(..) => "fire",
            Request::FireAll(..) => "fire_all",
            Request::Transition(..) => "transition_run",
            Request::PutChildren(..) => "put_children",
            Request::ChangeChild(..) => "change_child",
            Request::CountOutcome(..) => "count_outcome",
            Request::CreateBackfill(..) => "create_backfill",
            Request::PutBackfill(..) => "put_backfill",
            Request::Claim(..) => "claim_idempotency",
            Request::RecordAlert(..) => "record_alert",
            Request::AlertPublished(..) => "alert_published",
        }
    }

    /// What the request states beyond its operation (for the failure report).
    fn describe(&self) -> String {
        match self {
            Request::UpdateSchedule(_, version, _) => format!("expected version {version}"),
            Request::Pause(_, v, _) | Request::Resume(_, v, _) | Request::Archive(_, v, _) => {
                format!("expected version {v:?}")
            }
            Request::CreateRun(run) => format!("{} {}", run.key, run.status),
            Request::Fire(fire) => describe_fire(fire),
            Request::FireAll(fires) => fires
                .iter()
                .map(describe_fire)
                .collect::<Vec<_>>()
                .join("; "),
            Request::Transition(key, c) => {
                let mut text = format!("{key}: {} from {} epoch {}", c.event, c.from, c.epoch);
                if let Some(lease) = &c.lease {
                    let _ = write!(text, " lease {}", lease.owner);
                }
                let extras: [(&str, Option<String>); 8] = [
                    ("reason", c.reason.map(|r| r.to_string())),
                    ("result", c.result.as_ref().map(|r| format!("{r:?}"))),
                    ("lane", c.lane.map(|l| l.to_string())),
                    ("lane_was", c.lane_was.map(|l| l.to_string())),
                    ("catch_up", c.catch_up.clone()),
                    (
                        "schedule_version",
                        c.schedule_version.map(|v| v.to_string()),
                    ),
                    ("children", c.children.map(|n| format!("{n:?}"))),
                    ("coalesced_into", c.coalesced_into.map(|at| at.to_rfc3339())),
                ];
                for (name, value) in extras {
                    if let Some(value) = value {
                        let _ = write!(text, " {name} {value}");
                    }
                }
                text
            }
            Request::ChangeChild(key, c) => format!(
                "{key} child {}: {} -> {} epoch {}{}",
                c.index,
                c.from,
                c.to,
                c.epoch,
                if c.start_until.is_some() {
                    " start"
                } else {
                    ""
                }
            ),
            Request::PutBackfill(b) => format!("{} {} at version {}", b.id, b.state, b.version),
            Request::Claim(c) => format!("{} created {}", c.key, c.created_at.to_rfc3339()),
            _ => String::new(),
        }
    }
}

fn describe_fire(fire: &Fire) -> String {
    format!(
        "{} version {} expected {}",
        fire.run.key,
        fire.run.schedule_version,
        fire.expected_next_run_at.to_rfc3339()
    )
}

fn backfill(id: String, schedule_id: String, at: DateTime<Utc>) -> Backfill {
    let range = (window(0), window(WINDOWS - 1));
    running_backfill(id, schedule_id, range, WINDOWS as u64, at)
}

fn alert(schedule: String, kind: AlertKind, subject: usize, at: DateTime<Utc>) -> Alert {
    Alert {
        kind,
        severity: Severity::Warning,
        run: Some(format!("{schedule}/RUN#{}", at.to_rfc3339())),
        message: format!("{kind} on {schedule}"),
        schedule,
        owner: Some("payments".into()),
        window: Some(Window::new(at - Duration::hours(1), at)),
        console_url: None,
        at,
        subject: format!("subject-{subject}"),
    }
}

impl Model {
    /// The run `target` names: the `n`-th stored so far (by key), else a key of the space.
    fn target(&self, names: &Names, target: Target) -> RunKey {
        match target {
            Target::Stored(n) if !self.runs.is_empty() => self
                .runs
                .keys()
                .nth(n % self.runs.len())
                .cloned()
                .unwrap_or_else(|| {
                    names.run_key(RunRef {
                        s: 0,
                        w: 0,
                        manual: false,
                    })
                }),
            Target::Stored(n) => names.run_key(RunRef {
                s: 0,
                w: n % WINDOWS,
                manual: false,
            }),
            Target::Key(r) => names.run_key(r),
        }
    }

    /// The parent `target` names: the `n`-th of those with children, else as [`Model::target`].
    fn parent(&self, names: &Names, target: Target) -> RunKey {
        let parents: BTreeSet<&RunKey> = self.children.keys().map(|(parent, _)| parent).collect();
        match target {
            Target::Stored(n) if !parents.is_empty() => parents
                .iter()
                .nth(n % parents.len())
                .map(|k| (*k).clone())
                .unwrap_or_else(|| self.target(names, target)),
            _ => self.target(names, target),
        }
    }

    fn version(&self, id: &str) -> u64 {
        self.schedules.get(id).map_or(1, |s| s.version)
    }

    fn expect(&self, id: &str, choice: Expect) -> Option<u64> {
        match choice {
            Expect::Unset => None,
            Expect::Current => Some(self.version(id)),
            Expect::Stale => Some(stale(self.version(id))),
        }
    }

    fn counter(current: u64, choice: Counter) -> u64 {
        match choice {
            Counter::Current => current,
            Counter::Stale => stale(current),
        }
    }

    fn fire(
        &self,
        names: &Names,
        s: usize,
        w: usize,
        expected: Option<usize>,
        version: Counter,
        at: DateTime<Utc>,
    ) -> Fire {
        let id = names.schedule(s);
        let mut run = scheduled_run(&names.spec(s), window(w), at, "ticker");
        run.schedule_version = Model::counter(self.version(&id), version);
        let expected_next_run_at = match expected {
            Some(e) => window(e),
            None => self
                .schedules
                .get(&id)
                .and_then(|s| s.next_run_at)
                .unwrap_or(window(w)),
        };
        Fire {
            run,
            expected_next_run_at,
            next_run_at: Some(expected_next_run_at + Duration::minutes(5)),
        }
    }

    /// The request `op` (the `i`-th of its case) sends, stating what the model knows.
    fn request(&self, names: &Names, i: usize, op: &Op) -> Request {
        let at = op_at(i);
        match *op {
            Op::CreateSchedule { s } => Request::CreateSchedule(names.spec(s), meta("alice", at)),
            Op::UpdateSchedule { s, version, cron } => {
                let id = names.schedule(s);
                let edited = if cron {
                    spec(&id, "*/10 * * * *")
                } else {
                    spec_with(&id, CRON, serde_json::json!({ "owner": "someone-else" }))
                };
                let version = Model::counter(self.version(&id), version);
                Request::UpdateSchedule(edited, version, meta("bob", at))
            }
            Op::Pause { s, version } => {
                let id = names.schedule(s);
                let v = self.expect(&id, version);
                Request::Pause(id, v, meta("carol", at))
            }
            Op::Resume { s, version } => {
                let id = names.schedule(s);
                let v = self.expect(&id, version);
                Request::Resume(id, v, meta("carol", at))
            }
            Op::Archive { s, version } => {
                let id = names.schedule(s);
                let v = self.expect(&id, version);
                Request::Archive(id, v, meta("dave", at))
            }
            Op::Streak { s, failed } => Request::Streak(
                names.schedule(s),
                if failed {
                    StreakChange::Failed
                } else {
                    StreakChange::Succeeded
                },
            ),
            Op::CreateRun { run, status } => {
                let base = scheduled_run(&names.spec(run.s), window(run.w), at, "ticker");
                let mut new = if run.manual {
                    manual_run(&base, "req-1")
                } else {
                    base
                };
                new.status = status;
                if status == RunStatus::ManualRequired {
                    new.reason = Some(Reason::PolicyManual);
                } else if status == RunStatus::Skipped {
                    new.reason = Some(Reason::Missed);
                }
                Request::CreateRun(new)
            }
            Op::Fire {
                s,
                w,
                expected,
                version,
            } => Request::Fire(self.fire(names, s, w, expected, version, at)),
            Op::FireAll { w } => Request::FireAll(
                (0..SCHEDULES)
                    .map(|s| self.fire(names, s, w, None, Counter::Current, at))
                    .collect(),
            ),
            Op::Transition(ref m) => {
                let key = self.target(names, m.run);
                let known = self.runs.get(&key);
                let current = known.map_or(RunStatus::Pending, |r| r.status);
                let epoch = known.map_or(0, |r| r.lease_epoch);
                let from = match m.from {
                    Pick::Current => current,
                    Pick::Other(status) => status,
                };
                let event = match m.event {
                    EventPick::Allowed(n) => {
                        let allowed: Vec<RunEvent> = RunEvent::ALL
                            .iter()
                            .copied()
                            .filter(|e| transition(from, *e).is_ok())
                            .collect();
                        if allowed.is_empty() {
                            RunEvent::ALL[n % RunEvent::ALL.len()]
                        } else {
                            allowed[n % allowed.len()]
                        }
                    }
                    EventPick::Any(event) => event,
                };
                let mut change = RunChange::new(event, from, Model::counter(epoch, m.epoch), at);
                if m.lease {
                    change = change.with_lease(format!("w{i}"), at + Duration::minutes(1));
                }
                change.reason = m.reason;
                change.result = m.result.map(|count| RunResult {
                    count: Some(count),
                    error_code: (count % 2 == 1).then(|| "BOOM".to_string()),
                    ..RunResult::default()
                });
                change.lane = m.lane;
                change.lane_was = m.lane_was;
                change.catch_up = m.catch_up.then(|| "g1".to_string());
                change.schedule_version = m.repin.then_some(2);
                change.children = m.children.map(|total| ChildCounts {
                    total,
                    succeeded: 0,
                    failed: 0,
                    step: 0,
                });
                if event == RunEvent::Coalesce {
                    change.coalesced_into = Some(key.scheduled_for + Duration::minutes(5));
                }
                Request::Transition(key, change)
            }
            Op::PutChildren { run, count } => Request::PutChildren(
                self.target(names, run),
                (0..count)
                    .map(|index| {
                        Child::new(0, index, serde_json::json!({ "i": index, "op": i }), at)
                    })
                    .collect(),
            ),
            Op::ChangeChild {
                run,
                index,
                from,
                epoch,
                to,
                start,
            } => {
                let key = self.parent(names, run);
                let known = self.children.get(&(key.clone(), index));
                let current = known.map_or(ChildStatus::Pending, |c| c.status);
                let current_epoch = known.map_or(0, |c| c.lease_epoch);
                let change = ChildChange {
                    step: 0,
                    index,
                    from: match from {
                        Pick::Current => current,
                        Pick::Other(status) => status,
                    },
                    epoch: Model::counter(current_epoch, epoch),
                    to,
                    at,
                    start_until: start.then(|| at + Duration::minutes(1)),
                    count: (to == ChildStatus::Success).then_some(2),
                    checksum: None,
                    error_code: (to == ChildStatus::Failed).then(|| "BOOM".to_string()),
                };
                Request::ChangeChild(key, change)
            }
            Op::CountOutcome {
                s,
                day: d,
                outcome,
                count,
            } => Request::CountOutcome(names.schedule(s), day(d), outcome, count),
            Op::CreateBackfill { b, s } => {
                Request::CreateBackfill(backfill(names.backfill(b), names.schedule(s), at))
            }
            Op::PutBackfill { b, state, version } => {
                let id = names.backfill(b);
                let mut next = self
                    .backfills
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| backfill(id, names.schedule(0), at));
                next.version = Model::counter(next.version, version);
                next.state = state;
                next.updated_at = at;
                next.held = (state == BackfillState::Paused).then(|| "realtime backlog".into());
                Request::PutBackfill(next)
            }
            Op::Claim { s, k, w, created } => {
                let id = names.schedule(s);
                let created_at = t0() + Duration::hours(created);
                Request::Claim(IdempotencyClaim {
                    key: format!("{id}:k{k}"),
                    run: RunKey {
                        schedule_id: id,
                        scheduled_for: window(w),
                        origin: Origin::Manual(format!("req-{i}")),
                    },
                    body_hash: (k == 0).then(|| "ab12".into()),
                    created_at,
                    expires_at: created_at + Duration::hours(24),
                })
            }
            Op::RecordAlert { s, kind, subject } => {
                Request::RecordAlert(alert(names.schedule(s), kind, subject, at), at)
            }
            Op::AlertPublished { s, kind, subject } => {
                Request::AlertPublished(alert(names.schedule(s), kind, subject, at), at)
            }
        }
    }

    /// Learns from the memory store's answer to `request`.
    fn learn(&mut self, request: &Request, seen: Seen) {
        match seen {
            Seen::Nothing => {}
            Seen::Schedule(s) => {
                self.schedules.insert(s.spec.id.clone(), s);
            }
            Seen::Run(run) => {
                self.runs.insert(run.key.clone(), run);
            }
            Seen::Fired(outcomes) => {
                let fires: Vec<&Fire> = match request {
                    Request::Fire(fire) => vec![fire],
                    Request::FireAll(fires) => fires.iter().collect(),
                    _ => Vec::new(),
                };
                for (fire, outcome) in fires.into_iter().zip(outcomes) {
                    match outcome {
                        FireOutcome::Created => {
                            self.runs.insert(fire.run.key.clone(), fire.run.clone());
                            if let Some(s) = self.schedules.get_mut(&fire.run.key.schedule_id) {
                                s.next_run_at = fire.next_run_at;
                            }
                        }
                        FireOutcome::Lost {
                            existing: Some(run),
                            ..
                        } => {
                            self.runs.insert(run.key.clone(), *run);
                        }
                        FireOutcome::Lost { existing: None, .. } => {}
                    }
                }
            }
            Seen::Child(parent, child) => {
                self.children.insert((parent, child.index), child);
            }
            Seen::Children(parent, children) => {
                for child in children {
                    self.children
                        .entry((parent.clone(), child.index))
                        .or_insert(child);
                }
            }
            Seen::Backfill(b) => {
                self.backfills.insert(b.id.clone(), b);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Applying a request, and what came back.

/// Every store trait the operations call: both ledgers have them all.
trait Store: LedgerStore + OpsStore + AlertStore + HealthStore {}

impl<T: LedgerStore + OpsStore + AlertStore + HealthStore + ?Sized> Store for T {}

/// One store's answer: the value (as its `Debug` text) or the error's code.
enum Answer {
    Ok { full: String, brief: String },
    Err { code: &'static str, message: String },
}

impl PartialEq for Answer {
    fn eq(&self, other: &Answer) -> bool {
        match (self, other) {
            (Answer::Ok { full: a, .. }, Answer::Ok { full: b, .. }) => a == b,
            (Answer::Err { code: a, .. }, Answer::Err { code: b, .. }) => a == b,
            _ => false,
        }
    }
}

impl Answer {
    fn brief(&self) -> String {
        match self {
            Answer::Ok { brief, .. } => format!("Ok({brief})"),
            Answer::Err { code, .. } => format!("Err({code})"),
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Ok { full, .. } => write!(f, "Ok({full})"),
            Answer::Err { message, .. } => write!(f, "Err({message})"),
        }
    }
}

/// A one-line summary of an answer, for the failure report's trace.
trait Brief {
    fn brief(&self) -> String;
}

impl Brief for () {
    fn brief(&self) -> String {
        "()".into()
    }
}

impl Brief for bool {
    fn brief(&self) -> String {
        self.to_string()
    }
}

impl Brief for u32 {
    fn brief(&self) -> String {
        self.to_string()
    }
}

impl Brief for Run {
    fn brief(&self) -> String {
        format!(
            "{} epoch {} attempts {}",
            self.status, self.lease_epoch, self.attempts
        )
    }
}

impl Brief for Created {
    fn brief(&self) -> String {
        match self {
            Created::New(run) => format!("New({})", run.brief()),
            Created::Existing(run) => format!("Existing({})", run.brief()),
        }
    }
}

impl Brief for StoredSchedule {
    fn brief(&self) -> String {
        format!(
            "v{} {} next {:?}",
            self.version,
            self.state,
            self.next_run_at.map(|at| at.to_rfc3339())
        )
    }
}

impl Brief for FireOutcome {
    fn brief(&self) -> String {
        match self {
            FireOutcome::Created => "Created".into(),
            FireOutcome::Lost {
                existing,
                schedule_moved,
            } => format!(
                "Lost(existing {:?}, moved {schedule_moved})",
                existing.as_ref().map(|r| r.brief())
            ),
        }
    }
}

impl Brief for Vec<FireOutcome> {
    fn brief(&self) -> String {
        let each: Vec<String> = self.iter().map(Brief::brief).collect();
        format!("[{}]", each.join(", "))
    }
}

impl Brief for Child {
    fn brief(&self) -> String {
        format!("{} epoch {}", self.status, self.lease_epoch)
    }
}

impl Brief for Backfill {
    fn brief(&self) -> String {
        format!("{} v{}", self.state, self.version)
    }
}

impl Brief for Option<Backfill> {
    fn brief(&self) -> String {
        self.as_ref().map_or("None".into(), |b| b.brief())
    }
}

impl Brief for Option<IdempotencyClaim> {
    fn brief(&self) -> String {
        self.as_ref()
            .map_or("None".into(), |c| format!("held by {}", c.run))
    }
}

fn answer<T: Debug + Brief>(result: &Result<T, StoreError>) -> Answer {
    match result {
        Ok(value) => Answer::Ok {
            full: format!("{value:?}"),
            brief: value.brief(),
        },
        Err(e) => Answer::Err {
            code: e.code(),
            message: e.to_string(),
        },
    }
}

/// What an answer tells the model.
enum Seen {
    Nothing,
    Schedule(StoredSchedule),
    Run(Run),
    Fired(Vec<FireOutcome>),
    Child(RunKey, Child),
    /// Children put: the ones not stored yet are now, as given.
    Children(RunKey, Vec<Child>),
    Backfill(Backfill),
}

fn seen<T>(result: Result<T, StoreError>, what: impl FnOnce(T) -> Seen) -> Seen {
    result.map_or(Seen::Nothing, what)
}

async fn apply(store: &dyn Store, request: &Request) -> (Answer, Seen) {
    match request {
        Request::CreateSchedule(spec, meta) => {
            let r = store.create_schedule(spec.clone(), meta.clone()).await;
            (answer(&r), seen(r, Seen::Schedule))
        }
        Request::UpdateSchedule(spec, version, meta) => {
            let r = store
                .update_schedule(spec.clone(), *version, meta.clone())
                .await;
            (answer(&r), seen(r, Seen::Schedule))
        }
        Request::Pause(id, version, meta) => {
            let r = store.pause_schedule(id, *version, meta.clone()).await;
            (answer(&r), seen(r, Seen::Schedule))
        }
        Request::Resume(id, version, meta) => {
            let r = store.resume_schedule(id, *version, meta.clone()).await;
            (answer(&r), seen(r, Seen::Schedule))
        }
        Request::Archive(id, version, meta) => {
            let r = store.archive_schedule(id, *version, meta.clone()).await;
            (answer(&r), seen(r, Seen::Schedule))
        }
        Request::Streak(id, change) => {
            let r = store.count_failure_streak(id, *change).await;
            (answer(&r), Seen::Nothing)
        }
        Request::CreateRun(run) => {
            let r = store.create_run(run).await;
            (answer(&r), seen(r, |c| Seen::Run(c.run().clone())))
        }
        Request::Fire(fire) => {
            let r = store.fire(fire).await;
            (answer(&r), seen(r, |o| Seen::Fired(vec![o])))
        }
        Request::FireAll(fires) => {
            let r = store.fire_all(fires).await;
            (answer(&r), seen(r, Seen::Fired))
        }
        Request::Transition(key, change) => {
            let r = store.transition_run(key, change).await;
            (answer(&r), seen(r, Seen::Run))
        }
        Request::PutChildren(parent, children) => {
            let r = store.put_children(parent, children).await;
            (
                answer(&r),
                seen(r, |()| Seen::Children(parent.clone(), children.clone())),
            )
        }
        Request::ChangeChild(parent, change) => {
            let r = store.change_child(parent, change).await;
            (answer(&r), seen(r, |c| Seen::Child(parent.clone(), c)))
        }
        Request::CountOutcome(id, on, outcome, count) => {
            let r = store.count_outcome(id, *on, *outcome, *count).await;
            (answer(&r), Seen::Nothing)
        }
        Request::CreateBackfill(b) => {
            let r = store.create_backfill(b).await;
            (answer(&r), seen(r, Seen::Backfill))
        }
        Request::PutBackfill(b) => {
            let r = store.put_backfill(b).await;
            let learned = match &r {
                Ok(Some(stored)) => Seen::Backfill(stored.clone()),
                _ => Seen::Nothing,
            };
            (answer(&r), learned)
        }
        Request::Claim(claim) => {
            let r = store.claim_idempotency(claim).await;
            (answer(&r), Seen::Nothing)
        }
        Request::RecordAlert(alert, at) => {
            let r = store.record_alert(alert, *at).await;
            (answer(&r), Seen::Nothing)
        }
        Request::AlertPublished(alert, at) => {
            let r = store.alert_published(alert, *at).await;
            (answer(&r), Seen::Nothing)
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reading the state back.

/// What a case's requests named.
#[derive(Default)]
struct Touched {
    schedules: BTreeSet<String>,
    runs: BTreeSet<RunKey>,
    parents: BTreeSet<RunKey>,
    backfills: BTreeSet<String>,
}

impl Touched {
    fn note(&mut self, request: &Request) {
        match request {
            Request::CreateSchedule(spec, _) | Request::UpdateSchedule(spec, _, _) => {
                self.schedules.insert(spec.id.clone());
            }
            Request::Pause(id, _, _)
            | Request::Resume(id, _, _)
            | Request::Archive(id, _, _)
            | Request::Streak(id, _)
            | Request::CountOutcome(id, _, _, _) => {
                self.schedules.insert(id.clone());
            }
            Request::CreateRun(run) => {
                self.runs.insert(run.key.clone());
            }
            Request::Fire(fire) => {
                self.runs.insert(fire.run.key.clone());
            }
            Request::FireAll(fires) => {
                self.runs.extend(fires.iter().map(|f| f.run.key.clone()));
            }
            Request::Transition(key, _) => {
                self.runs.insert(key.clone());
            }
            Request::PutChildren(key, _) | Request::ChangeChild(key, _) => {
                self.runs.insert(key.clone());
                self.parents.insert(key.clone());
            }
            Request::CreateBackfill(b) | Request::PutBackfill(b) => {
                self.backfills.insert(b.id.clone());
                self.schedules.insert(b.schedule_id.clone());
            }
            Request::Claim(claim) => {
                self.schedules.insert(claim.run.schedule_id.clone());
            }
            Request::RecordAlert(alert, _) | Request::AlertPublished(alert, _) => {
                self.schedules.insert(alert.schedule.clone());
            }
        }
        // Every run's schedule: its history lists the run.
        let of_runs: Vec<String> = self.runs.iter().map(|k| k.schedule_id.clone()).collect();
        self.schedules.extend(of_runs);
    }
}

/// A read's result as compared: the value's `Debug` text, or the error's code.
fn shown<T: Debug>(result: &Result<T, StoreError>) -> String {
    match result {
        Ok(value) => format!("{value:?}"),
        Err(e) => format!("Err({})", e.code()),
    }
}

/// What one store holds for the case, and (for the table's clean-up) its runs and
/// schedules as read.
#[derive(Default)]
struct State {
    reads: BTreeMap<String, String>,
    runs: Vec<Run>,
    schedules: Vec<StoredSchedule>,
}

/// The case's items, read with reads that touch its own keys only.
async fn read_own(store: &dyn Store, touched: &Touched) -> State {
    let mut state = State::default();
    for key in &touched.runs {
        let read = store.get_run_with_attempts(key).await;
        state.reads.insert(format!("run {key}"), shown(&read));
        if let Ok((run, _)) = read {
            state.runs.push(run);
        }
    }
    for key in &touched.parents {
        let read = store.children_of(key, 0, 10, None).await;
        state
            .reads
            .insert(format!("children of {key}"), shown(&read));
    }
    for id in &touched.schedules {
        let read = store.get_schedule(id).await;
        state.reads.insert(format!("schedule {id}"), shown(&read));
        if let Ok(schedule) = read {
            state.schedules.push(schedule);
        }
        let audit = store.audit_log(id).await;
        state.reads.insert(format!("audit of {id}"), shown(&audit));
        let history = store.run_history(id, 20, None).await;
        state
            .reads
            .insert(format!("history of {id}"), shown(&history));
        let alerts = store.alerts_of(id, 20).await;
        state
            .reads
            .insert(format!("alerts of {id}"), shown(&alerts));
        let days = store.outcome_days(id, day(0), day(1)).await;
        state
            .reads
            .insert(format!("outcomes of {id}"), shown(&days));
    }
    for id in &touched.backfills {
        let read = store.get_backfill(id).await;
        state.reads.insert(format!("backfill {id}"), shown(&read));
    }
    state
}

/// The case's entries in the `due` and `active` indexes of its schedules' shards. These
/// reads see every case's entries on the shared table: they are filtered to the case's
/// schedules, and their requests are not compared.
async fn read_indexes(store: &dyn Store, names: &Names, state: &mut State) {
    let shards: BTreeSet<u32> = (0..SCHEDULES)
        .map(|s| shard_of(&names.schedule(s), SHARDS))
        .collect();
    for shard in shards {
        let due = store
            .due_schedules(shard, window(WINDOWS - 1) + Duration::hours(1), 1000)
            .await
            .map(|page| {
                page.into_iter()
                    .filter(|s| names.owns(&s.spec.id))
                    .map(|s| (s.spec.id, s.next_run_at))
                    .collect::<Vec<_>>()
            });
        state
            .reads
            .insert(format!("due in shard {shard}"), shown(&due));
        let active = store
            .active_runs(shard, None, 1000, None)
            .await
            .map(|page| {
                page.items
                    .into_iter()
                    .filter(|r| names.owns(&r.key.schedule_id))
                    .collect::<Vec<_>>()
            });
        state
            .reads
            .insert(format!("active in shard {shard}"), shown(&active));
    }
}

/// Takes the case's items out of the table's `due` and `active` indexes, so later cases'
/// index reads stay small: its schedules archived, its active runs ended.
async fn clean_up(store: &dyn Store, state: &State) {
    let at = t0() + Duration::days(1);
    for schedule in &state.schedules {
        if schedule.state != ScheduleState::Archived {
            let _ = store
                .archive_schedule(&schedule.spec.id, None, meta("cleanup", at))
                .await;
        }
    }
    for run in state.runs.iter().filter(|r| r.status.is_active()) {
        let event = match run.status {
            RunStatus::Running => RunEvent::Fail,
            RunStatus::Stalled => RunEvent::Cancel,
            _ => RunEvent::Skip,
        };
        let end = RunChange::new(event, run.status, run.lease_epoch, at);
        let _ = store.transition_run(&run.key, &end).await;
    }
}

// ---------------------------------------------------------------------------------------
// The meters.

/// What each (scope, operation) cost between two snapshots (nothing spent: left out).
fn spent(before: &MeterSnapshot, after: &MeterSnapshot) -> BTreeMap<(String, String), Usage> {
    after
        .usage
        .iter()
        .filter_map(|(key, now)| {
            let was = before.usage.get(key).cloned().unwrap_or_default();
            let usage = Usage {
                calls: now.calls.saturating_sub(was.calls),
                attempts: now.attempts.saturating_sub(was.attempts),
                read_units: now.read_units - was.read_units,
                write_units: now.write_units - was.write_units,
                billed_requests: now.billed_requests.saturating_sub(was.billed_requests),
                reported: now.reported.saturating_sub(was.reported),
            };
            let any = usage.calls > 0 || usage.read_units != 0.0 || usage.write_units != 0.0;
            any.then(|| (key.clone(), usage))
        })
        .collect()
}

fn calls(spent: &BTreeMap<(String, String), Usage>) -> BTreeMap<String, u64> {
    spent
        .iter()
        .filter(|(_, u)| u.calls > 0)
        .map(|((scope, op), u)| (format!("{scope} {op}"), u.calls))
        .collect()
}

/// The scopes of [`PLAIN`] whose every call DynamoDB Local reported capacity for. It reports
/// none for a conditional write whose condition failed (the error carries none) and 0 units
/// for a Query that found nothing, where DynamoDB charges both (the simulator's bill adds
/// them back, see `corrected_units`): a plain scope with such a call in the case is
/// compared by its calls only.
fn faithful(dynamodb: &BTreeMap<(String, String), Usage>) -> BTreeSet<&'static str> {
    PLAIN
        .iter()
        .copied()
        .filter(|plain| {
            let mut used = dynamodb
                .iter()
                .filter(|((scope, _), _)| scope == plain)
                .peekable();
            used.peek().is_some() && used.all(|(_, u)| u.reported == u.calls)
        })
        .collect()
}

/// Read and write units per scope, of the `scopes` given.
fn units(
    spent: &BTreeMap<(String, String), Usage>,
    scopes: &BTreeSet<&'static str>,
) -> BTreeMap<&'static str, (f64, f64)> {
    let mut units = BTreeMap::new();
    for ((scope, _), usage) in spent {
        if let Some(plain) = scopes.get(scope.as_str()) {
            let entry: &mut (f64, f64) = units.entry(*plain).or_default();
            entry.0 += usage.read_units;
            entry.1 += usage.write_units;
        }
    }
    units
}

fn units_reported() -> bool {
    std::env::var("CRONLEDGER_DYNAMODB_BACKEND").as_deref() == Ok("dynamodb-local")
}

/// How the memory store answered each operation over the run (Ok or an error's code), for
/// the test's output: what the generated sequences reached.
static ANSWERS: Mutex<BTreeMap<(&'static str, &'static str), u64>> = Mutex::new(BTreeMap::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------
// One case.

/// A store under test and the meter it charges.
struct Side<'a> {
    store: &'a dyn Store,
    meter: &'a RequestMeter,
}

async fn check_case(case: u64, ops: &[Op], dynamodb: Side<'_>) -> Result<(), TestCaseError> {
    let names = Names { case };
    let memory_meter = RequestMeter::new();
    let memory_store = MemoryStore::new(SHARDS, memory_meter.clone());
    let memory = Side {
        store: &memory_store,
        meter: &memory_meter,
    };
    let mut model = Model::default();
    let mut touched = Touched::default();
    let mut trace = String::new();
    let mut failure = None;

    let d0 = dynamodb.meter.snapshot();
    let m0 = memory.meter.snapshot();
    for (i, op) in ops.iter().enumerate() {
        let request = model.request(&names, i, op);
        touched.note(&request);
        let (on_dynamodb, _) = apply(dynamodb.store, &request).await;
        let (on_memory, learned) = apply(memory.store, &request).await;
        let _ = writeln!(
            trace,
            "  #{i} {op:?}\n      sent: {}\n      dynamodb: {}\n      memory:   {}",
            request.describe(),
            on_dynamodb.brief(),
            on_memory.brief()
        );
        let code = match &on_memory {
            Answer::Ok { .. } => "Ok",
            Answer::Err { code, .. } => code,
        };
        *lock(&ANSWERS)
            .entry((request.operation(), code))
            .or_default() += 1;
        if on_dynamodb != on_memory {
            failure = Some(format!(
                "operation #{i} answered differently\n  dynamodb: {on_dynamodb}\n  memory:   {on_memory}"
            ));
            break;
        }
        model.learn(&request, learned);
    }

    let mut on_dynamodb = read_own(dynamodb.store, &touched).await;
    let mut on_memory = read_own(memory.store, &touched).await;
    let d1 = dynamodb.meter.snapshot();
    let m1 = memory.meter.snapshot();
    read_indexes(dynamodb.store, &names, &mut on_dynamodb).await;
    read_indexes(memory.store, &names, &mut on_memory).await;
    clean_up(dynamodb.store, &on_dynamodb).await;

    let report = |what: String| {
        TestCaseError::fail(format!(
            "case {case}: {what}\noperations (names d{case}-*):\n{trace}"
        ))
    };
    if let Some(failure) = failure {
        return Err(report(failure));
    }

    let mut differences = String::new();
    let labels: BTreeSet<&String> = on_dynamodb
        .reads
        .keys()
        .chain(on_memory.reads.keys())
        .collect();
    for label in labels {
        let (d, m) = (on_dynamodb.reads.get(label), on_memory.reads.get(label));
        if d != m {
            let _ = writeln!(
                differences,
                "  {label}\n    dynamodb: {}\n    memory:   {}",
                d.map_or("-", String::as_str),
                m.map_or("-", String::as_str)
            );
        }
    }
    if !differences.is_empty() {
        return Err(report(format!(
            "the stores hold different state\n{differences}"
        )));
    }

    let (d_spent, m_spent) = (spent(&d0, &d1), spent(&m0, &m1));
    let (d_calls, m_calls) = (calls(&d_spent), calls(&m_spent));
    if d_calls != m_calls {
        return Err(report(format!(
            "calls per (scope, operation) differ\n  dynamodb: {d_calls:?}\n  memory:   {m_calls:?}"
        )));
    }
    if units_reported() {
        let scopes = faithful(&d_spent);
        let (d_units, m_units) = (units(&d_spent, &scopes), units(&m_spent, &scopes));
        let same = d_units.len() == m_units.len()
            && d_units.iter().zip(&m_units).all(|((ds, d), (ms, m))| {
                ds == ms && (d.0 - m.0).abs() < 1e-9 && (d.1 - m.1).abs() < 1e-9
            });
        if !same {
            return Err(report(format!(
                "units (read, write) of plain requests differ\n  dynamodb: {d_units:?}\n  memory:   {m_units:?}"
            )));
        }
    }
    Ok(())
}

fn cases() -> u32 {
    match std::env::var(CASES_VAR) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{CASES_VAR}={text:?} is not a number of cases")),
        Err(_) => DEFAULT_CASES,
    }
}

#[test]
fn both_stores_answer_hold_and_charge_the_same() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let table = rt.block_on(TestLedger::new());
    let counter = AtomicU64::new(0);
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        // Each shrinking step is a case against the emulator: bounded, so a failure is
        // reported within minutes.
        max_shrink_iters: 1024,
        ..Config::default()
    });
    let result = runner.run(&ops(), |ops| {
        let case = counter.fetch_add(1, Ordering::Relaxed);
        let dynamodb = Side {
            store: &table.ledger,
            meter: &table.clients.meter,
        };
        rt.block_on(check_case(case, &ops, dynamodb))
    });
    println!(
        "{} cases run (shrinking included)",
        counter.load(Ordering::Relaxed)
    );
    println!("answers by operation and code: {:?}", *lock(&ANSWERS));
    if let Err(e) = result {
        panic!("{e}");
    }
}
