//! A tiny webhook receiver on 127.0.0.1 for `type: http` jobs.
//!
//! It records every request (idempotency key, attempt, what it answered) and behaves like a
//! well-made target: a key it already executed is answered 200 without executing it again.
//! Tests tell it how to answer the next requests: succeed, fail with a status, or hang until
//! released.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 200 with `{"count": 1}`; the key counts as executed.
    Succeed,
    /// This status, nothing executed.
    Fail(u16),
    /// Holds the request until [`Webhook::release`], then succeeds.
    Hang,
}

/// One request as the receiver saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub idempotency_key: String,
    /// The `attempt` of the JSON body.
    pub attempt: u64,
    /// The body's `run.scheduled_for`.
    pub scheduled_for: String,
    pub status: u16,
    /// Whether this request executed the side effect (false for failures and for keys that
    /// were executed before).
    pub executed: bool,
    pub received_at: Instant,
}

#[derive(Default)]
struct State {
    calls: Mutex<Vec<Call>>,
    script: Mutex<VecDeque<Answer>>,
    default: Mutex<Option<Answer>>,
    /// Keys whose side effect ran; a key seen again is answered 200 without running it.
    executed: Mutex<BTreeSet<String>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    arrived: AtomicUsize,
}

pub struct Webhook {
    pub url: String,
    state: Arc<State>,
    releases: Arc<Semaphore>,
    task: tokio::task::JoinHandle<()>,
}

impl Webhook {
    /// Listens on a free port; answers `default` unless a scripted answer is queued.
    pub async fn start(default: Answer) -> Webhook {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let state = Arc::new(State::default());
        *lock(&state.default) = Some(default);
        let releases = Arc::new(Semaphore::new(0));
        let (s, r) = (state.clone(), releases.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, s.clone(), r.clone()));
            }
        });
        Webhook {
            url,
            state,
            releases,
            task,
        }
    }

    /// Queues answers for the next requests, in order.
    pub fn script(&self, answers: &[Answer]) {
        lock(&self.state.script).extend(answers.iter().copied());
    }

    pub fn set_default(&self, answer: Answer) {
        *lock(&self.state.default) = Some(answer);
    }

    /// Lets `n` hanging requests (current or future) answer.
    pub fn release(&self, n: usize) {
        self.releases.add_permits(n);
    }

    /// Requests answered so far, in the order they were answered.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.state.calls).clone()
    }

    /// Per idempotency key: (requests answered, side effects executed).
    pub fn by_key(&self) -> BTreeMap<String, (u32, u32)> {
        let mut out: BTreeMap<String, (u32, u32)> = BTreeMap::new();
        for call in self.calls() {
            let entry = out.entry(call.idempotency_key).or_default();
            entry.0 += 1;
            entry.1 += u32::from(call.executed);
        }
        out
    }

    /// Requests that arrived, answered or not.
    pub fn arrived(&self) -> usize {
        self.state.arrived.load(Ordering::SeqCst)
    }

    /// Most requests ever held at once.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Waits until `n` requests arrived (panics after `within`).
    pub async fn wait_arrived(&self, n: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while self.arrived() < n {
            assert!(
                Instant::now() < deadline,
                "the webhook saw {} requests, expected {n}",
                self.arrived()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn serve(mut stream: TcpStream, state: Arc<State>, releases: Arc<Semaphore>) {
    let Some((key, body)) = read_request(&mut stream).await else {
        return;
    };
    state.arrived.fetch_add(1, Ordering::SeqCst);
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let answer = lock(&state.script)
        .pop_front()
        .or(*lock(&state.default))
        .unwrap_or(Answer::Succeed);
    let status = match answer {
        Answer::Succeed => 200,
        Answer::Fail(status) => status,
        Answer::Hang => match releases.acquire().await {
            Ok(permit) => {
                permit.forget();
                200
            }
            Err(_) => 503,
        },
    };
    let executed = status / 100 == 2 && lock(&state.executed).insert(key.clone());
    let payload = if executed {
        r#"{"count": 1}"#
    } else {
        r#"{"duplicate": true}"#
    };
    lock(&state.calls).push(Call {
        idempotency_key: key,
        attempt: body["attempt"].as_u64().unwrap_or(0),
        scheduled_for: body["run"]["scheduled_for"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        status,
        executed,
        received_at: Instant::now(),
    });
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    let response = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads one request: its `Idempotency-Key` header and its JSON body.
async fn read_request(stream: &mut TcpStream) -> Option<(String, serde_json::Value)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let length: usize = header("content-length")?.parse().ok()?;
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[head_end..head_end + length]).ok()?;
    Some((header("idempotency-key").unwrap_or_default(), body))
}
