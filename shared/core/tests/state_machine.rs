//! The run state machine: a closed transition table. Terminal statuses absorb every
//! automatic event, absorbing statuses every event, and no sequence of events leaves the
//! defined statuses or fails with anything but a `TransitionError` that changes nothing.

use std::collections::BTreeSet;

use cronledger_core::run::{is_initial, transition, TransitionError};
use cronledger_core::{Code, RunEvent, RunStatus};
use proptest::prelude::*;

use RunEvent as E;
use RunStatus as S;

fn all_pairs() -> impl Iterator<Item = (RunStatus, RunEvent)> {
    S::ALL
        .iter()
        .flat_map(|s| E::ALL.iter().map(move |e| (*s, *e)))
}

#[test]
fn terminal_statuses_absorb_every_automatic_event() {
    for (from, event) in all_pairs().filter(|(s, e)| s.is_terminal() && !e.is_operator()) {
        assert_eq!(
            transition(from, event),
            Err(TransitionError { from, event }),
            "{event} must not move a {from} run"
        );
    }
}

#[test]
fn only_an_operator_retry_reopens_a_failed_run() {
    for event in E::ALL.iter().copied() {
        let result = transition(S::Failed, event);
        if event == E::Retry {
            assert_eq!(result, Ok(S::Pending));
        } else {
            assert!(result.is_err(), "{event} must not move a FAILED run");
        }
    }
}

#[test]
fn absorbing_statuses_reject_every_event() {
    let absorbing: Vec<_> = S::ALL
        .iter()
        .copied()
        .filter(|s| s.is_absorbing())
        .collect();
    assert_eq!(
        absorbing,
        [
            S::Success,
            S::PartialSuccess,
            S::Skipped,
            S::Coalesced,
            S::Cancelled
        ]
    );
    for (from, event) in all_pairs().filter(|(s, _)| s.is_absorbing()) {
        assert!(transition(from, event).is_err(), "{from} + {event}");
    }
}

#[test]
fn every_status_is_active_terminal_or_waiting_for_an_operator() {
    for status in S::ALL.iter().copied() {
        let kinds = [
            status.is_active(),
            status.is_terminal(),
            status == S::ManualRequired,
        ];
        assert_eq!(kinds.iter().filter(|k| **k).count(), 1, "{status}");
        // Only finished work counts as done for ALREADY_DONE.
        assert_eq!(
            status.is_success(),
            matches!(status, S::Success | S::PartialSuccess)
        );
    }
}

#[test]
fn every_status_is_reachable_and_every_live_status_can_end() {
    let mut reached: BTreeSet<RunStatus> =
        S::ALL.iter().copied().filter(|s| is_initial(*s)).collect();
    loop {
        let next: BTreeSet<RunStatus> = reached
            .iter()
            .flat_map(|s| E::ALL.iter().filter_map(move |e| transition(*s, *e).ok()))
            .collect();
        if next.is_subset(&reached) {
            break;
        }
        reached.extend(next);
    }
    assert_eq!(
        reached.len(),
        S::ALL.len(),
        "unreachable: {:?}",
        S::ALL
            .iter()
            .filter(|s| !reached.contains(s))
            .collect::<Vec<_>>()
    );
    // From every non-absorbing status some event sequence reaches an absorbing one: no run is
    // stuck forever.
    for start in S::ALL.iter().copied().filter(|s| !s.is_absorbing()) {
        let mut seen = BTreeSet::from([start]);
        let mut frontier = vec![start];
        while let Some(s) = frontier.pop() {
            for to in E::ALL.iter().filter_map(|e| transition(s, *e).ok()) {
                if seen.insert(to) {
                    frontier.push(to);
                }
            }
        }
        assert!(
            seen.iter().any(|s| s.is_absorbing()),
            "{start} can never finish"
        );
    }
}

#[test]
fn explicit_allowed_transitions() {
    let allowed = [
        (S::Pending, E::Enqueue, S::Queued),
        (S::Queued, E::Enqueue, S::Queued),
        (S::RetryPending, E::Enqueue, S::RetryPending),
        (S::Pending, E::Start, S::Running),
        (S::Queued, E::Start, S::Running),
        (S::RetryPending, E::Start, S::Running),
        (S::Running, E::Heartbeat, S::Running),
        (S::Running, E::Reclaim, S::Running),
        // Steps: a step's hand-over and the next step's start; children: the wait for them.
        (S::Running, E::AdvanceStep, S::Running),
        (S::Running, E::StartStep, S::Running),
        (S::Running, E::AwaitChildren, S::Running),
        // A steps run stopped between two steps parks for the resume.
        (S::Running, E::WaitResume, S::Pending),
        (S::Running, E::Succeed, S::Success),
        (S::Running, E::SucceedPartially, S::PartialSuccess),
        (S::Running, E::FailRetryable, S::RetryPending),
        (S::Running, E::Fail, S::Failed),
        (S::RetryPending, E::Fail, S::Failed),
        (S::Running, E::Stall, S::Stalled),
        (S::Stalled, E::RetryAfterStall, S::RetryPending),
        (S::Stalled, E::HoldForApproval, S::ManualRequired),
        (S::Pending, E::HoldForApproval, S::ManualRequired),
        (S::Queued, E::HoldForApproval, S::ManualRequired),
        (S::Running, E::HoldForApproval, S::ManualRequired),
        (S::ManualRequired, E::Skip, S::Skipped),
        (S::Pending, E::WaitBehind, S::Pending),
        (S::Queued, E::WaitBehind, S::Pending),
        (S::RetryPending, E::WaitBehind, S::Pending),
        (S::Pending, E::AwaitPlan, S::Pending),
        (S::Queued, E::AwaitPlan, S::Pending),
        (S::Pending, E::PlanCatchUp, S::Pending),
        (S::Pending, E::Skip, S::Skipped),
        (S::Queued, E::Skip, S::Skipped),
        (S::RetryPending, E::Skip, S::Skipped),
        (S::Pending, E::WaitResume, S::Pending),
        (S::Queued, E::WaitResume, S::Pending),
        (S::RetryPending, E::WaitResume, S::Pending),
        (S::Pending, E::Coalesce, S::Coalesced),
        (S::Queued, E::Coalesce, S::Coalesced),
        (S::ManualRequired, E::Coalesce, S::Coalesced),
        (S::ManualRequired, E::Approve, S::Pending),
        (S::ManualRequired, E::Reject, S::Cancelled),
        (S::ManualRequired, E::Cancel, S::Cancelled),
        (S::Pending, E::Cancel, S::Cancelled),
        (S::Queued, E::Cancel, S::Cancelled),
        (S::RetryPending, E::Cancel, S::Cancelled),
        (S::Stalled, E::Cancel, S::Cancelled),
        (S::Failed, E::Retry, S::Pending),
        (S::Stalled, E::Retry, S::Pending),
    ];
    for (from, event, to) in allowed {
        assert_eq!(transition(from, event), Ok(to), "{from} + {event}");
    }
    // The table is closed: these are all of them.
    let defined = all_pairs()
        .filter(|(s, e)| transition(*s, *e).is_ok())
        .count();
    assert_eq!(defined, allowed.len());
}

#[test]
fn explicit_forbidden_transitions() {
    let forbidden = [
        // A finished run never runs again on its own.
        (S::Success, E::Start),
        (S::Success, E::Retry),
        (S::Success, E::Fail),
        (S::Skipped, E::Start),
        (S::Coalesced, E::Approve),
        (S::Cancelled, E::Approve),
        (S::PartialSuccess, E::Retry),
        (S::Failed, E::Start),
        (S::Failed, E::Enqueue),
        (S::Failed, E::RetryAfterStall),
        // A run needs a worker before it can finish or beat.
        (S::Pending, E::Succeed),
        (S::Queued, E::Fail),
        (S::Queued, E::Heartbeat),
        (S::RetryPending, E::Succeed),
        // Held work starts only after approval.
        (S::ManualRequired, E::Start),
        (S::ManualRequired, E::Enqueue),
        // A run in flight is not skipped, coalesced or cancelled under the worker.
        (S::Running, E::Skip),
        (S::Running, E::Coalesce),
        (S::Running, E::Cancel),
        (S::Running, E::Start),
        (S::Running, E::Approve),
        // A stalled run is not started directly; it goes back through RETRY_PENDING.
        (S::Stalled, E::Start),
        (S::Stalled, E::Succeed),
        // Approval only applies to held runs.
        (S::Pending, E::Approve),
        (S::Pending, E::Reject),
        (S::Pending, E::Retry),
    ];
    for (from, event) in forbidden {
        let err = transition(from, event).unwrap_err();
        assert_eq!(err, TransitionError { from, event });
        assert_eq!(err.code(), Code::RunInvalidTransition);
        assert_eq!(
            err.to_string(),
            format!("RUN_INVALID_TRANSITION: {event} is not allowed from {from}")
        );
    }
}

#[test]
fn initial_statuses() {
    let initial: Vec<_> = S::ALL.iter().copied().filter(|s| is_initial(*s)).collect();
    assert_eq!(
        initial,
        [
            S::Pending,
            S::Queued,
            S::Skipped,
            S::Coalesced,
            S::ManualRequired
        ]
    );
}

fn initial_status() -> impl Strategy<Value = RunStatus> {
    prop::sample::select(
        S::ALL
            .iter()
            .copied()
            .filter(|s| is_initial(*s))
            .collect::<Vec<_>>(),
    )
}

fn event() -> impl Strategy<Value = RunEvent> {
    prop::sample::select(E::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_event_sequence_leaves_the_defined_statuses(
        start in initial_status(),
        events in prop::collection::vec(event(), 0..40),
    ) {
        let mut status = start;
        let mut was_terminal = status.is_terminal();
        for event in events {
            match transition(status, event) {
                Ok(to) => {
                    prop_assert!(S::ALL.contains(&to));
                    // Leaving a terminal status takes an operator's retry of a failed run.
                    if was_terminal {
                        prop_assert_eq!((status, event), (S::Failed, E::Retry));
                    }
                    status = to;
                }
                Err(err) => {
                    prop_assert_eq!(err, TransitionError { from: status, event });
                }
            }
            was_terminal = status.is_terminal();
        }
    }

    #[test]
    fn automatic_events_never_leave_a_terminal_status(
        start in initial_status(),
        events in prop::collection::vec(event(), 0..40),
    ) {
        let mut status = start;
        let mut ended_in: Option<RunStatus> = None;
        for event in events.into_iter().filter(|e| !e.is_operator()) {
            if let Ok(to) = transition(status, event) {
                if let Some(end) = ended_in {
                    prop_assert!(false, "{} left terminal {} for {}", event, end, to);
                }
                status = to;
            }
            if status.is_terminal() {
                ended_in = Some(status);
            }
        }
    }
}
