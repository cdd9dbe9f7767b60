//! A local Lambda Runtime API (the `2018-06-01` interface) and a function binary running
//! against it, as Lambda runs a custom runtime (`provided.al2023`): one server per function
//! process, events handed over through `GET /runtime/invocation/next`, answers taken from
//! `POST /runtime/invocation/{id}/response` or `/error`, init failures from
//! `POST /runtime/init/error`.
//!
//! The binaries are host builds of the function crates. The deployed artifacts are arm64
//! release builds for Lambda and do not run on an x86_64 host; a host build of the same
//! crates runs the same code.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use crate::lock;

/// Why an invocation has no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum InvokeError {
    /// The handler failed: the runtime posted to `/invocation/{id}/error`.
    Function { error_type: String, message: String },
    /// No answer within the timeout (Lambda would stop the function; so does this).
    Timeout(Duration),
    /// The process ended (or failed its init) before answering.
    Exited(String),
}

impl std::fmt::Display for InvokeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InvokeError::Function {
                error_type,
                message,
            } => write!(f, "function error {error_type}: {message}"),
            InvokeError::Timeout(d) => write!(f, "no answer within {} ms", d.as_millis()),
            InvokeError::Exited(why) => write!(f, "the function process ended: {why}"),
        }
    }
}

impl std::error::Error for InvokeError {}

type Answer = Result<Value, InvokeError>;

/// One event waiting for the runtime to take it.
struct Pending {
    request_id: String,
    event: Value,
    deadline_ms: u128,
}

struct Shared {
    function_arn: String,
    next: tokio::sync::Mutex<mpsc::UnboundedReceiver<Pending>>,
    answers: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    first_poll: OnceLock<Instant>,
    init_error: Mutex<Option<String>>,
}

const NEXT: &str = "/2018-06-01/runtime/invocation/next";
const RESPONSE: &str = "/2018-06-01/runtime/invocation/{id}/response";
const ERROR: &str = "/2018-06-01/runtime/invocation/{id}/error";
const INIT_ERROR: &str = "/2018-06-01/runtime/init/error";

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(NEXT, get(next))
        .route(RESPONSE, post(response))
        .route(ERROR, post(error))
        .route(INIT_ERROR, post(init_error))
        .with_state(shared)
}

/// The long poll: waits for the next event.
async fn next(State(shared): State<Arc<Shared>>) -> Response {
    shared.first_poll.get_or_init(Instant::now);
    let Some(pending) = shared.next.lock().await.recv().await else {
        return StatusCode::GONE.into_response();
    };
    let mut headers = HeaderMap::new();
    let mut put = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    put("Lambda-Runtime-Aws-Request-Id", pending.request_id.clone());
    put(
        "Lambda-Runtime-Deadline-Ms",
        pending.deadline_ms.to_string(),
    );
    put(
        "Lambda-Runtime-Invoked-Function-Arn",
        shared.function_arn.clone(),
    );
    put(
        "Lambda-Runtime-Trace-Id",
        format!(
            "Root=1-{:08x}-{:024x};Parent={:016x};Sampled=0",
            pending.deadline_ms / 1000,
            pending.deadline_ms,
            pending.deadline_ms
        ),
    );
    put("Content-Type", "application/json".to_string());
    (StatusCode::OK, headers, pending.event.to_string()).into_response()
}

fn answer(shared: &Shared, id: &str, result: Answer) -> StatusCode {
    let sender = lock(&shared.answers).remove(id);
    match sender {
        Some(sender) => {
            let _ = sender.send(result);
            StatusCode::ACCEPTED
        }
        None => StatusCode::BAD_REQUEST,
    }
}

async fn response(
    State(shared): State<Arc<Shared>>,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> StatusCode {
    let result = serde_json::from_slice::<Value>(&body).map_err(|e| InvokeError::Function {
        error_type: "Runtime.InvalidResponse".into(),
        message: format!("the response is not JSON: {e}"),
    });
    answer(&shared, &id, result)
}

async fn error(
    State(shared): State<Arc<Shared>>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let (error_type, message) = error_body(&headers, &body);
    answer(
        &shared,
        &id,
        Err(InvokeError::Function {
            error_type,
            message,
        }),
    )
}

async fn init_error(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let (error_type, message) = error_body(&headers, &body);
    *lock(&shared.init_error) = Some(format!("{error_type}: {message}"));
    StatusCode::ACCEPTED
}

/// `{"errorType", "errorMessage"}`, the type falling back to the error-type header.
fn error_body(headers: &HeaderMap, body: &[u8]) -> (String, String) {
    let doc: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let header = headers
        .get("lambda-runtime-function-error-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("Unhandled");
    let error_type = doc["errorType"].as_str().unwrap_or(header).to_string();
    let message = doc["errorMessage"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(body).to_string());
    (error_type, message)
}

/// Where a line of the function's output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One line the function wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputLine {
    pub stream: Stream,
    pub text: String,
}

/// How to start a function.
#[derive(Debug, Clone)]
pub struct FunctionConfig {
    /// `AWS_LAMBDA_FUNCTION_NAME`; also names the function in messages.
    pub name: String,
    pub binary: PathBuf,
    /// The function's own environment (table, queue prefix, ...), over the test's.
    pub env: Vec<(String, String)>,
    pub memory_mb: u32,
    /// Lambda's function timeout: an invocation gets no more.
    pub timeout: Duration,
    /// How long the process may take to reach its first `/next` poll.
    pub init_timeout: Duration,
}

impl FunctionConfig {
    pub fn new(name: &str, binary: PathBuf) -> FunctionConfig {
        FunctionConfig {
            name: name.to_string(),
            binary,
            env: Vec::new(),
            memory_mb: 256,
            timeout: Duration::from_secs(30),
            init_timeout: Duration::from_secs(20),
        }
    }

    pub fn env(mut self, name: &str, value: impl Into<String>) -> FunctionConfig {
        self.env.push((name.to_string(), value.into()));
        self
    }
}

/// A function binary running against its own Runtime API. The process is killed on drop.
pub struct Function {
    config: FunctionConfig,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Pending>,
    child: Mutex<Child>,
    output: Arc<Mutex<Vec<OutputLine>>>,
    readers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    init: Duration,
    server: tokio::task::JoinHandle<()>,
    invocations: AtomicU64,
}

impl Function {
    /// Serves a Runtime API on 127.0.0.1:0, spawns the binary against it and waits for its
    /// first `/next` poll: the init time (spawn to ready), which it prints.
    pub async fn start(config: FunctionConfig) -> Result<Function, InvokeError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| InvokeError::Exited(format!("cannot listen: {e}")))?;
        let address = listener
            .local_addr()
            .map_err(|e| InvokeError::Exited(format!("no local address: {e}")))?;
        let (events, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            function_arn: format!(
                "arn:aws:lambda:us-east-1:123456789012:function:{}",
                config.name
            ),
            next: tokio::sync::Mutex::new(receiver),
            answers: Mutex::new(HashMap::new()),
            first_poll: OnceLock::new(),
            init_error: Mutex::new(None),
        });
        let app = router(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });

        let mut command = Command::new(&config.binary);
        command
            .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", &config.name)
            .env(
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
                config.memory_mb.to_string(),
            )
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env(
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/{}", config.name),
            )
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
            .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
            .env("AWS_LAMBDA_LOG_LEVEL", "INFO")
            // Lambda sets no RUST_LOG; a developer's would change what the function logs.
            .env_remove("RUST_LOG")
            .envs(config.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spawned = Instant::now();
        let mut child = command.spawn().map_err(|e| {
            InvokeError::Exited(format!("cannot start {}: {e}", config.binary.display()))
        })?;
        let output = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(capture(out, Stream::Stdout, output.clone()));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(capture(err, Stream::Stderr, output.clone()));
        }
        let mut function = Function {
            config,
            shared,
            events,
            child: Mutex::new(child),
            output,
            readers: Mutex::new(readers),
            init: Duration::ZERO,
            server,
            invocations: AtomicU64::new(0),
        };
        let deadline = spawned + function.config.init_timeout;
        let ready = loop {
            if let Some(at) = function.shared.first_poll.get() {
                break *at;
            }
            function.check_alive()?;
            if Instant::now() > deadline {
                return Err(InvokeError::Exited(format!(
                    "{} did not poll for events within {} ms{}",
                    function.config.name,
                    function.config.init_timeout.as_millis(),
                    function.output_tail()
                )));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        function.init = ready.saturating_duration_since(spawned);
        println!(
            "e2e: {} init {} ms (process start to the first /next poll)",
            function.config.name,
            function.init.as_millis()
        );
        Ok(function)
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Process start to the first `/next` poll.
    pub fn init_time(&self) -> Duration {
        self.init
    }

    /// Invokes the function synchronously (`RequestResponse`): its answer, or why none.
    /// Invocations queue and run one at a time, as in one Lambda execution environment.
    pub async fn invoke(&self, event: Value) -> Result<Value, InvokeError> {
        let n = self.invocations.fetch_add(1, Ordering::Relaxed);
        let request_id = format!("{}-{n:08}-{}", self.config.name, std::process::id());
        let deadline_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis()
            + self.config.timeout.as_millis();
        let (tx, mut rx) = oneshot::channel();
        lock(&self.shared.answers).insert(request_id.clone(), tx);
        let queued = self.events.send(Pending {
            request_id: request_id.clone(),
            event,
            deadline_ms,
        });
        if queued.is_err() {
            return Err(InvokeError::Exited("the runtime api is closed".into()));
        }
        let deadline = Instant::now() + self.config.timeout;
        loop {
            tokio::select! {
                got = &mut rx => {
                    return got.unwrap_or_else(|_| Err(InvokeError::Exited("no answer".into())));
                }
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
            if let Err(e) = self.check_alive() {
                lock(&self.shared.answers).remove(&request_id);
                return Err(e);
            }
            if Instant::now() > deadline {
                lock(&self.shared.answers).remove(&request_id);
                // Lambda ends an execution environment whose invocation timed out.
                self.kill();
                return Err(InvokeError::Timeout(self.config.timeout));
            }
        }
    }

    /// Ends the process and waits until everything it wrote is read: after this, the output
    /// is complete (lines still in the pipe when an invocation answered included).
    pub fn stop(&self) {
        self.kill();
        let readers: Vec<_> = lock(&self.readers).drain(..).collect();
        for reader in readers {
            let _ = reader.join();
        }
    }

    /// Every line the function wrote so far, both streams in arrival order.
    pub fn output(&self) -> Vec<OutputLine> {
        lock(&self.output).clone()
    }

    pub fn lines(&self, stream: Stream) -> Vec<String> {
        self.output()
            .into_iter()
            .filter(|l| l.stream == stream)
            .map(|l| l.text)
            .collect()
    }

    /// The last lines of output, for failure messages.
    pub fn output_tail(&self) -> String {
        let output = self.output();
        let tail: Vec<String> = output
            .iter()
            .skip(output.len().saturating_sub(30))
            .map(|l| format!("  {:?}: {}", l.stream, l.text))
            .collect();
        format!(
            "\n{} output (last lines):\n{}",
            self.config.name,
            tail.join("\n")
        )
    }

    fn check_alive(&self) -> Result<(), InvokeError> {
        let status = lock(&self.child).try_wait();
        let init_error = lock(&self.shared.init_error).clone();
        match (status, init_error) {
            (_, Some(init)) => Err(InvokeError::Exited(format!(
                "{} failed its init: {init}{}",
                self.config.name,
                self.output_tail()
            ))),
            (Ok(Some(status)), None) => Err(InvokeError::Exited(format!(
                "{} exited with {status}{}",
                self.config.name,
                self.output_tail()
            ))),
            (Ok(None), None) => Ok(()),
            (Err(e), None) => Err(InvokeError::Exited(format!("cannot wait: {e}"))),
        }
    }

    fn kill(&self) {
        let mut child = lock(&self.child);
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        self.kill();
        self.server.abort();
    }
}

/// Reads a child's stream line by line into `into`, on a thread of its own.
fn capture(
    stream: impl Read + Send + 'static,
    kind: Stream,
    into: Arc<Mutex<Vec<OutputLine>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(text) = line else { return };
            lock(&into).push(OutputLine { stream: kind, text });
        }
    })
}

/// A function binary next to the test executable (`<target>/<profile>/deps/<test>-<hash>`
/// runs, the binaries are `<target>/<profile>/<name>`), or how to build it.
pub fn function_binary(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("no current executable: {e}"))?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} has no profile folder", exe.display()))?;
    let binary = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!(
            "the function binary {} is missing: run `cargo build -p ticker -p worker -p \
             reconciler -p api` first (infra/local/test does)",
            binary.display()
        ))
    }
}

/// An API Gateway HTTP API (payload 2.0) event, signed by `principal` with IAM (`None`: no
/// identity), as the api function receives it.
pub fn http_api_event(
    method: &str,
    path_and_query: &str,
    body: Option<&Value>,
    principal: Option<&str>,
    headers: &[(&str, &str)],
) -> Value {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let mut all = serde_json::Map::new();
    all.insert("host".into(), json!("api.example"));
    if body.is_some() {
        all.insert("content-type".into(), json!("application/json"));
    }
    for (name, value) in headers {
        all.insert(name.to_ascii_lowercase(), json!(value));
    }
    let authorizer = match principal {
        Some(arn) => {
            json!({"iam": {"userArn": arn, "accessKey": "AKIDLOCAL", "accountId": "111122223333",
            "callerId": "local", "principalOrgId": null, "userId": "local", "cognitoIdentity": null}})
        }
        None => Value::Null,
    };
    let mut event = json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": all,
        "requestContext": {
            "accountId": "111122223333", "apiId": "local", "domainName": "api.example",
            "domainPrefix": "api",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                     "sourceIp": "127.0.0.1", "userAgent": "cronledger-tests"},
            "requestId": "local", "routeKey": "$default", "stage": "$default",
            "time": "10/Mar/2026:12:00:00 +0000", "timeEpoch": 0,
            "authorizer": authorizer
        },
        "isBase64Encoded": false
    });
    if let Some(body) = body {
        event["body"] = json!(body.to_string());
    }
    event
}
