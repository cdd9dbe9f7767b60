//! Per-attempt history on the run item, straight through the store: every way an attempt
//! ends (lease taken over, retryable failure, success) is recorded by the transition that
//! ends it, and the history keeps the most recent attempts when retries go on and on.

use chrono::{DateTime, Duration, Utc};
use cronledger_aws::codec::attempt::ATTEMPT_HISTORY;
use cronledger_aws::ledger::{Ending, Opening};
use cronledger_aws::{LedgerStore, RunChange};
use cronledger_core::run::RunResult;
use cronledger_core::{AttemptOutcome, Run, RunEvent, RunStatus};
use cronledger_tests::bare;
use cronledger_tests::{scheduled_run, spec, t};

use crate::conformance;

async fn apply(
    ledger: &dyn LedgerStore,
    run: &Run,
    event: RunEvent,
    owner: Option<&str>,
    at: DateTime<Utc>,
) -> Run {
    let (from, epoch) = (run.status, run.lease_epoch);
    let until = at + Duration::minutes(5);
    let change = match (event, owner) {
        (RunEvent::Start, Some(owner)) => {
            RunChange::open(Opening::Start, from, epoch, at, owner, until)
        }
        (RunEvent::Reclaim, Some(owner)) => {
            RunChange::open(Opening::Reclaim, from, epoch, at, owner, until)
        }
        (RunEvent::FailRetryable, _) => {
            let busy = RunResult {
                error_code: Some("HTTP_503".into()),
                message: Some("upstream busy".into()),
                ..RunResult::default()
            };
            RunChange::end(Ending::FailRetryable, epoch, at, busy)
        }
        _ => bare(event, from, epoch, at),
    };
    ledger
        .transition_run(&run.key, &change)
        .await
        .unwrap_or_else(|e| panic!("{event} from {}: {e}", run.status))
}

conformance! {
    async fn each_attempt_is_recorded_by_the_write_that_opens_and_the_one_that_ends_it(env: Env) {
        let ledger = &*env.ledger;
        let at = t("2026-03-01T11:00:00Z");
        let run = scheduled_run(&spec("tried", "0 * * * *"), at, at, "ticker");
        ledger.create_run(&run).await.expect("create");
        let s = |secs: i64| at + Duration::seconds(secs);

        let run = apply(ledger, &run, RunEvent::Start, Some("w1"), s(1)).await;
        // w1's lease expired: w2 takes the run over (attempt 1 ends, attempt 2 opens, one write).
        let run = apply(ledger, &run, RunEvent::Reclaim, Some("w2"), s(400)).await;
        let run = apply(ledger, &run, RunEvent::FailRetryable, None, s(402)).await;
        let run = apply(ledger, &run, RunEvent::Start, Some("w3"), s(410)).await;
        let (seen, running) = ledger.get_run_with_attempts(&run.key).await.expect("read");
        assert_eq!(seen.status, RunStatus::Running);
        assert_eq!(running.len(), 3);
        assert!(running[2].end.is_none(), "attempt 3 is still running");
        let run = apply(ledger, &run, RunEvent::Succeed, None, s(413)).await;

        let (stored, attempts) = ledger.get_run_with_attempts(&run.key).await.expect("read");
        assert_eq!(stored.attempts, 3);
        let summary: Vec<(u64, &str, Option<AttemptOutcome>, Option<i64>)> = attempts
            .iter()
            .map(|a| {
                (
                    a.number,
                    a.start.as_ref().map_or("", |s| s.worker.as_str()),
                    a.end.as_ref().map(|e| e.outcome),
                    a.duration_ms(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (1, "w1", Some(AttemptOutcome::LeaseTakenOver), Some(399_000)),
                (2, "w2", Some(AttemptOutcome::FailedRetryable), Some(2_000)),
                (3, "w3", Some(AttemptOutcome::Success), Some(3_000)),
            ]
        );
        let failed = attempts[1].end.as_ref().expect("ended");
        assert_eq!(failed.status, RunStatus::RetryPending);
        assert_eq!(failed.error_code.as_deref(), Some("HTTP_503"));
        assert_eq!(failed.message.as_deref(), Some("upstream busy"));
        // The success reported no error: none is carried over from attempt 2.
        assert_eq!(
            attempts[2].end.as_ref().and_then(|e| e.error_code.clone()),
            None
        );
        // Plain reads and listings are unchanged by the history beside them.
        assert_eq!(ledger.get_run(&run.key).await.expect("get"), stored);
    }

    async fn the_history_keeps_the_most_recent_attempts(env: Env) {
        let ledger = &*env.ledger;
        let at = t("2026-03-01T11:00:00Z");
        let mut run = scheduled_run(&spec("flapping", "0 * * * *"), at, at, "ticker");
        ledger.create_run(&run).await.expect("create");
        let total = ATTEMPT_HISTORY + 3;
        for i in 0..total as i64 {
            let t0 = at + Duration::minutes(i);
            run = apply(ledger, &run, RunEvent::Start, Some("w"), t0).await;
            run = apply(
                ledger,
                &run,
                RunEvent::FailRetryable,
                None,
                t0 + Duration::seconds(1),
            )
            .await;
        }
        let (stored, attempts) = ledger.get_run_with_attempts(&run.key).await.expect("read");
        assert_eq!(u64::from(stored.attempts), total);
        let numbers: Vec<u64> = attempts.iter().map(|a| a.number).collect();
        assert_eq!(numbers, (4..=total).collect::<Vec<_>>());
        assert!(attempts
            .iter()
            .all(|a| a.start.is_some() && a.end.is_some()));
    }
}
