//! The memory store's item table and its item engine: items kept as DynamoDB keeps them,
//! every request the subjects make (see `crate::subjects`) answered on them with DynamoDB's
//! rules, and charged here, from the items it reads and writes, as DynamoDB charges it.

use std::collections::BTreeMap;
use std::ops::Bound::{self, Excluded, Included, Unbounded};

use async_trait::async_trait;

use super::capacity::Request;
use super::index::EntryKey;
use super::{InMemoryStore, Tables};
use crate::engine::{ItemEngine, QueryPage, Returning, Write, Written};
use crate::error::StoreError;
use crate::expr::{eval, Comparison, Cond, Expr, Update};
use crate::item::{table_key, Item, Value};
use crate::keys::{PK, SK};

/// Items by (PK, SK).
pub(crate) type ItemTable = BTreeMap<(String, String), Item>;

/// Items a Query page reads at most (the store asks for no more).
const QUERY_PAGE: u32 = 1000;

/// One write checked against the table: where, whether its condition held, and the item it
/// leaves there when it does (`None`: deleted). The item before stays in the table until
/// the write is committed, so nothing is copied to check it.
struct Checked {
    at: (String, String),
    after: Option<Item>,
    holds: bool,
}

fn check(items: &ItemTable, write: Write) -> Result<Checked, StoreError> {
    let (at, cond) = match &write {
        Write::Put { item, cond } => (table_key(item)?, cond),
        Write::Update { key, expr } => (table_key(key)?, expr),
        Write::Delete { key, cond } => (table_key(key)?, cond),
    };
    let before = items.get(&at);
    let holds = eval::all_hold(&cond.conditions, before);
    let after = match write {
        _ if !holds => None,
        Write::Put { item, .. } => Some(item),
        Write::Update { key, expr } => Some(eval::apply(&expr.updates, before.unwrap_or(&key))?),
        Write::Delete { .. } => None,
    };
    Ok(Checked { at, after, holds })
}

fn operation(write: &Write) -> &'static str {
    match write {
        Write::Put { .. } => "PutItem",
        Write::Update { .. } => "UpdateItem",
        Write::Delete { .. } => "DeleteItem",
    }
}

/// The attributes an update sets or adds (what `UPDATED_NEW` answers); `None` for a put or
/// a delete, which answer the whole item.
fn updated_names(write: &Write) -> Option<Vec<String>> {
    let Write::Update { expr, .. } = write else {
        return None;
    };
    Some(
        expr.updates
            .iter()
            .filter_map(|u| match u {
                Update::Set(attr, _) | Update::Add(attr, _) => Some(attr.clone()),
                Update::Remove(_) => None,
            })
            .collect(),
    )
}

/// The bounds a key condition puts on the sort attribute `range`, to range over instead of
/// scanning the partition (every condition is still evaluated on each item).
fn range_bounds(conditions: &[Cond], range: &str) -> (Bound<String>, Bound<String>) {
    let text = |v: &Value| v.as_s().ok().cloned();
    let mut bounds = (Unbounded, Unbounded);
    for cond in conditions {
        match cond {
            Cond::Between(attr, low, high) if attr == range => {
                if let (Some(low), Some(high)) = (text(low), text(high)) {
                    bounds = (Included(low), Included(high));
                }
            }
            Cond::BeginsWith(attr, prefix) if attr == range => {
                if let Some(prefix) = text(prefix) {
                    bounds = (Included(prefix.clone()), prefix_end(&prefix));
                }
            }
            Cond::Compare(attr, Comparison::Lt, v) if attr == range => {
                if let Some(v) = text(v) {
                    bounds.1 = Excluded(v);
                }
            }
            Cond::Compare(attr, Comparison::Le, v) if attr == range => {
                if let Some(v) = text(v) {
                    bounds.1 = Included(v);
                }
            }
            _ => {}
        }
    }
    bounds
}

/// The first string after every string that begins with `prefix`, when there is one.
fn prefix_end(prefix: &str) -> Bound<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        if let Some(next) = char::from_u32(last as u32 + 1) {
            chars.push(next);
            return Excluded(chars.into_iter().collect());
        }
    }
    Unbounded
}

/// The string value `conditions` require of `attr` (the key condition's partition).
fn partition(conditions: &[Cond], attr: &str) -> Result<String, StoreError> {
    conditions
        .iter()
        .find_map(|c| match c {
            Cond::Compare(a, Comparison::Eq, Value::S(v)) if a == attr => Some(v.clone()),
            _ => None,
        })
        .ok_or_else(|| StoreError::InvalidRequest(format!("a query names no `{attr}`")))
}

/// The first string after `s` (`s` followed by NUL): an exclusive bound that includes `s`.
fn after(s: &str) -> String {
    format!("{s}\0")
}

impl InMemoryStore {
    /// Applies checked writes that all held: items and index entries.
    fn commit(tables: &mut Tables, checked: Vec<Checked>) {
        let Tables { items, indexes } = tables;
        for Checked { at, after, .. } in checked {
            indexes.item_changed(items.get(&at), after.as_ref());
            match after {
                Some(item) => items.insert(at, item),
                None => items.remove(&at),
            };
        }
    }

    /// Charges one checked write: what it wrote, or (refused) the stored item's size.
    fn charge_checked(
        &self,
        operation: &'static str,
        items: &ItemTable,
        checked: &Checked,
        holds: bool,
        request: Request,
    ) {
        let before = items.get(&checked.at);
        match (before, &checked.after, holds) {
            (Some(before), None, true) => self.charge_delete(operation, before),
            (before, after, true) => self.charge_write(operation, before, after.as_ref(), request),
            (before, _, false) => self.charge_write(operation, before, None, request),
        }
    }

    /// A page of the table's partition or an index's, as Query reads it: the items read
    /// (filtered or not) and the last one's key when the page was full.
    fn read_page<'t>(
        tables: &'t Tables,
        index: Option<&str>,
        expr: &Expr,
        limit: usize,
        start: Option<&Item>,
        forward: bool,
    ) -> Result<(Vec<&'t Item>, Option<Item>), StoreError> {
        let conditions = &expr.conditions;
        let last_key = |item: &Item, attrs: &[&str]| -> Item {
            attrs
                .iter()
                .filter_map(|a| item.get(*a).map(|v| (a.to_string(), v.clone())))
                .collect()
        };
        let (read, attrs): (Vec<&Item>, Vec<&str>) = match index {
            None => {
                let pk = partition(conditions, PK)?;
                let (low, high) = range_bounds(conditions, SK);
                let low = match low {
                    Included(sk) => Included((pk.clone(), sk)),
                    _ => Included((pk.clone(), String::new())),
                };
                let high = match high {
                    Included(sk) => Included((pk.clone(), sk)),
                    Excluded(sk) => Excluded((pk.clone(), sk)),
                    Unbounded => Excluded((after(&pk), String::new())),
                };
                let start = start.map(table_key).transpose()?;
                let range = tables.items.range((low, high));
                let read = page(range, start, forward, conditions, limit);
                (read, vec![PK, SK])
            }
            Some(name) => {
                let index = tables.indexes.named(name).ok_or_else(|| {
                    StoreError::InvalidRequest(format!("the table has no index `{name}`"))
                })?;
                let part = partition(conditions, index.hash)?;
                let (low, high) = match index.range {
                    Some(range) => range_bounds(conditions, range),
                    None => (Unbounded, Unbounded),
                };
                let empty = String::new;
                let low: Bound<EntryKey> = match low {
                    Included(sk) => Included((part.clone(), sk, empty(), empty())),
                    _ => Included((part.clone(), empty(), empty(), empty())),
                };
                let high: Bound<EntryKey> = match high {
                    Included(sk) => Excluded((part.clone(), after(&sk), empty(), empty())),
                    Excluded(sk) => Excluded((part.clone(), sk, empty(), empty())),
                    Unbounded => Excluded((after(&part), empty(), empty(), empty())),
                };
                let start = start.map(|s| index.entry_key(s));
                let range = index.entries.range((low, high));
                let read = page(range, start, forward, conditions, limit);
                (read, index.key_attributes())
            }
        };
        let last = (read.len() == limit)
            .then(|| read.last().map(|item| last_key(item, &attrs)))
            .flatten();
        Ok((read, last))
    }
}

/// Up to `limit` items of a key range that meet the key condition, in order or reversed,
/// after `start` (exclusive).
fn page<'a, K: Ord + 'a>(
    range: impl DoubleEndedIterator<Item = (&'a K, &'a Item)> + 'a,
    start: Option<K>,
    forward: bool,
    conditions: &[Cond],
    limit: usize,
) -> Vec<&'a Item> {
    let past = |k: &K| match &start {
        Some(s) if forward => k > s,
        Some(s) => k < s,
        None => true,
    };
    let ordered: Box<dyn Iterator<Item = (&'a K, &'a Item)> + 'a> = if forward {
        Box::new(range)
    } else {
        Box::new(range.rev())
    };
    ordered
        .filter(|(k, _)| past(k))
        .map(|(_, item)| item)
        .filter(|item| eval::all_hold(conditions, Some(item)))
        .take(limit)
        .collect()
}

#[async_trait]
impl ItemEngine for InMemoryStore {
    fn shards(&self) -> u32 {
        self.shards
    }

    async fn get_item(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let at = table_key(&key)?;
        let tables = self.tables();
        self.charge_call("GetItem");
        let found = tables.items.get(&at).cloned();
        let read: Vec<&Item> = found.iter().collect();
        self.charge_read("GetItem", None, &read, true, Request::Standard);
        Ok(found)
    }

    async fn write(
        &self,
        write: Write,
        returning: Returning,
        old_on_refusal: bool,
    ) -> Result<Written, StoreError> {
        let operation = operation(&write);
        let updated = updated_names(&write);
        let mut tables = self.tables();
        self.charge_call(operation);
        let checked = check(&tables.items, write)?;
        let holds = checked.holds;
        self.charge_checked(operation, &tables.items, &checked, holds, Request::Standard);
        if !holds {
            let old = old_on_refusal
                .then(|| tables.items.get(&checked.at).cloned())
                .flatten();
            return Ok(Written::Refused(old));
        }
        let answer = match (returning, &checked.after, updated) {
            (Returning::Nothing, _, _) | (_, None, _) => None,
            (Returning::UpdatedNew, Some(after), Some(names)) => Some(
                names
                    .into_iter()
                    .filter_map(|name| after.get(&name).map(|v| (name, v.clone())))
                    .collect(),
            ),
            (_, Some(after), _) => Some(after.clone()),
        };
        Self::commit(&mut tables, vec![checked]);
        Ok(Written::Applied(answer))
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<bool, StoreError> {
        let mut tables = self.tables();
        let checked = writes
            .into_iter()
            .map(|w| check(&tables.items, w))
            .collect::<Result<Vec<_>, _>>()?;
        let mut keys: Vec<_> = checked.iter().map(|c| &c.at).collect();
        keys.sort();
        keys.dedup();
        if keys.len() < checked.len() {
            return Err(StoreError::InvalidRequest(
                "a transaction names one item twice".into(),
            ));
        }
        self.charge_call("TransactWriteItems");
        let holds = checked.iter().all(|c| c.holds);
        for c in &checked {
            let request = Request::Transactional;
            self.charge_checked("TransactWriteItems", &tables.items, c, holds, request);
        }
        if holds {
            Self::commit(&mut tables, checked);
        }
        Ok(holds)
    }

    async fn query(
        &self,
        index: Option<&str>,
        expr: &Expr,
        limit: u32,
        start: Option<Item>,
        forward: bool,
    ) -> Result<QueryPage, StoreError> {
        let tables = self.tables();
        let limit = limit.clamp(1, QUERY_PAGE) as usize;
        let (read, last_key) =
            Self::read_page(&tables, index, expr, limit, start.as_ref(), forward)?;
        self.charge_call("Query");
        let index_name = index
            .and_then(|name| tables.indexes.named(name))
            .map(|i| i.def.index_name.as_str());
        self.charge_read(
            "Query",
            index_name,
            &read,
            index.is_none(),
            Request::Standard,
        );
        // Only what the filter keeps is copied out.
        let items = read
            .into_iter()
            .filter(|item| eval::kept(&expr.filters, item))
            .cloned()
            .collect();
        Ok(QueryPage { items, last_key })
    }

    /// `BatchGetItem`s of up to 100 keys, eventually consistent, as the DynamoDB store
    /// sends them.
    async fn fetch_items(&self, entries: &[Item]) -> Result<Vec<Item>, StoreError> {
        let keys = entries
            .iter()
            .map(table_key)
            .collect::<Result<Vec<_>, _>>()?;
        let tables = self.tables();
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(crate::dynamo::BATCH_GET_KEYS) {
            let read: Vec<&Item> = chunk.iter().filter_map(|k| tables.items.get(k)).collect();
            self.charge_call("BatchGetItem");
            self.charge_read("BatchGetItem", None, &read, false, Request::Standard);
            found.extend(read.into_iter().cloned());
        }
        Ok(found)
    }
}
