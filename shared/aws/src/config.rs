//! SDK clients built from the standard AWS environment (region, credentials, and
//! `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL_SQS` /
//! `AWS_ENDPOINT_URL_SNS`), with an explicit
//! retry policy and the request meter attached. Nothing here knows about any emulator.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, SdkConfig};

use crate::meter::RequestMeter;
use crate::recorder::CallRecorder;

/// What the code decides about the clients; everything else comes from the environment.
#[derive(Debug, Clone)]
pub struct AwsSettings {
    /// Attempts per call, first included (standard retry mode: throttling, 5xx and
    /// transient network errors back off exponentially with jitter).
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Overrides the environment's endpoint. Only for tests that stand up their own server.
    pub endpoint_url: Option<String>,
}

impl Default for AwsSettings {
    fn default() -> Self {
        AwsSettings {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            endpoint_url: None,
        }
    }
}

/// The clients the adapters use, sharing one meter.
#[derive(Debug, Clone)]
pub struct AwsClients {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    /// Alerts' topics (see [`crate::notify`]).
    pub sns: aws_sdk_sns::Client,
    pub meter: RequestMeter,
}

impl AwsClients {
    /// Loads the environment's configuration and builds the clients.
    pub async fn from_env(settings: &AwsSettings) -> AwsClients {
        let sdk = load_sdk_config(settings).await;
        AwsClients::from_sdk_config(&sdk, RequestMeter::new(), settings.endpoint_url.as_deref())
    }

    pub fn from_sdk_config(
        sdk: &SdkConfig,
        meter: RequestMeter,
        endpoint_url: Option<&str>,
    ) -> AwsClients {
        // `From<&SdkConfig>` is what applies the per-service `AWS_ENDPOINT_URL_*` variables;
        // an explicit override is set after it so that it wins over them.
        let mut dynamodb = aws_sdk_dynamodb::config::Builder::from(sdk).interceptor(meter.clone());
        let mut sqs = aws_sdk_sqs::config::Builder::from(sdk).interceptor(meter.clone());
        let mut sns = aws_sdk_sns::config::Builder::from(sdk).interceptor(meter.clone());
        if let Some(url) = endpoint_url {
            dynamodb = dynamodb.endpoint_url(url);
            sqs = sqs.endpoint_url(url);
            sns = sns.endpoint_url(url);
        }
        let (dynamodb, sqs, sns) = (dynamodb.build(), sqs.build(), sns.build());
        AwsClients {
            dynamodb: aws_sdk_dynamodb::Client::from_conf(dynamodb),
            sqs: aws_sdk_sqs::Client::from_conf(sqs),
            sns: aws_sdk_sns::Client::from_conf(sns),
            meter,
        }
    }

    /// The same clients (same configuration and meter), each call also recorded as
    /// `function`'s in `recorder`: for the test that holds every call to its role. No
    /// function's wiring calls this.
    pub fn recorded_as(&self, recorder: &CallRecorder, function: &str) -> AwsClients {
        let interceptor = recorder.interceptor(function);
        let dynamodb = self.dynamodb.config().to_builder();
        let sqs = self.sqs.config().to_builder();
        let sns = self.sns.config().to_builder();
        AwsClients {
            dynamodb: aws_sdk_dynamodb::Client::from_conf(
                dynamodb.interceptor(interceptor.clone()).build(),
            ),
            sqs: aws_sdk_sqs::Client::from_conf(sqs.interceptor(interceptor.clone()).build()),
            sns: aws_sdk_sns::Client::from_conf(sns.interceptor(interceptor).build()),
            meter: self.meter.clone(),
        }
    }
}

pub async fn load_sdk_config(settings: &AwsSettings) -> SdkConfig {
    let retry = RetryConfig::standard()
        .with_max_attempts(settings.max_attempts)
        .with_initial_backoff(settings.initial_backoff)
        .with_max_backoff(settings.max_backoff);
    aws_config::defaults(BehaviorVersion::latest())
        .retry_config(retry)
        .load()
        .await
}
