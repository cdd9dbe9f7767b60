//! `cronledger local` as a user runs it: refused before anything starts when it cannot run,
//! and, when it runs, the examples' webhook job on a non-default port and a clean stop on
//! SIGTERM (summary printed, emulators gone, no temporary folder left).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn example() -> String {
    format!("{}/../examples/schedules.yaml", env!("CARGO_MANIFEST_DIR"))
}

/// The runner as a user starts it: its own emulators (no endpoint in the environment).
fn local(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cronledger"));
    command.arg("local").args(args);
    for name in [
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_SQS",
        "AWS_ENDPOINT_URL_DYNAMODB",
    ] {
        command.env_remove(name);
    }
    command
}

/// The folder the runner with this pid keeps its emulators' PIDs and logs in.
fn state_dir(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("cronledger-local-{pid}"))
}

fn free_port() -> u16 {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    socket.local_addr().unwrap().port()
}

/// Runs to the end, and checks it started nothing: no emulator folder for its pid.
fn refused(command: &mut Command) -> Output {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(!state_dir(pid).exists(), "emulators were started");
    out
}

#[test]
fn a_port_in_use_exits_2_before_anything_starts() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = refused(&mut local(&["-f", &example(), "--port", &port]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "LOCAL_PORT_IN_USE: port {port} is in use (another cronledger local?)"
        )),
        "{err}"
    );
}

#[test]
fn a_bad_identity_is_refused_before_the_emulators_start() {
    let port = free_port().to_string();
    let out = refused(
        local(&["-f", &example(), "--port", &port]).env("CRONLEDGER_LOCAL_IDENTITY", "nobody:root"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("LOCAL_IDENTITY: "), "{err}");
}

/// Lines of the child's stdout as they come.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Reads lines until one satisfies `wanted` (a bound on waiting, not an assertion on time).
fn wait_for(
    lines: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    wanted: impl Fn(&str) -> bool,
) -> String {
    let give_up = Instant::now() + Duration::from_secs(240);
    while let Some(left) = give_up.checked_duration_since(Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if wanted(&line) {
                    return line;
                }
            }
            Err(_) => break,
        }
    }
    panic!("never saw the line; output so far:\n{}", seen.join("\n"));
}

fn alive(pid: &str) -> bool {
    Command::new("kill")
        .args(["-0", pid])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The runner under test, stopped with SIGTERM if the test fails before it does.
struct Runner(Child);

impl Drop for Runner {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            terminate(self.0.id());
            let _ = self.0.wait();
        }
    }
}

fn terminate(pid: u32) {
    let sent = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

#[test]
fn on_another_port_the_examples_webhook_runs_and_sigterm_stops_everything() {
    let port = free_port().to_string();
    let mut runner = Runner(
        local(&["-f", &example(), "--port", &port])
            .env_remove("NO_COLOR")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = runner.0.id();
    let lines = lines_of(&mut runner.0);
    let mut seen = Vec::new();
    wait_for(&lines, &mut seen, |l| l.starts_with("cronledger local:"));
    let emulator_pids: Vec<String> = ["dynamodb", "moto"]
        .iter()
        .filter_map(|name| std::fs::read_to_string(state_dir(pid).join(format!("{name}.pid"))).ok())
        .map(|text| text.trim().to_string())
        .collect();
    assert!(!emulator_pids.is_empty(), "no emulator pid files");

    // The example's job url is the placeholder: it reaches this runner's port.
    let executed = wait_for(&lines, &mut seen, |l| {
        l.contains("webhook executed") && l.contains("cache-refresh")
    });
    assert!(
        !executed.contains('\u{1b}'),
        "colour codes in a pipe: {executed:?}"
    );
    // The worker's one INFO line per attempt says which schedule and which run it is about.
    let started = wait_for(&lines, &mut seen, |l| l.contains("run attempt finished"));
    assert!(
        started.contains("schedule") && started.contains("cache-refresh/RUN#"),
        "{started}"
    );
    // The line starts with what happened, not with its span's name (`INFO message: ...`).
    assert!(
        started.contains(" INFO run attempt finished ") && started.contains("message_id="),
        "{started}"
    );

    terminate(pid);
    let summary = wait_for(&lines, &mut seen, |l| l.starts_with("summary:"));
    let status = runner.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", seen.join("\n"));
    assert!(!summary.contains("webhook executions 0"), "{summary}");
    assert!(!summary.contains("FAILED"), "{summary}");
    for emulator in &emulator_pids {
        assert!(!alive(emulator), "emulator {emulator} still running");
    }
    assert!(!state_dir(pid).exists(), "temporary folder left behind");
}
