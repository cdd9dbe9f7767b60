use chrono::TimeZone;
use proptest::prelude::*;

use super::*;

fn pricing() -> Pricing {
    Pricing {
        prices: UnitPrices {
            lambda_gb_second: 0.0000133334,
            lambda_request: 0.20e-6,
            sqs_request: 0.40e-6,
            dynamodb_write_request_unit: 0.625e-6,
            dynamodb_read_request_unit: 0.125e-6,
        },
        per_call: CallUsage {
            worker_invocations: 1.0,
            worker_handler_ms: 70.0,
            sqs_requests: 3.0,
            dynamodb_wru: 11.3,
            dynamodb_rru: 6.6,
        },
        worker_memory_mb: 256,
    }
}

fn job(duration_ms: u64) -> JobCost {
    JobCost {
        calls_per_run: 1,
        target_memory_mb: None,
        duration_ms,
    }
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 4, 0, 0, 0).unwrap()
}

fn throttle(concurrency: u32, batch_size: u32, rate_per_minute: f64) -> Throttle {
    Throttle {
        concurrency,
        batch_size,
        rate_per_minute,
        pass_every_ms: 300_000,
    }
}

#[test]
fn prices_max_runtime_until_there_is_history() {
    assert_eq!(expected_duration_ms(&[1_000; 9], 60_000), 60_000);
    let mut recent = vec![1_000; 19];
    recent.push(9_000);
    assert_eq!(expected_duration_ms(&recent, 60_000), 1_000);
    recent.push(9_000);
    assert_eq!(expected_duration_ms(&recent, 60_000), 9_000, "the p95");
}

#[test]
fn a_run_costs_the_worker_the_target_the_lane_and_the_table() {
    let p = pricing();
    let (gb_s, usd) = run_cost(1_000, &job(1_000), &p);
    assert!(
        (gb_s - 1.07 * 0.25).abs() < 1e-9,
        "1 s job + 70 ms at 256 MB"
    );
    let expected = gb_s * 0.0000133334 + 0.20e-6 + 3.0 * 0.40e-6 + 11.3 * 0.625e-6 + 6.6 * 0.125e-6;
    assert!((usd - expected).abs() < 1e-12);
    let lambda = JobCost {
        target_memory_mb: Some(1024),
        ..job(1_000)
    };
    let (target_gb_s, target_usd) = run_cost(1_000, &lambda, &p);
    assert!((target_gb_s - gb_s - 1.0).abs() < 1e-9, "plus 1 s at 1 GB");
    assert!(target_usd > usd);
}

#[test]
fn steps_make_a_call_each() {
    let steps = JobCost {
        calls_per_run: 3,
        ..job(1_000)
    };
    let e = estimate(10, &steps, &pricing(), &throttle(2, 7, 7.0), now());
    assert_eq!(e.target_calls, 30);
}

#[test]
fn default_limits_release_a_batch_a_pass() {
    // 7 a pass every 5 minutes (the rate allows 35), 2 in flight: 1 s runs.
    let t = throttle(2, 7, 7.0);
    // 2 runs: released at once, done in a second.
    assert_eq!(release_span_ms(2, 1_000, &t), 1_000);
    // 3 runs: the third waits for the next pass.
    assert_eq!(release_span_ms(3, 1_000, &t), 300_000 + 1_000);
    assert_eq!(release_span_ms(0, 1_000, &t), 0);
}

#[test]
fn a_slow_rate_spaces_the_passes() {
    // One run every 10 minutes: every other pass releases.
    let t = throttle(10, 10, 0.1);
    assert_eq!(release_span_ms(11, 1_000, &t), 600_000 + 1_000);
}

#[test]
fn spend_sums_measured_runs() {
    let p = pricing();
    let s = spent(&[1_000, 2_000], &job(5_000), &p);
    assert_eq!(s.runs, 2);
    assert_eq!(s.target_calls, 2);
    let one = run_cost(1_000, &job(1_000), &p).1 + run_cost(2_000, &job(2_000), &p).1;
    assert!((s.cost_usd - one).abs() < 1e-12);
}

#[test]
fn a_retried_run_makes_a_call_an_attempt() {
    let p = pricing();
    let once = measured_spend(
        &[Measured {
            duration_ms: 1_000,
            attempts: 1,
        }],
        &job(1_000),
        &p,
    );
    let twice = measured_spend(
        &[Measured {
            duration_ms: 1_000,
            attempts: 2,
        }],
        &job(1_000),
        &p,
    );
    assert_eq!((once.target_calls, twice.target_calls), (1, 2));
    assert!(twice.cost_usd > once.cost_usd);
    assert_eq!(once, spent(&[1_000], &job(1_000), &p));
}

#[test]
fn budget_refuses_over_and_pauses_at() {
    let b = Budget {
        max_cost_usd: Some(1.0),
        max_target_calls: Some(10),
    };
    assert!(b.exceeded_by(1.0, 10).is_empty());
    assert_eq!(
        b.exceeded_by(1.01, 11),
        vec![BudgetCap::MaxCostUsd, BudgetCap::MaxTargetCalls]
    );
    assert_eq!(b.reached_by(0.5, 10), vec![BudgetCap::MaxTargetCalls]);
    assert!(Budget::default().reached_by(1e9, u64::MAX).is_empty());
}

proptest! {
    #[test]
    fn monotone_in_runs(
        runs in 0u64..400,
        more in 0u64..50,
        duration in 1u64..3_600_000,
        concurrency in 1u32..20,
        batch in 1u32..50,
        rate in 0.05f64..100.0,
    ) {
        let t = throttle(concurrency, batch, rate);
        let p = pricing();
        let j = job(duration);
        let a = estimate(runs, &j, &p, &t, now());
        let b = estimate(runs + more, &j, &p, &t, now());
        prop_assert!(a.cost_usd <= b.cost_usd);
        prop_assert!(a.lambda_gb_seconds <= b.lambda_gb_seconds);
        prop_assert!(a.target_calls <= b.target_calls);
        prop_assert!(a.finishes_at <= b.finishes_at);
    }

    #[test]
    fn finishes_at_respects_the_throttle(
        runs in 1u64..400,
        duration in 1u64..3_600_000,
        concurrency in 1u32..20,
        batch in 1u32..50,
        rate in 0.05f64..100.0,
    ) {
        let t = throttle(concurrency, batch, rate);
        let span = release_span_ms(runs, duration, &t);
        let d = duration as i64;
        // Every run takes its duration, and no more than `concurrency` run at once.
        let waves = runs.div_ceil(u64::from(concurrency)) as i64;
        prop_assert!(span >= waves * d, "{span} < {waves} waves of {d}");
        // After the first batch, the rate: the last release is no sooner than it allows.
        let after_first = runs.saturating_sub(u64::from(batch)) as f64;
        prop_assert!(span as f64 >= after_first / rate * 60_000.0 - 1.0 + d as f64 - 1.0);
        // Each pass releases at most a batch: that many passes at least.
        let passes = runs.div_ceil(u64::from(batch)) as i64;
        prop_assert!(span >= (passes - 1) * t.pass_every_ms + d);
    }
}
