//! The rule book's decisions: each lever against each kind of run, at creation and at start.

use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::run::Origin;
use crate::spec::{validate_schedule, ValidationRules};

fn at(minute: i64) -> DateTime<Utc> {
    "2026-01-01T10:00:00Z".parse::<DateTime<Utc>>().unwrap() + TimeDelta::minutes(minute)
}

fn spec(extra: serde_json::Value) -> ScheduleSpec {
    let mut doc = json!({
        "id": "s", "cron": "* * * * *", "timezone": "UTC", "grace": "2m",
        "job": {"type": "noop"}
    });
    if let (Some(doc), Some(extra)) = (doc.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            doc.insert(k.clone(), v.clone());
        }
    }
    validate_schedule(&doc, "", &ValidationRules::local(), at(0)).expect("a valid spec")
}

fn key(minute: i64) -> RunKey {
    RunKey::expected("s", at(minute))
}

fn candidate(key: &RunKey, trigger: Trigger, status: RunStatus) -> Candidate<'_> {
    Candidate {
        key,
        trigger,
        status,
        reason: None,
        lane: None,
        resuming: false,
    }
}

fn other(minute: i64, status: RunStatus, trigger: Trigger) -> ActiveRun {
    ActiveRun {
        key: key(minute),
        status,
        reason: None,
        live: matches!(trigger, Trigger::Scheduled | Trigger::Manual),
    }
}

fn ask<'a>(
    moment: Moment,
    spec: &'a ScheduleSpec,
    run: Candidate<'a>,
    others: &'a [ActiveRun],
    now: DateTime<Utc>,
) -> Ask<'a> {
    Ask {
        moment,
        spec,
        run,
        stopped: None,
        others,
        excluded: false,
        late: None,
        now,
    }
}

const ALL_TRIGGERS: [Trigger; 5] = [
    Trigger::Scheduled,
    Trigger::CatchUp,
    Trigger::Manual,
    Trigger::Backfill,
    Trigger::Dependency,
];

#[test]
fn every_run_approval_holds_every_unapproved_run_whoever_created_it() {
    let spec = spec(json!({"approval": "every_run"}));
    let k = key(5);
    for moment in [Moment::Create, Moment::Start] {
        for trigger in [Trigger::Scheduled, Trigger::CatchUp, Trigger::Dependency] {
            for status in [
                RunStatus::Pending,
                RunStatus::Queued,
                RunStatus::RetryPending,
            ] {
                let run = candidate(&k, trigger, status);
                assert_eq!(
                    decide(&ask(moment, &spec, run, &[], at(5))),
                    Admission::Hold {
                        reason: Reason::ApprovalRequired
                    },
                    "{moment:?} {trigger} {status}"
                );
            }
        }
        // An operator's run is its own approval, a backfill is approved as a whole, and an
        // approved window goes to the manual lane.
        for trigger in [Trigger::Manual, Trigger::Backfill] {
            let run = candidate(&k, trigger, RunStatus::Pending);
            assert!(matches!(
                decide(&ask(moment, &spec, run, &[], at(5))),
                Admission::Go { .. }
            ));
        }
        let approved = Candidate {
            lane: Some(Lane::Manual),
            ..candidate(&k, Trigger::CatchUp, RunStatus::Pending)
        };
        assert_eq!(
            decide(&ask(moment, &spec, approved, &[], at(5))),
            Admission::Go { lane: Lane::Manual }
        );
    }
}

#[test]
fn a_stop_ends_live_work_and_parks_released_work() {
    let spec = spec(json!({}));
    let k = key(5);
    for stop in [Reason::Paused, Reason::Disabled, Reason::Archived] {
        for trigger in ALL_TRIGGERS {
            let mut a = ask(
                Moment::Start,
                &spec,
                candidate(&k, trigger, RunStatus::Queued),
                &[],
                at(5),
            );
            a.stopped = Some(stop);
            let parks =
                matches!(trigger, Trigger::CatchUp | Trigger::Backfill) && stop != Reason::Archived;
            let expected = if parks {
                Admission::Wait { reason: stop }
            } else {
                Admission::Skip { reason: stop }
            };
            assert_eq!(decide(&a), expected, "{stop} {trigger}");
        }
    }
}

#[test]
fn skip_new_skips_a_live_window_and_makes_every_other_run_wait() {
    let spec = spec(json!({"overlap": "SKIP_NEW"}));
    let k = key(5);
    // A running run of any trigger, earlier or later.
    for blocker in [0, 9] {
        for blocker_trigger in ALL_TRIGGERS {
            let others = [other(blocker, RunStatus::Running, blocker_trigger)];
            for trigger in ALL_TRIGGERS {
                for status in [
                    RunStatus::Pending,
                    RunStatus::Queued,
                    RunStatus::RetryPending,
                ] {
                    let run = candidate(&k, trigger, status);
                    let live = run.is_live_window();
                    let expected = if live {
                        Admission::Skip {
                            reason: Reason::Overlap,
                        }
                    } else {
                        Admission::Wait {
                            reason: Reason::QueuedBehind,
                        }
                    };
                    assert_eq!(
                        decide(&ask(Moment::Start, &spec, run, &others, at(5))),
                        expected,
                        "{trigger} {status} behind {blocker_trigger} at {blocker}"
                    );
                }
            }
        }
    }
}

#[test]
fn skip_new_lets_waiting_runs_go_first_and_the_live_window_is_skipped() {
    let spec = spec(json!({"overlap": "SKIP_NEW"}));
    let k = key(5);
    let parked = ActiveRun {
        reason: Some(Reason::QueuedBehind),
        ..other(3, RunStatus::Pending, Trigger::CatchUp)
    };
    let live = candidate(&k, Trigger::Scheduled, RunStatus::Queued);
    assert_eq!(
        decide(&ask(
            Moment::Start,
            &spec,
            live,
            std::slice::from_ref(&parked),
            at(5)
        )),
        Admission::Skip {
            reason: Reason::Overlap
        }
    );
    // A catch-up run waiting for its throttled release holds nothing back.
    let unreleased = other(3, RunStatus::Pending, Trigger::CatchUp);
    assert!(matches!(
        decide(&ask(Moment::Start, &spec, live, &[unreleased], at(5))),
        Admission::Go { .. }
    ));
    // An earlier window waiting for a retry does not skip the live one (SKIP_NEW guards
    // executions, not a queue).
    for status in [
        RunStatus::RetryPending,
        RunStatus::Stalled,
        RunStatus::Queued,
    ] {
        let waiting = other(3, status, Trigger::Scheduled);
        assert!(matches!(
            decide(&ask(Moment::Start, &spec, live, &[waiting], at(5))),
            Admission::Go { .. }
        ));
    }
}

#[test]
fn queue_new_keeps_window_order() {
    let spec = spec(json!({"overlap": "QUEUE_NEW"}));
    let waits = Admission::Wait {
        reason: Reason::QueuedBehind,
    };
    for status in [
        RunStatus::Pending,
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::RetryPending,
        RunStatus::Stalled,
    ] {
        let others = [other(0, status, Trigger::Scheduled)];
        let k = key(5);
        let run = candidate(&k, Trigger::Scheduled, RunStatus::Queued);
        assert_eq!(
            decide(&ask(Moment::Start, &spec, run, &others, at(5))),
            waits,
            "{status}"
        );
    }
    // Once the first ends only the oldest waiting run may go.
    let others = [
        other(0, RunStatus::Success, Trigger::Scheduled),
        other(5, RunStatus::Pending, Trigger::Scheduled),
    ];
    let (k5, k10) = (key(5), key(10));
    let first = candidate(&k5, Trigger::Scheduled, RunStatus::Pending);
    let second = candidate(&k10, Trigger::Scheduled, RunStatus::Pending);
    assert!(matches!(
        decide(&ask(Moment::Start, &spec, first, &others, at(10))),
        Admission::Go { .. }
    ));
    assert_eq!(
        decide(&ask(Moment::Start, &spec, second, &others, at(10))),
        waits
    );
    // An operator's run at the same instant waits for the expected one, not the reverse.
    let manual_key = RunKey {
        origin: Origin::Manual("req-1".into()),
        ..key(5)
    };
    let expected = [other(5, RunStatus::Pending, Trigger::Scheduled)];
    let manual = candidate(&manual_key, Trigger::Manual, RunStatus::Pending);
    assert_eq!(
        decide(&ask(Moment::Start, &spec, manual, &expected, at(5))),
        waits
    );
    let manual_waiting = [ActiveRun {
        key: manual_key.clone(),
        status: RunStatus::Pending,
        reason: None,
        live: true,
    }];
    assert!(matches!(
        decide(&ask(Moment::Start, &spec, first, &manual_waiting, at(5))),
        Admission::Go { .. }
    ));
}

#[test]
fn a_run_going_on_keeps_its_turn() {
    for overlap in ["SKIP_NEW", "QUEUE_NEW"] {
        let spec = spec(json!({"overlap": overlap, "approval": "every_run"}));
        let k = key(5);
        let others = [other(0, RunStatus::Running, Trigger::Scheduled)];
        let run = Candidate {
            resuming: true,
            ..candidate(&k, Trigger::Scheduled, RunStatus::Running)
        };
        assert!(matches!(
            decide(&ask(Moment::Start, &spec, run, &others, at(5))),
            Admission::Go { .. }
        ));
    }
}

#[test]
fn a_late_dependent_window_is_catch_up_work() {
    let spec = spec(json!({"overlap": "SKIP_NEW", "grace": "2m"}));
    let k = key(0);
    let run = candidate(&k, Trigger::Dependency, RunStatus::Pending);
    // In time: its live lane.
    assert_eq!(
        decide(&ask(Moment::Create, &spec, run, &[], at(1))),
        Admission::Go { lane: Lane::Normal }
    );
    // Long after its window but in time by its upstreams' end (the caller's judgement):
    // still its live lane.
    assert_eq!(
        decide(&ask(Moment::Create, &spec, run, &[], at(30))),
        Admission::Go { lane: Lane::Normal }
    );
    // Judged past its grace (the misfire policy says run): the correction lane, through
    // the throttled release.
    let late_ask = |others| {
        let mut a = ask(Moment::Create, &spec, run, others, at(30));
        a.late = Some(LateStart::Run);
        a
    };
    assert_eq!(
        decide(&late_ask(&[])),
        Admission::Release {
            lane: Lane::Correction
        }
    );
    // And it waits behind a running run instead of being skipped as a live window would.
    let others = [other(29, RunStatus::Running, Trigger::Scheduled)];
    assert_eq!(
        decide(&late_ask(&others)),
        Admission::Wait {
            reason: Reason::QueuedBehind
        }
    );
    // Created in time behind a running one: skipped like the live window it is.
    let others = [other(-1, RunStatus::Running, Trigger::Dependency)];
    assert_eq!(
        decide(&ask(Moment::Create, &spec, run, &others, at(1))),
        Admission::Skip {
            reason: Reason::Overlap
        }
    );
    // The misfire policy's word on a late window applies first.
    let mut late = ask(Moment::Create, &spec, run, &[], at(30));
    late.late = Some(LateStart::Skip {
        reason: Reason::GraceExpired,
    });
    assert_eq!(
        decide(&late),
        Admission::Skip {
            reason: Reason::GraceExpired
        }
    );
}

#[test]
fn a_window_inside_the_lookahead_is_judged_when_it_starts() {
    let spec = spec(json!({"overlap": "SKIP_NEW"}));
    let k = key(5);
    let others = [other(0, RunStatus::Running, Trigger::Scheduled)];
    let run = candidate(&k, Trigger::Scheduled, RunStatus::Pending);
    assert!(matches!(
        decide(&ask(Moment::Create, &spec, run, &others, at(4))),
        Admission::Go { .. }
    ));
}

#[test]
fn lanes() {
    let live = Lane::Realtime;
    assert_eq!(lane_of(Trigger::Manual, None, live), Lane::Manual);
    assert_eq!(lane_of(Trigger::Backfill, None, live), Lane::Backfill);
    assert_eq!(lane_of(Trigger::CatchUp, None, live), Lane::Correction);
    assert_eq!(
        lane_of(Trigger::CatchUp, Some(Lane::Realtime), live),
        Lane::Correction
    );
    assert_eq!(
        lane_of(Trigger::CatchUp, Some(Lane::Backfill), live),
        Lane::Backfill
    );
    assert_eq!(lane_of(Trigger::Scheduled, None, live), live);
    assert_eq!(
        lane_of(Trigger::Scheduled, Some(Lane::Manual), live),
        Lane::Manual
    );
    assert_eq!(
        lane_of(Trigger::Dependency, Some(Lane::Correction), live),
        Lane::Correction
    );
}

fn any_trigger() -> impl Strategy<Value = Trigger> {
    prop::sample::select(ALL_TRIGGERS.to_vec())
}

fn any_status() -> impl Strategy<Value = RunStatus> {
    prop::sample::select(vec![
        RunStatus::Pending,
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::RetryPending,
        RunStatus::Stalled,
        RunStatus::Success,
    ])
}

proptest! {
    /// Under SKIP_NEW and QUEUE_NEW nothing new starts beside a running run, whatever
    /// created either of them; and approval is never bypassed.
    #[test]
    fn never_two_at_once_and_never_unapproved(
        policy in prop::sample::select(vec!["SKIP_NEW", "QUEUE_NEW"]),
        approval in any::<bool>(),
        trigger in any_trigger(),
        status in prop::sample::select(vec![RunStatus::Pending, RunStatus::Queued, RunStatus::RetryPending]),
        manual_lane in any::<bool>(),
        others in prop::collection::vec((0i64..20, any_status(), any_trigger()), 0..5),
        minute in 0i64..20,
    ) {
        let spec = spec(json!({
            "overlap": policy,
            "approval": if approval { "every_run" } else { "none" },
        }));
        let k = key(minute);
        let others: Vec<ActiveRun> = others
            .into_iter()
            .map(|(m, s, t)| other(m, s, t))
            .filter(|o| o.key != k)
            .collect();
        let run = Candidate {
            lane: manual_lane.then_some(Lane::Manual),
            ..candidate(&k, trigger, status)
        };
        let decision = decide(&ask(Moment::Start, &spec, run, &others, at(minute)));
        if matches!(decision, Admission::Go { .. }) {
            prop_assert!(!others.iter().any(|o| o.status == RunStatus::Running));
            prop_assert!(!approval || run.approved());
        }
    }
}
