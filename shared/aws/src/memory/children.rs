//! Children in memory, charged as `dynamo::children` is: a conditional put per child, a
//! strongly consistent read, a Query page, and a transaction (child and parent) for a
//! change that moves the parent's counters.

use cronledger_core::children::Child;
use cronledger_core::RunKey;

use super::{InMemoryStore, Request, StoredRun, Tables};
use crate::child_plan;
use crate::codec::attempt as attempt_codec;
use crate::codec::child as codec;
use crate::codec::run as run_codec;
use crate::cursor;
use crate::error::StoreError;
use crate::expr::eval;
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
        let child_write = child_plan::change(change)?;
        let parent_write = child_plan::parent_counters(change);
        let (operation, request) = match parent_write {
            Some(_) => ("TransactWriteItems", Request::Transactional),
            None => ("UpdateItem", Request::Standard),
        };
        self.charge_call(operation);
        let at = slot(parent, change.step, change.index);
        let name = keys::child_name(parent, change.step, change.index);
        let Some(stored) = children.get_mut(&at) else {
            return Err(StoreError::ChildConflict(name));
        };
        let before = codec::encode(parent, stored);
        let parent_run = runs
            .get_mut(&parent.schedule_id)
            .and_then(|by_sk| by_sk.get_mut(&keys::run_sk(parent)));
        let parent_before = parent_run
            .as_deref()
            .map(|p| self.stored_item(run_items, p));
        let holds = eval::all_hold(&child_write.conditions, Some(&before))
            && parent_write
                .as_ref()
                .is_none_or(|p| eval::all_hold(&p.conditions, parent_before.as_deref()));
        if !holds {
            self.charge_write(operation, Some(&before), None, request);
            return Err(StoreError::ChildConflict(name));
        }
        // Both items computed before either is stored: the transaction is all or nothing.
        let after = eval::apply(&child_write.updates, &before)?;
        let parent_after = match (&parent_write, &parent_before) {
            (Some(plan), Some(was)) => Some(eval::apply(&plan.updates, was)?),
            _ => None,
        };
        *stored = codec::decode(&after)?;
        self.charge_write(operation, Some(&before), Some(&after), request);
        let changed = stored.clone();
        if let (Some(item), Some(parent_run), Some(was)) = (parent_after, parent_run, parent_before)
        {
            *parent_run = StoredRun {
                run: run_codec::decode(&item)?,
                attempts: attempt_codec::decode(&item)?,
            };
            self.charge_run_write(run_items, operation, Some(was), Some(parent_run), request);
        }
        Ok(changed)
    }
}
