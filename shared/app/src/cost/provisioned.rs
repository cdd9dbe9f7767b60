//! Provisioned capacity priced from the fleet's own write and read profile: how many
//! capacity units a second the table (and its indexes) would need to serve what a
//! simulation consumed, second by second, and what that costs against on-demand.
//!
//! DynamoDB keeps up to 300 seconds of unused provisioned capacity as burst capacity
//! (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/burst-adaptive-capacity.html>).
//! The model is that bucket: with `p` units a second provisioned it holds at most `300 p`
//! units, starts full, refills `p` a second and pays each second's consumption; `p` serves
//! the profile when the bucket never runs dry. [`needed`] is the least such `p`. DynamoDB
//! documents burst as best effort, so the plan never provisions below the profile's mean
//! over the target utilisation that Application Auto Scaling keeps (the template's
//! `TableTargetUtilization`, 70% by default): a steady fleet is provisioned at its mean over
//! 0.7, a spiky one at what its bursts need.

use serde::Serialize;

/// Seconds of unused capacity DynamoDB keeps as burst capacity.
pub const BURST_SECONDS: f64 = 300.0;
/// Application Auto Scaling's default target utilisation in the template.
pub const TARGET_UTILIZATION: f64 = 0.70;

/// Whether `provisioned` units a second serve `per_second` with a burst bucket of
/// `burst_seconds` of unused capacity (starting full).
pub fn serves(per_second: &[f64], provisioned: f64, burst_seconds: f64) -> bool {
    let cap = provisioned * burst_seconds;
    let mut bucket = cap;
    for &used in per_second {
        bucket = (bucket + provisioned).min(cap + provisioned) - used;
        if bucket < -1e-9 {
            return false;
        }
        bucket = bucket.min(cap);
    }
    true
}

/// The least units a second that serve `per_second` (see [`serves`]), to a hundredth of a
/// unit; 0 for an empty or idle profile.
pub fn needed(per_second: &[f64], burst_seconds: f64) -> f64 {
    let peak = peak(per_second);
    if peak <= 0.0 {
        return 0.0;
    }
    // The peak always serves; below the mean nothing can (the bucket drains on average).
    let (mut low, mut high) = (mean(per_second).max(0.0), peak);
    if serves(per_second, low, burst_seconds) {
        return round_up(low);
    }
    while high - low > 0.005 {
        let mid = (low + high) / 2.0;
        if serves(per_second, mid, burst_seconds) {
            high = mid;
        } else {
            low = mid;
        }
    }
    round_up(high)
}

fn peak(per_second: &[f64]) -> f64 {
    per_second.iter().copied().fold(0.0_f64, f64::max)
}

fn mean(per_second: &[f64]) -> f64 {
    if per_second.is_empty() {
        0.0
    } else {
        per_second.iter().sum::<f64>() / per_second.len() as f64
    }
}

fn round_up(units: f64) -> f64 {
    (units * 100.0).ceil() / 100.0
}

/// What a profile needs provisioned, for writes and for reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Plan {
    /// The busiest second's write units.
    pub peak_wcu_per_s: f64,
    /// The busiest second's read units.
    pub peak_rcu_per_s: f64,
    pub mean_wcu_per_s: f64,
    pub mean_rcu_per_s: f64,
    /// Write capacity units to provision: what the bursts need, and never below the mean
    /// over the target utilisation.
    pub wcu: f64,
    pub rcu: f64,
}

/// What a table and its indexes need provisioned: each has its own capacity.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Provisioned {
    /// By target: `table`, or an index's name.
    pub targets: std::collections::BTreeMap<String, Plan>,
    /// Write capacity units provisioned, summed over the table and its indexes.
    pub wcu: f64,
    pub rcu: f64,
    /// The busiest second of the table and its indexes together.
    pub peak_wcu_per_s: f64,
    pub peak_rcu_per_s: f64,
}

/// Plans each target's profile (`(write, read)` units in each second, every target over the
/// same seconds) and sums them.
pub fn provision(profiles: std::collections::BTreeMap<String, Vec<(f64, f64)>>) -> Provisioned {
    let mut total = Provisioned::default();
    let mut together: Vec<(f64, f64)> = Vec::new();
    for (target, profile) in profiles {
        let writes: Vec<f64> = profile.iter().map(|(w, _)| *w).collect();
        let reads: Vec<f64> = profile.iter().map(|(_, r)| *r).collect();
        let p = plan(&writes, &reads);
        total.wcu += p.wcu;
        total.rcu += p.rcu;
        if together.len() < profile.len() {
            together.resize(profile.len(), (0.0, 0.0));
        }
        for (sum, (w, r)) in together.iter_mut().zip(&profile) {
            sum.0 += w;
            sum.1 += r;
        }
        total.targets.insert(target, p);
    }
    let writes: Vec<f64> = together.iter().map(|(w, _)| *w).collect();
    let reads: Vec<f64> = together.iter().map(|(_, r)| *r).collect();
    total.peak_wcu_per_s = peak(&writes);
    total.peak_rcu_per_s = peak(&reads);
    total
}

/// The plan for `writes` and `reads`, units consumed in each second of the profile.
pub fn plan(writes: &[f64], reads: &[f64]) -> Plan {
    let provision =
        |s: &[f64]| round_up(needed(s, BURST_SECONDS).max(mean(s) / TARGET_UTILIZATION));
    Plan {
        peak_wcu_per_s: peak(writes),
        peak_rcu_per_s: peak(reads),
        mean_wcu_per_s: mean(writes),
        mean_rcu_per_s: mean(reads),
        wcu: provision(writes),
        rcu: provision(reads),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_steady_profile_needs_its_rate_and_a_spike_is_paid_from_the_bucket() {
        assert_eq!(needed(&[5.0; 600], BURST_SECONDS), 5.0);
        // 3,010 units in one second of an otherwise idle 10 minutes: the full bucket (300 p)
        // and that second's p pay it when p is 10.
        let mut spike = vec![0.0; 600];
        spike[0] = 3010.0;
        assert!((needed(&spike, BURST_SECONDS) - 10.0).abs() < 0.02);
        assert_eq!(needed(&[], BURST_SECONDS), 0.0);
        assert_eq!(needed(&[0.0; 10], BURST_SECONDS), 0.0);
    }

    #[test]
    fn the_plan_never_provisions_below_the_mean_over_the_target_utilisation() {
        let steady = plan(&[7.0; 3600], &[1.0; 3600]);
        assert_eq!(steady.wcu, 10.0);
        assert_eq!(steady.peak_wcu_per_s, 7.0);
        assert_eq!(steady.rcu, round_up(1.0 / TARGET_UTILIZATION));
    }

    proptest! {
        #[test]
        fn what_is_needed_serves_and_a_little_less_does_not(
            profile in proptest::collection::vec(0.0f64..2000.0, 1..400),
            burst in 0.0f64..400.0,
        ) {
            let p = needed(&profile, burst);
            let peak = profile.iter().copied().fold(0.0, f64::max);
            prop_assert!(serves(&profile, p, burst));
            prop_assert!(p <= round_up(peak) + 1e-9);
            let mean = profile.iter().sum::<f64>() / profile.len() as f64;
            if p - 0.02 > mean {
                prop_assert!(!serves(&profile, p - 0.02, burst));
            }
        }
    }
}
