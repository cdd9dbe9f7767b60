//! The lanes as the simulator sees them: queues (see [`super::queues`]) with the two things
//! SQS times by the wall clock (message delays and visibility timeouts) moved onto the
//! virtual clock, and an event source that drains them between virtual instants.
//!
//! - A delayed send (the ticker's lookahead) is held here and sent, undelayed, when the
//!   virtual clock reaches its time.
//! - A received message never reappears on its own (SQS queues are created with the longest
//!   visibility timeout SQS allows, 12 hours of wall time). When the worker keeps a message
//!   (retry backoff, QUEUE_NEW deferral, a crash), the visibility it asked for (or the
//!   simulated default) is noted in virtual time, and the message is made visible again
//!   (`ChangeMessageVisibility` to 0) when the virtual clock gets there. Receive counts, the
//!   redrive to the DLQ and partial batch responses stay SQS behaviour.
//! - A message whose handler is still at work (a long job) reappears, as in SQS, once its
//!   visibility runs out: the simulated default from its receipt, or what the worker last
//!   asked for (its heartbeats). Its handler's receipt handle is then stale: what that
//!   handler ends with neither deletes nor hides the message.
//! - With duplicate deliveries on, every message is sent twice: two copies, each received,
//!   handled and acknowledged on its own, possibly at the same time by two workers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::lanes::{MessageOutcome, SqsRecord};
use cronledger_aws::{LaneError, LaneMessage, LaneQueue};
use cronledger_core::Lane;
use futures_util::future::join_all;
use tokio::task::JoinSet;
use tracing::instrument::WithSubscriber;
use tracing::Instrument;

use super::bill::{self, Bill};
use super::queues::SimQueues;
use super::time::VirtualTime;
use crate::worker::Worker;

/// Visibility timeout of the simulator's queues: SQS's maximum, 12 hours of wall time.
pub const QUEUE_VISIBILITY: Duration = Duration::from_secs(43_200);

#[derive(Default)]
struct State {
    /// Delayed sends, sent when the virtual clock reaches their time.
    held: Vec<(DateTime<Utc>, LaneMessage)>,
    /// Visibility the worker asked for, by receipt handle, in virtual time.
    asked: BTreeMap<String, DateTime<Utc>>,
    /// Received messages kept hidden until a virtual instant.
    hidden: Vec<(DateTime<Utc>, Lane, String)>,
    /// Messages each lane should have visible (sent or uncovered, not yet received): the
    /// event source receives only while this says there is something, which spares the
    /// empty receive that would otherwise end every drain.
    visible: BTreeMap<Lane, u64>,
    /// Receipt handles of finished messages, deleted together at the end of the instant.
    finished: BTreeMap<Lane, Vec<String>>,
    /// Messages whose handler is at work, by receipt handle: when they reappear unless the
    /// worker asks for more time.
    in_flight: BTreeMap<String, (DateTime<Utc>, Lane)>,
    /// Receipt handles whose message reappeared while their handler was still at work.
    stale: std::collections::BTreeSet<String>,
}

/// Counts of what went through the lanes.
#[derive(Debug, Default)]
pub struct LaneCounters {
    pub sent: AtomicU64,
    pub duplicates_sent: AtomicU64,
    pub deliveries: AtomicU64,
    pub redelivered: AtomicU64,
    /// What the deployed functions and event sources would be billed for (SQS requests as
    /// they make them, worker invocations, logs, metrics).
    pub bill: Bill,
}

pub struct SimLanes {
    queues: SimQueues,
    time: VirtualTime,
    duplicate: bool,
    /// How long a message the worker kept without saying for how long stays hidden
    /// (a crashed or failed invocation): the queue's visibility timeout, in virtual time.
    default_visibility: TimeDelta,
    state: Mutex<State>,
    next_worker: AtomicUsize,
    pub counters: LaneCounters,
}

impl SimLanes {
    pub fn new(
        queues: SimQueues,
        time: VirtualTime,
        duplicate: bool,
        default_visibility: TimeDelta,
    ) -> SimLanes {
        SimLanes {
            queues,
            time,
            duplicate,
            default_visibility,
            state: Mutex::new(State::default()),
            next_worker: AtomicUsize::new(0),
            counters: LaneCounters::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next virtual instant at which a held send or a hidden message is due.
    pub fn next_event(&self) -> Option<DateTime<Utc>> {
        let state = self.state();
        let held = state.held.iter().map(|(t, _)| *t);
        let hidden = state.hidden.iter().map(|(t, _, _)| *t);
        let in_flight = state.in_flight.values().map(|(t, _)| *t);
        held.chain(hidden).chain(in_flight).min()
    }

    /// Sends the held messages and uncovers the hidden ones that are due now, with one batch
    /// request per lane and 10 messages. This is SQS's part, so it happens during scheduler
    /// outages too.
    pub async fn release_due(&self) -> Result<(), LaneError> {
        let now = self.time.now();
        let (held, hidden) = {
            let mut state = self.state();
            let held: Vec<_>;
            (held, state.held) = std::mem::take(&mut state.held)
                .into_iter()
                .partition(|(t, _)| *t <= now);
            let mut hidden: Vec<_>;
            (hidden, state.hidden) = std::mem::take(&mut state.hidden)
                .into_iter()
                .partition(|(t, _, _)| *t <= now);
            // In flight past their visibility: back, under their handler's feet.
            let expired: Vec<String> = state
                .in_flight
                .iter()
                .filter(|(_, (t, _))| *t <= now)
                .map(|(receipt, _)| receipt.clone())
                .collect();
            for receipt in expired {
                if let Some((t, lane)) = state.in_flight.remove(&receipt) {
                    state.stale.insert(receipt.clone());
                    hidden.push((t, lane, receipt));
                }
            }
            (held, hidden)
        };
        let copies = if self.duplicate { 2 } else { 1 };
        let mut sends: BTreeMap<Lane, Vec<LaneMessage>> = BTreeMap::new();
        for (_, message) in held {
            let lane = sends.entry(message.lane).or_default();
            lane.extend(std::iter::repeat_n(message, copies));
        }
        let sent = sends.iter().map(|(lane, messages)| async move {
            self.queues.send_batch(*lane, messages).await?;
            self.counted_sends(*lane, messages.len() as u64 / copies as u64);
            Ok::<(), LaneError>(())
        });
        for result in join_all(sent).await {
            result?;
        }
        let mut shows: BTreeMap<Lane, Vec<String>> = BTreeMap::new();
        for (_, lane, receipt) in hidden {
            shows.entry(lane).or_default().push(receipt);
        }
        let uncover = shows.iter().map(|(lane, receipts)| async move {
            self.queues.show_batch(*lane, receipts).await?;
            let n = receipts.len() as u64;
            self.counters.redelivered.fetch_add(n, Ordering::Relaxed);
            *self.state().visible.entry(*lane).or_default() += n;
            Ok::<(), LaneError>(())
        });
        for result in join_all(uncover).await {
            result?;
        }
        Ok(())
    }

    /// Counts `n` messages (and their copies) sent to `lane` and now visible there.
    fn counted_sends(&self, lane: Lane, n: u64) {
        self.counters.sent.fetch_add(n, Ordering::Relaxed);
        let mut visible = n;
        if self.duplicate {
            self.counters
                .duplicates_sent
                .fetch_add(n, Ordering::Relaxed);
            visible *= 2;
        }
        *self.state().visible.entry(lane).or_default() += visible;
    }

    /// Deletes finished messages with one batch request per 10 (as Lambda's event source
    /// deletes a batch), only lanes with a full batch unless `all`. Waiting costs nothing: a
    /// received message stays hidden for the queue's 12 hours of wall time.
    pub async fn flush_finished(&self, all: bool) -> Result<(), LaneError> {
        let finished: Vec<(Lane, Vec<String>)> = {
            let mut state = self.state();
            let full: Vec<Lane> = state
                .finished
                .iter()
                .filter(|(_, r)| all || r.len() >= 10)
                .map(|(lane, _)| *lane)
                .collect();
            full.into_iter()
                .filter_map(|lane| state.finished.remove(&lane).map(|r| (lane, r)))
                .collect()
        };
        // The event source deletes a batch with one request per 10 messages.
        let requests: usize = finished.iter().map(|(_, r)| r.len().div_ceil(10)).sum();
        self.counters.bill.sqs(requests as u64);
        let deletes = finished
            .iter()
            .map(|(lane, receipts)| self.queues.delete_batch(*lane, receipts));
        for result in join_all(deletes).await {
            result?;
        }
        Ok(())
    }

    async fn send_now(&self, message: &LaneMessage) -> Result<String, LaneError> {
        let id = self.queues.send(message).await?;
        if self.duplicate {
            self.queues.send(message).await?;
        }
        self.counted_sends(message.lane, 1);
        Ok(id)
    }

    /// The SQS event source: receives every visible message of every lane and hands them to
    /// workers, up to 10 a invocation as the event source mapping batches them, until the
    /// lanes are empty and every invocation has finished or is waiting on virtual time.
    ///
    /// Messages of one schedule that are visible at the same instant (a backlog after a
    /// worker outage, a released gap) go out in [`waves`]: the n-th run of each schedule in
    /// the n-th wave, once the wave before has settled. Deployed, they could start in either
    /// order; the simulator picks the order they were sent in, so whether a window starts
    /// beside its predecessor (SKIP_NEW) does not depend on the host's thread timing and
    /// a simulation repeats. Copies of one message stay in one wave and still race.
    pub async fn drain(
        self: &Arc<Self>,
        workers: &[Arc<Worker>],
        tasks: &mut JoinSet<()>,
    ) -> Result<(), LaneError> {
        if workers.is_empty() {
            return Ok(());
        }
        loop {
            let received = self.receive_visible().await?;
            if received.is_empty() {
                return Ok(());
            }
            for wave in waves(received) {
                let mut by_lane: BTreeMap<Lane, Vec<SqsRecord>> = BTreeMap::new();
                for (lane, record) in wave {
                    by_lane.entry(lane).or_default().push(record);
                }
                for (lane, records) in by_lane {
                    for batch in records.chunks(10) {
                        self.spawn_invocation(workers, lane, batch.to_vec(), tasks);
                    }
                }
                self.time.idle().await;
            }
        }
    }

    /// Receives until no lane has a visible message, in the order SQS hands them out.
    async fn receive_visible(&self) -> Result<Vec<(Lane, SqsRecord)>, LaneError> {
        let mut all = Vec::new();
        loop {
            let lanes: Vec<Lane> = self
                .state()
                .visible
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(lane, _)| *lane)
                .collect();
            if lanes.is_empty() {
                return Ok(all);
            }
            for lane in lanes {
                while self.state().visible.get(&lane).is_some_and(|n| *n > 0) {
                    let received = self.queues.receive(lane).await?;
                    self.counters.bill.sqs(1);
                    let mut state = self.state();
                    let n = state.visible.entry(lane).or_default();
                    // Empty: SQS moved what was left to the DLQ (redrive on receive).
                    *n = if received.is_empty() {
                        0
                    } else {
                        n.saturating_sub(received.len() as u64)
                    };
                    let visible_until = self.time.now() + self.default_visibility;
                    for m in &received {
                        state
                            .in_flight
                            .insert(m.receipt_handle.clone(), (visible_until, lane));
                    }
                    all.extend(received.iter().map(|m| (lane, SqsRecord::from(m))));
                }
            }
        }
    }

    /// One worker invocation on `records` (the worker handles them concurrently), each
    /// counted busy on the virtual clock until it is done.
    fn spawn_invocation(
        self: &Arc<Self>,
        workers: &[Arc<Worker>],
        lane: Lane,
        records: Vec<SqsRecord>,
        tasks: &mut JoinSet<()>,
    ) {
        let n = self.next_worker.fetch_add(1, Ordering::Relaxed);
        let worker = workers[n % workers.len()].clone();
        let lanes = self.clone();
        self.counters
            .deliveries
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        for _ in &records {
            self.time.enter();
        }
        tasks.spawn(
            async move { lanes.deliver(&worker, lane, records).await }.with_current_subscriber(),
        );
    }

    /// One invocation: the worker's batch handler on the records, then the event source's
    /// part for each as it finishes: delete what it finished, hide what it kept until its
    /// virtual time. Virtual time counts each message busy until it is done.
    async fn deliver(&self, worker: &Worker, lane: Lane, records: Vec<SqsRecord>) {
        let started = self.time.now();
        // When the last record finished. Read there, not after the handler returns: once its
        // last record has left, the clock may jump to the next event before the rest of the
        // invocation is polled, and that wait is not the invocation's.
        let finished = Mutex::new(started);
        let done = |record: &SqsRecord, outcome: &MessageOutcome| {
            {
                let mut last = finished.lock().unwrap_or_else(PoisonError::into_inner);
                *last = (*last).max(self.time.now());
            }
            let asked = self.state().asked.remove(&record.receipt_handle);
            let stale = {
                let mut state = self.state();
                state.in_flight.remove(&record.receipt_handle);
                state.stale.remove(&record.receipt_handle)
            };
            if stale {
                // The message is back in its lane (or with another handler) already.
            } else if outcome.keeps_message() {
                let at = asked.unwrap_or_else(|| self.time.now() + self.default_visibility);
                self.state()
                    .hidden
                    .push((at, lane, record.receipt_handle.clone()));
            } else {
                // Deleted with the instant's other finished messages (see `flush_finished`):
                // received, it stays hidden meanwhile.
                self.state()
                    .finished
                    .entry(lane)
                    .or_default()
                    .push(record.receipt_handle.clone());
            }
            self.time.leave();
        };
        let (_, handler) = bill::handler_time(
            worker
                .handle_invocation(lane, &records, None, &done)
                .instrument(bill::invocation_span()),
        )
        .await;
        let finished = *finished.lock().unwrap_or_else(PoisonError::into_inner);
        let job = (finished - started).to_std().unwrap_or_default();
        self.counters.bill.invocation("worker", job, handler);
        self.counters.bill.flush_metrics(worker.metrics(), "worker");
    }
}

#[async_trait]
impl LaneQueue for SimLanes {
    async fn send(&self, message: &LaneMessage, delay: Duration) -> Result<String, LaneError> {
        // One SendMessage as deployed, delayed or not (held here only for the virtual clock).
        self.counters.bill.sqs(1);
        self.deliver_later(message, delay).await
    }

    async fn send_many(
        &self,
        messages: &[(LaneMessage, Duration)],
    ) -> Vec<Result<String, LaneError>> {
        // SendMessageBatch as deployed: one request per 10 messages of a lane.
        let mut per_lane: BTreeMap<Lane, u64> = BTreeMap::new();
        for (message, _) in messages {
            *per_lane.entry(message.lane).or_default() += 1;
        }
        self.counters
            .bill
            .sqs(per_lane.values().map(|n| n.div_ceil(10)).sum());
        let mut sent = Vec::with_capacity(messages.len());
        for (message, delay) in messages {
            sent.push(self.deliver_later(message, *delay).await);
        }
        sent
    }

    async fn dead_letter(
        &self,
        lane: Lane,
        body: &str,
        code: &str,
        detail: &str,
    ) -> Result<(), LaneError> {
        self.counters.bill.sqs(1);
        self.queues.dead_letter(lane, body, code, detail).await
    }

    /// Noted in virtual time; the message stays hidden in SQS meanwhile (see the module docs).
    async fn extend_visibility(
        &self,
        _lane: Lane,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), LaneError> {
        self.counters.bill.sqs(1);
        let at = later(self.time.now(), timeout);
        let mut state = self.state();
        state.asked.insert(receipt_handle.to_string(), at);
        if let Some((visible_at, _)) = state.in_flight.get_mut(receipt_handle) {
            *visible_at = at;
        }
        Ok(())
    }
}

impl SimLanes {
    /// A sent message: into the queue now, or held until its delay has passed.
    async fn deliver_later(
        &self,
        message: &LaneMessage,
        delay: Duration,
    ) -> Result<String, LaneError> {
        if delay.is_zero() {
            return self.send_now(message).await;
        }
        static HELD: AtomicU64 = AtomicU64::new(0);
        let at = later(self.time.now(), delay);
        self.state().held.push((at, message.clone()));
        Ok(format!(
            "sim-delayed-{}",
            HELD.fetch_add(1, Ordering::Relaxed)
        ))
    }
}

/// `now + d`, with `d` capped at SQS's longest visibility timeout.
fn later(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    now + TimeDelta::from_std(d.min(QUEUE_VISIBILITY)).unwrap_or(TimeDelta::hours(12))
}

/// Splits what was received at one instant into waves: a schedule's n-th distinct run goes
/// in wave n, copies of a message with the first copy, in received order. A body that is
/// not a lane message goes in the first wave (the worker reports it).
fn waves(received: Vec<(Lane, SqsRecord)>) -> Vec<Vec<(Lane, SqsRecord)>> {
    let mut runs_seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut waves: Vec<Vec<(Lane, SqsRecord)>> = Vec::new();
    for (lane, record) in received {
        let wave = match LaneMessage::parse(&record.body) {
            Ok(message) => {
                let run = message.run.to_string();
                let runs = runs_seen.entry(message.run.schedule_id).or_default();
                match runs.iter().position(|r| *r == run) {
                    Some(i) => i,
                    None => {
                        runs.push(run);
                        runs.len() - 1
                    }
                }
            }
            Err(_) => 0,
        };
        if waves.len() <= wave {
            waves.resize_with(wave + 1, Vec::new);
        }
        waves[wave].push((lane, record));
    }
    waves
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronledger_core::{IdempotencyKey, RunKey, Window};

    fn record(schedule: &str, minute: u32, copy: u32) -> (Lane, SqsRecord) {
        let at: DateTime<Utc> = format!("2026-03-01T01:{minute:02}:00Z").parse().unwrap();
        let run = RunKey::expected(schedule, at);
        let window = Window::new(at, at + TimeDelta::minutes(1));
        let message = LaneMessage::new(
            run,
            IdempotencyKey::for_window(schedule, &window, None),
            window,
            Lane::Normal,
            1,
        );
        let record = SqsRecord {
            message_id: format!("{schedule}-{minute}-{copy}"),
            receipt_handle: format!("r-{schedule}-{minute}-{copy}"),
            body: message.to_body(),
            receive_count: 1,
        };
        (Lane::Normal, record)
    }

    fn ids(wave: &[(Lane, SqsRecord)]) -> Vec<&str> {
        wave.iter().map(|(_, r)| r.message_id.as_str()).collect()
    }

    #[test]
    fn a_schedules_backlog_goes_out_one_run_a_wave_with_copies_together() {
        let received = vec![
            record("a", 58, 0),
            record("b", 58, 0),
            record("a", 59, 0),
            record("a", 58, 1),
            (
                Lane::Normal,
                SqsRecord {
                    body: "junk".into(),
                    ..record("c", 0, 0).1
                },
            ),
        ];
        let waves = waves(received);
        assert_eq!(waves.len(), 2);
        assert_eq!(ids(&waves[0]), ["a-58-0", "b-58-0", "a-58-1", "c-0-0"]);
        assert_eq!(ids(&waves[1]), ["a-59-0"]);
    }
}
