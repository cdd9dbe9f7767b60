//! Schedules and their audit log in memory: the same versioned, conditional writes as
//! `dynamo::schedules` and `dynamo::audit`, each charged as the DynamoDB store's requests.
//!
//! What is stored is what the codecs give back from the item they write, so a value read
//! here has exactly the precision a DynamoDB read would give it.

use chrono::{DateTime, Utc};
use cronledger_core::ScheduleSpec;

use super::capacity::Request;
use super::{InMemoryStore, Tables};
use crate::codec::schedule as codec;
use crate::cursor;
use crate::error::StoreError;
use crate::item::{s, Item};
use crate::keys::{self, GSI3PK, GSI3SK, PK, SK};
use crate::ledger::{
    AuditAction, AuditEntry, ChangeMeta, OperatorAction, Page, StoredSchedule, StreakChange,
};
use crate::schedule_change as change;
use crate::schedule_marks;

/// The most items one DynamoDB query page returns (the stores ask for at most this).
pub(super) const QUERY_PAGE_MAX: u32 = 1000;

/// A schedule's item and the schedule as read back from it.
pub(super) fn schedule_item(
    schedule: &StoredSchedule,
) -> Result<(Item, StoredSchedule), StoreError> {
    let item = codec::encode(schedule)?;
    let stored = codec::decode(&item)?;
    Ok((item, stored))
}

/// An audit entry's sort key: a change's `AUDIT#{version}`, or an operator's action after
/// it. An action's random tag only orders actions of one instant, so a fixed one stands in
/// (same length, same order otherwise).
fn audit_sk(entry: &AuditEntry) -> String {
    if is_change(entry.action) {
        keys::audit_sk(entry.version)
    } else {
        keys::operator_audit_sk(entry.version, entry.at, entry.action.as_str(), 0)
    }
}

fn is_change(action: AuditAction) -> bool {
    matches!(
        action,
        AuditAction::Create
            | AuditAction::Update
            | AuditAction::Pause
            | AuditAction::Resume
            | AuditAction::Archive
    )
}

fn audit_item(entry: &AuditEntry) -> Result<(Item, AuditEntry), StoreError> {
    let item = codec::encode_audit(entry, audit_sk(entry))?;
    let stored = codec::decode_audit(&item)?;
    Ok((item, stored))
}

/// Adds an entry to a schedule's log in sort key order (after equal keys: one instant's
/// actions keep their arrival order, as good as DynamoDB's random tag).
fn insert_audit(tables: &mut Tables, entry: AuditEntry) {
    let sk = audit_sk(&entry);
    let log = tables.audit.entry(entry.schedule_id.clone()).or_default();
    let at = log.partition_point(|e| audit_sk(e) <= sk);
    log.insert(at, entry);
}

fn schedule_key_of(item: &Item) -> Option<String> {
    item.get(GSI3SK)?.as_s().ok().cloned()
}

impl InMemoryStore {
    pub(super) fn create_schedule_impl(
        &self,
        spec: ScheduleSpec,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        let schedule = change::created(spec, &meta, self.shards)?;
        let entry = change::change_entry(AuditAction::Create, None, &schedule, &meta);
        let (item, stored) = schedule_item(&schedule)?;
        let (audit, stored_entry) = audit_item(&entry)?;
        let mut tables = self.tables();
        self.charge_call("TransactWriteItems");
        let existing = match tables.schedules.get(schedule.id()) {
            Some(current) => Some(codec::encode(current)?),
            None => None,
        };
        let audit_taken = self.change_entry_exists(&tables, schedule.id(), 1);
        if existing.is_some() || audit_taken {
            self.charge_write(
                "TransactWriteItems",
                existing.as_ref(),
                None,
                Request::Transactional,
            );
            self.charge_write("TransactWriteItems", None, None, Request::Transactional);
            return Err(StoreError::ScheduleAlreadyExists(schedule.id().to_string()));
        }
        self.apply_change(&mut tables, None, (item, stored), (audit, stored_entry));
        Ok(schedule)
    }

    pub(super) fn update_schedule_impl(
        &self,
        spec: ScheduleSpec,
        expected_version: u64,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        let id = spec.id.clone();
        self.change(
            &id,
            Some(expected_version),
            &meta,
            AuditAction::Update,
            |current| change::updated(current, &spec, &meta),
        )
    }

    pub(super) fn pause_impl(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.change(id, expected_version, &meta, AuditAction::Pause, |current| {
            change::paused(current, &meta)
        })
    }

    pub(super) fn resume_impl(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.change(
            id,
            expected_version,
            &meta,
            AuditAction::Resume,
            |current| change::resumed(current, &meta),
        )
    }

    pub(super) fn archive_impl(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: ChangeMeta,
    ) -> Result<StoredSchedule, StoreError> {
        self.change(
            id,
            expected_version,
            &meta,
            AuditAction::Archive,
            change::archived,
        )
    }

    /// Read, apply, write back at version + 1 with its audit entry: the DynamoDB store's
    /// GetItem then TransactWriteItems. Under the one lock nothing moves in between, so the
    /// transaction's conditions (version, `next_run_at`, watermark unchanged) hold.
    fn change(
        &self,
        id: &str,
        expected_version: Option<u64>,
        meta: &ChangeMeta,
        action: AuditAction,
        apply: impl Fn(&StoredSchedule) -> Result<StoredSchedule, StoreError>,
    ) -> Result<StoredSchedule, StoreError> {
        let mut tables = self.tables();
        let (current_item, current) = self.read_schedule(&tables, id)?;
        change::check_changeable(&current, expected_version)?;
        let mut next = apply(&current)?;
        next.version = current.version + 1;
        next.updated_at = meta.at;
        let entry = change::change_entry(action, Some(&current), &next, meta);
        let (item, stored) = schedule_item(&next)?;
        let (audit, stored_entry) = audit_item(&entry)?;
        self.charge_call("TransactWriteItems");
        self.apply_change(
            &mut tables,
            Some(&current_item),
            (item, stored),
            (audit, stored_entry),
        );
        Ok(next)
    }

    /// The transaction's two puts, their conditions checked: the schedule item (over
    /// `before`) and its new audit entry, each charged as a transactional write.
    fn apply_change(
        &self,
        tables: &mut Tables,
        before: Option<&Item>,
        (item, stored): (Item, StoredSchedule),
        (audit, entry): (Item, AuditEntry),
    ) {
        self.charge_write(
            "TransactWriteItems",
            before,
            Some(&item),
            Request::Transactional,
        );
        self.charge_write(
            "TransactWriteItems",
            None,
            Some(&audit),
            Request::Transactional,
        );
        tables.schedules.insert(stored.id().to_string(), stored);
        insert_audit(tables, entry);
    }

    /// One strongly consistent GetItem of a schedule's item: the item (for charges) and the
    /// schedule, or `SCHEDULE_NOT_FOUND`.
    fn read_schedule(
        &self,
        tables: &Tables,
        id: &str,
    ) -> Result<(Item, StoredSchedule), StoreError> {
        self.charge_call("GetItem");
        let Some(current) = tables.schedules.get(id) else {
            self.charge_read("GetItem", None, &[], true, Request::Standard);
            return Err(StoreError::ScheduleNotFound(id.to_string()));
        };
        let item = codec::encode(current)?;
        self.charge_read("GetItem", None, &[&item], true, Request::Standard);
        Ok((item, current.clone()))
    }

    fn change_entry_exists(&self, tables: &Tables, id: &str, version: u64) -> bool {
        tables.audit.get(id).is_some_and(|log| {
            log.iter()
                .any(|e| e.version == version && is_change(e.action))
        })
    }

    pub(super) fn get_schedule_impl(&self, id: &str) -> Result<StoredSchedule, StoreError> {
        let tables = self.tables();
        self.read_schedule(&tables, id)
            .map(|(_, schedule)| schedule)
    }

    /// One Query page of the `catalog` index (every schedule, by id), eventually consistent,
    /// with DynamoDB's cursor: the last item's keys, given whenever the page is full.
    pub(super) fn list_schedules_impl(
        &self,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<StoredSchedule>, StoreError> {
        let after = match cursor::decode(cursor)? {
            Some(start) => Some(schedule_key_of(&start).ok_or_else(|| StoreError::Request {
                operation: "Query",
                message: "the exclusive start key does not name the index's keys".into(),
            })?),
            None => None,
        };
        let limit = limit.clamp(1, QUERY_PAGE_MAX) as usize;
        let tables = self.tables();
        self.charge_call("Query");
        let lower = match &after {
            Some(id) => std::ops::Bound::Excluded(id.clone()),
            None => std::ops::Bound::Unbounded,
        };
        let page: Vec<&StoredSchedule> = tables
            .schedules
            .range((lower, std::ops::Bound::Unbounded))
            .map(|(_, schedule)| schedule)
            .take(limit)
            .collect();
        let items = page
            .iter()
            .map(|schedule| codec::encode(schedule))
            .collect::<Result<Vec<Item>, _>>()?;
        let read: Vec<&Item> = items.iter().collect();
        self.charge_read(
            "Query",
            Some(keys::CATALOG_INDEX),
            &read,
            false,
            Request::Standard,
        );
        let full = page.len() == limit;
        let next = page.last().filter(|_| full).and_then(|last| {
            let id = last.id();
            let start: Item = [
                (PK.to_string(), s(keys::schedule_pk(id))),
                (SK.to_string(), s(keys::SCHEDULE_SK)),
                (GSI3PK.to_string(), s(keys::CATALOG_PK)),
                (GSI3SK.to_string(), s(id)),
            ]
            .into();
            cursor::encode(Some(&start))
        });
        Ok(Page {
            items: page.into_iter().cloned().collect(),
            next,
        })
    }

    /// The whole log in sort key order, read as the DynamoDB store's Query pages of 1,000
    /// (a last, empty page when the log fills its pages exactly).
    pub(super) fn audit_log_impl(&self, id: &str) -> Result<Vec<AuditEntry>, StoreError> {
        let tables = self.tables();
        let log = tables.audit.get(id).map(Vec::as_slice).unwrap_or_default();
        let items = log
            .iter()
            .map(|entry| codec::encode_audit(entry, audit_sk(entry)))
            .collect::<Result<Vec<Item>, _>>()?;
        self.charge_query_all(&items);
        Ok(log.to_vec())
    }

    /// One GetItem on the version's change entry, read back as the codec reads its spec.
    pub(super) fn schedule_spec_at_impl(
        &self,
        id: &str,
        version: u64,
    ) -> Result<ScheduleSpec, StoreError> {
        let tables = self.tables();
        self.charge_call("GetItem");
        let entry = tables.audit.get(id).and_then(|log| {
            log.iter()
                .find(|e| e.version == version && is_change(e.action))
        });
        let Some(entry) = entry else {
            self.charge_read("GetItem", None, &[], true, Request::Standard);
            return Err(StoreError::VersionNotFound {
                id: id.to_string(),
                version,
            });
        };
        let item = codec::encode_audit(entry, audit_sk(entry))?;
        self.charge_read("GetItem", None, &[&item], true, Request::Standard);
        codec::decode_audit_spec(&item)
    }

    /// GetItem for the current version, then a PutItem of the entry under it.
    pub(super) fn record_operator_action_impl(
        &self,
        action: &OperatorAction,
    ) -> Result<AuditEntry, StoreError> {
        let mut tables = self.tables();
        let (_, current) = self.read_schedule(&tables, &action.schedule_id)?;
        let entry = change::operator_entry(action, current.version);
        let (item, stored) = audit_item(&entry)?;
        self.charge_call("PutItem");
        self.charge_write("PutItem", None, Some(&item), Request::Standard);
        insert_audit(&mut tables, stored);
        Ok(entry)
    }

    /// One UpdateItem, like the DynamoDB store's.
    pub(super) fn count_failure_streak_impl(
        &self,
        id: &str,
        change: StreakChange,
    ) -> Result<u32, StoreError> {
        let plan = schedule_marks::failure_streak(change);
        let mut tables = self.tables();
        if !self.update_schedule_item(&mut tables, id, &plan)? {
            return Err(StoreError::ScheduleNotFound(id.to_string()));
        }
        Ok(tables.schedules.get(id).map_or(0, |s| s.failure_streak))
    }

    pub(super) fn set_downstream_impl(
        &self,
        id: &str,
        downstream: &[String],
    ) -> Result<(), StoreError> {
        let plan = schedule_marks::downstream(downstream)?;
        if self.update_schedule_item(&mut self.tables(), id, &plan)? {
            Ok(())
        } else {
            Err(StoreError::ScheduleNotFound(id.to_string()))
        }
    }

    pub(super) fn advance_watermark_impl(
        &self,
        id: &str,
        expected: DateTime<Utc>,
        through: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let plan = schedule_marks::watermark(id, expected, through)?;
        self.update_schedule_item(&mut self.tables(), id, &plan)
    }
}
