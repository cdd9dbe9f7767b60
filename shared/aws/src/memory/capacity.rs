//! Consumed capacity of the in-memory store's requests, by DynamoDB's published rules, so
//! the request meter counts the same calls and units on both stores.
//!
//! - **Item size** is the sum of its attribute names' and values' lengths: strings and
//!   binaries by their bytes, a number about one byte per two significant digits plus one,
//!   a boolean or null one byte, a list or map 3 bytes plus one per element plus its
//!   elements. Storage adds 100 bytes per item, in the table and in each index.
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html>
//! - **A write** costs one unit per started KB of the larger of the item before and after
//!   (a write whose condition fails still costs the stored item's size, at least one unit).
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html>
//! - **Each global secondary index** the item is in before or after costs the projected
//!   item's size (table and index keys plus the projection the table definition declares):
//!   once when the item enters or leaves it or a projected attribute changes, twice when an
//!   index key changes (a delete and a put), nothing when it is in neither or nothing
//!   projected changed.
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations.Writes>
//! - **A read** costs one unit per started 4 KB, of each item for a get, of the sum of the
//!   items for a query (one unit at least), half for an eventually consistent read.
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html>
//! - **A transactional request** costs twice the units of the same request outside one.
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling>
//!
//! The table's name and indexes come from [`crate::table::TableDefinition::bundled`], so a
//! narrowed projection is charged as narrowed.

use std::sync::OnceLock;

use super::InMemoryStore;
use crate::item::{Item, Value};
use crate::keys::{PK, SK};
use crate::meter::{CapacityTarget, Units};
use crate::table::{IndexDef, TableDefinition};

/// Whether a request ran inside a transaction (DynamoDB charges its units twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Standard,
    Transactional,
}

impl Request {
    fn factor(self) -> f64 {
        match self {
            Request::Standard => 1.0,
            Request::Transactional => 2.0,
        }
    }
}

const WRITE_UNIT_BYTES: u64 = 1024;
const READ_UNIT_BYTES: u64 = 4096;
/// Storage DynamoDB bills per item, in the table and in each index, beyond its size.
pub const STORAGE_OVERHEAD_BYTES: u64 = 100;

/// The size DynamoDB counts for `item`: names and values.
pub fn item_size(item: &Item) -> u64 {
    item.iter()
        .map(|(name, value)| name.len() as u64 + value_size(value))
        .sum()
}

/// One attribute value's size, without its name.
pub fn value_size(value: &Value) -> u64 {
    match value {
        Value::S(s) => s.len() as u64,
        Value::N(n) => number_size(n),
        Value::B(b) => b.len() as u64,
        Value::Bool(_) | Value::Null => 1,
        Value::Ss(v) => v.iter().map(|s| s.len() as u64).sum(),
        Value::Ns(v) => v.iter().map(|n| number_size(n)).sum(),
        Value::Bs(v) => v.iter().map(|b| b.len() as u64).sum(),
        // 3 bytes for the container, 1 per element, and the elements (names too, in a map).
        Value::L(v) => 3 + v.iter().map(|e| 1 + value_size(e)).sum::<u64>(),
        Value::M(m) => {
            3 + m
                .iter()
                .map(|(k, e)| 1 + k.len() as u64 + value_size(e))
                .sum::<u64>()
        }
    }
}

/// About one byte per two significant digits, plus one (leading and trailing zeros trimmed).
fn number_size(text: &str) -> u64 {
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len() as u64;
    significant.max(1).div_ceil(2) + 1
}

/// Units for `bytes` at `unit` bytes per unit, at least one.
fn units(bytes: u64, unit: u64) -> f64 {
    bytes.div_ceil(unit).max(1) as f64
}

/// The table's indexes, as [`IndexDef`]s, read once.
fn definition() -> &'static Option<TableDefinition> {
    static DEFINITION: OnceLock<Option<TableDefinition>> = OnceLock::new();
    DEFINITION.get_or_init(|| TableDefinition::bundled().ok())
}

/// The table's name in the meter (the bundled definition's).
pub fn table_name() -> &'static str {
    definition()
        .as_ref()
        .map(|d| d.table_name.as_str())
        .unwrap_or("cronledger")
}

pub(super) fn indexes() -> &'static [IndexDef] {
    definition()
        .as_ref()
        .map(|d| d.global_secondary_indexes.as_slice())
        .unwrap_or(&[])
}

pub(super) fn index_def(name: &str) -> Option<&'static IndexDef> {
    indexes().iter().find(|i| i.index_name == name)
}

fn index_keys(index: &IndexDef) -> impl Iterator<Item = &str> {
    index.key_schema.iter().map(|k| k.attribute_name.as_str())
}

/// The attributes of `item` that `index` holds, by reference, or `None` when the item lacks
/// one of the index's keys (a sparse index leaves it out). Named lookups for a narrowed
/// projection, so an item's other attributes are never visited.
fn projection<'a>(index: &'a IndexDef, item: &'a Item) -> Option<Vec<(&'a str, &'a Value)>> {
    if index_keys(index).any(|k| !item.contains_key(k)) {
        return None;
    }
    if index.projection.projection_type == "ALL" {
        return Some(item.iter().map(|(n, v)| (n.as_str(), v)).collect());
    }
    let mut kept: Vec<(&str, &Value)> = [PK, SK]
        .into_iter()
        .chain(index_keys(index))
        .chain(
            index
                .projection
                .non_key_attributes
                .iter()
                .map(String::as_str),
        )
        .filter_map(|name| item.get_key_value(name).map(|(n, v)| (n.as_str(), v)))
        .collect();
    kept.sort_unstable_by_key(|(name, _)| *name);
    kept.dedup_by_key(|(name, _)| *name);
    Some(kept)
}

fn attribute<'a>(attributes: &[(&str, &'a Value)], name: &str) -> Option<&'a Value> {
    attributes.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

fn projection_size(attributes: &[(&str, &Value)]) -> u64 {
    attributes
        .iter()
        .map(|(name, value)| name.len() as u64 + value_size(value))
        .sum()
}

/// `item` as `index` holds it, or `None` when the item lacks one of the index's keys.
pub fn projected(index: &IndexDef, item: &Item) -> Option<Item> {
    projection(index, item).map(|kept| {
        kept.into_iter()
            .map(|(name, value)| (name.to_string(), value.clone()))
            .collect()
    })
}

/// Write units one index is charged for an item going from `before` to `after`.
fn index_write_units(index: &IndexDef, before: Option<&Item>, after: Option<&Item>) -> f64 {
    let old = before.and_then(|b| projection(index, b));
    let new = after.and_then(|a| projection(index, a));
    let size = |p: &Option<Vec<(&str, &Value)>>| p.as_deref().map(projection_size).unwrap_or(0);
    let one_write = || units(size(&old).max(size(&new)), WRITE_UNIT_BYTES);
    match (&old, &new) {
        (None, None) => 0.0,
        (Some(_), None) | (None, Some(_)) => one_write(),
        (Some(o), Some(n)) => {
            let key_changed = index_keys(index).any(|k| attribute(o, k) != attribute(n, k));
            if key_changed {
                // A delete of the old entry and a put of the new one.
                units(size(&old), WRITE_UNIT_BYTES) + units(size(&new), WRITE_UNIT_BYTES)
            } else if o != n {
                one_write()
            } else {
                0.0
            }
        }
    }
}

/// Bytes DynamoDB bills as storage for `item`: in the table and in every index it is in.
pub fn stored_bytes(item: &Item) -> u64 {
    let own = item_size(item) + STORAGE_OVERHEAD_BYTES;
    let in_indexes: u64 = indexes()
        .iter()
        .filter_map(|index| projection(index, item))
        .map(|p| projection_size(&p) + STORAGE_OVERHEAD_BYTES)
        .sum();
    own + in_indexes
}

impl InMemoryStore {
    /// Counts one call (and one attempt) of a DynamoDB operation, e.g. `"PutItem"`, under the
    /// current metered scope, as the SDK interceptor does for the DynamoDB store.
    pub(crate) fn charge_call(&self, operation: &'static str) {
        self.meter.record_call(operation);
    }

    /// Charges one item's write (`before`: the item stored, `after`: the item written;
    /// `None` for absent or deleted) to `operation`: the table and every index it touches.
    /// A write whose condition failed passes `after: None` and the stored item as `before`.
    pub(crate) fn charge_write(
        &self,
        operation: &'static str,
        before: Option<&Item>,
        after: Option<&Item>,
        request: Request,
    ) {
        let factor = request.factor();
        let size = before
            .map(item_size)
            .unwrap_or(0)
            .max(after.map(item_size).unwrap_or(0));
        let target = |index: Option<&str>| CapacityTarget {
            table: table_name().to_string(),
            index: index.map(str::to_string),
        };
        self.meter.record_units(
            operation,
            target(None),
            Units::write(units(size, WRITE_UNIT_BYTES) * factor),
        );
        // A failed condition writes nothing, so no index is touched.
        let Some(after) = after else {
            return;
        };
        for index in indexes() {
            let used = index_write_units(index, before, Some(after));
            if used > 0.0 {
                self.meter.record_units(
                    operation,
                    target(Some(&index.index_name)),
                    Units::write(used * factor),
                );
            }
        }
        let key = |name: &str| match after.get(name) {
            Some(Value::S(s)) => s.clone(),
            _ => String::new(),
        };
        self.meter
            .record_stored(key(PK), key(SK), stored_bytes(after));
    }

    /// Charges a delete of `before` that applied: its size in the table, and the removal of
    /// its entry from every index it was in. It no longer counts as stored.
    pub(crate) fn charge_delete(&self, operation: &'static str, before: &Item) {
        let target = |index: Option<&str>| CapacityTarget {
            table: table_name().to_string(),
            index: index.map(str::to_string),
        };
        self.meter.record_units(
            operation,
            target(None),
            Units::write(units(item_size(before), WRITE_UNIT_BYTES)),
        );
        for index in indexes() {
            let used = index_write_units(index, Some(before), None);
            if used > 0.0 {
                self.meter.record_units(
                    operation,
                    target(Some(&index.index_name)),
                    Units::write(used),
                );
            }
        }
        let key = |name: &str| match before.get(name) {
            Some(Value::S(s)) => s.clone(),
            _ => String::new(),
        };
        self.meter.record_stored(key(PK), key(SK), 0);
    }

    /// Charges a read that returned (or, for a query, examined) `items`, from the table
    /// (`index: None`) or an index by name (`"due"`, `"active"`).
    pub(crate) fn charge_read(
        &self,
        operation: &'static str,
        index: Option<&'static str>,
        items: &[&Item],
        consistent: bool,
        request: Request,
    ) {
        let def = index.and_then(index_def);
        let size_in_place = |item: &Item| match def {
            Some(def) => projection(def, item)
                .as_deref()
                .map(projection_size)
                .unwrap_or(0),
            None => item_size(item),
        };
        // A get is charged per item, a query on the items' total.
        let read = if operation == "GetItem" || operation == "BatchGetItem" {
            items
                .iter()
                .map(|i| units(size_in_place(i), READ_UNIT_BYTES))
                .sum::<f64>()
                .max(1.0)
        } else {
            units(
                items.iter().map(|i| size_in_place(i)).sum(),
                READ_UNIT_BYTES,
            )
        };
        let consistency = if consistent { 1.0 } else { 0.5 };
        self.meter.record_units(
            operation,
            CapacityTarget {
                table: table_name().to_string(),
                index: index.map(str::to_string),
            },
            Units::read(read * consistency * request.factor()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::RequestMeter;

    fn s(v: &str) -> Value {
        Value::S(v.to_string())
    }

    fn n(v: &str) -> Value {
        Value::N(v.to_string())
    }

    fn item(attrs: &[(&str, Value)]) -> Item {
        attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn store() -> InMemoryStore {
        InMemoryStore::new(1, RequestMeter::new())
    }

    fn index_units(store: &InMemoryStore, index: &str) -> Units {
        store.meter().snapshot().units_in(table_name(), Some(index))
    }

    fn table_units(store: &InMemoryStore) -> Units {
        store.meter().snapshot().units_in(table_name(), None)
    }

    fn due_item(gsi1sk: &str) -> Item {
        item(&[
            (PK, s("SCHEDULE#a")),
            (SK, s("SCHEDULE")),
            ("GSI1PK", s("DUE#0")),
            ("GSI1SK", s(gsi1sk)),
        ])
    }

    #[test]
    fn sizes_a_known_item_by_the_published_rules() {
        let it = item(&[
            ("PK", s("abc")),                               // 2 + 3
            ("n", n("12345")),                              // 1 + (3 + 1)
            ("z", n("-0.00100")),                           // 1 + (1 + 1)
            ("b", Value::Bool(true)),                       // 1 + 1
            ("l", Value::L(vec![s("xy"), n("7")])),         // 1 + 3 + (1+2) + (1+2)
            ("m", Value::M([("k".into(), s("v"))].into())), // 1 + 3 + (1+1+1)
        ]);
        assert_eq!(item_size(&it), 5 + 5 + 3 + 2 + 10 + 7);
    }

    #[test]
    fn a_write_costs_a_unit_per_started_kilobyte_of_the_larger_version() {
        let store = store();
        let small = item(&[(PK, s("X#1")), (SK, s("Y"))]);
        let mut big = small.clone();
        big.insert("pad".into(), s(&"x".repeat(1500)));
        store.charge_write("PutItem", Some(&big), Some(&small), Request::Standard);
        assert_eq!(
            table_units(&store).write,
            2.0,
            "1,500 bytes before: 2 units"
        );
        assert_eq!(index_units(&store, "due").write, 0.0, "in no index");
    }

    #[test]
    fn an_index_key_change_costs_two_writes_and_entering_one() {
        let store = store();
        store.charge_write("PutItem", None, Some(&due_item("t1")), Request::Standard);
        assert_eq!(index_units(&store, "due").write, 1.0, "enters the index");
        store.charge_write(
            "UpdateItem",
            Some(&due_item("t1")),
            Some(&due_item("t2")),
            Request::Standard,
        );
        assert_eq!(index_units(&store, "due").write, 3.0, "delete + put");
        store.charge_write(
            "UpdateItem",
            Some(&due_item("t2")),
            Some(&due_item("t2")),
            Request::Standard,
        );
        assert_eq!(
            index_units(&store, "due").write,
            3.0,
            "nothing projected changed"
        );
        let mut left = due_item("t2");
        left.remove("GSI1PK");
        store.charge_write(
            "UpdateItem",
            Some(&due_item("t2")),
            Some(&left),
            Request::Standard,
        );
        assert_eq!(index_units(&store, "due").write, 4.0, "leaves the index");
        assert_eq!(index_units(&store, "active").write, 0.0);
    }

    #[test]
    fn a_projected_attribute_change_costs_one_index_write() {
        let store = store();
        let before = due_item("t1");
        let mut after = before.clone();
        after.insert("state".into(), s("PAUSED"));
        store.charge_write("UpdateItem", Some(&before), Some(&after), Request::Standard);
        // Projection ALL today; a narrower one that leaves `state` out would charge 0.
        let expected = match index_def("due").map(|d| d.projection.projection_type.as_str()) {
            Some("ALL") => 1.0,
            _ => 0.0,
        };
        assert_eq!(index_units(&store, "due").write, expected);
    }

    #[test]
    fn a_transaction_costs_double() {
        let store = store();
        store.charge_write(
            "TransactWriteItems",
            None,
            Some(&due_item("t1")),
            Request::Transactional,
        );
        assert_eq!(table_units(&store).write, 2.0);
        assert_eq!(index_units(&store, "due").write, 2.0);
        let snapshot = store.meter().snapshot();
        assert_eq!(
            snapshot
                .operation("DynamoDB.TransactWriteItems")
                .write_units,
            4.0
        );
    }

    #[test]
    fn a_failed_condition_still_charges_the_stored_item() {
        let store = store();
        let mut stored = due_item("t1");
        stored.insert("pad".into(), s(&"x".repeat(2100)));
        store.charge_write("PutItem", Some(&stored), None, Request::Standard);
        assert_eq!(table_units(&store).write, 3.0, "2.1 KB stored: 3 units");
        assert_eq!(index_units(&store, "due").write, 0.0, "nothing written");
        store.charge_write("PutItem", None, None, Request::Standard);
        assert_eq!(table_units(&store).write, 4.0, "absent: one unit");
    }

    #[test]
    fn reads_round_per_item_for_a_get_and_on_the_sum_for_a_query() {
        let store = store();
        let mut a = due_item("t1");
        a.insert("pad".into(), s(&"x".repeat(3000)));
        let b = a.clone();
        store.charge_read("GetItem", None, &[&a], true, Request::Standard);
        assert_eq!(table_units(&store).read, 1.0);
        store.charge_read("Query", None, &[&a, &b], true, Request::Standard);
        assert_eq!(table_units(&store).read, 3.0, "6 KB summed: 2 units");
        // `due` projects keys only: the two entries are a few dozen bytes, not 6 KB.
        store.charge_read("Query", Some("due"), &[&a, &b], false, Request::Standard);
        assert_eq!(
            index_units(&store, "due").read,
            0.5,
            "keys only, eventually consistent: half a unit"
        );
        store.charge_read("Query", Some("due"), &[], false, Request::Standard);
        assert_eq!(
            index_units(&store, "due").read,
            1.0,
            "an empty query: half a unit"
        );
    }

    #[test]
    fn counts_calls_as_the_interceptor_does() {
        let store = store();
        store.charge_call("GetItem");
        store.charge_call("GetItem");
        let usage = store.meter().snapshot().operation("DynamoDB.GetItem");
        assert_eq!((usage.calls, usage.attempts), (2, 2));
    }

    #[test]
    fn stored_bytes_count_the_table_and_index_entries_with_their_overhead() {
        let store = store();
        let it = due_item("t1");
        store.charge_write("PutItem", None, Some(&it), Request::Standard);
        let size = item_size(&it);
        let expected = match index_def("due").map(|d| d.projection.projection_type.as_str()) {
            Some("ALL") => 2 * (size + STORAGE_OVERHEAD_BYTES),
            _ => {
                size + STORAGE_OVERHEAD_BYTES
                    + item_size(&projected(index_def("due").unwrap(), &it).unwrap())
                    + STORAGE_OVERHEAD_BYTES
            }
        };
        assert_eq!(store.meter().snapshot().stored_bytes, expected);
        store.charge_write("PutItem", Some(&it), Some(&it), Request::Standard);
        assert_eq!(
            store.meter().snapshot().stored_bytes,
            expected,
            "rewritten, not added"
        );
    }
}
