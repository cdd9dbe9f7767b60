//! Retry delays: exponential with full jitter, capped. The jitter is derived from the run and
//! attempt, not from a random source, so a run's retry timing is reproducible in tests and
//! still spread out across runs.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use cronledger_core::RunKey;

#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(10),
            // SQS visibility can be at most 12 hours; 15 minutes keeps retries timely.
            max: Duration::from_secs(900),
        }
    }
}

impl Backoff {
    /// The delay before attempt `failed_attempt + 1`: between half and all of
    /// `base * 2^(failed_attempt - 1)`, capped at `max`.
    pub fn delay(&self, run: &RunKey, failed_attempt: u32) -> Duration {
        let exponent = failed_attempt.saturating_sub(1).min(20);
        let ceiling = self.base.saturating_mul(1u32 << exponent).min(self.max);
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        run.hash(&mut hasher);
        failed_attempt.hash(&mut hasher);
        // A fraction in [0.5, 1.0): never a zero wait, never above the ceiling.
        let fraction = 0.5 + (hasher.finish() % 1000) as f64 / 2000.0;
        ceiling.mul_f64(fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_is_capped() {
        let b = Backoff::default();
        let key = RunKey::expected("s", "2026-01-01T00:00:00Z".parse().unwrap());
        let delays: Vec<Duration> = (1..=12).map(|a| b.delay(&key, a)).collect();
        assert!(delays[0] >= Duration::from_secs(5) && delays[0] < Duration::from_secs(10));
        assert!(delays[3] >= Duration::from_secs(40));
        assert!(delays.iter().all(|d| *d <= b.max));
        assert_eq!(b.delay(&key, 3), b.delay(&key, 3), "reproducible");
    }
}
