//! Api Lambda: the control plane's axum router behind API Gateway (HTTP API payload 2.0 or
//! REST), and the firing of one-off runs. The logic is `cronledger_app::api`.
//!
//! One function takes two event shapes: an API Gateway proxy event (turned into an HTTP
//! request with `lambda_http`'s conversion, the caller's identity read from its typed request
//! context, the response built in the payload version's type), and `{"run_at": {...}}` from
//! a one-time EventBridge Scheduler schedule.

use std::sync::Arc;

use axum::body::Body;
use cronledger_app::api::auth::Identity;
use cronledger_app::api::system::{SchedulerControl, WorkerIntake};
use cronledger_app::api::{Api, ApiConfig, AuthConfig, Caller, CursorKey, RequestId, RunAtEvent};
use cronledger_app::deployment::Deployment;
use cronledger_app::jobs::http_auth::SECRET_PREFIX_ENV;
use cronledger_app::jobs::target_fence::loopback_allowed_by_env;
use cronledger_app::wiring::{Components, Deps};
use cronledger_aws::config::load_sdk_config;
use cronledger_aws::AwsSettings;
use http_body_util::{BodyExt, Full};
use lambda_http::aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayV2httpResponse};
use lambda_http::http::header::SET_COOKIE;
use lambda_http::http::{HeaderMap, HeaderValue, Response};
use lambda_http::request::{LambdaRequest, RequestContext};
use lambda_http::IntoResponse;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde::de::{Error as _, IgnoredAny};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
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
    automatic.extend(list("CRONLEDGER_AUDITOR_SCHEDULES"));
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
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| {
        handle(api.clone(), router.clone(), event)
    }))
    .await
}

/// What the function is invoked with.
#[derive(Debug)]
enum Event {
    /// `{"run_at": {...}}`: a one-time EventBridge Scheduler schedule firing.
    RunAt(RunAtEvent),
    /// An API Gateway proxy event: REST (payload 1.0) or HTTP API (payload 2.0).
    Gateway(Box<LambdaRequest>),
}

/// By the event's shape: one with a `run_at` is a one-off run's. (Not `#[serde(untagged)]`:
/// `LambdaRequest` reads its event as raw JSON, which an untagged enum's buffer cannot give;
/// and each shape keeps its own error message.)
impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Event, D::Error> {
        #[derive(Deserialize)]
        struct Shape {
            run_at: Option<IgnoredAny>,
        }
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        let shape: Shape = serde_json::from_str(raw.get()).map_err(D::Error::custom)?;
        match shape.run_at {
            Some(_) => serde_json::from_str(raw.get()).map(Event::RunAt),
            None => serde_json::from_str(raw.get()).map(|req| Event::Gateway(Box::new(req))),
        }
        .map_err(D::Error::custom)
    }
}

/// What the function answers: the fired run, or the HTTP response in the shape of the
/// payload version its request came in.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Answer {
    Fired(Value),
    Rest(ApiGatewayProxyResponse),
    Http(ApiGatewayV2httpResponse),
}

async fn handle(
    api: Api,
    router: axum::Router,
    event: LambdaEvent<Event>,
) -> Result<Answer, Error> {
    match event.payload {
        Event::RunAt(fire) => {
            let done = api.fire_run_at(&fire).await.map_err(|e| e.to_string())?;
            tracing::info!(run = %done.run.run_id, created = done.created, "one-off run fired");
            Ok(Answer::Fired(serde_json::to_value(done)?))
        }
        Event::Gateway(request) => http(router, *request, event.context.request_id).await,
    }
}

/// One API Gateway proxy event through the router. The request id in answers and logs is
/// API Gateway's, else the Lambda invocation's; the caller is the identity API Gateway
/// authenticated.
async fn http(
    router: axum::Router,
    request: LambdaRequest,
    invocation: String,
) -> Result<Answer, Error> {
    let req: lambda_http::Request = request.into();
    let (mut parts, body) = req.into_parts();
    let front = Front::of(parts.extensions.get::<RequestContext>());
    parts
        .extensions
        .insert(RequestId(front.request_id.unwrap_or(invocation)));
    if let Some(identity) = front.identity {
        parts.extensions.insert(Caller::from(identity));
    }
    let req = axum::http::Request::from_parts(parts, Body::from(body.to_vec()));
    let resp = router.oneshot(req).await?;
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await?.to_bytes();
    // Text or binary (base64) by the response's content type and encoding.
    let resp = Response::from_parts(parts, Full::new(bytes))
        .into_response()
        .await;
    Ok(front.payload.answer(resp))
}

/// The payload version of API Gateway's proxy integration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Payload {
    /// 1.0: REST APIs.
    Rest,
    /// 2.0: HTTP APIs.
    Http,
}

/// What an event's request context says: its payload version, request id and caller.
#[derive(Debug)]
struct Front {
    payload: Payload,
    request_id: Option<String>,
    identity: Option<Identity>,
}

impl Front {
    fn of(context: Option<&RequestContext>) -> Front {
        let (payload, request_id, identity) = match context {
            Some(RequestContext::ApiGatewayV2(context)) => (
                Payload::Http,
                context.request_id.as_ref(),
                Identity::from_http_api(context),
            ),
            Some(RequestContext::ApiGatewayV1(context)) => (
                Payload::Rest,
                context.request_id.as_ref(),
                Identity::from_rest_api(context),
            ),
            _ => (Payload::Rest, None, None),
        };
        Front {
            payload,
            request_id: request_id.filter(|id| !id.is_empty()).cloned(),
            identity,
        }
    }
}

impl Payload {
    /// The response as API Gateway reads it. A header value that is not text is left out
    /// (the answer is JSON).
    fn answer(self, resp: Response<lambda_http::Body>) -> Answer {
        let (parts, body) = resp.into_parts();
        let status_code = i64::from(parts.status.as_u16());
        let is_base64_encoded = matches!(body, lambda_http::Body::Binary(_));
        let body = (!matches!(body, lambda_http::Body::Empty)).then_some(body);
        let mut headers = HeaderMap::new();
        for (name, value) in &parts.headers {
            if value.to_str().is_ok() {
                headers.append(name, value.clone());
            }
        }
        match self {
            Payload::Rest => {
                let mut answer = ApiGatewayProxyResponse::default();
                answer.status_code = status_code;
                answer.body = body;
                answer.is_base64_encoded = is_base64_encoded;
                // Every value of every header; `headers` stays empty, as API Gateway would
                // send the values in both twice.
                answer.multi_value_headers = headers;
                Answer::Rest(answer)
            }
            Payload::Http => {
                let mut answer = ApiGatewayV2httpResponse::default();
                answer.status_code = status_code;
                answer.body = body;
                answer.is_base64_encoded = is_base64_encoded;
                // Payload 2.0 has one value per header: cookies go in `cookies`, and the
                // values of a repeated header are joined with commas.
                answer.cookies = headers
                    .get_all(SET_COOKIE)
                    .iter()
                    .filter_map(|value| value.to_str().ok())
                    .map(str::to_string)
                    .collect();
                headers.remove(SET_COOKIE);
                for name in headers.keys() {
                    let values: Vec<&str> = headers
                        .get_all(name)
                        .iter()
                        .filter_map(|value| value.to_str().ok())
                        .collect();
                    if let Ok(joined) = HeaderValue::from_str(&values.join(", ")) {
                        answer.headers.insert(name, joined);
                    }
                }
                Answer::Http(answer)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use cronledger_app::deployment::Connected;
    use cronledger_aws::{AwsClients, DynamoLedger, RequestMeter, SqsLanes};
    use serde_json::json;

    use super::*;

    /// A router whose clients are never called: authorization answers before any I/O.
    fn router() -> axum::Router {
        router_with(AuthConfig::default())
    }

    fn router_with(auth: AuthConfig) -> axum::Router {
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
            .api(None, None, auth, ApiConfig::default())
            .router()
    }

    /// The event as the runtime reads it (from the invocation's JSON text).
    fn parse(event: &Value) -> Result<Event, serde_json::Error> {
        serde_json::from_str(&event.to_string())
    }

    /// One proxy event through the router; the answer as the runtime sends it back.
    async fn call(router: axum::Router, event: Value) -> Value {
        let Ok(Event::Gateway(request)) = parse(&event) else {
            panic!("not a proxy event: {event}");
        };
        let answer = http(router, *request, "inv-1".into())
            .await
            .expect("an answer");
        serde_json::to_value(answer).expect("the answer is JSON")
    }

    fn body(answer: &Value) -> Value {
        serde_json::from_str(answer["body"].as_str().unwrap_or("")).unwrap_or_default()
    }

    fn event(authorizer: Value) -> Value {
        event_at("/v1/schedules", authorizer)
    }

    /// An HTTP API (payload 2.0) event.
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

    /// A REST API (payload 1.0) event.
    fn rest_event(path: &str, identity: Value, authorizer: Value) -> Value {
        json!({
            "resource": "/{proxy+}", "path": path, "httpMethod": "GET",
            "headers": {"Host": "api.example"}, "multiValueHeaders": {"Host": ["api.example"]},
            "queryStringParameters": null, "multiValueQueryStringParameters": null,
            "pathParameters": {"proxy": path.trim_start_matches('/')}, "stageVariables": null,
            "requestContext": {"accountId": "1", "resourceId": "x", "stage": "$default", "requestId": "r1",
                "identity": identity, "resourcePath": "/{proxy+}", "authorizer": authorizer,
                "httpMethod": "GET", "apiId": "a", "path": path, "protocol": "HTTP/1.1",
                "requestTime": "10/Mar/2026:12:00:00 +0000", "requestTimeEpoch": 0},
            "body": null, "isBase64Encoded": false
        })
    }

    fn iam(arn: &str) -> Value {
        json!({"iam": {"userArn": arn, "accessKey": "k", "accountId": "1", "callerId": "c", "principalOrgId": null, "userId": "u", "cognitoIdentity": null}})
    }

    #[tokio::test]
    async fn the_caller_comes_from_the_request_context() {
        let answer = call(router(), event(iam("arn:aws:iam::1:user/nobody"))).await;
        // Identified but without a role: 403, not 401.
        assert_eq!(answer["statusCode"], 403, "{answer}");
        assert_eq!(body(&answer)["code"], "FORBIDDEN");
        let anonymous = call(router(), event(json!(null))).await;
        assert_eq!(anonymous["statusCode"], 401, "{anonymous}");
    }

    /// The console's public routes answer without an identity (API Gateway lets them through
    /// unauthenticated); the data routes behind them still do not.
    #[tokio::test]
    async fn the_console_shell_is_served_without_an_identity_and_the_data_is_not() {
        let shell = call(router(), event_at("/console/schedules/x", json!(null))).await;
        assert_eq!(shell["statusCode"], 200, "{shell}");
        assert!(shell["body"]
            .as_str()
            .unwrap_or("")
            .contains("<!doctype html>"));
        let config = call(router(), event_at("/console/config.json", json!(null))).await;
        assert_eq!(config["body"], r#"{"auth":"local"}"#, "{config}");
        let whoami = call(router(), event_at("/v1/whoami", json!(null))).await;
        assert_eq!(whoami["statusCode"], 401, "{whoami}");
    }

    #[tokio::test]
    async fn http_api_callers_iam_and_jwt_with_groups() {
        let auth = AuthConfig::parse(
            r#"{"roles": {"arn:aws:sts::1:assumed-role/Ops/*": "operator", "group:admins": "admin"}}"#,
        )
        .expect("an auth config");
        let ops = call(
            router_with(auth.clone()),
            event_at("/v1/whoami", iam("arn:aws:sts::1:assumed-role/Ops/s1")),
        )
        .await;
        assert_eq!(ops["statusCode"], 200, "{ops}");
        assert_eq!(
            body(&ops),
            json!({"principal": "arn:aws:sts::1:assumed-role/Ops/s1", "role": "operator", "groups": []})
        );
        // API Gateway passes a list claim as `[a b]`.
        let jwt = json!({"jwt": {"claims": {"sub": "u1", "cognito:groups": "[ops admins]", "exp": "1773144000"}, "scopes": null}});
        let admin = call(router_with(auth), event_at("/v1/whoami", jwt)).await;
        assert_eq!(admin["statusCode"], 200, "{admin}");
        assert_eq!(
            body(&admin),
            json!({"principal": "u1", "role": "admin", "groups": ["ops", "admins"]})
        );
    }

    #[tokio::test]
    async fn rest_api_callers_iam_cognito_and_none() {
        let auth = AuthConfig::parse(
            r#"{"roles": {"arn:aws:iam::1:user/alice": "viewer", "group:admins": "admin"}}"#,
        )
        .expect("an auth config");
        let alice = json!({"userArn": "arn:aws:iam::1:user/alice", "caller": "AIDA1", "sourceIp": "10.0.0.1"});
        let answer = call(
            router_with(auth.clone()),
            rest_event("/v1/whoami", alice, json!(null)),
        )
        .await;
        assert_eq!(answer["statusCode"], 200, "{answer}");
        assert_eq!(
            body(&answer),
            json!({"principal": "arn:aws:iam::1:user/alice", "role": "viewer", "groups": []})
        );
        let cognito = json!({"claims": {"sub": "u1", "cognito:groups": ["ops", "admins"]}});
        let answer = call(
            router_with(auth.clone()),
            rest_event("/v1/whoami", json!({"sourceIp": "10.0.0.1"}), cognito),
        )
        .await;
        assert_eq!(
            body(&answer),
            json!({"principal": "u1", "role": "admin", "groups": ["ops", "admins"]})
        );
        let anonymous = call(
            router_with(auth),
            rest_event("/v1/whoami", json!({"sourceIp": "10.0.0.1"}), json!(null)),
        )
        .await;
        assert_eq!(anonymous["statusCode"], 401, "{anonymous}");
        assert_eq!(body(&anonymous)["code"], "UNAUTHENTICATED", "{anonymous}");
    }

    /// The request id in an answer is API Gateway's, else the invocation's.
    #[tokio::test]
    async fn the_request_id_is_api_gateways_else_the_invocations() {
        let answer = call(router(), event(json!(null))).await;
        assert_eq!(answer["headers"]["x-request-id"], "r", "{answer}");
        let mut unnamed = event(json!(null));
        unnamed["requestContext"]["requestId"] = json!("");
        let answer = call(router(), unnamed).await;
        assert_eq!(answer["headers"]["x-request-id"], "inv-1", "{answer}");
    }

    /// Through the router: text (JSON) in the shape of each payload version.
    #[tokio::test]
    async fn the_answer_is_in_the_shape_of_the_payload_version() {
        let http = call(router(), event_at("/console/config.json", json!(null))).await;
        assert_eq!(http["isBase64Encoded"], false, "{http}");
        assert_eq!(
            http["headers"]["content-type"], "application/json",
            "{http}"
        );
        assert_eq!(http["headers"]["x-request-id"], "r", "{http}");
        assert_eq!(http["cookies"], json!([]), "{http}");
        let rest = call(
            router(),
            rest_event("/console/config.json", json!({}), json!(null)),
        )
        .await;
        assert_eq!(rest["statusCode"], 200, "{rest}");
        assert_eq!(rest["body"], r#"{"auth":"local"}"#, "{rest}");
        assert_eq!(rest["isBase64Encoded"], false, "{rest}");
        assert_eq!(rest["headers"], json!({}), "{rest}");
        assert_eq!(
            rest["multiValueHeaders"]["content-type"],
            json!(["application/json"]),
            "{rest}"
        );
        assert_eq!(
            rest["multiValueHeaders"]["x-request-id"],
            json!(["r1"]),
            "{rest}"
        );
    }

    /// Binary bodies in base64, repeated headers and cookies, an empty body.
    #[tokio::test]
    async fn binary_bodies_and_repeated_headers_in_both_payload_versions() {
        let response = || {
            Response::builder()
                .status(200)
                .header("content-type", "image/png")
                .header("vary", "accept")
                .header("vary", "origin")
                .header("set-cookie", "a=1")
                .header("set-cookie", "b=2")
                .header(
                    "x-opaque",
                    HeaderValue::from_bytes(b"caf\xc3\xa9").expect("a value"),
                )
                .body(Full::new(axum::body::Bytes::from_static(b"\x89PNG\0")))
                .expect("a response")
                .into_response()
        };
        let http = serde_json::to_value(Payload::Http.answer(response().await)).expect("JSON");
        assert_eq!(http["statusCode"], 200);
        assert_eq!(http["isBase64Encoded"], true, "{http}");
        assert_eq!(http["body"], "iVBORwA=", "{http}");
        assert_eq!(http["headers"]["vary"], "accept, origin", "{http}");
        assert_eq!(http["headers"]["content-type"], "image/png", "{http}");
        assert_eq!(http["headers"].get("set-cookie"), None, "{http}");
        assert_eq!(http["headers"].get("x-opaque"), None, "{http}");
        assert_eq!(http["cookies"], json!(["a=1", "b=2"]), "{http}");
        let rest = serde_json::to_value(Payload::Rest.answer(response().await)).expect("JSON");
        assert_eq!(rest["isBase64Encoded"], true, "{rest}");
        assert_eq!(rest["body"], "iVBORwA=", "{rest}");
        assert_eq!(rest["headers"], json!({}), "{rest}");
        assert_eq!(
            rest["multiValueHeaders"]["vary"],
            json!(["accept", "origin"]),
            "{rest}"
        );
        assert_eq!(
            rest["multiValueHeaders"]["set-cookie"],
            json!(["a=1", "b=2"]),
            "{rest}"
        );
        assert_eq!(rest["multiValueHeaders"].get("x-opaque"), None, "{rest}");
        assert_eq!(rest.get("cookies"), None, "{rest}");
        // No body: none in the answer.
        let empty = || {
            Response::builder()
                .status(204)
                .body(lambda_http::Body::Empty)
                .expect("a response")
        };
        for payload in [Payload::Http, Payload::Rest] {
            let answer = serde_json::to_value(payload.answer(empty())).expect("JSON");
            assert_eq!(answer["statusCode"], 204, "{answer}");
            assert_eq!(answer.get("body"), None, "{answer}");
            assert_eq!(answer["isBase64Encoded"], false, "{answer}");
        }
    }

    #[test]
    fn the_event_is_told_apart_by_its_shape() {
        let fire = json!({"run_at": {"schedule_id": "s", "request_id": "q", "mode": "new", "actor": "ann"}});
        assert!(matches!(parse(&fire), Ok(Event::RunAt(_))));
        // A one-off run's event keeps its own error.
        let wrong = json!({"run_at": {"schedule_id": "s", "request_id": "q", "mode": "new"}});
        let error = parse(&wrong).expect_err("no actor").to_string();
        assert!(error.contains("actor"), "{error}");
        assert!(matches!(parse(&event(json!(null))), Ok(Event::Gateway(_))));
        assert!(matches!(
            parse(&rest_event("/v1/whoami", json!({}), json!(null))),
            Ok(Event::Gateway(_))
        ));
        // Payload 2.0 claims are text (API Gateway sends a list as `[a b]`): a hand-made
        // event with a list claim does not read as an HTTP API event.
        let listed = json!({"jwt": {"claims": {"sub": "u1", "cognito:groups": ["ops", "admins"]}}});
        assert!(parse(&event(listed)).is_err());
        assert!(parse(&json!({"time": "2026-03-10T12:00:00Z"})).is_err());
        assert!(parse(&json!("run_at")).is_err());
    }
}
