//! Issue 17, point 10: under SKIP_NEW only a run that is executing makes a new window
//! SKIPPED (OVERLAP). After a worker outage, the run of 01:28 was moved to the correction
//! lane and waited there while the ticker fired 01:29, 01:30 and 01:31 already due: those
//! were recorded SKIPPED (OVERLAP) behind a run that was not running, and 01:28 then ran
//! after them. Now the live windows run, and the waiting run still runs once it is taken
//! (windows are independent under SKIP_NEW).

use cronledger_aws::ledger::Transition;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronledger_app::ticker::TickerConfig;
use cronledger_aws::lanes::{LaneMessage, LaneSettings};
use cronledger_aws::RunChange;
use cronledger_core::{Lane, Reason, RunKey, RunStatus, Span};
use cronledger_tests::app::{ticker_config, worker_config, AppEnv};
use cronledger_tests::{spec_with, t};
use serde_json::json;

fn at(hh_mm_ss: &str) -> DateTime<Utc> {
    t(&format!("2026-03-01T{hh_mm_ss}Z"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_earlier_run_does_not_skip_live_windows_under_skip_new() {
    let env = AppEnv::new(LaneSettings::default(), at("01:28:00")).await;
    let fields = json!({"overlap": "SKIP_NEW", "misfire": "RUN_ONCE", "grace": "5m",
                        "side_effects": false, "job": {"type": "noop"}});
    env.create(spec_with("minutely", "* * * * *", fields), at("01:27:30"))
        .await;
    let ticker = env.ticker_with(TickerConfig {
        lookahead: Span::ZERO,
        ..ticker_config()
    });
    let key = |hh_mm: &str| RunKey::expected("minutely", at(&format!("{hh_mm}:00")));

    // 01:28 is fired; no worker takes it (the outage), and it is moved to the correction
    // lane as a late RUN_ONCE window's run is: it waits there, QUEUED, not running.
    assert_eq!(env.tick_with(&ticker, at("01:28:00")).await.sent, 1);
    let waiting = env.run(&key("01:28")).await;
    let moving = Transition::Enqueue {
        lane: Some(Lane::Correction),
        lane_was: waiting.lane,
        job_id: None,
        reason: None,
    };
    let moved = RunChange::new(waiting.status, waiting.lease_epoch, at("01:28:30"), moving);
    let waiting = env
        .store
        .transition_run(&waiting.key, &moved)
        .await
        .expect("move to the correction lane");
    assert_eq!(waiting.status, RunStatus::Queued);
    env.resend(&waiting).await;

    // The ticker comes back at 01:31:10 and fires 01:29, 01:30 and 01:31, all already due.
    env.clock.set(at("01:31:10"));
    let tick = env.tick_with(&ticker, at("01:31:10")).await;
    assert_eq!(
        (tick.created, tick.skipped_overlap, tick.sent),
        (3, 0, 3),
        "nothing is running: no live window is skipped behind the waiting 01:28"
    );

    // The workers take the live windows first: each runs.
    env.clock.set(at("01:31:11"));
    let worker = Arc::new(env.worker(worker_config("w")));
    let live = env
        .receive(Lane::Normal, false, 4, Duration::from_secs(5))
        .await;
    let (stale, live): (Vec<_>, Vec<_>) = live.into_iter().partition(|m| {
        let message: LaneMessage = serde_json::from_str(&m.body).expect("a lane message");
        message.run == key("01:28")
    });
    assert_eq!(live.len(), 3, "01:29, 01:30 and 01:31 are in the live lane");
    for message in &live {
        env.deliver(&worker, Lane::Normal, std::slice::from_ref(message))
            .await;
    }
    for hh_mm in ["01:29", "01:30", "01:31"] {
        let run = env.run(&key(hh_mm)).await;
        assert_eq!(
            (run.status, run.reason),
            (RunStatus::Success, None),
            "{hh_mm}"
        );
    }

    // Then 01:28 is taken from the correction lane: it still runs (inside its grace, its own
    // window and key), after the later windows, and only once.
    let correction = env
        .receive(Lane::Correction, false, 1, Duration::from_secs(5))
        .await;
    assert_eq!(correction.len(), 1);
    env.deliver(&worker, Lane::Correction, &correction).await;
    env.deliver(&worker, Lane::Normal, &stale).await;
    let late = env.run(&key("01:28")).await;
    assert_eq!(
        (late.status, late.reason, late.attempts),
        (RunStatus::Success, None, 1)
    );
    assert_ne!(late.reason, Some(Reason::Overlap));
}
