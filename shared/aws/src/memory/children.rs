//! Children in memory, charged as `dynamo::children` is: a conditional put per child, a
//! strongly consistent read, a Query page, and a transaction (child and parent) for a
//! change that moves the parent's counters.

use cronledger_core::children::{Child, ChildStatus};
use cronledger_core::{RunKey, RunStatus};

use super::{InMemoryStore, Request, Tables};
use crate::codec::child as codec;
use crate::cursor;
use crate::error::StoreError;
use crate::item::{key, Item};
use crate::keys;
use crate::ledger::{ChildChange, Page};

/// Where a child sits: its schedule and its sort key.
pub(crate) type ChildSlot = (String, String);

fn slot(parent: &RunKey, step: u32, index: u32) -> ChildSlot {
    (
        parent.schedule_id.clone(),
        keys::child_sk(parent, step, index),
    )
}

/// Largest page a Query answers.
const PAGE_MAX: u32 = 1000;

impl InMemoryStore {
    pub(super) fn put_children_impl(
        &self,
        parent: &RunKey,
        children: &[Child],
    ) -> Result<(), StoreError> {
        let mut tables = self.tables();
        for child in children {
            self.charge_call("PutItem");
            let at = slot(parent, child.step, child.index);
            let item = codec::encode(parent, child);
            match tables.children.get(&at) {
                Some(kept) => {
                    let kept = codec::encode(parent, kept);
                    self.charge_write("PutItem", Some(&kept), None, Request::Standard);
                }
                None => {
                    self.charge_write("PutItem", None, Some(&item), Request::Standard);
                    tables.children.insert(at, child.clone());
                }
            }
        }
        Ok(())
    }

    pub(super) fn get_child_impl(
        &self,
        parent: &RunKey,
        step: u32,
        index: u32,
    ) -> Result<Child, StoreError> {
        let tables = self.tables();
        self.charge_call("GetItem");
        match tables.children.get(&slot(parent, step, index)) {
            Some(child) => {
                let item = codec::encode(parent, child);
                self.charge_read("GetItem", None, &[&item], true, Request::Standard);
                Ok(child.clone())
            }
            None => {
                self.charge_read("GetItem", None, &[], true, Request::Standard);
                Err(StoreError::ChildNotFound(keys::child_name(
                    parent, step, index,
                )))
            }
        }
    }

    pub(super) fn children_of_impl(
        &self,
        parent: &RunKey,
        step: u32,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Child>, StoreError> {
        let after = match cursor::decode(cursor)? {
            Some(item) => match item.get(keys::SK).and_then(|v| v.as_s().ok()) {
                Some(sk) => Some(sk.clone()),
                None => return Err(StoreError::BadCursor),
            },
            None => None,
        };
        let tables = self.tables();
        let prefix = keys::children_prefix(parent, step);
        let limit = limit.clamp(1, PAGE_MAX) as usize;
        let from = (
            parent.schedule_id.clone(),
            after.clone().unwrap_or_else(|| prefix.clone()),
        );
        let read: Vec<(&ChildSlot, &Child)> = tables
            .children
            .range(from..)
            .filter(|((_, sk), _)| after.as_ref() != Some(sk))
            .take_while(|((schedule, sk), _)| {
                *schedule == parent.schedule_id && sk.starts_with(&prefix)
            })
            .take(limit)
            .collect();
        self.charge_call("Query");
        let items: Vec<Item> = read.iter().map(|(_, c)| codec::encode(parent, c)).collect();
        let refs: Vec<&Item> = items.iter().collect();
        self.charge_read("Query", None, &refs, true, Request::Standard);
        let next = (read.len() == limit)
            .then(|| read.last())
            .flatten()
            .and_then(|((_, sk), _)| {
                cursor::encode(Some(&key(
                    keys::schedule_pk(&parent.schedule_id),
                    sk.clone(),
                )))
            });
        Ok(Page {
            items: read.into_iter().map(|(_, c)| c.clone()).collect(),
            next,
        })
    }

    pub(super) fn change_child_impl(
        &self,
        parent: &RunKey,
        change: &ChildChange,
    ) -> Result<Child, StoreError> {
        let mut tables = self.tables();
        let Tables {
            children,
            runs,
            run_items,
            ..
        } = &mut *tables;
        let delta = change.counter_delta();
        let request = if delta.is_some() {
            self.charge_call("TransactWriteItems");
            Request::Transactional
        } else {
            self.charge_call("UpdateItem");
            Request::Standard
        };
        let operation = if delta.is_some() {
            "TransactWriteItems"
        } else {
            "UpdateItem"
        };
        let at = slot(parent, change.step, change.index);
        let name = keys::child_name(parent, change.step, change.index);
        let Some(stored) = children.get_mut(&at) else {
            return Err(StoreError::ChildConflict(name));
        };
        let before = codec::encode(parent, stored);
        let parent_run = runs
            .get_mut(&parent.schedule_id)
            .and_then(|by_sk| by_sk.get_mut(&keys::run_sk(parent)));
        let child_holds = stored.status == change.from && stored.lease_epoch == change.epoch;
        let parent_holds = parent_run
            .as_ref()
            .is_some_and(|p| p.run.status == RunStatus::Running);
        if !child_holds || (delta.is_some() && !parent_holds) {
            self.charge_write(operation, Some(&before), None, request);
            return Err(StoreError::ChildConflict(name));
        }
        stored.status = change.to;
        stored.updated_at = change.at;
        if let Some(until) = change.start_until {
            stored.lease_epoch = change.epoch + 1;
            stored.attempts += 1;
            stored.lease_until = Some(until);
        }
        if change.to.is_terminal() || change.to == ChildStatus::Pending {
            stored.lease_until = None;
        }
        stored.count = change.count.or(stored.count);
        if change.checksum.is_some() {
            stored.checksum = change.checksum.clone();
        }
        if change.error_code.is_some() {
            stored.error_code = change.error_code.clone();
        }
        let after = codec::encode(parent, stored);
        self.charge_write(operation, Some(&before), Some(&after), request);
        let changed = stored.clone();
        if let (Some((succeeded, failed, count)), Some(parent_run)) = (delta, parent_run) {
            let was = self.stored_item(run_items, parent_run);
            let run = &mut parent_run.run;
            let counts = run.children.get_or_insert_with(Default::default);
            counts.succeeded = counts.succeeded.saturating_add_signed(succeeded as i32);
            counts.failed = counts.failed.saturating_add_signed(failed as i32);
            if count > 0 {
                let result = run.result.get_or_insert_with(Default::default);
                result.count = Some(result.count.unwrap_or(0) + count);
            }
            run.updated_at = change.at;
            self.charge_run_write(run_items, operation, Some(was), Some(parent_run), request);
        }
        Ok(changed)
    }
}
