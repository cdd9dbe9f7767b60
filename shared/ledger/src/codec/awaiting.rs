//! Reminder trackers of held work (`SCHED#{schedule}` / `AWAITING#{group}`): the tracker as
//! one JSON document, its TTL, and while it reminds its entry in the `active` index
//! (`ALERTS#AWAITING` / `{remind_at}#{schedule}#{group}`).

use chrono::{DateTime, Duration, Utc};

use crate::alerts::{Awaiting, AWAITING_RECORD_DAYS};
use crate::error::StoreError;
use crate::item::{key, Item, ItemReader, ItemWriter};
use crate::keys::{self, EXPIRES_AT, GSI2PK, GSI2SK, PK, SK};

pub const TYPE: &str = "type";
pub const AWAITING_TYPE: &str = "AWAITING";
pub const DOC: &str = "doc";

/// The table key of the tracker of `group` of `schedule`.
pub fn awaiting_key(schedule: &str, group: &str) -> Item {
    key(keys::schedule_pk(schedule), keys::awaiting_sk(group))
}

/// When a tracker started at `since` expires (its TTL, epoch seconds).
pub fn expires_at(since: DateTime<Utc>) -> i64 {
    (since + Duration::days(AWAITING_RECORD_DAYS)).timestamp()
}

/// The tracker's `active` index sort key.
pub fn index_sk(awaiting: &Awaiting) -> String {
    keys::awaiting_index_sk(awaiting.remind_at, &awaiting.schedule, &awaiting.group)
}

pub fn encode(awaiting: &Awaiting) -> Result<Item, StoreError> {
    let doc =
        serde_json::to_string(awaiting).map_err(|e| StoreError::InvalidRequest(e.to_string()))?;
    Ok(ItemWriter::new()
        .s(PK, keys::schedule_pk(&awaiting.schedule))
        .s(SK, keys::awaiting_sk(&awaiting.group))
        .s(TYPE, AWAITING_TYPE)
        .s(DOC, doc)
        .s(GSI2PK, keys::ALERTS_AWAITING_PK)
        .s(GSI2SK, index_sk(awaiting))
        .n(EXPIRES_AT, expires_at(awaiting.since))
        .build())
}

pub fn decode(item: &Item) -> Result<Awaiting, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, AWAITING_TYPE)?;
    r.json(DOC)
}

#[cfg(test)]
mod tests {
    use cronledger_core::RunKey;

    use super::*;
    use crate::alerts::HeldWork;

    #[test]
    fn round_trips_with_its_reminder_time_in_the_index_key() {
        let since: DateTime<Utc> = "2026-03-01T10:00:00Z".parse().expect("instant");
        let awaiting = Awaiting {
            schedule: "nightly".into(),
            group: "nightly/RUN#2026-03-01T10:00:00Z".into(),
            held: HeldWork::Run {
                key: RunKey::expected("nightly", since),
            },
            since,
            remind_at: since + Duration::hours(4),
        };
        let item = encode(&awaiting).expect("encode");
        assert_eq!(decode(&item).expect("decode"), awaiting);
        let r = ItemReader::new(&item);
        assert!(r
            .s(GSI2SK)
            .expect("index key")
            .starts_with("2026-03-01T14:00:00Z#nightly#"));
        assert_eq!(
            r.n::<i64>(EXPIRES_AT).expect("ttl"),
            since.timestamp() + AWAITING_RECORD_DAYS * 86_400
        );
    }
}
