//! Where the simulated lanes keep their messages: the emulator's SQS queues, or queues held in
//! this process.
//!
//! SQS times delays and visibility by the wall clock, which a virtual clock cannot move, so
//! [`super::lanes`] already keeps both on the virtual clock itself and uses SQS only to store
//! messages, count receives and redrive. The in-process queues do exactly that part, with
//! SQS's rules (a receive beyond the lane's `max_receive_count` moves the message to the DLQ
//! instead of delivering it; a received message stays hidden until deleted or shown again),
//! and cost no round trip: an SQS call to the emulator costs more than the DynamoDB calls a
//! delivery makes. The ledger, which is what a simulation answers with, stays in the
//! emulator's DynamoDB either way; `--queues emulator` keeps SQS in the loop, and a test holds
//! both to the same ledger.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cronledger_aws::lanes::Received;
use cronledger_aws::{LaneError, LaneMessage, LaneQueue, QueueDepth, SqsLanes};
use cronledger_core::Lane;

/// The message store behind the simulated lanes.
#[derive(Clone)]
pub enum SimQueues {
    /// The emulator's (or `AWS_ENDPOINT_URL`'s) SQS queues.
    Sqs(Arc<SqsLanes>),
    /// Queues in this process.
    Memory(Arc<MemoryQueues>),
}

impl SimQueues {
    /// In-process queues with the redrive of the simulator's SQS queues ([`super::lane_settings`]).
    pub fn memory() -> SimQueues {
        let max_receive_count = super::lane_settings().max_receive_count;
        SimQueues::Memory(Arc::new(MemoryQueues::new(max_receive_count)))
    }

    /// Sends messages of one lane at once, undelayed.
    pub async fn send_batch(&self, lane: Lane, messages: &[LaneMessage]) -> Result<(), LaneError> {
        match self {
            SimQueues::Sqs(sqs) => sqs.send_batch(lane, messages).await.map(drop),
            SimQueues::Memory(memory) => {
                for message in messages {
                    memory.send(lane, message.to_body());
                }
                Ok(())
            }
        }
    }

    /// Sends one message, undelayed; returns its message id.
    pub async fn send(&self, message: &LaneMessage) -> Result<String, LaneError> {
        match self {
            SimQueues::Sqs(sqs) => sqs.send(message, Duration::ZERO).await,
            SimQueues::Memory(memory) => Ok(memory.send(message.lane, message.to_body())),
        }
    }

    /// Receives up to 10 visible messages of a lane's queue.
    pub async fn receive(&self, lane: Lane) -> Result<Vec<Received>, LaneError> {
        match self {
            SimQueues::Sqs(sqs) => sqs.receive(lane, false, 10, Duration::ZERO).await,
            SimQueues::Memory(memory) => Ok(memory.receive(lane, 10)),
        }
    }

    /// Makes received messages visible again.
    pub async fn show_batch(&self, lane: Lane, receipts: &[String]) -> Result<(), LaneError> {
        match self {
            SimQueues::Sqs(sqs) => sqs.show_batch(lane, receipts).await,
            SimQueues::Memory(memory) => {
                memory.show(lane, receipts);
                Ok(())
            }
        }
    }

    /// Deletes received messages.
    pub async fn delete_batch(&self, lane: Lane, receipts: &[String]) -> Result<(), LaneError> {
        match self {
            SimQueues::Sqs(sqs) => sqs.delete_batch(lane, receipts).await,
            SimQueues::Memory(memory) => {
                memory.delete(lane, receipts);
                Ok(())
            }
        }
    }

    /// Puts a message the worker could not handle on the lane's DLQ.
    pub async fn dead_letter(
        &self,
        lane: Lane,
        body: &str,
        code: &str,
        detail: &str,
    ) -> Result<(), LaneError> {
        match self {
            SimQueues::Sqs(sqs) => sqs.dead_letter(lane, body, code, detail).await,
            SimQueues::Memory(memory) => {
                memory.dead_letter(lane, body);
                Ok(())
            }
        }
    }

    /// A lane's queue depth (or its DLQ's).
    pub async fn depth(&self, lane: Lane, dlq: bool) -> Result<QueueDepth, LaneError> {
        match self {
            SimQueues::Sqs(sqs) => sqs.depth(lane, dlq).await,
            SimQueues::Memory(memory) => Ok(memory.depth(lane, dlq)),
        }
    }
}

#[derive(Debug, Clone)]
struct Stored {
    id: String,
    body: String,
    receive_count: u32,
}

#[derive(Debug, Default)]
struct Queue {
    visible: VecDeque<Stored>,
    /// Received and not deleted, by receipt handle.
    in_flight: BTreeMap<String, Stored>,
    dead: Vec<String>,
}

/// SQS queues with everything timed taken out (the simulated lanes time it): messages wait in
/// order until received, stay in flight until deleted or shown, and are redriven on receive.
#[derive(Debug)]
pub struct MemoryQueues {
    max_receive_count: u32,
    state: Mutex<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    lanes: BTreeMap<Lane, Queue>,
    /// Message ids and receipt handles are numbered, so a simulation is repeatable.
    next_id: u64,
}

impl MemoryQueues {
    pub fn new(max_receive_count: u32) -> MemoryQueues {
        MemoryQueues {
            max_receive_count: max_receive_count.max(1),
            state: Mutex::new(MemoryState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MemoryState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn send(&self, lane: Lane, body: String) -> String {
        let mut state = self.state();
        state.next_id += 1;
        let id = format!("sim-message-{}", state.next_id);
        state
            .lanes
            .entry(lane)
            .or_default()
            .visible
            .push_back(Stored {
                id: id.clone(),
                body,
                receive_count: 0,
            });
        id
    }

    fn receive(&self, lane: Lane, max: usize) -> Vec<Received> {
        let mut guard = self.state();
        let state = &mut *guard;
        let queue = state.lanes.entry(lane).or_default();
        let mut received = Vec::new();
        while received.len() < max {
            let Some(mut message) = queue.visible.pop_front() else {
                break;
            };
            // SQS's redrive: a message already received `maxReceiveCount` times goes to the
            // DLQ when it would be received again.
            if message.receive_count >= self.max_receive_count {
                queue.dead.push(message.body);
                continue;
            }
            message.receive_count += 1;
            state.next_id += 1;
            let receipt = format!("sim-receipt-{}", state.next_id);
            received.push(Received {
                message_id: message.id.clone(),
                receipt_handle: receipt.clone(),
                body: message.body.clone(),
                receive_count: message.receive_count,
                attributes: BTreeMap::new(),
            });
            queue.in_flight.insert(receipt, message);
        }
        received
    }

    fn show(&self, lane: Lane, receipts: &[String]) {
        let mut state = self.state();
        let queue = state.lanes.entry(lane).or_default();
        for receipt in receipts {
            if let Some(message) = queue.in_flight.remove(receipt) {
                queue.visible.push_back(message);
            }
        }
    }

    fn delete(&self, lane: Lane, receipts: &[String]) {
        let mut state = self.state();
        let queue = state.lanes.entry(lane).or_default();
        for receipt in receipts {
            queue.in_flight.remove(receipt);
        }
    }

    fn dead_letter(&self, lane: Lane, body: &str) {
        let mut state = self.state();
        state
            .lanes
            .entry(lane)
            .or_default()
            .dead
            .push(body.to_string());
    }

    fn depth(&self, lane: Lane, dlq: bool) -> QueueDepth {
        let state = self.state();
        let Some(queue) = state.lanes.get(&lane) else {
            return QueueDepth::default();
        };
        if dlq {
            return QueueDepth {
                visible: queue.dead.len() as u64,
                ..QueueDepth::default()
            };
        }
        QueueDepth {
            visible: queue.visible.len() as u64,
            in_flight: queue.in_flight.len() as u64,
            delayed: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(received: &[Received]) -> Vec<&str> {
        received.iter().map(|r| r.body.as_str()).collect()
    }

    #[test]
    fn messages_are_received_in_order_and_hidden_until_shown_or_deleted() {
        let queues = MemoryQueues::new(5);
        for body in ["a", "b", "c"] {
            queues.send(Lane::Realtime, body.into());
        }
        let first = queues.receive(Lane::Realtime, 2);
        assert_eq!(bodies(&first), ["a", "b"]);
        assert_eq!(
            queues.depth(Lane::Realtime, false),
            QueueDepth {
                visible: 1,
                in_flight: 2,
                delayed: 0
            }
        );
        queues.delete(Lane::Realtime, &[first[0].receipt_handle.clone()]);
        queues.show(Lane::Realtime, &[first[1].receipt_handle.clone()]);
        let again = queues.receive(Lane::Realtime, 10);
        assert_eq!(bodies(&again), ["c", "b"]);
        assert_eq!(again[1].receive_count, 2);
        assert_eq!(again[1].message_id, first[1].message_id);
        assert_ne!(again[1].receipt_handle, first[1].receipt_handle);
        assert!(queues.receive(Lane::Normal, 10).is_empty());
    }

    #[test]
    fn a_message_received_max_receive_count_times_is_redriven_on_the_next_receive() {
        let queues = MemoryQueues::new(2);
        queues.send(Lane::Correction, "x".into());
        for count in 1..=2 {
            let received = queues.receive(Lane::Correction, 10);
            assert_eq!(received[0].receive_count, count);
            queues.show(Lane::Correction, &[received[0].receipt_handle.clone()]);
        }
        assert!(queues.receive(Lane::Correction, 10).is_empty());
        assert_eq!(queues.depth(Lane::Correction, true).visible, 1);
        assert_eq!(queues.depth(Lane::Correction, false), QueueDepth::default());
    }
}
