//! Builds DynamoDB expressions with placeholders for every name and value, so reserved
//! words (`status`, `count`, ...) never matter and values are never spliced into text.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::values::to_sdk;
use crate::item::Value;

#[derive(Debug, Default, Clone)]
pub struct Expr {
    names: HashMap<String, String>,
    values: HashMap<String, Value>,
    set: Vec<String>,
    remove: Vec<String>,
    /// `ADD` clauses: atomic increments that start an absent number at zero.
    add: Vec<String>,
    conditions: Vec<String>,
    /// Alternatives of a query's filter: an item is kept when any holds.
    filters: Vec<String>,
}

impl Expr {
    pub fn new() -> Expr {
        Expr::default()
    }

    fn name(&mut self, attr: &str) -> String {
        // Our attribute names are [A-Za-z0-9_], valid placeholder text as they are.
        let placeholder = format!("#{attr}");
        self.names.insert(placeholder.clone(), attr.to_string());
        placeholder
    }

    fn value(&mut self, value: Value) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    pub fn set(&mut self, attr: &str, value: Value) -> &mut Expr {
        let (n, v) = (self.name(attr), self.value(value));
        self.set.push(format!("{n} = {v}"));
        self
    }

    pub fn set_opt(&mut self, attr: &str, value: Option<Value>) -> &mut Expr {
        if let Some(value) = value {
            self.set(attr, value);
        }
        self
    }

    /// `attr = if_not_exists(attr, value)`: set once, kept by later writes.
    pub fn set_if_absent(&mut self, attr: &str, value: Value) -> &mut Expr {
        let (n, v) = (self.name(attr), self.value(value));
        self.set.push(format!("{n} = if_not_exists({n}, {v})"));
        self
    }

    /// `attr = base + if_not_exists(addend, default)`: a sum with a number the item holds
    /// (or `default` on items written before it had one).
    pub fn set_sum(&mut self, attr: &str, base: Value, addend: &str, default: Value) -> &mut Expr {
        let (n, b, a, d) = (
            self.name(attr),
            self.value(base),
            self.name(addend),
            self.value(default),
        );
        self.set
            .push(format!("{n} = {b} + if_not_exists({a}, {d})"));
        self
    }

    /// `attr = attr + by`
    pub fn add(&mut self, attr: &str, by: u64) -> &mut Expr {
        let (n, v) = (self.name(attr), self.value(Value::N(by.to_string())));
        self.set.push(format!("{n} = {n} + {v}"));
        self
    }

    /// `ADD attr by`: unlike [`Expr::add`], valid on an absent item or attribute (it starts
    /// at zero), and concurrent increments all apply.
    pub fn increment(&mut self, attr: &str, by: u64) -> &mut Expr {
        let (n, v) = (self.name(attr), self.value(Value::N(by.to_string())));
        self.add.push(format!("{n} {v}"));
        self
    }

    /// [`Expr::increment`] by a signed amount (a counter taken back).
    pub fn increment_signed(&mut self, attr: &str, by: i64) -> &mut Expr {
        let (n, v) = (self.name(attr), self.value(Value::N(by.to_string())));
        self.add.push(format!("{n} {v}"));
        self
    }

    pub fn remove(&mut self, attr: &str) -> &mut Expr {
        let n = self.name(attr);
        self.remove.push(n);
        self
    }

    fn compare(&mut self, attr: &str, op: &str, value: Value) -> &mut Expr {
        let (n, v) = (self.name(attr), self.value(value));
        self.conditions.push(format!("{n} {op} {v}"));
        self
    }

    pub fn eq(&mut self, attr: &str, value: Value) -> &mut Expr {
        self.compare(attr, "=", value)
    }

    pub fn lt(&mut self, attr: &str, value: Value) -> &mut Expr {
        self.compare(attr, "<", value)
    }

    pub fn between(&mut self, attr: &str, low: Value, high: Value) -> &mut Expr {
        let (n, lo, hi) = (self.name(attr), self.value(low), self.value(high));
        self.conditions.push(format!("{n} BETWEEN {lo} AND {hi}"));
        self
    }

    pub fn begins_with(&mut self, attr: &str, prefix: Value) -> &mut Expr {
        let (n, v) = (self.name(attr), self.value(prefix));
        self.conditions.push(format!("begins_with({n}, {v})"));
        self
    }

    pub fn exists(&mut self, attr: &str) -> &mut Expr {
        let n = self.name(attr);
        self.conditions.push(format!("attribute_exists({n})"));
        self
    }

    pub fn not_exists(&mut self, attr: &str) -> &mut Expr {
        let n = self.name(attr);
        self.conditions.push(format!("attribute_not_exists({n})"));
        self
    }

    /// `attr = value`, or absent when `value` is `None`.
    pub fn eq_or_absent(&mut self, attr: &str, value: Option<Value>) -> &mut Expr {
        match value {
            Some(value) => self.eq(attr, value),
            None => self.not_exists(attr),
        }
    }

    /// Keeps items whose `attr` is one of `values` (a query filter alternative).
    pub fn or_one_of(&mut self, attr: &str, values: impl IntoIterator<Item = Value>) -> &mut Expr {
        let n = self.name(attr);
        let vs: Vec<String> = values.into_iter().map(|v| self.value(v)).collect();
        self.filters.push(format!("{n} IN ({})", vs.join(", ")));
        self
    }

    /// Keeps items whose `attr` begins with `prefix` (a query filter alternative).
    pub fn or_begins_with(&mut self, attr: &str, prefix: Value) -> &mut Expr {
        let (n, v) = (self.name(attr), self.value(prefix));
        self.filters.push(format!("begins_with({n}, {v})"));
        self
    }

    /// The query filter: any of its alternatives.
    pub fn filter(&self) -> Option<String> {
        (!self.filters.is_empty()).then(|| self.filters.join(" OR "))
    }

    pub fn update(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.set.is_empty() {
            parts.push(format!("SET {}", self.set.join(", ")));
        }
        if !self.remove.is_empty() {
            parts.push(format!("REMOVE {}", self.remove.join(", ")));
        }
        if !self.add.is_empty() {
            parts.push(format!("ADD {}", self.add.join(", ")));
        }
        (!parts.is_empty()).then(|| parts.join(" "))
    }

    pub fn condition(&self) -> Option<String> {
        (!self.conditions.is_empty()).then(|| self.conditions.join(" AND "))
    }

    /// DynamoDB rejects empty maps, hence `None` when there is nothing.
    pub fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    /// The values, as the SDK takes them.
    pub fn values(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| {
            self.values
                .iter()
                .map(|(k, v)| (k.clone(), to_sdk(v.clone())))
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{n, s};

    #[test]
    fn builds_set_remove_and_conditions_with_placeholders() {
        let mut e = Expr::new();
        e.set("status", s("RUNNING"))
            .add("attempts", 1)
            .remove("GSI2PK")
            .eq("status", s("QUEUED"))
            .eq("lease_epoch", n(3))
            .exists("PK");
        assert_eq!(
            e.update().unwrap(),
            "SET #status = :v0, #attempts = #attempts + :v1 REMOVE #GSI2PK"
        );
        assert_eq!(
            e.condition().unwrap(),
            "#status = :v2 AND #lease_epoch = :v3 AND attribute_exists(#PK)"
        );
        assert_eq!(e.names().unwrap().len(), 5);
        assert_eq!(e.values().unwrap().len(), 4);
        assert_eq!(Expr::new().update(), None);
    }

    #[test]
    fn increments_go_to_an_add_clause_beside_set() {
        let mut e = Expr::new();
        e.increment("failed", 2)
            .set_if_absent("expires_at", n(99))
            .increment("fresh", 1);
        assert_eq!(
            e.update().unwrap(),
            "SET #expires_at = if_not_exists(#expires_at, :v1) ADD #failed :v0, #fresh :v2"
        );
    }

    #[test]
    fn a_filter_keeps_an_item_when_any_alternative_holds() {
        let mut e = Expr::new();
        e.eq("PK", s("SCHED#a"))
            .or_one_of("status", [s("QUEUED"), s("RUNNING")])
            .or_begins_with("scheduled_for", s("2026-03-01T10:05:00"));
        assert_eq!(e.condition().unwrap(), "#PK = :v0");
        assert_eq!(
            e.filter().unwrap(),
            "#status IN (:v1, :v2) OR begins_with(#scheduled_for, :v3)"
        );
        assert_eq!(e.values().unwrap().len(), 4);
        assert_eq!(Expr::new().filter(), None);
    }
}
