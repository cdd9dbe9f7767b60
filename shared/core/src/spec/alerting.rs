//! `alerts`, `deadline` and `slo`: who hears about a schedule's problems, and the promises
//! its health is measured against. Each bad value is one problem with its own code.

use serde_json::{Map, Value};

use crate::alerts::{percent_text, AlertSettings, FreshnessSlo};
use crate::error::{Code, Issue};
use crate::span::Span;

/// Longest `deadline`, `slo.within` and `alerts.remind_after`: a week.
const LONGEST: Span = Span::days(7);
/// Shortest reminder: the reconciler looks every few minutes.
const SHORTEST_REMINDER: Span = Span::minutes(5);
/// Most failures in a row a setting may wait for.
const MOST_FAILURES: u64 = 1000;

pub(super) struct Alerting {
    pub(super) alerts: AlertSettings,
    pub(super) deadline: Option<Span>,
    pub(super) slo: Option<FreshnessSlo>,
}

pub(super) fn read(
    obj: &Map<String, Value>,
    field: &dyn Fn(&str) -> String,
    issues: &mut Vec<Issue>,
) -> Alerting {
    Alerting {
        alerts: obj
            .get("alerts")
            .filter(|v| !v.is_null())
            .map(|v| read_alerts(v, &field("alerts"), issues))
            .unwrap_or_default(),
        deadline: obj
            .get("deadline")
            .filter(|v| !v.is_null())
            .and_then(|v| read_deadline(v, &field("deadline"), issues)),
        slo: obj
            .get("slo")
            .filter(|v| !v.is_null())
            .and_then(|v| read_slo(v, &field("slo"), issues)),
    }
}

fn span(value: &Value) -> Result<Span, String> {
    match value {
        Value::String(s) => s.parse::<Span>().map_err(|e| e.to_string()),
        _ => Err("must be a duration like 30m".into()),
    }
}

fn within(value: &Value, low: Span, what: &str) -> Result<Span, String> {
    let s = span(value)?;
    if s < low || s == Span::ZERO || s > LONGEST {
        return Err(format!(
            "{what} must be from {} to {}, found {}",
            low.max(Span::seconds(1)).humanized(),
            LONGEST.humanized(),
            s.humanized()
        ));
    }
    Ok(s)
}

fn count(value: &Value, low: u64) -> Result<u32, String> {
    value
        .as_u64()
        .filter(|n| (low..=MOST_FAILURES).contains(n))
        .map(|n| n as u32)
        .ok_or_else(|| format!("must be a whole number from {low} to {MOST_FAILURES}"))
}

/// An SNS topic ARN: `arn:{partition}:sns:{region}:{account}:{name}`.
fn topic_arn(value: &Value) -> Result<String, String> {
    let text = value.as_str().ok_or("must be an SNS topic ARN")?;
    let parts: Vec<&str> = text.split(':').collect();
    let ok = parts.len() == 6
        && parts[0] == "arn"
        && parts[1].starts_with("aws")
        && parts[2] == "sns"
        && !parts[3].is_empty()
        && parts[4].len() == 12
        && parts[4].bytes().all(|b| b.is_ascii_digit())
        && !parts[5].is_empty()
        && parts[5].len() <= 256;
    if ok {
        Ok(text.to_string())
    } else {
        Err(format!(
            "`{text}` is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)"
        ))
    }
}

fn read_alerts(value: &Value, path: &str, issues: &mut Vec<Issue>) -> AlertSettings {
    let mut settings = AlertSettings::default();
    let Some(obj) = value.as_object() else {
        issues.push(Issue::new(
            Code::ScheduleInvalidAlerts,
            path,
            "alerts must be a mapping of after_failures, remind_after, topic, pause_after_failures",
        ));
        return settings;
    };
    for (key, v) in obj {
        let at = format!("{path}.{key}");
        let read = match key.as_str() {
            "after_failures" => count(v, 0).map(|n| settings.after_failures = Some(n)),
            "pause_after_failures" => count(v, 1).map(|n| settings.pause_after_failures = Some(n)),
            "remind_after" => within(v, SHORTEST_REMINDER, "remind_after")
                .map(|s| settings.remind_after = Some(s)),
            "topic" => topic_arn(v).map(|t| settings.topic = Some(t)),
            other => Err(format!(
                "unknown field `{other}` (after_failures, remind_after, topic, pause_after_failures)"
            )),
        };
        if let Err(message) = read {
            issues.push(Issue::new(Code::ScheduleInvalidAlerts, at, message));
        }
    }
    settings
}

fn read_deadline(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<Span> {
    within(value, Span::ZERO, "deadline")
        .map_err(|m| issues.push(Issue::new(Code::ScheduleInvalidDeadline, path, m)))
        .ok()
}

fn read_slo(value: &Value, path: &str, issues: &mut Vec<Issue>) -> Option<FreshnessSlo> {
    let problem = |issues: &mut Vec<Issue>, at: String, m: String| {
        issues.push(Issue::new(Code::ScheduleInvalidSlo, at, m));
    };
    let Some(obj) = value.as_object() else {
        problem(
            issues,
            path.into(),
            "slo must be { within: 30m, target: 95% }".into(),
        );
        return None;
    };
    for key in obj
        .keys()
        .filter(|k| !matches!(k.as_str(), "within" | "target"))
    {
        problem(
            issues,
            format!("{path}.{key}"),
            format!("unknown field `{key}` (within, target)"),
        );
    }
    let within = match obj.get("within") {
        Some(v) => within(v, Span::ZERO, "slo.within")
            .map_err(|m| problem(issues, format!("{path}.within"), m))
            .ok(),
        None => {
            problem(
                issues,
                format!("{path}.within"),
                "slo.within is required".into(),
            );
            None
        }
    };
    let target = match obj.get("target") {
        Some(Value::Number(n)) => n.as_f64().ok_or_else(|| "not a number".to_string()),
        Some(Value::String(t)) => percent_text::parse(t),
        Some(_) => Err("slo.target must be a percentage like 95%".into()),
        None => Err("slo.target is required".into()),
    }
    .and_then(|t| {
        if t > 0.0 && t <= 100.0 {
            Ok(t)
        } else {
            Err(format!(
                "slo.target must be over 0% and at most 100%, found {t}%"
            ))
        }
    })
    .map_err(|m| problem(issues, format!("{path}.target"), m))
    .ok();
    Some(FreshnessSlo {
        within: within?,
        target: target?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codes(value: Value) -> Vec<(String, &'static str)> {
        let obj = value.as_object().expect("test input is a mapping").clone();
        let mut issues = Vec::new();
        read(&obj, &|n: &str| format!("s.{n}"), &mut issues);
        issues
            .into_iter()
            .map(|i| (i.field, i.code.as_str()))
            .collect()
    }

    #[test]
    fn good_settings_read_back() {
        let obj = json!({
            "alerts": {"after_failures": 2, "remind_after": "2h", "pause_after_failures": 5,
                       "topic": "arn:aws:sns:us-east-1:123456789012:billing-alerts"},
            "deadline": "1h",
            "slo": {"within": "30m", "target": "95%"}
        });
        let mut issues = Vec::new();
        let got = read(
            obj.as_object().expect("mapping"),
            &|n: &str| n.to_string(),
            &mut issues,
        );
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(got.alerts.after_failures, Some(2));
        assert_eq!(got.alerts.remind_after, Some(Span::hours(2)));
        assert_eq!(got.alerts.pause_after_failures, Some(5));
        assert_eq!(got.deadline, Some(Span::hours(1)));
        assert_eq!(got.slo.map(|s| s.target), Some(95.0));
    }

    #[test]
    fn each_bad_value_is_its_own_problem_with_a_stable_code() {
        let got = codes(json!({
            "alerts": {"after_failures": -1, "remind_after": "1m", "topic": "billing",
                       "pause_after_failures": 0, "page": true},
            "deadline": "0s",
            "slo": {"within": "30m", "target": "120%", "extra": 1}
        }));
        let expect = [
            ("s.alerts.after_failures", "SCHEDULE_INVALID_ALERTS"),
            ("s.alerts.remind_after", "SCHEDULE_INVALID_ALERTS"),
            ("s.alerts.topic", "SCHEDULE_INVALID_ALERTS"),
            ("s.alerts.pause_after_failures", "SCHEDULE_INVALID_ALERTS"),
            ("s.alerts.page", "SCHEDULE_INVALID_ALERTS"),
            ("s.deadline", "SCHEDULE_INVALID_DEADLINE"),
            ("s.slo.target", "SCHEDULE_INVALID_SLO"),
            ("s.slo.extra", "SCHEDULE_INVALID_SLO"),
        ];
        for (field, code) in expect {
            assert!(
                got.contains(&(field.to_string(), code)),
                "{field} {code} missing from {got:?}"
            );
        }
        assert_eq!(got.len(), expect.len(), "{got:?}");
    }

    #[test]
    fn a_deadline_over_a_week_or_a_missing_slo_part_is_refused() {
        let got = codes(json!({"deadline": "8d", "slo": {"target": 95}}));
        assert_eq!(
            got,
            vec![
                ("s.deadline".to_string(), "SCHEDULE_INVALID_DEADLINE"),
                ("s.slo.within".to_string(), "SCHEDULE_INVALID_SLO"),
            ]
        );
    }
}
