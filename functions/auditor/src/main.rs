//! Auditor Lambda: parse the event, run one audit pass, answer its summary. The logic is
//! `cronledger_app::auditor`; its read-only connection is `cronledger_app::auditor::deployed`.

use std::sync::Arc;

use cronledger_app::auditor::{AuditEvent, Auditor, AuditorConfig};
use cronledger_app::deployment::Deployment;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    cronledger_app::logging::init_function_logs();
    let deployment = Deployment::from_env()?;
    let auditor =
        Arc::new(cronledger_app::auditor::deployed(&deployment, AuditorConfig::default()).await);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let auditor = auditor.clone();
        async move { handle(&auditor, &event.payload).await }
    }))
    .await
}

/// One invocation. A bad event or a failed read is the invocation's error, its stable code
/// first; the pass wrote nothing to the ledger, so Scheduler's retry is safe (an alert
/// already recorded is not published again).
async fn handle(auditor: &Auditor, payload: &Value) -> Result<Value, Error> {
    let event = AuditEvent::from_json(payload)?;
    let outcome = auditor.run(&event).await?;
    Ok(serde_json::to_value(outcome.summary())?)
}

#[cfg(test)]
mod tests {
    use cronledger_app::clock::ManualClock;
    use cronledger_aws::{MemoryStore, RequestMeter};
    use serde_json::json;

    use super::*;

    fn auditor() -> Auditor {
        let now = "2026-03-10T01:00:00Z".parse().expect("an instant");
        Auditor::new(
            Arc::new(MemoryStore::new(1, RequestMeter::new())),
            Arc::new(ManualClock::new(now)),
            AuditorConfig::default(),
        )
        .keeping_metrics()
    }

    #[tokio::test]
    async fn the_schedulers_event_audits_the_utc_day_before() {
        let summary = handle(&auditor(), &json!({"time": "2026-03-10T01:00:00Z"}))
            .await
            .expect("a daily pass");
        assert_eq!(summary["trigger"], "daily");
        assert_eq!(summary["from"], "2026-03-09T00:00:00Z");
        assert_eq!(summary["to"], "2026-03-10T00:00:00Z");
        assert_eq!(summary["completeness"], 1.0);
        // A classic EventBridge rule event carries `time` among its other fields.
        let rule = json!({"version": "0", "id": "e", "detail-type": "Scheduled Event",
            "source": "aws.events", "time": "2026-03-10T01:00:00Z", "detail": {}});
        assert_eq!(
            handle(&auditor(), &rule).await.expect("a daily pass"),
            summary
        );
    }

    #[tokio::test]
    async fn an_on_demand_event_audits_its_range() {
        let summary = handle(
            &auditor(),
            &json!({"from": "2026-03-01T00:00:00Z", "to": "2026-03-08T00:00:00Z"}),
        )
        .await
        .expect("an on-demand audit");
        assert_eq!(summary["trigger"], "on_demand");
        assert_eq!(summary["from"], "2026-03-01T00:00:00Z");
        assert_eq!(summary["to"], "2026-03-08T00:00:00Z");
        assert_eq!(summary["kill_switch_engaged"], false);
        // One schedule's: the store's own error when there is no such schedule.
        let error = handle(
            &auditor(),
            &json!({"from": "2026-03-01T00:00:00Z", "to": "2026-03-08T00:00:00Z", "schedule": "nightly"}),
        )
        .await
        .expect_err("no such schedule")
        .to_string();
        assert!(error.starts_with("SCHEDULE_NOT_FOUND: "), "{error}");
    }

    #[tokio::test]
    async fn a_bad_event_is_refused_with_its_code() {
        let refused = [
            (
                json!("2026-03-10T01:00:00Z"),
                "AUDIT_EVENT_INVALID: the event must be a JSON object",
            ),
            (json!({}), "AUDIT_EVENT_INVALID: neither a daily pass"),
            (
                json!({"time": 1}),
                "AUDIT_EVENT_INVALID: `time` must be an RFC3339 instant",
            ),
            (
                json!({"time": "yesterday"}),
                "AUDIT_EVENT_INVALID: `time` yesterday is not RFC3339",
            ),
            (
                json!({"from": "2026-03-01T00:00:00Z"}),
                "AUDIT_EVENT_INVALID: an on-demand audit",
            ),
            (
                json!({"from": "2026-03-01T00:00:00Z", "to": "2026-03-02T00:00:00Z", "schedules": ["a"]}),
                "AUDIT_EVENT_INVALID: an on-demand audit",
            ),
            (
                json!({"from": "2026-03-02T00:00:00Z", "to": "2026-03-01T00:00:00Z"}),
                "AUDIT_RANGE_INVALID: `from`",
            ),
            (
                json!({"from": "2026-03-09T00:00:00Z", "to": "2026-03-11T00:00:00Z"}),
                "AUDIT_RANGE_INVALID: `to`",
            ),
            (
                json!({"from": "2026-01-01T00:00:00Z", "to": "2026-03-01T00:00:00Z"}),
                "AUDIT_RANGE_TOO_LONG: 2026-01-01",
            ),
            (
                json!({"from": "2026-03-01T00:00:00Z", "to": "2026-03-02T00:00:00Z", "schedule": "Not An Id"}),
                "AUDIT_RANGE_INVALID: `schedule`",
            ),
        ];
        for (event, expected) in refused {
            let error = handle(&auditor(), &event)
                .await
                .expect_err("refused")
                .to_string();
            assert!(error.starts_with(expected), "{event}: {error}");
        }
    }
}
