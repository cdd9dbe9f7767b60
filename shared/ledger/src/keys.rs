//! Key layout of the single table (DESIGN "Data model"). Every key string is built here.

use chrono::{DateTime, NaiveDate, Utc};
use cronledger_core::RunKey;

pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const GSI1PK: &str = "GSI1PK";
pub const GSI1SK: &str = "GSI1SK";
pub const GSI2PK: &str = "GSI2PK";
pub const GSI2SK: &str = "GSI2SK";
pub const GSI3PK: &str = "GSI3PK";
pub const GSI3SK: &str = "GSI3SK";
/// The TTL attribute (epoch seconds) of expiring items.
pub const EXPIRES_AT: &str = "expires_at";

/// Sparse index of enabled schedules by next fire time, per shard.
pub const DUE_INDEX: &str = "due";
/// Sparse index of non-terminal runs, per shard, for the reconciler's stuck-run scan.
pub const ACTIVE_INDEX: &str = "active";
/// Every schedule, for listing without scanning the runs.
pub const CATALOG_INDEX: &str = "catalog";

/// The schedule's own item. It sorts after every run key (`RUN#...`), so one descending
/// query reads the schedule and its newest runs together (the worker's admission).
pub const SCHEDULE_SK: &str = "SCHEDULE";
pub const RUN_PREFIX: &str = "RUN#";
pub const AUDIT_PREFIX: &str = "AUDIT#";
/// A schedule's outcome counters of one UTC day (see [`crate::health`]). Sorts before
/// `RUN#`, so the schedule-and-newest-runs read (`RUN#` through `SCHEDULE`) never meets them.
pub const HEALTH_PREFIX: &str = "HEALTH#";
pub const CATALOG_PK: &str = "SCHEDULES";
/// A schedule's recorded alerts (`ALERT#{kind}#{subject}`): before every audit entry and run
/// key, so the schedule's run and audit reads (prefixed or ranged) never meet them.
pub const ALERT_PREFIX: &str = "ALERT#";
/// The `active` index partition of recorded alerts not yet published (the outbox).
pub const ALERTS_OUTBOX_PK: &str = "ALERTS#OUTBOX";
/// A schedule's reminder trackers of held work (`AWAITING#{group}`): after the audit
/// entries and before the health counters and runs, so no prefixed or ranged read of those
/// meets them.
pub const AWAITING_PREFIX: &str = "AWAITING#";
/// The `active` index partition of reminder trackers, by next reminder time.
pub const ALERTS_AWAITING_PK: &str = "ALERTS#AWAITING";

pub fn schedule_pk(id: &str) -> String {
    format!("SCHED#{id}")
}

pub fn audit_sk(version: u64) -> String {
    // Zero-padded so versions sort numerically.
    format!("{AUDIT_PREFIX}{version:010}")
}

/// An operator's action under `version`: after that version's entry (a longer key with the
/// same prefix sorts after it) and before the next one's, in time order, with a tag so two
/// actions at one instant both stay.
pub fn operator_audit_sk(version: u64, at: DateTime<Utc>, action: &str, tag: u32) -> String {
    format!(
        "{}#{}#{action}#{tag:08x}",
        audit_sk(version),
        at.format("%Y-%m-%dT%H:%M:%S%.6fZ")
    )
}

/// `HEALTH#{yyyy-mm-dd}`: text order is day order.
pub fn health_sk(day: NaiveDate) -> String {
    format!("{HEALTH_PREFIX}{}", day.format("%Y-%m-%d"))
}

pub fn run_sk(key: &RunKey) -> String {
    key.sort_key()
}

/// A run's children (`CHILD#{run}#{step}#{index}`): before `RUN#`, so no read of runs meets
/// them, and together under their run for one Query.
pub const CHILD_PREFIX: &str = "CHILD#";

/// The sort key prefix of the children one step of `parent` answered.
pub fn children_prefix(parent: &RunKey, step: u32) -> String {
    let run = run_sk(parent);
    let rest = run.strip_prefix(RUN_PREFIX).unwrap_or(&run);
    format!("{CHILD_PREFIX}{rest}#S{step:02}#")
}

/// A child as errors name it.
pub fn child_name(parent: &RunKey, step: u32, index: u32) -> String {
    format!("{parent}#S{step}#child-{index}")
}

pub fn child_sk(parent: &RunKey, step: u32, index: u32) -> String {
    format!("{}{index:05}", children_prefix(parent, step))
}

/// An instant's whole second as text without the zone (`2026-03-01T10:05:00`): every text
/// form of an instant in that second (fractions, the `Z`, a sort key's suffix) begins with it.
pub fn whole_second(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S").to_string()
}

/// The instant a run sort key (`RUN#{instant}` and an optional `#...` suffix) is for.
pub fn run_sk_instant(sk: &str) -> Option<DateTime<Utc>> {
    let rest = sk.strip_prefix(RUN_PREFIX)?;
    let instant = rest.split('#').next()?;
    DateTime::parse_from_rfc3339(instant)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// An alert's sort key in its schedule's partition; `alert_key` is `Alert::key()`.
pub fn alert_sk(alert_key: &str) -> String {
    format!("{ALERT_PREFIX}{alert_key}")
}

/// An unpublished alert's outbox sort key: recorded time first (fixed-width microseconds,
/// so text order is time order), then its schedule and key.
pub fn alert_outbox_sk(recorded_at: DateTime<Utc>, schedule_id: &str, alert_key: &str) -> String {
    format!(
        "{}#{schedule_id}#{alert_key}",
        recorded_at.format("%Y-%m-%dT%H:%M:%S%.6fZ")
    )
}

/// A reminder tracker's sort key in its schedule's partition.
pub fn awaiting_sk(group: &str) -> String {
    format!("{AWAITING_PREFIX}{group}")
}

/// A reminder tracker's index sort key: its next reminder first (whole seconds, so text
/// order is time order and [`due_sk_bound`] bounds the due ones), then its schedule and group.
pub fn awaiting_index_sk(remind_at: DateTime<Utc>, schedule_id: &str, group: &str) -> String {
    format!("{}#{schedule_id}#{group}", index_time(remind_at))
}

pub fn backfill_pk(id: &str) -> String {
    format!("BACKFILL#{id}")
}

pub fn idempotency_pk(key: &str) -> String {
    format!("IDEM#{key}")
}

/// A shard's own partition: its fire mark and its catalog (see [`crate::fire_mark`]).
pub fn shard_pk(shard: u32) -> String {
    format!("SHARD#{shard}")
}

pub const FIRE_MARK_SK: &str = "FIRE";
pub const CATALOG_ENTRY_PREFIX: &str = "SCHEDULE#";

pub fn catalog_entry_sk(id: &str) -> String {
    format!("{CATALOG_ENTRY_PREFIX}{id}")
}

pub fn due_pk(shard: u32) -> String {
    format!("DUE#{shard}")
}

pub fn due_sk(next_run_at: DateTime<Utc>, id: &str) -> String {
    format!("{}#{id}", index_time(next_run_at))
}

/// Upper bound (exclusive) of `due_sk` values whose time is at or before `t`.
/// `$` is the character after `#`, so every `{t}#{id}` sorts below `{t}$`.
pub fn due_sk_bound(t: DateTime<Utc>) -> String {
    format!("{}$", index_time(t))
}

pub fn active_pk(shard: u32) -> String {
    format!("ACTIVE#{shard}")
}

/// A live run's entry, by window: nothing about its status, so no status change moves it.
/// A run enters the index once when it is created live (or first becomes live) and leaves it
/// once at its end: two index writes a run, however many statuses it passes through (an
/// update that changes no key or projected attribute writes nothing to an index). Readers
/// that want one status filter the entries' runs by it.
pub fn active_sk(key: &RunKey) -> String {
    format!(
        "{}#{}#{}",
        index_time(key.scheduled_for),
        key.schedule_id,
        key.sort_key()
    )
}

/// Index sort keys need one fixed width so text order is time order: whole seconds
/// (fractions are dropped, which only ever moves a bound earlier by less than a second).
pub fn index_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Writes per second one index partition key is sized for: half of DynamoDB's 1,000 write
/// units per second per partition, leaving room for the top-of-the-minute burst.
pub const INDEX_PARTITION_WRITES_PER_SECOND: u64 = 500;

/// Index writes one run makes in its busiest index, `active` (keys-only projection, at most
/// 1 KB an entry, so one unit each): the PENDING put, QUEUED->RUNNING (the class changes: a
/// delete and a put) and the delete when it ends; PENDING->QUEUED keeps its key and writes
/// nothing. The `due` index takes two per fire (the sort key moves to the next time).
pub const ACTIVE_WRITES_PER_RUN: u64 = 4;

/// The shard count a fleet needs so that no index partition key takes more than
/// [`INDEX_PARTITION_WRITES_PER_SECOND`]: ceil(runs per minute / 60 x 4 / 500), that is one
/// shard per 7,500 runs a minute (100,000 minutely schedules: 14 shards, 476 writes/s on
/// each `active` key and 238 on each `due` key).
pub fn shards_for_fleet(runs_per_minute: u64) -> u32 {
    let per_shard = INDEX_PARTITION_WRITES_PER_SECOND * 60 / ACTIVE_WRITES_PER_RUN;
    let shards = runs_per_minute
        .div_ceil(per_shard)
        .clamp(1, u64::from(MAX_SHARDS));
    u32::try_from(shards).unwrap_or(MAX_SHARDS)
}

/// The most shards a deployment may have (the template's bound).
pub const MAX_SHARDS: u32 = 1024;

/// Which shard a schedule (and its runs) belongs to: FNV-1a of the id, so every writer
/// agrees without a lookup. The shard count may grow (never shrink: see
/// `DynamoLedger::claim_shard_count`); items move to their new shard when next written.
pub fn shard_of(schedule_id: &str, shards: u32) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in schedule_id.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash % shards.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn due_bound_includes_the_instant_and_excludes_later_ones() {
        let bound = due_sk_bound(t("2026-01-01T00:00:00Z"));
        assert!(due_sk(t("2026-01-01T00:00:00Z"), "zzz") < bound);
        assert!(due_sk(t("2025-12-31T23:59:59Z"), "a") < bound);
        assert!(due_sk(t("2026-01-01T00:00:01Z"), "a") > bound);
    }

    #[test]
    fn a_run_sort_key_gives_back_its_instant() {
        let at = t("2026-03-01T10:05:00.5Z");
        let manual = RunKey {
            schedule_id: "a".into(),
            scheduled_for: at,
            origin: cronledger_core::run::Origin::Manual("m#1".into()),
        };
        assert_eq!(run_sk_instant(&run_sk(&manual)), Some(at));
        assert_eq!(
            run_sk_instant("RUN#2026-03-01T10:05:00Z"),
            Some(t("2026-03-01T10:05:00Z"))
        );
        assert_eq!(run_sk_instant(SCHEDULE_SK), None);
        assert_eq!(run_sk_instant("RUN#garbage"), None);
    }

    #[test]
    fn the_schedule_item_sorts_after_every_run() {
        let at = t("2026-03-01T10:05:00Z");
        let manual = RunKey {
            schedule_id: "a".into(),
            scheduled_for: at,
            origin: cronledger_core::run::Origin::Manual("~~~".into()),
        };
        assert!(run_sk(&manual).as_str() < SCHEDULE_SK);
        assert!(RUN_PREFIX < SCHEDULE_SK && audit_sk(u64::MAX).as_str() < RUN_PREFIX);
    }

    #[test]
    fn alerts_sort_before_audit_entries_and_runs() {
        let alert = alert_sk("CONSECUTIVE_FAILURES#~~~");
        assert!(alert.as_str() < AUDIT_PREFIX && alert.as_str() < RUN_PREFIX);
        let tracker = awaiting_sk("~~~");
        let last_audit = operator_audit_sk(u64::MAX, t("2026-01-01T00:00:00Z"), "~~~", u32::MAX);
        assert!(awaiting_sk("") > last_audit && tracker.as_str() < HEALTH_PREFIX);
        assert!(!tracker.starts_with(ALERT_PREFIX) && !tracker.starts_with(AUDIT_PREFIX));
        assert!(!alert.starts_with(AUDIT_PREFIX) && !alert.starts_with(RUN_PREFIX));
        let early = alert_outbox_sk(t("2026-01-01T00:00:00.5Z"), "b", "K");
        let late = alert_outbox_sk(t("2026-01-01T00:00:01Z"), "a", "K");
        assert!(early < late, "recorded time first: {early} < {late}");
    }

    #[test]
    fn audit_keys_sort_by_version() {
        assert!(audit_sk(9) < audit_sk(10));
    }

    #[test]
    fn operator_entries_sort_between_their_version_and_the_next() {
        let early = operator_audit_sk(9, t("2026-01-01T00:00:00Z"), "RUN_NOW", 7);
        let late = operator_audit_sk(9, t("2026-01-01T00:00:00.5Z"), "RUN_RETRY", 1);
        assert!(audit_sk(9) < early && early < late && late < audit_sk(10));
    }

    #[test]
    fn the_fleet_rule_gives_one_shard_per_seven_thousand_five_hundred_runs_a_minute() {
        assert_eq!(shards_for_fleet(0), 1);
        assert_eq!(shards_for_fleet(1_000), 1);
        assert_eq!(shards_for_fleet(7_500), 1);
        assert_eq!(shards_for_fleet(7_501), 2);
        assert_eq!(shards_for_fleet(10_000), 2);
        assert_eq!(shards_for_fleet(100_000), 14);
        assert_eq!(shards_for_fleet(u64::MAX), MAX_SHARDS);
        // At 100,000 runs a minute, no active partition key goes past the target.
        let per_key = 100_000 * ACTIVE_WRITES_PER_RUN / 60 / u64::from(shards_for_fleet(100_000));
        assert!(per_key <= INDEX_PARTITION_WRITES_PER_SECOND, "{per_key}");
    }

    #[test]
    fn shards_are_stable_and_in_range() {
        assert_eq!(
            shard_of("daily-settlement", 8),
            shard_of("daily-settlement", 8)
        );
        assert!((0..100).all(|i| shard_of(&format!("s{i}"), 4) < 4));
        assert_eq!(shard_of("anything", 0), 0);
    }
}
