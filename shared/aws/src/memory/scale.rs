//! The reads that page through a whole shard at fleet size (see `dynamo::schedules`): the
//! `due` index answered from the schedules map, in the index's key order, with the last
//! sort key read as the cursor.

use chrono::{DateTime, Utc};

use super::capacity::Request;
use super::InMemoryStore;
use crate::codec::schedule as schedule_codec;
use crate::error::StoreError;
use crate::keys;
use crate::ledger::{Page, StoredSchedule};

impl InMemoryStore {
    pub(super) fn due_schedules_page_impl(
        &self,
        shard: u32,
        until: DateTime<Utc>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError> {
        let partition = keys::due_pk(shard);
        let bound = keys::due_sk_bound(until);
        let tables = self.tables();
        let mut due: Vec<(String, &StoredSchedule)> = tables
            .schedules
            .values()
            .filter_map(|s| {
                let (pk, sk) = schedule_codec::due_keys(s)?;
                let after_cursor = cursor.is_none_or(|c| sk.as_str() > c);
                (pk == partition && sk < bound && after_cursor).then_some((sk, s))
            })
            .collect();
        due.sort_by(|a, b| a.0.cmp(&b.0));
        // A query page holds at most 1,000 items, as DynamoDB's.
        let take = limit.clamp(1, 1000) as usize;
        let next = (due.len() > take).then(|| due[take - 1].0.clone());
        let items: Vec<StoredSchedule> =
            due.into_iter().take(take).map(|(_, s)| s.clone()).collect();
        drop(tables);
        self.charge_call("Query");
        let encoded = items
            .iter()
            .map(schedule_codec::encode)
            .collect::<Result<Vec<_>, _>>()?;
        let read: Vec<_> = encoded.iter().collect();
        self.charge_read(
            "Query",
            Some(keys::DUE_INDEX),
            &read,
            false,
            Request::Standard,
        );
        Ok(Page { items, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::ScheduleState;
    use crate::meter::RequestMeter;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("instant")
    }

    fn schedule(id: &str, next: &str) -> StoredSchedule {
        let spec = serde_json::from_value(serde_json::json!({
            "id": id, "cron": "* * * * *", "timezone": "UTC", "job": {"type": "noop"}
        }))
        .expect("spec");
        StoredSchedule {
            spec,
            version: 1,
            state: ScheduleState::Active,
            shard: 0,
            next_run_at: Some(t(next)),
            reconciled_through: t("2026-03-01T00:00:00Z"),
            pauses: Vec::new(),
            past_timings: Vec::new(),
            created_at: t("2026-03-01T00:00:00Z"),
            updated_at: t("2026-03-01T00:00:00Z"),
            failure_streak: 0,
            downstream: Vec::new(),
        }
    }

    #[test]
    fn pages_cover_every_due_schedule_once_in_time_order_and_nothing_later() {
        let store = InMemoryStore::new(1, RequestMeter::new());
        {
            let mut tables = store.tables();
            for (id, next) in [
                ("c", "2026-03-01T10:00:00Z"),
                ("a", "2026-03-01T10:01:00Z"),
                ("b", "2026-03-01T09:59:00Z"),
                ("d", "2026-03-01T10:00:00Z"),
                ("later", "2026-03-01T10:02:00Z"),
            ] {
                tables.schedules.insert(id.into(), schedule(id, next));
            }
        }
        let until = t("2026-03-01T10:01:00Z");
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = store
                .due_schedules_page_impl(0, until, 2, cursor.as_deref())
                .expect("page");
            assert!(page.items.len() <= 2);
            seen.extend(page.items.iter().map(|s| s.id().to_string()));
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, ["b", "c", "d", "a"]);
        let other_shard = store
            .due_schedules_page_impl(1, until, 10, None)
            .expect("page");
        assert!(other_shard.items.is_empty() && other_shard.next.is_none());
    }
}
