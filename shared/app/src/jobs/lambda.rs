//! `lambda` jobs: a synchronous Invoke of the named function with the run's context.
//!
//! The client never retries on its own: a retried Invoke after a lost response would run the
//! function twice outside the ledger. Retries are the worker's (a new attempt under a new
//! lease epoch, with the run's idempotency key in the payload), bounded by `max_attempts`.

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_lambda::config::retry::RetryConfig;
use aws_sdk_lambda::error::ProvideErrorMetadata;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;

use super::{JobFailure, LambdaInvoker};

/// Invokes through the Lambda API (endpoint from the SDK configuration, so `AWS_ENDPOINT_URL`
/// applies as everywhere else).
pub struct SdkLambdaInvoker {
    client: aws_sdk_lambda::Client,
}

impl SdkLambdaInvoker {
    pub fn new(sdk: &SdkConfig) -> SdkLambdaInvoker {
        let config = aws_sdk_lambda::config::Builder::from(sdk)
            .retry_config(RetryConfig::disabled())
            .build();
        SdkLambdaInvoker::from_client(aws_sdk_lambda::Client::from_conf(config))
    }

    pub fn from_client(client: aws_sdk_lambda::Client) -> SdkLambdaInvoker {
        SdkLambdaInvoker { client }
    }
}

#[async_trait]
impl LambdaInvoker for SdkLambdaInvoker {
    async fn invoke(
        &self,
        function: &str,
        payload: &serde_json::Value,
    ) -> Result<serde_json::Value, JobFailure> {
        let body = serde_json::to_vec(payload)
            .map_err(|e| JobFailure::permanent("JOB_PAYLOAD_REJECTED", e.to_string()))?;
        let sent = self
            .client
            .invoke()
            .function_name(function)
            .invocation_type(InvocationType::RequestResponse)
            .payload(Blob::new(body))
            .send()
            .await;
        match sent {
            Ok(out) => answer_of(
                function,
                out.function_error(),
                out.payload().map(|b| b.as_ref()),
            ),
            Err(e) => Err(match e.as_service_error() {
                Some(service) => invoke_failure(function, service.code(), service.message()),
                // No answer from Lambda (connection, timeout): the function may or may not
                // have run; the next attempt carries the same idempotency key.
                None => JobFailure::retryable(
                    "JOB_TARGET_UNREACHABLE",
                    format!("invoking {function}: {e}"),
                ),
            }),
        }
    }
}

/// What an Invoke that Lambda answered means for the attempt. A function error (the
/// function threw, timed out or ran out of memory) is worth another attempt, as an HTTP
/// target's 5xx is.
fn answer_of(
    function: &str,
    function_error: Option<&str>,
    payload: Option<&[u8]>,
) -> Result<serde_json::Value, JobFailure> {
    let answer: serde_json::Value = payload
        .filter(|p| !p.is_empty())
        .and_then(|p| serde_json::from_slice(p).ok())
        .unwrap_or(serde_json::Value::Null);
    let Some(kind) = function_error else {
        return Ok(answer);
    };
    let field = |name: &str| answer.get(name).and_then(serde_json::Value::as_str);
    let what = match (field("errorType"), field("errorMessage")) {
        (Some(t), Some(m)) => format!("{t}: {m}"),
        (None, Some(m)) => m.to_string(),
        (Some(t), None) => t.to_string(),
        (None, None) => format!("{kind} error"),
    };
    Err(JobFailure::retryable(
        "JOB_FUNCTION_ERROR",
        format!("{function}: {what}"),
    ))
}

/// An Invoke Lambda refused. Whether another attempt can help follows the API's error code:
/// a missing function, a rejected payload or a missing permission stay so; throttling and
/// Lambda's own faults pass.
fn invoke_failure(function: &str, code: Option<&str>, message: Option<&str>) -> JobFailure {
    let code_text = code.unwrap_or("unknown");
    let detail = format!(
        "invoking {function}: {code_text}: {}",
        message.unwrap_or("no message")
    );
    match code_text {
        "ResourceNotFoundException" => JobFailure::permanent("JOB_TARGET_NOT_FOUND", detail),
        "AccessDeniedException" => JobFailure::permanent("JOB_TARGET_FORBIDDEN", detail),
        "InvalidRequestContentException"
        | "RequestTooLargeException"
        | "InvalidParameterValueException" => JobFailure::permanent("JOB_PAYLOAD_REJECTED", detail),
        "TooManyRequestsException" => JobFailure::retryable("JOB_TARGET_THROTTLED", detail),
        _ => JobFailure::retryable("JOB_TARGET_FAILED", detail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::Path;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use axum::Router;
    use serde_json::json;

    /// A stand-in for the Lambda API's Invoke (`POST /2015-03-31/functions/{name}/invocations`):
    /// `echo` answers with what it was sent, `throws` answers with a function error,
    /// `missing` is not there, `busy` is throttled.
    async fn fake_lambda() -> String {
        async fn invoke(Path(name): Path<String>, body: String) -> (StatusCode, HeaderMap, String) {
            let mut headers = HeaderMap::new();
            let error = |status, kind: &str| {
                let mut h = HeaderMap::new();
                h.insert("x-amzn-errortype", kind.parse().expect("header"));
                (status, h, json!({ "message": "no" }).to_string())
            };
            match name.as_str() {
                "echo" => (StatusCode::OK, headers, body),
                "throws" => {
                    headers.insert("x-amz-function-error", "Unhandled".parse().expect("header"));
                    let thrown = json!({ "errorType": "Boom", "errorMessage": "it broke" });
                    (StatusCode::OK, headers, thrown.to_string())
                }
                "missing" => error(StatusCode::NOT_FOUND, "ResourceNotFoundException"),
                _ => error(StatusCode::TOO_MANY_REQUESTS, "TooManyRequestsException"),
            }
        }
        let app = Router::new().route("/2015-03-31/functions/{name}/invocations", post(invoke));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn invoker(endpoint: &str) -> SdkLambdaInvoker {
        let sdk = SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_lambda::config::SharedCredentialsProvider::new(
                aws_sdk_lambda::config::Credentials::new("AKID", "SECRET", None, None, "test"),
            ))
            .endpoint_url(endpoint)
            .build();
        SdkLambdaInvoker::new(&sdk)
    }

    #[tokio::test]
    async fn invokes_through_the_lambda_api_and_classifies_its_answers() {
        let lambda = invoker(&fake_lambda().await);
        let sent = json!({ "context": { "attempt": 1 }, "payload": { "region": "eu" } });
        assert_eq!(lambda.invoke("echo", &sent).await, Ok(sent.clone()));
        let thrown = lambda.invoke("throws", &sent).await.unwrap_err();
        assert_eq!(
            thrown,
            JobFailure::retryable("JOB_FUNCTION_ERROR", "throws: Boom: it broke")
        );
        let missing = lambda.invoke("missing", &sent).await.unwrap_err();
        assert!(matches!(missing, JobFailure::Permanent { .. }));
        assert_eq!(missing.code(), "JOB_TARGET_NOT_FOUND");
        let busy = lambda.invoke("busy", &sent).await.unwrap_err();
        assert!(matches!(busy, JobFailure::Retryable { .. }));
        assert_eq!(busy.code(), "JOB_TARGET_THROTTLED");
    }

    #[test]
    fn an_answer_is_the_functions_json_or_null() {
        let ok = answer_of("f", None, Some(br#"{"count": 3}"#));
        assert_eq!(ok, Ok(json!({ "count": 3 })));
        assert_eq!(answer_of("f", None, None), Ok(serde_json::Value::Null));
        assert_eq!(
            answer_of("f", None, Some(b"not json")),
            Ok(serde_json::Value::Null)
        );
    }

    #[test]
    fn a_function_error_is_retryable_and_names_the_error() {
        let thrown = br#"{"errorType": "ValueError", "errorMessage": "no rates for 2026-03-01"}"#;
        let failure = answer_of("settle", Some("Unhandled"), Some(thrown)).unwrap_err();
        assert_eq!(
            failure,
            JobFailure::retryable(
                "JOB_FUNCTION_ERROR",
                "settle: ValueError: no rates for 2026-03-01"
            )
        );
        let bare = answer_of("settle", Some("Unhandled"), None).unwrap_err();
        assert_eq!(bare.message(), "settle: Unhandled error");
    }

    #[test]
    fn refusals_are_permanent_unless_another_attempt_can_pass() {
        let classify = |code: &str| {
            let f = invoke_failure("f", Some(code), Some("m"));
            (
                f.code().to_string(),
                matches!(f, JobFailure::Permanent { .. }),
            )
        };
        let table = [
            ("ResourceNotFoundException", "JOB_TARGET_NOT_FOUND", true),
            ("AccessDeniedException", "JOB_TARGET_FORBIDDEN", true),
            ("RequestTooLargeException", "JOB_PAYLOAD_REJECTED", true),
            ("TooManyRequestsException", "JOB_TARGET_THROTTLED", false),
            ("ServiceException", "JOB_TARGET_FAILED", false),
        ];
        for (code, expected, permanent) in table {
            assert_eq!(classify(code), (expected.to_string(), permanent), "{code}");
        }
        assert!(matches!(
            invoke_failure("f", None, None),
            JobFailure::Retryable { .. }
        ));
    }
}
