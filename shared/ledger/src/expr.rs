//! A write's condition and updates, and a query's filter, as values: what a store does to
//! one item, said once. The DynamoDB store renders an [`Expr`] to expression text with
//! placeholders; the memory store evaluates the same [`Expr`] on its items (see [`eval`]),
//! so both apply one rule by construction.

pub mod eval;

use crate::item::Value;

/// A value computed from the item being written (DynamoDB's SET operands).
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Value(Value),
    /// The item's attribute (an error when absent).
    Attr(String),
    /// `if_not_exists(attr, value)`: the attribute, or `value` when it is absent.
    IfNotExists(String, Value),
    /// The sum of two numbers.
    Plus(Box<Operand>, Box<Operand>),
}

/// One change to an item's attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// `SET attr = operand`
    Set(String, Operand),
    /// `REMOVE attr`
    Remove(String),
    /// `ADD attr n`: starts an absent number at zero; concurrent additions all apply.
    Add(String, Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Eq,
    Lt,
    Le,
}

/// A condition on one item (absent items have no attributes).
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    Compare(String, Comparison, Value),
    Between(String, Value, Value),
    BeginsWith(String, Value),
    Exists(String),
    NotExists(String),
    In(String, Vec<Value>),
    Or(Vec<Cond>),
}

/// A write's updates and condition (all must hold), or a query's key condition and filter
/// (any alternative keeps an item). Built with the methods below, in any order. (No
/// `PartialEq`: its `eq` would shadow the builder's.)
#[derive(Debug, Default, Clone)]
pub struct Expr {
    pub updates: Vec<Update>,
    pub conditions: Vec<Cond>,
    pub filters: Vec<Cond>,
}

fn number(n: impl ToString) -> Value {
    Value::N(n.to_string())
}

impl Expr {
    pub fn new() -> Expr {
        Expr::default()
    }

    pub fn set(&mut self, attr: &str, value: Value) -> &mut Expr {
        self.updates
            .push(Update::Set(attr.to_string(), Operand::Value(value)));
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
        self.updates.push(Update::Set(
            attr.to_string(),
            Operand::IfNotExists(attr.to_string(), value),
        ));
        self
    }

    /// `attr = base + if_not_exists(addend, default)`: a sum with a number the item holds
    /// (or `default` on items written before it had one).
    pub fn set_sum(&mut self, attr: &str, base: Value, addend: &str, default: Value) -> &mut Expr {
        self.updates.push(Update::Set(
            attr.to_string(),
            Operand::Plus(
                Box::new(Operand::Value(base)),
                Box::new(Operand::IfNotExists(addend.to_string(), default)),
            ),
        ));
        self
    }

    /// `attr = attr + by` (the attribute must exist).
    pub fn add(&mut self, attr: &str, by: u64) -> &mut Expr {
        self.updates.push(Update::Set(
            attr.to_string(),
            Operand::Plus(
                Box::new(Operand::Attr(attr.to_string())),
                Box::new(Operand::Value(number(by))),
            ),
        ));
        self
    }

    /// `ADD attr by`: unlike [`Expr::add`], valid on an absent item or attribute (it starts
    /// at zero), and concurrent increments all apply.
    pub fn increment(&mut self, attr: &str, by: u64) -> &mut Expr {
        self.updates.push(Update::Add(attr.to_string(), number(by)));
        self
    }

    /// [`Expr::increment`] by a signed amount (a counter taken back).
    pub fn increment_signed(&mut self, attr: &str, by: i64) -> &mut Expr {
        self.updates.push(Update::Add(attr.to_string(), number(by)));
        self
    }

    pub fn remove(&mut self, attr: &str) -> &mut Expr {
        self.updates.push(Update::Remove(attr.to_string()));
        self
    }

    fn compare(&mut self, attr: &str, op: Comparison, value: Value) -> &mut Expr {
        self.conditions
            .push(Cond::Compare(attr.to_string(), op, value));
        self
    }

    pub fn eq(&mut self, attr: &str, value: Value) -> &mut Expr {
        self.compare(attr, Comparison::Eq, value)
    }

    pub fn lt(&mut self, attr: &str, value: Value) -> &mut Expr {
        self.compare(attr, Comparison::Lt, value)
    }

    pub fn le(&mut self, attr: &str, value: Value) -> &mut Expr {
        self.compare(attr, Comparison::Le, value)
    }

    pub fn between(&mut self, attr: &str, low: Value, high: Value) -> &mut Expr {
        self.conditions
            .push(Cond::Between(attr.to_string(), low, high));
        self
    }

    pub fn begins_with(&mut self, attr: &str, prefix: Value) -> &mut Expr {
        self.conditions
            .push(Cond::BeginsWith(attr.to_string(), prefix));
        self
    }

    pub fn exists(&mut self, attr: &str) -> &mut Expr {
        self.conditions.push(Cond::Exists(attr.to_string()));
        self
    }

    pub fn not_exists(&mut self, attr: &str) -> &mut Expr {
        self.conditions.push(Cond::NotExists(attr.to_string()));
        self
    }

    /// Any of `alternatives` holds (each an [`Expr`]'s conditions, all of which must hold).
    pub fn any(&mut self, alternatives: Vec<Cond>) -> &mut Expr {
        self.conditions.push(Cond::Or(alternatives));
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
        self.filters
            .push(Cond::In(attr.to_string(), values.into_iter().collect()));
        self
    }

    /// Keeps items whose `attr` begins with `prefix` (a query filter alternative).
    pub fn or_begins_with(&mut self, attr: &str, prefix: Value) -> &mut Expr {
        self.filters
            .push(Cond::BeginsWith(attr.to_string(), prefix));
        self
    }
}
