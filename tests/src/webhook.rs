//! A tiny webhook receiver on 127.0.0.1 for `type: http` jobs.
//!
//! It records every request (idempotency key, attempt, what it answered) and behaves like a
//! well-made target: a key it already executed is answered 200 without executing it again.
//! Tests tell it how to answer the next requests: succeed, fail with a status, or hang until
//! released. Dry runs (body `"mode": "dry_run"`) are answered `{"affected": N}` once told N
//! ([`Webhook::answer_dry_runs`]); until then it ignores the mode, as a target that does not
//! know the protocol would (the request executes).

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
    /// The body's `mode` (`execute`, `dry_run`; empty when absent).
    pub mode: String,
    /// The `X-Cronledger-Mode` header, if sent.
    pub mode_header: Option<String>,
    /// The body's `approved_affected`, if sent.
    pub approved_affected: Option<u64>,
}

#[derive(Default)]
struct State {
    calls: Mutex<Vec<Call>>,
    script: Mutex<VecDeque<Answer>>,
    default: Mutex<Option<Answer>>,
    /// What a dry run answers as `affected`; `None`: dry runs are taken as executions.
    dry_run_affected: Mutex<Option<u64>>,
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

    /// Answers dry runs `{"affected": affected}` from now on (they execute nothing and take
    /// no scripted answer); `None` makes it ignore the mode again.
    pub fn answer_dry_runs(&self, affected: Option<u64>) {
        *lock(&self.state.dry_run_affected) = affected;
    }

    /// Requests that executed the side effect, dry runs left out.
    pub fn executions(&self) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.executed).collect()
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
    let Some((key, mode_header, body)) = read_request(&mut stream).await else {
        return;
    };
    state.arrived.fetch_add(1, Ordering::SeqCst);
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let mode = body["mode"].as_str().unwrap_or_default().to_string();
    let call = |status, executed| Call {
        idempotency_key: key.clone(),
        attempt: body["attempt"].as_u64().unwrap_or(0),
        scheduled_for: body["run"]["scheduled_for"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        status,
        executed,
        received_at: Instant::now(),
        mode: mode.clone(),
        mode_header: mode_header.clone(),
        approved_affected: body["approved_affected"].as_u64(),
    };
    let dry_run_affected = *lock(&state.dry_run_affected);
    if let (Some(affected), "dry_run") = (dry_run_affected, mode.as_str()) {
        lock(&state.calls).push(call(200, false));
        state.in_flight.fetch_sub(1, Ordering::SeqCst);
        respond(&mut stream, 200, &format!(r#"{{"affected": {affected}}}"#)).await;
        return;
    }
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
    lock(&state.calls).push(call(status, executed));
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    respond(&mut stream, status, payload).await;
}

async fn respond(stream: &mut TcpStream, status: u16, payload: &str) {
    let response = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads one request: its `Idempotency-Key` and `X-Cronledger-Mode` headers and its JSON body.
async fn read_request(
    stream: &mut TcpStream,
) -> Option<(String, Option<String>, serde_json::Value)> {
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
    Some((
        header("idempotency-key").unwrap_or_default(),
        header("x-cronledger-mode"),
        body,
    ))
}

#[cfg(test)]
mod tests {
    use cronledger_app::jobs::{
        HttpJob, HttpOptions, JobContext, JobMode, JobTargets, GUARD_UNSUPPORTED,
    };
    use cronledger_core::spec::JobGuard;
    use cronledger_core::{IdempotencyKey, JobSpec, RunKey, Span, Window};

    use super::*;

    fn ctx() -> JobContext {
        let start = "2026-03-01T00:00:00Z".parse().expect("an instant");
        let end = "2026-03-02T00:00:00Z".parse().expect("an instant");
        let window = Window::new(start, end);
        JobContext {
            run: RunKey::expected("purge", end),
            window,
            business_date: start.date_naive(),
            idempotency_key: IdempotencyKey::for_window("purge", &window, None),
            attempt: 1,
            payload: serde_json::Value::Null,
            deadline: end,
            mode: JobMode::Execute,
            approved_affected: Some(3),
            step: None,
            previous: None,
            child: None,
        }
    }

    #[tokio::test]
    async fn answers_dry_runs_once_told_and_until_then_executes_them() {
        let hook = Webhook::start(Answer::Succeed).await;
        let job = JobSpec::Http {
            url: hook.url.clone(),
            timeout: Span::seconds(5),
            payload: serde_json::Value::Null,
            guard: Some(JobGuard { max_affected: 5 }),
            auth: None,
        };
        let targets =
            JobTargets::new(HttpJob::with_options(HttpOptions::local()).expect("a client"));
        // Unaware of the protocol: the dry run executes, and its answer is refused.
        let unaware = targets.dry_run(&job, &ctx()).await;
        assert!(matches!(unaware, Err(f) if f.code() == GUARD_UNSUPPORTED));
        assert_eq!(hook.executions().len(), 1);

        let hook = Webhook::start(Answer::Succeed).await;
        let job = JobSpec::Http {
            url: hook.url.clone(),
            timeout: Span::seconds(5),
            payload: serde_json::Value::Null,
            guard: Some(JobGuard { max_affected: 5 }),
            auth: None,
        };
        hook.answer_dry_runs(Some(3));
        let report = targets.dry_run(&job, &ctx()).await.expect("a report");
        assert_eq!(report.affected, 3);
        assert!(hook.executions().is_empty());
        targets.run(&job, &ctx()).await.expect("executed");
        let calls = hook.calls();
        let seen: Vec<(&str, Option<&str>, bool, Option<u64>)> = calls
            .iter()
            .map(|c| {
                let header = c.mode_header.as_deref();
                (c.mode.as_str(), header, c.executed, c.approved_affected)
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                ("dry_run", Some("dry-run"), false, None),
                ("execute", Some("execute"), true, Some(3)),
            ]
        );
    }
}
