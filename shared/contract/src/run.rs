//! Runs as the api shows them: a ledger entry with its run id, timestamps, steps, children,
//! attempts and the same window's runs of its upstreams and downstreams.

use chrono::{DateTime, NaiveDate, Utc};
use cronledger_core::attempt::AttemptOutcome;
use cronledger_core::quality::{Quality, QualityReason};
use cronledger_core::run::{Origin, Reason, RunResult, RunStatus, Trigger};
use cronledger_core::steps::StepCheckpoint;
use cronledger_core::Lane;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{BackfillView, Page};

/// One run: its ledger entry (DESIGN "Manifest and ledger formats") and what the api adds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunView {
    // The ledger entry.
    pub schedule: String,
    pub scheduled_for: DateTime<Utc>,
    pub trigger: Trigger,
    pub status: RunStatus,
    pub reason: Option<Reason>,
    pub attempts: u32,
    pub window_start: DateTime<Utc>,
    pub window_end: DateTime<Utc>,
    pub idempotency_key: String,
    pub replay_group_id: Option<String>,
    /// A range record's last window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_end: Option<DateTime<Utc>>,
    /// A range record's windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// A COALESCED run's: the run that does its work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coalesced_into: Option<DateTime<Utc>>,
    // What the api adds.
    /// The run's id in paths: its scheduled instant, plus `~M~{request}` or `~B~{backfill}`
    /// for an operator's run.
    pub run_id: String,
    pub origin: Origin,
    /// The window's business date in the schedule's zone.
    pub business_date: NaiveDate,
    pub lane: Option<Lane>,
    /// An operator forced it (`mode: new`): it runs even when its window already succeeded.
    pub forced: bool,
    /// The schedule version whose job it runs.
    pub schedule_version: u64,
    pub cron: String,
    pub timezone: String,
    pub job_id: Option<String>,
    pub result: Option<RunResult>,
    /// SUSPECT: the run succeeded with a `count` outside its schedule's `expect` band
    /// (its dependents wait unless they `accept_suspect`); `null` otherwise. The same as
    /// `result.quality`, at the top where lists and filters read it.
    #[serde(default)]
    pub quality: Option<Quality>,
    /// Why a SUSPECT run is: BELOW_MIN, ABOVE_MAX or OUTSIDE_LEARNED_BAND; `null` otherwise.
    #[serde(default)]
    pub quality_reason: Option<QualityReason>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub queued_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    /// A steps job's checkpoints, one per step, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepCheckpoint>,
    /// The children the run's job answered, as counted so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<ChildrenView>,
    /// One run (GET, retry): the latest attempt as the run describes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_detail: Option<AttemptDetail>,
    /// One run (GET, retry): its attempts, oldest first (the most recent 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_history: Option<Vec<AttemptView>>,
    /// Older attempts beyond `attempt_history`'s bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts_unlisted: Option<u64>,
    /// One run (GET): the same window's run of each schedule this one runs after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Vec<RelatedRun>>,
    /// One run (GET): the same window's run of each schedule that runs after this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downstream: Option<Vec<RelatedRun>>,
}

pub type RunPage = Page<RunView>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChildrenView {
    pub total: u32,
    pub succeeded: u32,
    pub failed: u32,
    pub running: u32,
}

/// Another schedule's run of the same window; `status: null` while not recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelatedRun {
    pub schedule: String,
    pub scheduled_for: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub status: Option<RunStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttemptDetail {
    pub count: u32,
    /// `null` before the first attempt.
    pub current: Option<CurrentAttempt>,
}

/// The latest attempt as the run item holds it: its lease and heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CurrentAttempt {
    pub number: u32,
    pub lease_epoch: u64,
    pub lease_owner: Option<String>,
    pub lease_until: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub status: RunStatus,
    pub result: Option<RunResult>,
}

/// One attempt: number (its lease epoch), worker, start, end, outcome, the status it left
/// the run in and the error it reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttemptView {
    pub number: u64,
    pub lease_epoch: u64,
    pub worker: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    /// `null` while running.
    pub outcome: Option<AttemptOutcome>,
    pub status: Option<RunStatus>,
    pub reason: Option<Reason>,
    pub error: Option<AttemptError>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttemptError {
    pub code: Option<String>,
    pub message: Option<String>,
}

/// What an operator's run request did: a new run, the window's existing one (`reused`), or
/// the answer to a repeated `Idempotency-Key` (`idempotent_replay`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunOutcome {
    pub created: bool,
    pub reused: bool,
    pub idempotent_replay: bool,
    pub run: RunView,
}

/// An approved run: sent to the manual lane, or (a range record) folded into the backfill
/// that replays its windows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalOutcome {
    pub run: RunView,
    /// The range record's backfill; `null` for one run.
    pub backfill: Option<BackfillView>,
}

/// A one-off run at a future instant, as EventBridge Scheduler will deliver it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunAtOutcome {
    pub schedule: String,
    pub at: DateTime<Utc>,
    pub request_id: String,
    /// The one-time EventBridge Scheduler schedule (deleted after it fires).
    pub scheduler_schedule: String,
    /// The event it will deliver to the api function.
    pub event: Value,
}
