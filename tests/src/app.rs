//! Helpers for the ticker and worker tests: a ledger and lanes sharing one request meter, lanes
//! and a store that record what the functions asked of them, injected crashes, and a poller
//! that plays the SQS event source.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cronledger_app::backoff::Backoff;
use cronledger_app::clock::ManualClock;
use cronledger_app::faults::{CrashPoint, Faults};
use cronledger_app::jobs::http_auth::HttpAuthorizer;
use cronledger_app::jobs::{HttpJob, HttpOptions, JobTargets};
use cronledger_app::ticker::{TickEvent, TickReport, Ticker, TickerConfig};
use cronledger_app::worker::{Worker, WorkerConfig};
use cronledger_aws::lanes::{BatchReport, LaneSettings, Received, SqsRecord};
use cronledger_aws::layer::{BoxFuture, Layer};
use cronledger_aws::ledger::{ChangeMeta, RunChange, StoredSchedule};
use cronledger_aws::{LaneError, LaneMessage, LaneQueue, LedgerStore, SqsLanes, StoreError};
use cronledger_core::{Lane, Run, RunEvent, RunKey, RunStatus, ScheduleSpec, Span};

use crate::{TestLanes, TestLedger, SHARDS};

/// A ledger and the five lanes on one set of clients (one meter), a recording wrapper around
/// the lanes, and a virtual clock for the workers.
pub struct AppEnv {
    pub ledger: TestLedger,
    pub lanes: TestLanes,
    pub store: Arc<dyn LedgerStore>,
    pub queue: Arc<RecordingLanes>,
    pub clock: ManualClock,
}

impl AppEnv {
    /// Fresh table and queues; the workers' clock starts at `now`.
    pub async fn new(settings: LaneSettings, now: DateTime<Utc>) -> AppEnv {
        let ledger = TestLedger::new().await;
        let lanes = TestLanes::with_clients(ledger.clients.clone(), settings).await;
        let store: Arc<dyn LedgerStore> = Arc::new(ledger.ledger.clone());
        let queue = Arc::new(RecordingLanes::new(lanes.lanes.clone()));
        AppEnv {
            ledger,
            lanes,
            store,
            queue,
            clock: ManualClock::new(now),
        }
    }

    pub async fn create(&self, spec: ScheduleSpec, at: DateTime<Utc>) -> StoredSchedule {
        let meta = ChangeMeta {
            actor: "tests".into(),
            reason: "test schedule".into(),
            at,
            details: None,
        };
        self.store
            .create_schedule(spec, meta)
            .await
            .expect("create schedule")
    }

    /// A ticker on the shared store and lanes whose SQS delays follow the virtual clock.
    pub fn ticker(&self) -> Ticker {
        self.ticker_with(ticker_config())
    }

    pub fn ticker_with(&self, config: TickerConfig) -> Ticker {
        Ticker::new(self.store.clone(), self.queue.clone(), config)
            .with_send_clock(Arc::new(self.clock.clone()))
    }

    /// Ticks for `at` with `ticker`, the virtual clock moved to `at` first; fails on errors.
    pub async fn tick_with(&self, ticker: &Ticker, at: DateTime<Utc>) -> TickReport {
        self.clock.set(at);
        let report = ticker
            .tick(&TickEvent {
                time: at,
                shards: None,
            })
            .await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        report
    }

    pub async fn tick(&self, at: DateTime<Utc>) -> TickReport {
        self.tick_with(&self.ticker(), at).await
    }

    /// A worker on the shared store, lanes and clock.
    pub fn worker(&self, config: WorkerConfig) -> Worker {
        self.worker_on(self.store.clone(), config)
    }

    pub fn worker_on(&self, store: Arc<dyn LedgerStore>, config: WorkerConfig) -> Worker {
        // The tests' webhook receivers listen on 127.0.0.1: loopback allowed, as locally.
        let http = HttpJob::with_options(HttpOptions::local()).expect("http client");
        self.worker_with(store, JobTargets::new(http), config)
    }

    /// A worker with its own job targets (http options, handlers).
    pub fn worker_with(
        &self,
        store: Arc<dyn LedgerStore>,
        jobs: JobTargets,
        config: WorkerConfig,
    ) -> Worker {
        Worker::new(
            store,
            self.queue.clone(),
            jobs,
            Arc::new(self.clock.clone()),
            config,
        )
    }

    /// Ticks at `at` (one normal-lane run due) and has a worker whose http jobs authenticate
    /// with `authorizer` run it; the run of `schedule` at `at` as it ended.
    pub async fn fire_authenticated(
        &self,
        schedule: &str,
        at: DateTime<Utc>,
        authorizer: HttpAuthorizer,
    ) -> Run {
        assert_eq!(self.tick(at).await.sent, 1);
        let http = HttpJob::with_options(HttpOptions {
            authorizer,
            ..HttpOptions::local()
        })
        .expect("a client");
        let worker = self.worker_with(
            self.store.clone(),
            JobTargets::new(http),
            worker_config("w"),
        );
        let received = self
            .receive(Lane::Normal, false, 1, Duration::from_secs(10))
            .await;
        self.deliver(&worker, Lane::Normal, &received).await;
        self.run(&RunKey::expected(schedule, at)).await
    }

    /// Receives until `count` messages arrived or `within` passed.
    pub async fn receive(
        &self,
        lane: Lane,
        dlq: bool,
        count: usize,
        within: Duration,
    ) -> Vec<Received> {
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        while got.len() < count && Instant::now() < deadline {
            let batch = self
                .lanes
                .lanes
                .receive(lane, dlq, 10, Duration::from_secs(1))
                .await
                .expect("receive");
            got.extend(batch);
        }
        got
    }

    /// Puts `body` in `lane` exactly as it is: a message no current sender would write (a
    /// previous release's, a later one's, or poison).
    pub async fn send_raw(&self, lane: Lane, body: String) {
        let url = self.lanes.lanes.urls(lane).expect("urls").queue.clone();
        self.lanes
            .clients
            .sqs
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .expect("raw send");
    }

    /// Hands records to a worker as the event source does, then deletes what it acknowledged.
    pub async fn deliver(&self, worker: &Worker, lane: Lane, records: &[Received]) -> BatchReport {
        let records: Vec<SqsRecord> = records.iter().map(SqsRecord::from).collect();
        let report = worker.handle_batch(lane, &records).await;
        acknowledge(&self.lanes.lanes, lane, &records, &report).await;
        report
    }

    /// Sends (another) message for a run to its lane, as SQS's at-least-once delivery or the
    /// reconciler may.
    pub async fn resend(&self, run: &Run) {
        let message = LaneMessage::next_attempt(run, run.lane.unwrap_or(Lane::Normal));
        self.queue
            .send(&message, Duration::ZERO)
            .await
            .expect("send");
    }

    pub async fn run(&self, key: &RunKey) -> Run {
        self.store.get_run(key).await.expect("get run")
    }
}

/// What the tests' tickers use: every shard of the test table.
pub fn ticker_config() -> TickerConfig {
    TickerConfig {
        shards: SHARDS,
        ..TickerConfig::default()
    }
}

/// Short leases and backoff so a test's retries take seconds; heartbeats only when asked.
pub fn worker_config(owner: &str) -> WorkerConfig {
    WorkerConfig {
        owner: owner.into(),
        lease: Span::seconds(30),
        heartbeat_every: Span::minutes(5),
        backoff: Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(8),
        },
        kill_switch_hide: Span::seconds(1),
    }
}

/// Deletes the records a batch acknowledged (the event source's part of the contract).
async fn acknowledge(lanes: &SqsLanes, lane: Lane, records: &[SqsRecord], report: &BatchReport) {
    for (record, (id, outcome)) in records.iter().zip(&report.outcomes) {
        assert_eq!(&record.message_id, id);
        if !outcome.keeps_message() {
            lanes
                .delete(lane, &record.receipt_handle)
                .await
                .expect("delete");
        }
    }
}

/// A worker polling one lane until stopped, like the SQS event source.
pub fn spawn_poller(
    lanes: SqsLanes,
    worker: Arc<Worker>,
    lane: Lane,
    stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !*stop.borrow() {
            let Ok(batch) = lanes.receive(lane, false, 10, Duration::from_secs(1)).await else {
                continue;
            };
            let records: Vec<SqsRecord> = batch.iter().map(SqsRecord::from).collect();
            if records.is_empty() {
                continue;
            }
            let report = worker.handle_batch(lane, &records).await;
            acknowledge(&lanes, lane, &records, &report).await;
        }
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Something a function asked of the lanes.
#[derive(Debug, Clone, PartialEq)]
pub enum LaneCall {
    Send {
        run: RunKey,
        lane: Lane,
        delay: Duration,
    },
    DeadLetter {
        lane: Lane,
        code: String,
    },
    Visibility {
        lane: Lane,
        timeout: Duration,
        at: Instant,
    },
}

/// The SQS lanes, recording every call.
pub struct RecordingLanes {
    inner: SqsLanes,
    calls: Mutex<Vec<LaneCall>>,
}

impl RecordingLanes {
    pub fn new(inner: SqsLanes) -> RecordingLanes {
        RecordingLanes {
            inner,
            calls: Mutex::new(Vec::new()),
        }
    }

    pub fn calls(&self) -> Vec<LaneCall> {
        lock(&self.calls).clone()
    }

    /// The runs sent, in order.
    pub fn sends(&self) -> Vec<RunKey> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                LaneCall::Send { run, .. } => Some(run),
                _ => None,
            })
            .collect()
    }

    /// The visibility timeouts set, in order.
    pub fn visibility_timeouts(&self) -> Vec<Duration> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                LaneCall::Visibility { timeout, .. } => Some(timeout),
                _ => None,
            })
            .collect()
    }
}

#[async_trait]
impl LaneQueue for RecordingLanes {
    async fn send(&self, message: &LaneMessage, delay: Duration) -> Result<String, LaneError> {
        lock(&self.calls).push(LaneCall::Send {
            run: message.run.clone(),
            lane: message.lane,
            delay,
        });
        self.inner.send(message, delay).await
    }

    async fn dead_letter(
        &self,
        lane: Lane,
        body: &str,
        code: &str,
        detail: &str,
    ) -> Result<(), LaneError> {
        lock(&self.calls).push(LaneCall::DeadLetter {
            lane,
            code: code.into(),
        });
        self.inner.dead_letter(lane, body, code, detail).await
    }

    async fn extend_visibility(
        &self,
        lane: Lane,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), LaneError> {
        lock(&self.calls).push(LaneCall::Visibility {
            lane,
            timeout,
            at: Instant::now(),
        });
        self.inner
            .extend_visibility(lane, receipt_handle, timeout)
            .await
    }
}

/// Crashes at one point, the first `times` times it is reached.
pub struct CrashAt {
    point: CrashPoint,
    remaining: AtomicU32,
}

impl CrashAt {
    pub fn new(point: CrashPoint, times: u32) -> Arc<CrashAt> {
        Arc::new(CrashAt {
            point,
            remaining: AtomicU32::new(times),
        })
    }
}

impl Faults for CrashAt {
    fn crash_at(&self, point: CrashPoint, _run: &RunKey, _attempt: u32) -> bool {
        point == self.point
            && self
                .remaining
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
    }
}

/// One status change a function asked for, and how the ledger answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub run: RunKey,
    pub event: RunEvent,
    pub from: RunStatus,
    pub epoch: u64,
    /// `Ok` or the error code (`RUN_LEASE_LOST`, ...).
    pub outcome: Result<(), String>,
}

/// A ledger that records every `transition_run` and its answer, and can slip another
/// writer's change in just before the next START (a race made deterministic).
pub struct ObservedStore {
    inner: Arc<dyn LedgerStore>,
    transitions: Mutex<Vec<Transition>>,
    before_start: Mutex<Option<RunChange>>,
}

impl ObservedStore {
    pub fn new(inner: Arc<dyn LedgerStore>) -> Arc<ObservedStore> {
        Arc::new(ObservedStore {
            inner,
            transitions: Mutex::new(Vec::new()),
            before_start: Mutex::new(None),
        })
    }

    pub fn transitions(&self) -> Vec<Transition> {
        lock(&self.transitions).clone()
    }

    /// Applies `change` (as someone else) right before the next START reaches the ledger.
    pub fn before_next_start(&self, change: RunChange) {
        *lock(&self.before_start) = Some(change);
    }
}

impl Layer for ObservedStore {
    type Inner = dyn LedgerStore;

    fn inner(&self) -> &(dyn LedgerStore + 'static) {
        self.inner.as_ref()
    }

    fn intercept_transition<'a>(
        &'a self,
        key: &'a RunKey,
        change: &'a RunChange,
    ) -> BoxFuture<'a, Result<Run, StoreError>> {
        Box::pin(async move {
            let other = match change.event() {
                RunEvent::Start => lock(&self.before_start).take(),
                _ => None,
            };
            if let Some(other) = other {
                self.inner
                    .transition_run(key, &other)
                    .await
                    .expect("the interleaved change applies");
            }
            let result = self.inner.transition_run(key, change).await;
            lock(&self.transitions).push(Transition {
                run: key.clone(),
                event: change.event(),
                from: change.from,
                epoch: change.epoch,
                outcome: result
                    .as_ref()
                    .map(|_| ())
                    .map_err(|e| e.code().to_string()),
            });
            result
        })
    }
}
