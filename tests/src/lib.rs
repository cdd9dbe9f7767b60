//! Helpers for the integration tests, which run against an AWS API emulator.
//!
//! Start the emulators and run everything with `infra/local/test`. Each test makes its own
//! uniquely named table and queues, so `cargo test` runs them in parallel, and removes them
//! when it ends (on panic too).

pub mod api;
pub mod app;
pub mod contract;
pub mod event_source;
pub mod iam;
pub mod reconcile;
pub mod runtime_api;
pub mod sns;
pub mod webdriver;
pub mod webhook;

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::lanes::{LaneSettings, SqsLanes};
use cronledger_aws::ledger::{Ending, Opening, Transition};
use cronledger_aws::{
    AwsClients, AwsSettings, DynamoLedger, LedgerStore, RunChange, StreakChange, TableDefinition,
};
use cronledger_core::run::Origin;
use cronledger_core::{
    Lane, Reason, Run, RunEvent, RunStatus, Schedule, ScheduleSpec, Trigger, ValidationRules,
};

/// Shards the test ledgers use (small, so per-shard queries see several schedules).
pub const SHARDS: u32 = 4;

/// Fails the test, loudly, when no emulator endpoint is configured: these tests must never
/// create tables in a real account, and must never pass by skipping.
pub fn require_emulator() {
    let any = |names: &[&str]| {
        names
            .iter()
            .any(|n| std::env::var(n).is_ok_and(|v| !v.is_empty()))
    };
    let dynamodb = any(&["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"]);
    let sqs = any(&["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS"]);
    assert!(
        dynamodb && sqs,
        "no AWS emulator endpoint is set (AWS_ENDPOINT_URL, or AWS_ENDPOINT_URL_DYNAMODB and \
         AWS_ENDPOINT_URL_SQS). Run the tests with `infra/local/test`, which starts the \
         emulators, or point AWS_ENDPOINT_URL at a LocalStack."
    );
}

pub async fn clients() -> AwsClients {
    require_emulator();
    AwsClients::from_env(&AwsSettings::default()).await
}

/// `{prefix}-{random}`: unique across parallel tests and repeated runs.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = RandomState::new().hash_one((std::process::id(), n));
    format!("{prefix}-{:012x}", random & 0xffff_ffff_ffff)
}

/// A ledger on a fresh table, deleted on drop.
pub struct TestLedger {
    pub clients: AwsClients,
    pub ledger: DynamoLedger,
    pub table: String,
}

impl TestLedger {
    pub async fn new() -> TestLedger {
        let clients = clients().await;
        let table = unique_name("cl-test");
        TableDefinition::bundled()
            .expect("the bundled table definition parses")
            .create(&clients.dynamodb, &table)
            .await
            .expect("creating the test table");
        let ledger = DynamoLedger::new(&clients, &table, SHARDS);
        TestLedger {
            clients,
            ledger,
            table,
        }
    }
}

impl Drop for TestLedger {
    fn drop(&mut self) {
        let table = self.table.clone();
        // The test's runtime is busy dropping us: clean up from a thread with its own
        // runtime and its own clients (the test's are bound to the test's runtime).
        cleanup(move |clients| async move {
            let _ = TableDefinition::delete(&clients.dynamodb, &table).await;
        });
    }
}

/// The five lanes under a fresh prefix, deleted on drop.
pub struct TestLanes {
    pub clients: AwsClients,
    pub lanes: SqsLanes,
    pub prefix: String,
}

impl TestLanes {
    pub async fn new(settings: LaneSettings) -> TestLanes {
        TestLanes::with_clients(clients().await, settings).await
    }

    /// On given clients (to share a ledger's request meter).
    pub async fn with_clients(clients: AwsClients, settings: LaneSettings) -> TestLanes {
        let prefix = unique_name("cl-test");
        let lanes = SqsLanes::create(clients.sqs.clone(), &prefix, settings)
            .await
            .expect("creating the test lanes");
        TestLanes {
            clients,
            lanes,
            prefix,
        }
    }
}

impl Drop for TestLanes {
    fn drop(&mut self) {
        let prefix = self.prefix.clone();
        cleanup(move |clients| async move {
            if let Ok(lanes) = SqsLanes::resolve(clients.sqs.clone(), &prefix).await {
                let _ = lanes.delete_all().await;
            }
        });
    }
}

/// A mutex's guard, whether or not another thread panicked holding it.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cleanup<F, Fut>(work: F)
where
    F: FnOnce(AwsClients) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let joined = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            let clients = AwsClients::from_env(&AwsSettings::default()).await;
            work(clients).await;
        });
    })
    .join();
    drop(joined);
}

pub fn t(text: &str) -> DateTime<Utc> {
    text.parse().expect("a valid RFC3339 instant")
}

/// A validated spec, through the same validation the API and CLI use.
pub fn spec(id: &str, cron: &str) -> ScheduleSpec {
    spec_with(id, cron, serde_json::json!({}))
}

/// A validated spec with more fields (`job`, `overlap`, ...) over the defaults of [`spec`].
pub fn spec_with(id: &str, cron: &str, fields: serde_json::Value) -> ScheduleSpec {
    let mut doc = serde_json::json!({
        "id": id,
        "cron": cron,
        "timezone": "UTC",
        "owner": "tests",
        "job": { "type": "noop" },
    });
    if let (Some(doc), Some(fields)) = (doc.as_object_mut(), fields.as_object()) {
        doc.extend(fields.clone());
    }
    cronledger_core::spec::validate_schedule(
        &doc,
        "",
        // The tests' targets are on 127.0.0.1, as in the local runner.
        &ValidationRules::local(),
        t("2026-01-01T00:00:00Z"),
    )
    .expect("a valid test spec")
}

/// The run the ticker would write for one occurrence, marked with who wrote it.
pub fn scheduled_run(
    spec: &ScheduleSpec,
    scheduled_for: DateTime<Utc>,
    created_at: DateTime<Utc>,
    writer: &str,
) -> Run {
    let schedule = Schedule::new(spec.clone()).expect("the spec compiles");
    let mut run = schedule.pending_run(
        scheduled_for,
        schedule.window_for(scheduled_for),
        Origin::Expected,
        Trigger::Scheduled,
        created_at,
        1,
    );
    run.replay_group_id = Some(writer.to_string());
    run.lane = Some(Lane::Normal);
    run
}

/// The ticker's run of `spec` for `scheduled_for`, stored and driven to its end by `end`
/// (SUCCEED or FAIL): started a second after `scheduled_for`, ended 2.5 s after the start.
pub async fn ended_run(
    store: &dyn LedgerStore,
    spec: &ScheduleSpec,
    scheduled_for: DateTime<Utc>,
    end: RunEvent,
) -> Run {
    let at = scheduled_for;
    let run = scheduled_run(spec, at, at, "ticker");
    store.create_run(&run).await.expect("run");
    let later = |ms: i64| at + TimeDelta::milliseconds(ms);
    let steps = [
        RunChange::enqueue(RunStatus::Pending, 0, at),
        RunChange::open(
            Opening::Start,
            RunStatus::Queued,
            0,
            later(1000),
            "w",
            later(60_000),
        ),
        bare(end, RunStatus::Running, 1, later(3500)),
    ];
    let mut ended = run;
    for step in steps {
        ended = store.transition_run(&ended.key, &step).await.expect("step");
    }
    // The schedule's failure streak, moved as the worker moves it at a run's end.
    let change = match ended.status {
        RunStatus::Failed => Some(StreakChange::Failed),
        RunStatus::Success | RunStatus::PartialSuccess => Some(StreakChange::Succeeded),
        _ => None,
    };
    if let Some(change) = change {
        store
            .count_failure_streak(&spec.id, change)
            .await
            .expect("streak");
    }
    ended
}

/// `event` as a change that carries nothing but itself: an attempt's end with an empty
/// result, an operator's approval or retry as they come, any other event as a decision
/// without a reason. (A start needs its lease: [`RunChange::open`].)
pub fn bare(event: RunEvent, from: RunStatus, epoch: u64, at: DateTime<Utc>) -> RunChange {
    because(event, from, epoch, at, None)
}

/// [`bare`] with `reason` on the run.
pub fn because(
    event: RunEvent,
    from: RunStatus,
    epoch: u64,
    at: DateTime<Utc>,
    reason: Option<Reason>,
) -> RunChange {
    let transition = match (event, reason) {
        (RunEvent::Enqueue, reason) => Transition::Enqueue {
            lane: None,
            lane_was: None,
            job_id: None,
            reason,
        },
        (RunEvent::Approve, reason) => Transition::Approve { reason },
        (RunEvent::Retry, reason) => Transition::Retry {
            reason,
            schedule_version: None,
            cascade: None,
        },
        (RunEvent::Coalesce, reason) => Transition::Coalesce { reason, into: None },
        (RunEvent::HoldForApproval, Some(reason)) => Transition::Hold {
            reason,
            result: None,
        },
        (event, reason) => match Ending::of(event) {
            Some(ending) => Transition::End {
                event: ending,
                reason,
                result: Default::default(),
                steps: None,
            },
            None => Transition::Decide { event, reason },
        },
    };
    RunChange::new(from, epoch, at, transition)
}

/// An operator's run at the same instant as an expected one (its own key).
pub fn manual_run(base: &Run, request_id: &str) -> Run {
    let mut run = base.clone();
    run.key.origin = Origin::Manual(request_id.to_string());
    run.trigger = Trigger::Manual;
    run
}

/// The store operations whose every request is a plain one on an item in no index: the
/// ones whose consumed units DynamoDB Local reports as DynamoDB charges them (the
/// conformance suite's capacity test and the differential test compare their units).
pub const PLAIN_SCOPES: &[&str] = &[
    "put_release_state",
    "release_state",
    "put_kill_switch",
    "kill_switch",
    "claim_idempotency",
    "append_system_audit",
    "system_audit",
    "record_operator_action",
    "audit_log",
    "schedule_spec_at",
    "get_schedule",
    "alerts_of",
    "count_outcome",
    "outcome_days",
];

/// A RUNNING backfill of `schedule_id`'s `windows` windows from `from` to `to`, planned and
/// not written yet, created by an operator at `created_at` (version 0: not stored yet).
pub fn running_backfill(
    id: impl Into<String>,
    schedule_id: impl Into<String>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    windows: u64,
    created_at: DateTime<Utc>,
) -> cronledger_aws::Backfill {
    use cronledger_aws::{BackfillLimits, BackfillState, PauseConditions, Reprocess};
    cronledger_aws::Backfill {
        id: id.into(),
        schedule_id: schedule_id.into(),
        from,
        to,
        reprocess: Reprocess::Missing,
        limits: BackfillLimits::default(),
        pause_when: PauseConditions::default(),
        state: BackfillState::Running,
        held: None,
        cursor: None,
        total_windows: windows,
        planned: windows,
        written: 0,
        passed_over: 0,
        created_at,
        created_by: "ops".into(),
        note: "refill".into(),
        updated_at: created_at,
        last_release_at: None,
        source_record: None,
        replay_group: None,
        approval_required: Vec::new(),
        approved_by: None,
        approved_at: None,
        cascade: false,
        verify: None,
        budget: Default::default(),
        version: 0,
    }
}

/// A benchmark's `n`-th positional argument as a count (`10,080` and `10_080` read as 10080),
/// or `default`.
pub fn bench_arg(n: usize, default: usize) -> usize {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .and_then(|a| a.replace([',', '_'], "").parse().ok())
        .unwrap_or(default)
}
