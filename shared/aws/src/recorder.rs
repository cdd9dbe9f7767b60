//! What each function asks of AWS, as IAM sees it: an SDK interceptor that turns every call
//! into the authorisation requests AWS would evaluate against the caller's role (action,
//! resource ARN, condition keys), so a test can hold the calls the suite makes against the
//! roles the template grants.
//!
//! Tests only: a client records nothing unless it was built with
//! [`crate::AwsClients::recorded_as`] (or has [`CallRecorder::interceptor`] added), which no
//! function's wiring does.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use serde_json::Value;

/// The ledger's partition key attribute: the value IAM's `dynamodb:LeadingKeys` compares.
const PARTITION_KEY: &str = "PK";

/// The account and region the recorded ARNs are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub partition: String,
    pub region: String,
    pub id: String,
}

/// One authorisation request: `action` on `resource`, with the condition keys the request
/// carries (say `dynamodb:LeadingKeys`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    /// `service:Action`, as IAM names it (`dynamodb:PutItem`, `lambda:InvokeFunction`).
    pub action: String,
    pub resource: String,
    pub context: BTreeMap<String, Vec<String>>,
}

/// One SDK call and what IAM checks for it (a transaction or batch: one access per item or
/// table inside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCall {
    /// The function whose clients made the call.
    pub function: String,
    /// `Service.Operation`, as the SDK names it (`DynamoDB.TransactWriteItems`).
    pub operation: String,
    /// The store or lane operation that made it (see [`crate::meter::metered`]).
    pub scope: String,
    pub accesses: Vec<Access>,
}

/// Where the calls go; cheap to clone.
#[derive(Debug, Clone)]
pub struct CallRecorder {
    account: Arc<Account>,
    calls: Arc<Mutex<Vec<RecordedCall>>>,
}

impl CallRecorder {
    pub fn new(account: Account) -> CallRecorder {
        CallRecorder {
            account: Arc::new(account),
            calls: Arc::default(),
        }
    }

    /// An interceptor recording each call of the client it is added to as `function`'s.
    pub fn interceptor(&self, function: &str) -> RecordingInterceptor {
        RecordingInterceptor {
            function: function.to_string(),
            recorder: self.clone(),
        }
    }

    pub fn calls(&self) -> Vec<RecordedCall> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn push(&self, call: RecordedCall) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
    }
}

/// See [`CallRecorder::interceptor`].
#[derive(Debug, Clone)]
pub struct RecordingInterceptor {
    function: String,
    recorder: CallRecorder,
}

impl Intercept for RecordingInterceptor {
    fn name(&self) -> &'static str {
        "cronledger.CallRecorder"
    }

    // Once per call (retries are not new authorisations), with the request serialized.
    fn read_after_serialization(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (service, operation) = match cfg.load::<Metadata>() {
            Some(m) => (m.service().to_string(), m.name().to_string()),
            None => ("unknown".to_string(), "unknown".to_string()),
        };
        let request = context.request();
        let sent = Sent {
            path: request.uri(),
            body: request.body().bytes().unwrap_or_default(),
        };
        let accesses = accesses(&self.recorder.account, &service, &operation, &sent);
        self.recorder.push(RecordedCall {
            function: self.function.clone(),
            operation: format!("{service}.{operation}"),
            scope: crate::meter::current_scope().to_string(),
            accesses,
        });
        Ok(())
    }
}

/// The serialized request.
struct Sent<'a> {
    /// Path and query.
    path: &'a str,
    body: &'a [u8],
}

impl Sent<'_> {
    fn json(&self) -> Value {
        serde_json::from_slice(self.body).unwrap_or(Value::Null)
    }

    /// A form-encoded (AWS query protocol) parameter.
    fn form(&self, name: &str) -> Option<String> {
        let body = std::str::from_utf8(self.body).ok()?;
        body.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            (key == name).then(|| percent_decoded(value))
        })
    }

    /// The path's segments (percent-decoded) and its query parameters.
    fn path_and_query(&self) -> (Vec<String>, BTreeMap<String, String>) {
        let after_host = match self.path.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("", |i| &rest[i..]),
            None => self.path,
        };
        let (path, query) = after_host.split_once('?').unwrap_or((after_host, ""));
        let segments = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(percent_decoded)
            .collect();
        let query = query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (percent_decoded(k), percent_decoded(v)))
            .collect();
        (segments, query)
    }
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What IAM authorises for one call. A call whose resource cannot be read is recorded with
/// the resource `?`, which no policy allows: the test names it rather than passing it by.
fn accesses(account: &Account, service: &str, operation: &str, sent: &Sent) -> Vec<Access> {
    let arn = |service: &str, resource: &str| {
        format!(
            "arn:{}:{service}:{}:{}:{resource}",
            account.partition, account.region, account.id
        )
    };
    let plain = |action: String, resource: String| Access {
        action,
        resource,
        context: BTreeMap::new(),
    };
    let unknown = "?".to_string();
    match service {
        "DynamoDB" => dynamodb_accesses(operation, &sent.json(), &|table| {
            arn("dynamodb", &format!("table/{table}"))
        }),
        "SQS" => {
            let body = sent.json();
            let queue = body["QueueUrl"]
                .as_str()
                .and_then(|url| url.rsplit('/').next())
                .or_else(|| body["QueueName"].as_str());
            let resource = queue.map_or(unknown, |name| arn("sqs", name));
            // SQS authorises its batch actions as the single-message ones.
            let action = operation.strip_suffix("Batch").unwrap_or(operation);
            vec![plain(format!("sqs:{action}"), resource)]
        }
        "SNS" => {
            let topic = sent.form("TopicArn").unwrap_or(unknown);
            vec![plain(format!("sns:{operation}"), topic)]
        }
        "Secrets Manager" => {
            let body = sent.json();
            let resource = match body["SecretId"].as_str() {
                Some(id) if id.starts_with("arn:") => id.to_string(),
                Some(name) => arn("secretsmanager", &format!("secret:{name}")),
                None => unknown,
            };
            vec![plain(format!("secretsmanager:{operation}"), resource)]
        }
        "Scheduler" => scheduler_accesses(operation, sent, &|r| arn("scheduler", r)),
        "Lambda" => lambda_accesses(operation, sent, &|r| arn("lambda", r)),
        // DescribeAlarms (the only CloudWatch call) cannot be scoped to a resource.
        "CloudWatch" => vec![plain(format!("cloudwatch:{operation}"), "*".into())],
        other => vec![plain(
            format!("{}:{operation}", other.to_lowercase().replace(' ', "")),
            unknown,
        )],
    }
}

fn dynamodb_accesses(
    operation: &str,
    body: &Value,
    table_arn: &dyn Fn(&str) -> String,
) -> Vec<Access> {
    let item_access = |action: &str, request: &Value| {
        let table = request["TableName"].as_str().unwrap_or("?");
        Access {
            action: format!("dynamodb:{action}"),
            resource: table_arn(table),
            context: item_context(request),
        }
    };
    match operation {
        // Transactions authorise each item as the single-item operation it stands for.
        "TransactWriteItems" | "TransactGetItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|entry| {
                let (kind, request) = entry.as_object()?.iter().next()?;
                let action = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    "Get" => "GetItem",
                    _ => "ConditionCheckItem",
                };
                Some(item_access(action, request))
            })
            .collect(),
        // Batches authorise per table.
        "BatchGetItem" | "BatchWriteItem" => body["RequestItems"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(table, requests)| {
                let keys = match operation {
                    "BatchGetItem" => requests["Keys"].as_array().cloned().unwrap_or_default(),
                    _ => requests
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|r| match &r["PutRequest"]["Item"] {
                            Value::Null => r["DeleteRequest"]["Key"].clone(),
                            item => item.clone(),
                        })
                        .collect(),
                };
                let leading = keys.iter().filter_map(partition_of).collect::<Vec<_>>();
                Access {
                    action: format!("dynamodb:{operation}"),
                    resource: table_arn(table),
                    context: BTreeMap::from([("dynamodb:LeadingKeys".to_string(), leading)]),
                }
            })
            .collect(),
        _ => {
            let mut access = item_access(operation, body);
            if let Some(index) = body["IndexName"].as_str() {
                access.resource = format!("{}/index/{index}", access.resource);
            }
            vec![access]
        }
    }
}

/// The condition keys of a request on one item: its partition key value and the attribute
/// names it carries (the item's, the key's and the expressions' placeholders).
fn item_context(request: &Value) -> BTreeMap<String, Vec<String>> {
    let mut context = BTreeMap::new();
    let item = [&request["Item"], &request["Key"]]
        .into_iter()
        .find(|v| v.is_object());
    let Some(item) = item else {
        return context;
    };
    if let Some(key) = partition_of(item) {
        context.insert("dynamodb:LeadingKeys".to_string(), vec![key]);
    }
    let mut names: Vec<String> = item
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .collect();
    names.extend(
        request["ExpressionAttributeNames"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, v)| v.as_str().map(str::to_string)),
    );
    names.sort();
    names.dedup();
    context.insert("dynamodb:Attributes".to_string(), names);
    context
}

fn partition_of(item: &Value) -> Option<String> {
    item[PARTITION_KEY]["S"].as_str().map(str::to_string)
}

/// EventBridge Scheduler (REST): `/schedules/NAME`, the group in the query or the body.
fn scheduler_accesses(operation: &str, sent: &Sent, arn: &dyn Fn(&str) -> String) -> Vec<Access> {
    let (segments, query) = sent.path_and_query();
    let body = sent.json();
    let name = segments.last().cloned().unwrap_or_else(|| "?".into());
    let group = query
        .get("groupName")
        .cloned()
        .or_else(|| body["GroupName"].as_str().map(str::to_string))
        .unwrap_or_else(|| "default".into());
    let mut accesses = vec![Access {
        action: format!("scheduler:{operation}"),
        resource: arn(&format!("schedule/{group}/{name}")),
        context: BTreeMap::new(),
    }];
    // Creating or updating a schedule passes its target's role to Scheduler.
    if let Some(role) = body["Target"]["RoleArn"].as_str() {
        accesses.push(Access {
            action: "iam:PassRole".into(),
            resource: role.to_string(),
            context: BTreeMap::from([(
                "iam:PassedToService".to_string(),
                vec!["scheduler.amazonaws.com".to_string()],
            )]),
        });
    }
    accesses
}

/// Lambda (REST): invocations name the function in the path; event source mappings are
/// listed without a resource and updated by id.
fn lambda_accesses(operation: &str, sent: &Sent, arn: &dyn Fn(&str) -> String) -> Vec<Access> {
    let (segments, _) = sent.path_and_query();
    let (action, resource) = match operation {
        "Invoke" => {
            let function = segments.get(2).cloned().unwrap_or_else(|| "?".into());
            let resource = if function.starts_with("arn:") {
                function
            } else {
                arn(&format!("function:{function}"))
            };
            ("InvokeFunction".to_string(), resource)
        }
        "ListEventSourceMappings" => (operation.to_string(), "*".to_string()),
        // UpdateEventSourceMapping names the mapping by id; its function (IAM's
        // `lambda:FunctionArn`) is not in the request, so no condition key is recorded.
        _ => {
            let id = segments.get(2).cloned().unwrap_or_else(|| "?".into());
            let resource = arn(&format!("event-source-mapping:{id}"));
            (operation.to_string(), resource)
        }
    };
    vec![Access {
        action: format!("lambda:{action}"),
        resource,
        context: BTreeMap::new(),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account() -> Account {
        Account {
            partition: "aws".into(),
            region: "us-east-1".into(),
            id: "123456789012".into(),
        }
    }

    fn sent<'a>(path: &'a str, body: &'a str) -> Sent<'a> {
        Sent {
            path,
            body: body.as_bytes(),
        }
    }

    #[test]
    fn a_transaction_is_authorised_item_by_item_and_a_query_on_its_index() {
        let body = r##"{"TransactItems": [
            {"Put": {"TableName": "t", "Item": {"PK": {"S": "SCHED#a"}, "SK": {"S": "RUN#1"}}}},
            {"Update": {"TableName": "t", "Key": {"PK": {"S": "SCHED#a"}, "SK": {"S": "META"}},
                        "ExpressionAttributeNames": {"#n": "next_run_at"}}}]}"##;
        let accesses = accesses(
            &account(),
            "DynamoDB",
            "TransactWriteItems",
            &sent("/", body),
        );
        let actions: Vec<_> = accesses.iter().map(|a| a.action.as_str()).collect();
        assert_eq!(actions, ["dynamodb:PutItem", "dynamodb:UpdateItem"]);
        assert_eq!(
            accesses[1].resource,
            "arn:aws:dynamodb:us-east-1:123456789012:table/t"
        );
        assert_eq!(accesses[1].context["dynamodb:LeadingKeys"], ["SCHED#a"]);
        assert_eq!(
            accesses[1].context["dynamodb:Attributes"],
            ["PK", "SK", "next_run_at"]
        );
        let query = accesses_of(
            "DynamoDB",
            "Query",
            r#"{"TableName": "t", "IndexName": "active"}"#,
        );
        assert_eq!(
            query[0].resource,
            "arn:aws:dynamodb:us-east-1:123456789012:table/t/index/active"
        );
        let batch = accesses_of(
            "DynamoDB",
            "BatchGetItem",
            r#"{"RequestItems": {"t": {"Keys": [{"PK": {"S": "RUN#x"}}]}}}"#,
        );
        assert_eq!(batch[0].action, "dynamodb:BatchGetItem");
        assert_eq!(batch[0].context["dynamodb:LeadingKeys"], ["RUN#x"]);
    }

    fn accesses_of(service: &str, operation: &str, body: &str) -> Vec<Access> {
        accesses(&account(), service, operation, &sent("/", body))
    }

    #[test]
    fn queues_topics_secrets_schedules_and_functions_are_named_by_their_arns() {
        let send = accesses_of(
            "SQS",
            "SendMessage",
            r#"{"QueueUrl": "http://h:1/123456789012/p-normal"}"#,
        );
        assert_eq!(
            send[0].resource,
            "arn:aws:sqs:us-east-1:123456789012:p-normal"
        );
        let topic = "arn:aws:sns:us-east-1:123456789012:alerts";
        let publish = accesses(
            &account(),
            "SNS",
            "Publish",
            &sent(
                "/",
                "Action=Publish&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A123456789012%3Aalerts",
            ),
        );
        assert_eq!(
            (publish[0].action.as_str(), publish[0].resource.as_str()),
            ("sns:Publish", topic)
        );
        let secret = accesses_of(
            "Secrets Manager",
            "GetSecretValue",
            r#"{"SecretId": "cronledger/x"}"#,
        );
        assert_eq!(
            secret[0].resource,
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:cronledger/x"
        );
        let create = accesses(
            &account(),
            "Scheduler",
            "CreateSchedule",
            &sent(
                "http://h/schedules/cronledger-runat-1",
                r#"{"GroupName": "g", "Target": {"RoleArn": "arn:aws:iam::123456789012:role/r"}}"#,
            ),
        );
        assert_eq!(
            create[0].resource,
            "arn:aws:scheduler:us-east-1:123456789012:schedule/g/cronledger-runat-1"
        );
        assert_eq!(create[1].action, "iam:PassRole");
        let get = accesses(
            &account(),
            "Scheduler",
            "GetSchedule",
            &sent("/schedules/ticker-1?groupName=g", ""),
        );
        assert_eq!(
            get[0].resource,
            "arn:aws:scheduler:us-east-1:123456789012:schedule/g/ticker-1"
        );
        let invoke = accesses(
            &account(),
            "Lambda",
            "Invoke",
            &sent("/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3Ajob/invocations", ""),
        );
        assert_eq!(invoke[0].action, "lambda:InvokeFunction");
        assert_eq!(
            invoke[0].resource,
            "arn:aws:lambda:us-east-1:123456789012:function:job"
        );
    }
}
