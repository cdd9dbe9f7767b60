//! Alert items (`SCHED#{schedule}` / `ALERT#{kind}#{subject}`): the alert as one JSON
//! document, when it was recorded and published, its TTL, and while unpublished its outbox
//! entry in the `active` index (`ALERTS#OUTBOX` / `{recorded_at}#{schedule}#{key}`).

use chrono::{DateTime, Duration, Utc};
use cronledger_core::alerts::Alert;

use crate::alerts::{RecordedAlert, ALERT_RECORD_DAYS};
use crate::error::StoreError;
use crate::item::{key, Item, ItemReader, ItemWriter};
use crate::keys::{self, EXPIRES_AT, GSI2PK, GSI2SK, PK, SK};

pub const TYPE: &str = "type";
pub const ALERT_TYPE: &str = "ALERT";
pub const DOC: &str = "doc";
pub const RECORDED_AT: &str = "recorded_at";
pub const PUBLISHED_AT: &str = "published_at";

/// The table key of `alert`'s record.
pub fn alert_key(alert: &Alert) -> Item {
    key(
        keys::schedule_pk(&alert.schedule),
        keys::alert_sk(&alert.key()),
    )
}

/// When a record made at `recorded_at` expires (its TTL, epoch seconds).
pub fn expires_at(recorded_at: DateTime<Utc>) -> i64 {
    (recorded_at + Duration::days(ALERT_RECORD_DAYS)).timestamp()
}

pub fn encode(recorded: &RecordedAlert) -> Result<Item, StoreError> {
    let alert = &recorded.alert;
    let doc =
        serde_json::to_string(alert).map_err(|e| StoreError::InvalidRequest(e.to_string()))?;
    let mut w = ItemWriter::new()
        .s(PK, keys::schedule_pk(&alert.schedule))
        .s(SK, keys::alert_sk(&alert.key()))
        .s(TYPE, ALERT_TYPE)
        .s(DOC, doc)
        .time(RECORDED_AT, recorded.recorded_at)
        .opt_time(PUBLISHED_AT, recorded.published_at)
        .n(EXPIRES_AT, expires_at(recorded.recorded_at));
    if recorded.published_at.is_none() {
        w = w.s(GSI2PK, keys::ALERTS_OUTBOX_PK).s(
            GSI2SK,
            keys::alert_outbox_sk(recorded.recorded_at, &alert.schedule, &alert.key()),
        );
    }
    Ok(w.build())
}

pub fn decode(item: &Item) -> Result<RecordedAlert, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, ALERT_TYPE)?;
    Ok(RecordedAlert {
        alert: r.json(DOC)?,
        recorded_at: r.time(RECORDED_AT)?,
        published_at: r.opt_time(PUBLISHED_AT)?,
    })
}

/// A schedule's alerts as `alerts_of` answers: newest recorded first (ties in the table's
/// key order), at most `limit`.
pub fn newest_first(mut alerts: Vec<RecordedAlert>, limit: u32) -> Vec<RecordedAlert> {
    alerts.sort_by_key(|recorded| std::cmp::Reverse(recorded.recorded_at));
    alerts.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    alerts
}

#[cfg(test)]
mod tests {
    use cronledger_core::alerts::{AlertKind, Severity};

    use super::*;

    fn recorded(published_at: Option<DateTime<Utc>>) -> RecordedAlert {
        let at: DateTime<Utc> = "2026-03-01T10:00:00.25Z".parse().expect("instant");
        RecordedAlert {
            alert: Alert {
                kind: AlertKind::ConsecutiveFailures,
                severity: Severity::Warning,
                schedule: "nightly".into(),
                owner: Some("payments".into()),
                window: None,
                run: Some("nightly/RUN#2026-03-01T10:00:00Z".into()),
                message: "failed 3 times in a row".into(),
                console_url: None,
                at,
                subject: "nightly/RUN#2026-03-01T10:00:00Z".into(),
            },
            recorded_at: at,
            published_at,
        }
    }

    #[test]
    fn round_trips_and_sits_in_the_outbox_only_while_unpublished() {
        let waiting = recorded(None);
        let item = encode(&waiting).expect("encode");
        assert_eq!(decode(&item).expect("decode"), waiting);
        assert!(item.contains_key(GSI2PK) && item.contains_key(GSI2SK));
        let sent = recorded(Some(waiting.recorded_at + Duration::seconds(1)));
        let item = encode(&sent).expect("encode");
        assert_eq!(decode(&item).expect("decode"), sent);
        assert!(!item.contains_key(GSI2PK) && !item.contains_key(GSI2SK));
        assert_eq!(
            ItemReader::new(&item).n::<i64>(EXPIRES_AT).expect("ttl"),
            waiting.recorded_at.timestamp() + ALERT_RECORD_DAYS * 86_400
        );
    }
}
