//! Children: stored once whatever the generator re-answers, paged by index, and counted
//! exactly once on the run when four workers race to start and end each child.

use cronledger_aws::ledger::{LeaseGrant, Opening, Transition};
use std::sync::Arc;

use chrono::Duration;
use cronledger_aws::ledger::ChildChange;
use cronledger_aws::LedgerStore;
use cronledger_aws::RunChange;
use cronledger_core::children::{Child, ChildCounts, ChildStatus};
use cronledger_core::{RunKey, RunStatus};
use cronledger_tests::{scheduled_run, spec, t};

use crate::conformance;

const CHILDREN: u32 = 200;
const WORKERS: usize = 4;

/// A run RUNNING and waiting for `CHILDREN` children of step 0.
async fn waiting_parent(ledger: &Arc<dyn LedgerStore>) -> RunKey {
    let t0 = t("2026-03-01T00:00:00Z");
    let spec = spec("fan", "*/5 * * * *");
    let run = scheduled_run(&spec, t0 + Duration::minutes(5), t0, "ticker");
    ledger.create_run(&run).await.expect("run");
    let at = t0 + Duration::minutes(5);
    let until = at + Duration::minutes(1);
    let start = RunChange::open(Opening::Start, RunStatus::Pending, 0, at, "w", until);
    ledger
        .transition_run(&run.key, &start)
        .await
        .expect("start");
    let children: Vec<Child> = (0..CHILDREN)
        .map(|i| Child::new(0, i, serde_json::json!({ "i": i }), at))
        .collect();
    ledger
        .put_children(&run.key, &children)
        .await
        .expect("children");
    let awaiting = Transition::AwaitChildren {
        lease: LeaseGrant::new("children", until),
        children: Some(ChildCounts {
            total: CHILDREN,
            succeeded: 0,
            failed: 0,
            step: 0,
        }),
    };
    let wait = RunChange::new(RunStatus::Running, 1, at, awaiting);
    ledger.transition_run(&run.key, &wait).await.expect("await");
    run.key
}

fn change(child: &Child, to: ChildStatus, start: bool) -> ChildChange {
    let at = t("2026-03-01T00:06:00Z");
    ChildChange {
        start_until: start.then(|| at + Duration::minutes(1)),
        count: (to == ChildStatus::Success).then_some(2),
        error_code: (to == ChildStatus::Failed).then(|| "BOOM".to_string()),
        ..ChildChange::new(child, to, at)
    }
}

conformance! {
    async fn four_workers_racing_over_every_child_count_each_end_once(env: Env) {
        let ledger = env.ledger.clone();
        let parent = waiting_parent(&ledger).await;
        // Children re-answered (a generator run again) keep what they are.
        let again: Vec<Child> = (0..3)
            .map(|i| Child::new(0, i, serde_json::json!("changed"), t("2026-03-01T01:00:00Z")))
            .collect();
        ledger.put_children(&parent, &again).await.expect("again");
        assert_eq!(
            ledger.get_child(&parent, 0, 1).await.expect("child").payload,
            serde_json::json!({"i": 1})
        );

        let mut tasks = Vec::new();
        for worker in 0..WORKERS {
            let (ledger, parent) = (ledger.clone(), parent.clone());
            tasks.push(tokio::spawn(async move {
                let mut ended = 0u32;
                for n in 0..CHILDREN {
                    // Each worker walks from its own offset, so they collide on every child.
                    let i = (n + worker as u32 * CHILDREN / WORKERS as u32) % CHILDREN;
                    let Ok(child) = ledger.get_child(&parent, 0, i).await else { continue };
                    if child.status != ChildStatus::Pending {
                        continue;
                    }
                    let Ok(started) = ledger
                        .change_child(&parent, &change(&child, ChildStatus::Running, true))
                        .await
                    else {
                        continue;
                    };
                    let to = if i.is_multiple_of(10) { ChildStatus::Failed } else { ChildStatus::Success };
                    // Every worker tries to end what it read as running, as a duplicate would.
                    if ledger.change_child(&parent, &change(&started, to, false)).await.is_ok() {
                        ended += 1;
                    }
                    let again = ledger.change_child(&parent, &change(&started, to, false)).await;
                    assert_eq!(again.map_err(|e| e.code()).err(), Some("CHILD_CONFLICT"));
                }
                ended
            }));
        }
        let mut ended = 0;
        for task in tasks {
            ended += task.await.expect("worker");
        }
        assert_eq!(ended, CHILDREN, "each child ended exactly once");
        let run = ledger.get_run(&parent).await.expect("parent");
        let failed = CHILDREN.div_ceil(10);
        assert_eq!(
            run.children,
            Some(ChildCounts { total: CHILDREN, succeeded: CHILDREN - failed, failed, step: 0 })
        );
        // The succeeded children's counts add up into the run's.
        assert_eq!(
            run.result.and_then(|r| r.count),
            Some(u64::from(CHILDREN - failed) * 2)
        );

        // Paged by index; a failed child reopens with its counter taken back.
        let first = ledger.children_of(&parent, 0, 150, None).await.expect("page");
        assert_eq!(first.items.len(), 150);
        let rest = ledger
            .children_of(&parent, 0, 150, first.next.as_deref())
            .await
            .expect("page 2");
        assert_eq!(rest.items.len(), (CHILDREN - 150) as usize);
        assert_eq!(rest.items[0].index, 150);
        let zero = ledger.get_child(&parent, 0, 0).await.expect("child 0");
        assert_eq!(zero.status, ChildStatus::Failed);
        ledger
            .change_child(&parent, &change(&zero, ChildStatus::Pending, false))
            .await
            .expect("reopen");
        let run = ledger.get_run(&parent).await.expect("parent");
        assert_eq!(run.children.map(|c| c.failed), Some(failed - 1));
    }
}
