use proptest::prelude::*;
use serde_json::json;

use super::*;

fn learned() -> Expect {
    Expect {
        learned: true,
        ..Expect::default()
    }
}

#[test]
fn fixed_bounds_judge_below_and_above() {
    let expect = Expect {
        min_count: Some(10),
        max_count: Some(20),
        learned: false,
    };
    assert_eq!(judge(&expect, Some(9), &[]), Some(QualityReason::BelowMin));
    assert_eq!(judge(&expect, Some(21), &[]), Some(QualityReason::AboveMax));
    assert_eq!(judge(&expect, Some(10), &[]), None);
    assert_eq!(judge(&expect, Some(20), &[]), None);
    // Nothing reported: nothing to judge.
    assert_eq!(judge(&expect, None, &[]), None);
}

#[test]
fn a_learned_band_waits_for_ten_successes() {
    let nine = [100; 9];
    assert_eq!(learned_band(&nine), None);
    assert_eq!(judge(&learned(), Some(0), &nine), None);
    let ten = [100; 10];
    assert_eq!(
        judge(&learned(), Some(0), &ten),
        Some(QualityReason::OutsideLearnedBand)
    );
    assert_eq!(judge(&learned(), Some(100), &ten), None);
}

#[test]
fn the_band_is_the_median_plus_or_minus_four_mads() {
    // median 100, deviations 0,0,2,2,2,2,4,4,6,10 -> MAD 2 -> [92, 108]
    let counts = [100, 100, 98, 102, 98, 102, 96, 104, 94, 110];
    let band = learned_band(&counts).expect("ten counts");
    assert_eq!(
        band,
        Band {
            low: 92.0,
            high: 108.0
        }
    );
    assert_eq!(judge(&learned(), Some(108), &counts), None);
    assert_eq!(
        judge(&learned(), Some(109), &counts),
        Some(QualityReason::OutsideLearnedBand)
    );
    assert_eq!(
        judge(&learned(), Some(91), &counts),
        Some(QualityReason::OutsideLearnedBand)
    );
}

#[test]
fn only_the_newest_thirty_counts_are_learned_from() {
    // The newest 30 say 1000; 50 older ones say 1.
    let mut counts = vec![1000; 30];
    counts.extend([1; 50]);
    assert_eq!(judge(&learned(), Some(1000), &counts), None);
    assert_eq!(
        judge(&learned(), Some(1), &counts),
        Some(QualityReason::OutsideLearnedBand)
    );
}

#[test]
fn slow_is_past_twice_the_p95_of_at_least_ten_successes() {
    let nine = [1000; 9];
    assert_eq!(slow(1_000_000, &nine), None);
    let durations: Vec<u64> = (1..=20).map(|i| i * 100_000).collect();
    // p95 of 100 s..=2000 s (nearest rank 19) is 1900 s.
    assert_eq!(percentile(&durations, 95), Some(1_900_000));
    assert_eq!(percentile(&durations, 50), Some(1_000_000));
    assert_eq!(slow_threshold(&durations), Some(3_800_000));
    assert_eq!(slow(3_800_000, &durations), None);
    assert_eq!(slow(3_800_001, &durations), Some(3_800_000));
    assert_eq!(
        duration_percentiles(&durations),
        Some((1_000_000, 1_900_000))
    );
    // Under the one-minute floor nothing is slow, however far past the threshold.
    let quick = [1000; 10];
    assert_eq!(slow_threshold(&quick), Some(2000));
    assert_eq!(slow(SLOW_RUN_FLOOR_MS - 1, &quick), None);
    assert_eq!(slow(SLOW_RUN_FLOOR_MS, &quick), Some(2000));
    assert_eq!(duration_percentiles(&[]), None);
}

#[test]
fn expect_is_read_with_its_own_code() {
    let read = |v: serde_json::Value| {
        let mut issues = Vec::new();
        let got = read_expect(Some(&v), "schedules[a].expect", &mut issues);
        (got, issues)
    };
    let (got, issues) = read(json!({"min_count": 1, "max_count": 5, "learned": true}));
    assert!(issues.is_empty());
    assert_eq!(
        got,
        Some(Expect {
            min_count: Some(1),
            max_count: Some(5),
            learned: true
        })
    );
    for bad in [
        json!({"min_count": 5, "max_count": 1}),
        json!({"min_count": -1}),
        json!({"learned": "yes"}),
        json!({"band": 3}),
        json!({}),
        json!([1, 2]),
    ] {
        let (got, issues) = read(bad.clone());
        assert_eq!(got, None, "{bad}");
        assert!(
            !issues.is_empty()
                && issues
                    .iter()
                    .all(|i| i.code == Code::ScheduleInvalidExpect
                        && i.field == "schedules[a].expect"),
            "{bad}: {issues:?}"
        );
    }
}

proptest! {
    /// The median of the counts is always inside the learned band, and a count far past
    /// every one of them (when they are not all equal) is not.
    #[test]
    fn the_median_is_inside_and_outliers_are_outside(
        counts in prop::collection::vec(0u64..1_000_000, 10..60),
    ) {
        let band = learned_band(&counts).expect("at least ten");
        let mut used: Vec<u64> = counts.iter().take(HISTORY_RUNS).copied().collect();
        used.sort_unstable();
        prop_assert!(band.low <= band.high);
        let lower_mid = used[(used.len() - 1) / 2];
        let upper_mid = used[used.len() / 2];
        prop_assert!(band.contains(lower_mid) || band.contains(upper_mid));
        let max = *used.last().expect("non-empty");
        let min = used[0];
        let far = max + 8 * (max - min) + 1;
        prop_assert!(!band.contains(far));
        prop_assert_eq!(judge(&learned(), Some(far), &counts), Some(QualityReason::OutsideLearnedBand));
    }

    /// Fixed bounds: suspect exactly when outside [min, max], below checked first.
    #[test]
    fn fixed_bounds_are_exact(min in 0u64..100, span in 0u64..100, count in 0u64..300) {
        let expect = Expect { min_count: Some(min), max_count: Some(min + span), learned: false };
        let want = if count < min {
            Some(QualityReason::BelowMin)
        } else if count > min + span {
            Some(QualityReason::AboveMax)
        } else {
            None
        };
        prop_assert_eq!(judge(&expect, Some(count), &[]), want);
    }

    /// A slow run is past twice the p95; nothing is slow with fewer than ten successes.
    #[test]
    fn slow_runs_pass_twice_the_p95(
        durations in prop::collection::vec(1u64..100_000, 0..50),
        d in 0u64..500_000,
    ) {
        let used: Vec<u64> = durations.iter().take(HISTORY_RUNS).copied().collect();
        match slow(d, &durations) {
            Some(threshold) => {
                prop_assert!(used.len() >= MIN_HISTORY);
                let p95 = percentile(&used, 95).expect("non-empty");
                prop_assert_eq!(threshold, 2 * p95);
                prop_assert!(d > threshold);
                // At least 95% of the successes took no longer than the p95.
                let within = used.iter().filter(|&&u| u <= p95).count();
                prop_assert!(within * 100 >= used.len() * 95);
            }
            None => prop_assert!(
                used.len() < MIN_HISTORY
                    || d <= 2 * percentile(&used, 95).expect("non-empty")
            ),
        }
    }
}
