//! Throttling and 5xx answers are retried with backoff by the SDK configuration the adapters
//! build (`AwsSettings`), and the meter sees every attempt. A tiny HTTP server on 127.0.0.1
//! plays DynamoDB with a script of answers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cronledger_aws::prelude::*;
use cronledger_aws::{AwsClients, AwsSettings, DynamoLedger, StoreError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const SERVER_ERROR: (u16, &str) = (
    500,
    r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"boom"}"#,
);
const THROTTLED: (u16, &str) = (
    400,
    r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow down"}"#,
);
const INVALID: (u16, &str) = (
    400,
    r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"bad"}"#,
);
const EMPTY_GET: (u16, &str) = (200, "{}");

/// Serves the script's answers in order (the last one repeats); counts requests.
async fn scripted_server(script: Vec<(u16, &'static str)>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let (status, body) = script[n.min(script.len() - 1)];
            tokio::spawn(async move {
                if read_request(&mut socket).await.is_none() {
                    return;
                }
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/x-amz-json-1.0\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, hits)
}

/// Reads one request (headers, then Content-Length bytes of body).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = socket.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return Some(());
            }
        }
    }
}

async fn ledger_at(url: &str, max_attempts: u32) -> (AwsClients, DynamoLedger) {
    cronledger_tests::require_emulator();
    let settings = AwsSettings {
        max_attempts,
        initial_backoff: Duration::from_millis(20),
        endpoint_url: Some(url.to_string()),
        ..AwsSettings::default()
    };
    let clients = AwsClients::from_env(&settings).await;
    let ledger = DynamoLedger::new(&clients, "retry-table", 1);
    (clients, ledger)
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried_until_an_answer_comes() {
    let (url, hits) = scripted_server(vec![SERVER_ERROR, THROTTLED, SERVER_ERROR, EMPTY_GET]).await;
    let (clients, ledger) = ledger_at(&url, 5).await;

    // The fourth answer is "no such item": the store call got through its retries.
    let err = ledger.get_schedule("s").await.unwrap_err();
    assert!(matches!(err, StoreError::ScheduleNotFound(_)), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 4, "three retries were sent");

    let usage = clients.meter.snapshot().scope("get_schedule");
    assert_eq!(
        (usage.calls, usage.attempts),
        (1, 4),
        "the meter counts each attempt"
    );
}

#[tokio::test]
async fn retries_stop_at_the_configured_attempts_with_a_typed_error() {
    let (url, hits) = scripted_server(vec![SERVER_ERROR]).await;
    let (clients, ledger) = ledger_at(&url, 3).await;

    let err = ledger.get_schedule("s").await.unwrap_err();
    assert_eq!(err.code(), "STORE_REQUEST_FAILED", "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    assert_eq!(
        clients
            .meter
            .snapshot()
            .operation("DynamoDB.GetItem")
            .attempts,
        3
    );
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let (url, hits) = scripted_server(vec![INVALID, EMPTY_GET]).await;
    let (_clients, ledger) = ledger_at(&url, 5).await;

    let err = ledger.get_schedule("s").await.unwrap_err();
    assert_eq!(err.code(), "STORE_REQUEST_FAILED", "{err}");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "a validation error is final"
    );
}
