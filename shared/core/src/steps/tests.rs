use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use serde_json::json;

use super::*;

fn steps(names: &[&str]) -> Vec<Step> {
    names
        .iter()
        .map(|name| {
            serde_json::from_value(json!({ "name": name, "type": "noop" })).expect("a noop step")
        })
        .collect()
}

fn at(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 0, minute, 0).unwrap()
}

#[test]
fn a_step_reads_and_writes_its_fields_beside_its_targets() {
    let step: Step = serde_json::from_value(json!({
        "name": "generate", "type": "lambda", "function": "gen",
        "max_attempts": 5, "max_runtime": "10m"
    }))
    .unwrap();
    assert_eq!(step.name, "generate");
    assert_eq!(step.max_attempts, Some(5));
    assert_eq!(step.max_runtime, Some(Span::minutes(10)));
    assert_eq!(step.target.type_name(), "lambda");
    let back: Step = serde_json::from_value(serde_json::to_value(&step).unwrap()).unwrap();
    assert_eq!(back, step);
}

#[test]
fn steps_do_not_nest_and_need_a_name() {
    let nested = json!({ "name": "a", "type": "steps", "steps": [] });
    assert!(serde_json::from_value::<Step>(nested).is_err());
    assert!(serde_json::from_value::<Step>(json!({ "type": "noop" })).is_err());
}

#[test]
fn a_run_resumes_at_the_first_step_that_has_not_succeeded() {
    let spec = steps(&["collect", "generate", "save", "upload"]);
    let mut stored = start(&spec, &[], 0, at(0));
    assert_eq!(current(&spec, &stored), Some(0));
    stored = end(&stored, 0, at(1), Ok(Some(json!({"rows": 10}))));
    assert!(handed_over(&stored));
    assert_eq!(current(&spec, &stored), Some(1));
    stored = start(&spec, &stored, 1, at(2));
    assert!(!handed_over(&stored));
    stored = end(&stored, 1, at(3), Ok(None));
    stored = start(&spec, &stored, 2, at(4));
    stored = end(&stored, 2, at(5), Ok(None));
    stored = start(&spec, &stored, 3, at(6));
    stored = end(&stored, 3, at(7), Err("UPLOAD_FAILED"));
    // Failed, not handed over: a retry of the run resumes at upload, not at collect.
    assert!(!handed_over(&stored));
    assert_eq!(current(&spec, &stored), Some(3));
    assert_eq!(stored[3].error_code.as_deref(), Some("UPLOAD_FAILED"));
    assert_eq!(stored[0].output, Some(json!({"rows": 10})));
}

#[test]
fn checkpoints_follow_the_steps_by_name() {
    let spec = steps(&["a", "b"]);
    let stored = end(&start(&spec, &[], 0, at(0)), 0, at(1), Ok(None));
    // A step added in front (a later version): `a` stays done, the new one is pending.
    let edited = steps(&["z", "a", "b"]);
    let now = checkpoints(&edited, &stored);
    assert_eq!(now[0].status, StepStatus::Pending);
    assert_eq!(now[1].status, StepStatus::Success);
    assert_eq!(current(&edited, &stored), Some(0));
}

#[test]
fn a_step_key_is_the_run_key_and_the_step_name() {
    let key = IdempotencyKey::from_stored("nightly:2026-03-01T00:00:00Z".into());
    assert_eq!(
        idempotency_key(&key, "upload").as_str(),
        "nightly:2026-03-01T00:00:00Z#upload"
    );
}

#[test]
fn an_output_over_four_kilobytes_does_not_fit() {
    assert!(output_fits(&json!({"id": 1})));
    assert!(!output_fits(&json!("x".repeat(MAX_STEP_OUTPUT_BYTES))));
}

proptest! {
    /// Whatever the attempts' outcomes, a step that succeeded is never current again, and
    /// the run's steps run in order.
    #[test]
    fn a_succeeded_step_is_never_executed_again(outcomes in proptest::collection::vec(any::<bool>(), 0..40)) {
        let spec = steps(&["a", "b", "c", "d"]);
        let mut stored: Vec<StepCheckpoint> = Vec::new();
        let mut executed = vec![0u32; spec.len()];
        let mut succeeded = vec![false; spec.len()];
        for (i, ok) in outcomes.into_iter().enumerate() {
            let Some(index) = current(&spec, &stored) else { break };
            prop_assert!(!succeeded[index]);
            prop_assert!(succeeded[..index].iter().all(|s| *s));
            stored = start(&spec, &stored, index, at(i as u32 % 60));
            executed[index] += 1;
            let outcome = if ok { Ok(None) } else { Err("E") };
            stored = end(&stored, index, at(i as u32 % 60), outcome);
            succeeded[index] |= ok;
            prop_assert_eq!(stored[index].attempts, executed[index]);
        }
    }
}

#[test]
fn a_manifest_with_steps_validates_to_a_steps_job() {
    let doc = json!({
        "id": "nightly", "cron": "0 2 * * *", "timezone": "UTC",
        "job": {"type": "steps", "steps": [
            {"name": "collect", "type": "noop"},
            {"name": "upload", "type": "noop", "max_attempts": 5}
        ]}
    });
    let spec = crate::spec::validate_schedule(&doc, "", &crate::ValidationRules::local(), at(0))
        .expect("valid");
    let steps = spec.job.steps().expect("a steps job");
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1].max_attempts, Some(5));
    let back: crate::ScheduleSpec =
        serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
    assert_eq!(back, spec);
}

#[test]
fn a_steps_job_is_refused_with_its_problems() {
    let doc = |steps: Value| {
        json!({"id": "nightly", "cron": "0 2 * * *", "timezone": "UTC",
               "job": {"type": "steps", "steps": steps}})
    };
    let rules = crate::ValidationRules::local();
    for (steps, field) in [
        (json!([]), "job.steps"),
        (json!([{"type": "noop"}]), "job.steps[0].name"),
        (
            json!([{"name": "a", "type": "noop"}, {"name": "a", "type": "noop"}]),
            "job.steps[1].name",
        ),
        (
            json!([{"name": "a", "type": "steps", "steps": []}]),
            "job.steps[0].type",
        ),
        (
            json!([{"name": "a", "type": "http", "url": "ftp://x"}]),
            "job.steps[0].url",
        ),
        (
            json!([{"name": "a", "type": "noop", "max_attempts": 0}]),
            "job.steps[0].max_attempts",
        ),
        (
            json!([{"name": "a", "type": "noop", "max_runtime": "1h"}]),
            "job.steps[0].max_runtime",
        ),
    ] {
        let issues = crate::spec::validate_schedule(&doc(steps.clone()), "", &rules, at(0))
            .expect_err("refused");
        assert!(
            issues.iter().any(|i| i.field == field),
            "{steps}: {:?}",
            issues
        );
    }
}

#[test]
fn the_attempt_budget_counts_the_current_steps_attempts_against_its_limit() {
    let doc = json!({
        "id": "nightly", "cron": "0 2 * * *", "timezone": "UTC", "max_attempts": 2,
        "job": {"type": "steps", "steps": [
            {"name": "collect", "type": "noop"},
            {"name": "upload", "type": "noop", "max_attempts": 5}
        ]}
    });
    let spec = crate::spec::validate_schedule(&doc, "", &crate::ValidationRules::local(), at(0))
        .expect("valid");
    let schedule = crate::Schedule::new(spec.clone()).expect("schedule");
    let mut run = schedule.pending_run(
        at(0),
        schedule.window_for(at(0)),
        crate::run::Origin::Expected,
        crate::Trigger::Scheduled,
        at(0),
        1,
    );
    let list = spec.job.steps().expect("steps");
    // The first step, twice tried: its limit is the schedule's, used up.
    run.steps = start(list, &[], 0, at(1));
    run.steps = start(list, &run.steps, 0, at(2));
    run.attempts = 2;
    let budget = AttemptBudget::of(&spec.job, spec.max_attempts, &run);
    assert_eq!((budget.step, budget.used, budget.limit), (Some(0), 2, 2));
    assert!(!budget.left());
    // Handed over to the second: its own attempts against its own limit, whatever the run's.
    run.steps = end(&run.steps, 0, at(3), Ok(None));
    run.steps = start(list, &run.steps, 1, at(4));
    run.attempts = 3;
    let budget = AttemptBudget::of(&spec.job, spec.max_attempts, &run);
    assert_eq!((budget.step, budget.used, budget.limit), (Some(1), 1, 5));
    assert!(budget.left());
    // A one-call job: the run's attempts against the schedule's limit.
    let plain: crate::JobSpec =
        serde_json::from_value(json!({"type": "noop"})).expect("a noop job");
    let budget = AttemptBudget::of(&plain, 2, &run);
    assert_eq!((budget.step, budget.used, budget.limit), (None, 3, 2));
}
