//! The reconciler's knobs, with their defaults and the environment variables that set them.

use std::str::FromStr;

use cronledger_core::{PlannerConfig, Span};

use super::error::ReconcileError;

/// Stuck-run thresholds.
#[derive(Debug, Clone, Copy)]
pub struct StuckConfig {
    /// A PENDING live run without a message this long after it was created is sent
    /// (the ticker died between the run write and the send).
    pub pending_after: Span,
    /// A QUEUED run not started this long after it was queued (or became due) is sent
    /// again with the same message identity.
    pub queued_after: Span,
    /// A RETRY_PENDING run not restarted this long after its last activity is sent again
    /// (longer than the longest retry backoff).
    pub retry_pending_after: Span,
    /// Slack past an expired lease or past `max_runtime` before a RUNNING run is STALLED.
    pub stall_grace: Span,
    /// Active runs read per query. The scan follows the pages until every shard is read:
    /// a pass sees every active run (a RUNNING run behind any number of QUEUED ones too).
    pub scan_page_size: u32,
}

impl Default for StuckConfig {
    fn default() -> Self {
        StuckConfig {
            pending_after: Span::minutes(2),
            queued_after: Span::minutes(30),
            retry_pending_after: Span::minutes(60),
            stall_grace: Span::minutes(2),
            scan_page_size: 1_000,
        }
    }
}

/// How catch-up runs flow into the correction and backfill lanes.
#[derive(Debug, Clone, Copy)]
pub struct ReleaseConfig {
    /// Catch-up runs in flight per schedule at most (backfill lane; the correction lane's
    /// serial release is one at a time).
    pub per_schedule: usize,
    /// Catch-up runs in flight per lane at most.
    pub per_lane: usize,
    /// Runs released per lane per pass at most.
    pub batch: usize,
    /// Runs released per lane per minute at most, averaged over passes.
    pub rate_per_minute: f64,
}

impl Default for ReleaseConfig {
    fn default() -> Self {
        ReleaseConfig {
            per_schedule: 2,
            per_lane: 10,
            batch: 7,
            rate_per_minute: 7.0,
        }
    }
}

/// When catch-up release pauses.
#[derive(Debug, Clone)]
pub struct PauseConfig {
    /// Visible messages in the realtime lane above which catch-up waits.
    pub realtime_backlog: u64,
    /// DLQ growth of a catch-up lane between two passes above which it waits.
    pub dlq_growth: u64,
    /// Fraction of in-flight catch-up runs that failed an attempt (RETRY_PENDING or
    /// STALLED) above which release waits, once `error_min_sample` runs are in flight.
    pub error_rate: f64,
    pub error_min_sample: usize,
    /// CloudWatch alarms that pause catch-up while any is in ALARM.
    pub alarms: Vec<String>,
}

impl Default for PauseConfig {
    fn default() -> Self {
        PauseConfig {
            realtime_backlog: 100,
            dlq_growth: 0,
            error_rate: 0.5,
            error_min_sample: 4,
            alarms: Vec::new(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// Shards the table's schedules and runs are spread over.
    pub shards: u32,
    pub planner: PlannerConfig,
    /// Schedules reconciled at once.
    pub concurrency: usize,
    /// Schedules listed per page.
    pub page_size: u32,
    pub stuck: StuckConfig,
    pub release: ReleaseConfig,
    pub pause: PauseConfig,
    /// How long a schedule's parked late runs wait for the rest of their gap: past it they
    /// are planned even though more late runs are still queued (a lane that stays behind
    /// would otherwise keep the gap open, and the schedule from running, forever).
    pub backlog_wait: Span,
    /// The ticker's EventBridge Scheduler schedules, checked to exist and be ENABLED.
    pub ticker_schedules: Vec<String>,
    pub ticker_schedule_group: Option<String>,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        ReconcilerConfig {
            shards: 1,
            planner: PlannerConfig {
                settle: Span::minutes(2),
                ..PlannerConfig::default()
            },
            concurrency: 8,
            page_size: 100,
            stuck: StuckConfig::default(),
            release: ReleaseConfig::default(),
            pause: PauseConfig::default(),
            backlog_wait: Span::minutes(15),
            ticker_schedules: Vec::new(),
            ticker_schedule_group: None,
        }
    }
}

impl ReconcilerConfig {
    /// Reads the `CRONLEDGER_*` variables over the defaults (see the README of the template).
    pub fn from_env(shards: u32) -> Result<ReconcilerConfig, ReconcileError> {
        ReconcilerConfig::from_lookup(shards, |name| std::env::var(name).ok())
    }

    pub fn from_lookup(
        shards: u32,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<ReconcilerConfig, ReconcileError> {
        let d = ReconcilerConfig::default();
        let list = |name: &str| -> Vec<String> {
            get(name)
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(ReconcilerConfig {
            shards,
            planner: PlannerConfig {
                settle: read(&get, "CRONLEDGER_RECONCILE_SETTLE", d.planner.settle)?,
                range_threshold: read(
                    &get,
                    "CRONLEDGER_RANGE_THRESHOLD",
                    d.planner.range_threshold,
                )?,
            },
            concurrency: read(&get, "CRONLEDGER_RECONCILE_CONCURRENCY", d.concurrency)?,
            page_size: d.page_size,
            stuck: StuckConfig {
                pending_after: read(
                    &get,
                    "CRONLEDGER_STUCK_PENDING_AFTER",
                    d.stuck.pending_after,
                )?,
                queued_after: read(&get, "CRONLEDGER_STUCK_QUEUED_AFTER", d.stuck.queued_after)?,
                retry_pending_after: read(
                    &get,
                    "CRONLEDGER_STUCK_RETRY_PENDING_AFTER",
                    d.stuck.retry_pending_after,
                )?,
                stall_grace: read(&get, "CRONLEDGER_STALL_GRACE", d.stuck.stall_grace)?,
                scan_page_size: d.stuck.scan_page_size,
            },
            release: ReleaseConfig {
                per_schedule: read(
                    &get,
                    "CRONLEDGER_RELEASE_PER_SCHEDULE",
                    d.release.per_schedule,
                )?,
                per_lane: read(&get, "CRONLEDGER_RELEASE_PER_LANE", d.release.per_lane)?,
                batch: read(&get, "CRONLEDGER_RELEASE_BATCH", d.release.batch)?,
                rate_per_minute: read(
                    &get,
                    "CRONLEDGER_RELEASE_RATE_PER_MINUTE",
                    d.release.rate_per_minute,
                )?,
            },
            pause: PauseConfig {
                realtime_backlog: read(
                    &get,
                    "CRONLEDGER_PAUSE_REALTIME_BACKLOG",
                    d.pause.realtime_backlog,
                )?,
                dlq_growth: read(&get, "CRONLEDGER_PAUSE_DLQ_GROWTH", d.pause.dlq_growth)?,
                error_rate: read(&get, "CRONLEDGER_PAUSE_ERROR_RATE", d.pause.error_rate)?,
                error_min_sample: d.pause.error_min_sample,
                alarms: list("CRONLEDGER_PAUSE_ALARMS"),
            },
            backlog_wait: read(&get, "CRONLEDGER_BACKLOG_WAIT", d.backlog_wait)?,
            ticker_schedules: list("CRONLEDGER_TICKER_SCHEDULES"),
            ticker_schedule_group: get("CRONLEDGER_TICKER_SCHEDULE_GROUP")
                .filter(|g| !g.is_empty()),
        })
    }
}

fn read<T: FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
    default: T,
) -> Result<T, ReconcileError>
where
    T::Err: std::fmt::Display,
{
    match get(name) {
        None => Ok(default),
        Some(value) => value
            .trim()
            .parse()
            .map_err(|e: T::Err| ReconcileError::Config {
                name,
                value: value.clone(),
                problem: e.to_string(),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_overrides_and_refuses_garbage() {
        let env = |k: &str| match k {
            "CRONLEDGER_RELEASE_BATCH" => Some("3".to_string()),
            "CRONLEDGER_RECONCILE_SETTLE" => Some("90s".to_string()),
            "CRONLEDGER_PAUSE_ALARMS" => Some("a, b,,".to_string()),
            "CRONLEDGER_BACKLOG_WAIT" => Some("40m".to_string()),
            _ => None,
        };
        let c = ReconcilerConfig::from_lookup(4, env).unwrap();
        assert_eq!(c.shards, 4);
        assert_eq!(c.release.batch, 3);
        assert_eq!(c.planner.settle, Span::seconds(90));
        assert_eq!(c.pause.alarms, vec!["a", "b"]);
        assert_eq!(c.backlog_wait, Span::minutes(40));
        let bad = ReconcilerConfig::from_lookup(1, |k: &str| {
            (k == "CRONLEDGER_RELEASE_RATE_PER_MINUTE").then(|| "fast".to_string())
        });
        assert_eq!(bad.unwrap_err().code(), "RECONCILE_CONFIG_INVALID");
    }
}
