//! Api Lambda: the control plane's axum router behind API Gateway (HTTP API payload 2.0 or
//! REST), and the firing of one-off runs. The logic is `cronledger_app::api`.
//!
//! One function takes two event shapes: an API Gateway proxy event (turned into an HTTP
//! request with `lambda_http`'s conversion, the caller identity read from its request
//! context), and `{"run_at": {...}}` from a one-time EventBridge Scheduler schedule.

use std::sync::Arc;

use axum::body::Body;
use cronledger_app::api::system::{SchedulerControl, WorkerIntake};
use cronledger_app::api::{ApiConfig, AuthConfig, Caller, CursorKey, RequestId, RunAtEvent};
use cronledger_app::deployment::Deployment;
use cronledger_app::jobs::http_auth::SECRET_PREFIX_ENV;
use cronledger_app::jobs::target_fence::loopback_allowed_by_env;
use cronledger_app::wiring::{Components, Deps};
use cronledger_aws::config::load_sdk_config;
use cronledger_aws::AwsSettings;
use http_body_util::BodyExt;
use lambda_http::request::{LambdaRequest, RequestContext};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::{json, Value};
use tower::ServiceExt;

/// A comma-separated list from the environment.
fn list(name: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The api's limits: the code's defaults with what the template sets; an http job's secret
/// must be under the prefix the worker may read, and its target where the worker may call.
fn api_config(table: &str) -> Result<ApiConfig, Error> {
    let mut config = ApiConfig {
        cursor_key: CursorKey::from_env(table),
        ..ApiConfig::from_lookup(|name| std::env::var(name).ok())?
    };
    config.rules.allow_loopback_targets = loopback_allowed_by_env();
    config.rules.secret_name_prefix = std::env::var(SECRET_PREFIX_ENV)
        .ok()
        .filter(|prefix| !prefix.trim().is_empty());
    Ok(config)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    cronledger_app::logging::init_function_logs();
    let deployment = Deployment::from_env()?;
    let connected = deployment.connect().await?;
    let sdk = load_sdk_config(&AwsSettings::default()).await;
    let mut automatic = list("CRONLEDGER_TICKER_SCHEDULES");
    automatic.extend(list("CRONLEDGER_RECONCILER_SCHEDULES"));
    let control = SchedulerControl {
        client: aws_sdk_scheduler::Client::new(&sdk),
        group: std::env::var("CRONLEDGER_TICKER_SCHEDULE_GROUP").ok(),
        automatic,
        target_arn: std::env::var("CRONLEDGER_API_FUNCTION_ARN").ok(),
        role_arn: std::env::var("CRONLEDGER_SCHEDULER_ROLE_ARN").ok(),
        // The kill switch disables the worker's event source mappings too.
        intake: std::env::var("CRONLEDGER_WORKER_FUNCTION")
            .ok()
            .map(|function| WorkerIntake {
                client: aws_sdk_lambda::Client::new(&sdk),
                function,
            }),
    };
    let api = Components::build(Deps::deployed(&connected)).api(
        Some(Arc::new(control)),
        None,
        AuthConfig::from_env()?,
        api_config(&deployment.table)?,
    );
    let router = api.router();
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let (api, router) = (api.clone(), router.clone());
        async move {
            if event.payload.get("run_at").is_some() {
                let fire: RunAtEvent = serde_json::from_value(event.payload)?;
                let done = api.fire_run_at(&fire).await.map_err(|e| e.to_string())?;
                tracing::info!(run = ?done.get("run").and_then(|r| r.get("run_id")), "one-off run fired");
                return Ok::<Value, Error>(done);
            }
            http(router, event.payload, event.context.request_id).await
        }
    }))
    .await
}

/// One API Gateway proxy event through the router; the answer in the proxy response shape
/// (the same fields serve REST and HTTP APIs). The request id in answers and logs is API
/// Gateway's, else the Lambda invocation's.
async fn http(router: axum::Router, payload: Value, invocation: String) -> Result<Value, Error> {
    let lambda: LambdaRequest = serde_json::from_value(payload)?;
    let req: lambda_http::Request = lambda.into();
    let (mut parts, body) = req.into_parts();
    let context = parts
        .extensions
        .get::<RequestContext>()
        .and_then(|ctx| serde_json::to_value(ctx).ok());
    let gateway_id = context
        .as_ref()
        .and_then(|ctx| ctx.get("requestId"))
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_string);
    parts
        .extensions
        .insert(RequestId(gateway_id.unwrap_or(invocation)));
    if let Some(caller) = context.as_ref().and_then(Caller::from_request_context) {
        parts.extensions.insert(caller);
    }
    let req = axum::http::Request::from_parts(parts, Body::from(body.to_vec()));
    let resp = router.oneshot(req).await?;
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await?.to_bytes();
    let mut headers = serde_json::Map::new();
    for (name, value) in &parts.headers {
        if let Ok(v) = value.to_str() {
            headers.insert(name.as_str().to_string(), json!(v));
        }
    }
    Ok(json!({
        "statusCode": parts.status.as_u16(),
        "headers": headers,
        "body": String::from_utf8_lossy(&bytes),
        "isBase64Encoded": false,
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use cronledger_app::deployment::Connected;
    use cronledger_aws::{AwsClients, DynamoLedger, RequestMeter, SqsLanes};

    use super::*;

    /// A router whose clients are never called: authorization answers before any I/O.
    fn router() -> axum::Router {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .build();
        let clients = AwsClients::from_sdk_config(&sdk, RequestMeter::new(), None);
        let connected = Connected {
            ledger: Arc::new(DynamoLedger::new(&clients, "t", 1)),
            lanes: Arc::new(SqsLanes::new(clients.sqs.clone(), BTreeMap::new())),
            clients,
        };
        Components::build(Deps::deployed(&connected))
            .api(None, None, AuthConfig::default(), ApiConfig::default())
            .router()
    }

    fn event(authorizer: Value) -> Value {
        event_at("/v1/schedules", authorizer)
    }

    fn event_at(path: &str, authorizer: Value) -> Value {
        json!({
            "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
            "headers": {"host": "api.example"},
            "requestContext": {"accountId": "1", "apiId": "a", "domainName": "api.example", "domainPrefix": "api",
                "http": {"method": "GET", "path": path, "protocol": "HTTP/1.1", "sourceIp": "10.0.0.1", "userAgent": "t"},
                "requestId": "r", "routeKey": "$default", "stage": "$default", "time": "10/Mar/2026:12:00:00 +0000", "timeEpoch": 0,
                "authorizer": authorizer},
            "isBase64Encoded": false
        })
    }

    #[tokio::test]
    async fn the_caller_comes_from_the_request_context() {
        let with_iam = event(
            json!({"iam": {"userArn": "arn:aws:iam::1:user/nobody", "accessKey": "k", "accountId": "1", "callerId": "c", "principalOrgId": null, "userId": "u", "cognitoIdentity": null}}),
        );
        let answer = http(router(), with_iam, "inv-1".into())
            .await
            .expect("an answer");
        // Identified but without a role: 403, not 401.
        assert_eq!(answer["statusCode"], 403, "{answer}");
        let body: Value =
            serde_json::from_str(answer["body"].as_str().unwrap_or("")).unwrap_or_default();
        assert_eq!(body["code"], "FORBIDDEN");
        let anonymous = http(router(), event(json!(null)), "inv-2".into())
            .await
            .expect("an answer");
        assert_eq!(anonymous["statusCode"], 401, "{anonymous}");
    }

    /// The console's public routes answer without an identity (API Gateway lets them through
    /// unauthenticated); the data routes behind them still do not.
    #[tokio::test]
    async fn the_console_shell_is_served_without_an_identity_and_the_data_is_not() {
        let shell = http(
            router(),
            event_at("/console/schedules/x", json!(null)),
            "i".into(),
        )
        .await
        .expect("an answer");
        assert_eq!(shell["statusCode"], 200, "{shell}");
        assert!(shell["body"]
            .as_str()
            .unwrap_or("")
            .contains("<!doctype html>"));
        let config = http(
            router(),
            event_at("/console/config.json", json!(null)),
            "i".into(),
        )
        .await
        .expect("an answer");
        assert_eq!(config["body"], r#"{"auth":"local"}"#, "{config}");
        let whoami = http(router(), event_at("/v1/whoami", json!(null)), "i".into())
            .await
            .expect("an answer");
        assert_eq!(whoami["statusCode"], 401, "{whoami}");
    }
}
