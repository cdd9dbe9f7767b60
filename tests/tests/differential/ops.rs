//! The generated operations: what a case sends, drawn on a small key space.

use super::*;

/// One run of the key space: a schedule, a window, the expected occurrence or an operator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RunRef {
    pub(crate) s: usize,
    pub(crate) w: usize,
    pub(crate) manual: bool,
}

/// The run an operation works on: the `n`-th of the runs the case has stored so far (the
/// common case, so runs move through their lives), or any key of the key space.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    Stored(usize),
    Key(RunRef),
}

/// The value a request states about what it read: the current one, or another.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pick<T> {
    Current,
    Other(T),
}

/// A version or lease epoch: the current one, or a stale one.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counter {
    Current,
    Stale,
}

/// A schedule change's expected version: none, the current, or a stale one.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expect {
    Unset,
    Current,
    Stale,
}

/// A run's event: the `n`-th of those the table allows from the status sent, or any.
#[derive(Debug, Clone, Copy)]
pub(crate) enum EventPick {
    Allowed(usize),
    Any(RunEvent),
}

#[derive(Debug, Clone)]
pub(crate) struct Move {
    pub(crate) run: Target,
    pub(crate) event: EventPick,
    pub(crate) from: Pick<RunStatus>,
    pub(crate) epoch: Counter,
    pub(crate) lease: bool,
    pub(crate) reason: Option<Reason>,
    pub(crate) result: Option<u64>,
    pub(crate) lane: Option<Lane>,
    pub(crate) lane_was: Option<Lane>,
    pub(crate) catch_up: bool,
    pub(crate) repin: bool,
    pub(crate) children: Option<u32>,
}

#[derive(Debug, Clone)]
pub(crate) enum Op {
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
pub(crate) fn schedule() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(0usize), 1 => Just(1usize)]
}

pub(crate) fn run_ref() -> impl Strategy<Value = RunRef> {
    (schedule(), 0..WINDOWS, proptest::bool::weighted(0.2)).prop_map(|(s, w, manual)| RunRef {
        s,
        w,
        manual,
    })
}

pub(crate) fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => (0usize..6).prop_map(Target::Stored),
        1 => run_ref().prop_map(Target::Key),
    ]
}

pub(crate) fn counter() -> impl Strategy<Value = Counter> {
    prop_oneof![3 => Just(Counter::Current), 1 => Just(Counter::Stale)]
}

pub(crate) fn expect() -> impl Strategy<Value = Expect> {
    prop_oneof![
        2 => Just(Expect::Unset),
        2 => Just(Expect::Current),
        1 => Just(Expect::Stale),
    ]
}

pub(crate) fn pick<T: Debug + Clone + 'static>(
    values: &'static [T],
) -> impl Strategy<Value = Pick<T>> {
    prop_oneof![
        3 => Just(Pick::Current),
        1 => proptest::sample::select(values).prop_map(Pick::Other),
    ]
}

pub(crate) fn event_pick() -> impl Strategy<Value = EventPick> {
    prop_oneof![
        7 => (0usize..8).prop_map(EventPick::Allowed),
        1 => proptest::sample::select(RunEvent::ALL).prop_map(EventPick::Any),
    ]
}

pub(crate) fn a_move() -> impl Strategy<Value = Move> {
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

pub(crate) fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Succeeded { fresh: true }),
        Just(Outcome::Succeeded { fresh: false }),
        Just(Outcome::Failed),
        Just(Outcome::Skipped),
    ]
}

pub(crate) fn alert_kind() -> impl Strategy<Value = AlertKind> {
    proptest::sample::select(&[AlertKind::ConsecutiveFailures, AlertKind::MissedWindows][..])
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
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
pub(crate) fn opening() -> impl Strategy<Value = Op> {
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
pub(crate) fn ops() -> impl Strategy<Value = Vec<Op>> {
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
