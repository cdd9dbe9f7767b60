//! [`Expr`](super::Expr)s evaluated on items by DynamoDB's rules, for stores that keep the
//! items themselves (the memory store): a condition on an absent item sees no attributes;
//! comparisons of different types are false; strings and binaries order by their bytes,
//! numbers by value; every SET operand reads the item as it was before the write.
//! <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html>

use std::cmp::Ordering;

use super::{Comparison, Cond, Operand, Update};
use crate::error::StoreError;
use crate::item::{Item, Value};

/// Whether `cond` holds on `item` (`None`: no item).
pub fn holds(cond: &Cond, item: Option<&Item>) -> bool {
    let get = |attr: &str| item.and_then(|i| i.get(attr));
    match cond {
        Cond::Exists(attr) => get(attr).is_some(),
        Cond::NotExists(attr) => get(attr).is_none(),
        Cond::Compare(attr, op, value) => get(attr).is_some_and(|found| match op {
            Comparison::Eq => found == value,
            Comparison::Lt => order(found, value) == Some(Ordering::Less),
            Comparison::Le => matches!(order(found, value), Some(Ordering::Less | Ordering::Equal)),
        }),
        Cond::Between(attr, low, high) => get(attr).is_some_and(|found| {
            matches!(order(low, found), Some(Ordering::Less | Ordering::Equal))
                && matches!(order(found, high), Some(Ordering::Less | Ordering::Equal))
        }),
        Cond::BeginsWith(attr, prefix) => match (get(attr), prefix) {
            (Some(Value::S(s)), Value::S(p)) => s.starts_with(p.as_str()),
            (Some(Value::B(b)), Value::B(p)) => b.starts_with(p),
            _ => false,
        },
        Cond::In(attr, values) => get(attr).is_some_and(|found| values.contains(found)),
        Cond::Or(alternatives) => alternatives.iter().any(|c| holds(c, item)),
    }
}

/// Whether every condition holds (none: true).
pub fn all_hold(conditions: &[Cond], item: Option<&Item>) -> bool {
    conditions.iter().all(|c| holds(c, item))
}

/// Whether a query's filter keeps `item`: any alternative holds (none: every item is kept).
pub fn kept(filters: &[Cond], item: &Item) -> bool {
    filters.is_empty() || filters.iter().any(|c| holds(c, Some(item)))
}

/// The order of two values DynamoDB can compare (same type: string, number or binary).
fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::S(x), Value::S(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Value::B(x), Value::B(y)) => Some(x.cmp(y)),
        (Value::N(x), Value::N(y)) => number_order(x, y),
        _ => None,
    }
}

fn number_order(x: &str, y: &str) -> Option<Ordering> {
    match (x.parse::<i128>(), y.parse::<i128>()) {
        (Ok(x), Ok(y)) => Some(x.cmp(&y)),
        _ => x.parse::<f64>().ok()?.partial_cmp(&y.parse::<f64>().ok()?),
    }
}

fn integer(value: &Value, attr: &str) -> Result<i128, StoreError> {
    match value {
        Value::N(n) => n
            .parse()
            .map_err(|_| StoreError::InvalidRequest(format!("`{attr}`: `{n}` is not an integer"))),
        other => Err(StoreError::InvalidRequest(format!(
            "`{attr}` is {other:?}, not a number"
        ))),
    }
}

fn operand(op: &Operand, before: &Item, attr: &str) -> Result<Value, StoreError> {
    Ok(match op {
        Operand::Value(v) => v.clone(),
        Operand::Attr(name) => before.get(name).cloned().ok_or_else(|| {
            StoreError::InvalidRequest(format!(
                "the expression refers to `{name}`, which the item does not have"
            ))
        })?,
        Operand::IfNotExists(name, default) => {
            before.get(name).cloned().unwrap_or_else(|| default.clone())
        }
        Operand::Plus(a, b) => {
            let sum = integer(&operand(a, before, attr)?, attr)?
                + integer(&operand(b, before, attr)?, attr)?;
            Value::N(sum.to_string())
        }
    })
}

/// `item` after `updates` (an update of an absent item starts from its key, given as
/// `item`). Every operand reads the item as it was; an error changes nothing.
pub fn apply(updates: &[Update], item: &Item) -> Result<Item, StoreError> {
    // DynamoDB refuses an expression that names one attribute twice ("two document paths
    // overlap"): so does this, rather than apply one after the other.
    let mut named = std::collections::BTreeSet::new();
    for update in updates {
        let (Update::Set(attr, _) | Update::Remove(attr) | Update::Add(attr, _)) = update;
        if !named.insert(attr.as_str()) {
            return Err(StoreError::InvalidRequest(format!(
                "the update names `{attr}` twice"
            )));
        }
    }
    let mut after = item.clone();
    for update in updates {
        match update {
            Update::Set(attr, op) => {
                after.insert(attr.clone(), operand(op, item, attr)?);
            }
            Update::Remove(attr) => {
                after.remove(attr);
            }
            Update::Add(attr, by) => {
                let start = match item.get(attr) {
                    Some(found) => integer(found, attr)?,
                    None => 0,
                };
                let sum = start + integer(by, attr)?;
                after.insert(attr.clone(), Value::N(sum.to_string()));
            }
        }
    }
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use crate::item::{n, s};

    fn item(pairs: &[(&str, Value)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn conditions_follow_dynamodb() {
        let it = item(&[
            ("status", s("QUEUED")),
            ("epoch", n(3)),
            ("at", s("2026-03-01T10:00:00Z")),
        ]);
        let mut e = Expr::new();
        e.eq("status", s("QUEUED")).eq("epoch", n(3)).exists("at");
        assert!(all_hold(&e.conditions, Some(&it)));
        assert!(
            !all_hold(&e.conditions, None),
            "an absent item has no attributes"
        );
        let mut absent = Expr::new();
        absent.not_exists("PK");
        assert!(all_hold(&absent.conditions, None));
        // Numbers order by value, not text; different types never compare.
        assert!(holds(
            &Cond::Compare("epoch".into(), Comparison::Lt, n(10)),
            Some(&it)
        ));
        assert!(!holds(
            &Cond::Compare("epoch".into(), Comparison::Eq, s("3")),
            Some(&it)
        ));
        assert!(holds(
            &Cond::Between("at".into(), s("2026-03-01"), s("2026-03-02")),
            Some(&it)
        ));
        assert!(holds(
            &Cond::BeginsWith("at".into(), s("2026-03-01T10")),
            Some(&it)
        ));
        assert!(holds(
            &Cond::Or(vec![Cond::NotExists("x".into()), Cond::Exists("y".into())]),
            Some(&it)
        ));
    }

    #[test]
    fn updates_read_the_item_as_it_was() {
        let it = item(&[("count", n(2)), ("gone", s("x"))]);
        let mut e = Expr::new();
        e.add("count", 1)
            .set_sum("total", n(10), "count", n(0))
            .set_if_absent("first", s("a"))
            .increment("fresh", 5)
            .increment_signed("count2", -1)
            .remove("gone");
        let after = apply(&e.updates, &it).expect("applies");
        assert_eq!(after.get("count"), Some(&n(3)));
        assert_eq!(
            after.get("total"),
            Some(&n(12)),
            "the old count, not the new"
        );
        assert_eq!(after.get("first"), Some(&s("a")));
        assert_eq!(after.get("fresh"), Some(&n(5)));
        assert_eq!(after.get("count2"), Some(&n(-1)));
        assert_eq!(after.get("gone"), None);
        let mut missing = Expr::new();
        missing.add("nothing", 1);
        assert!(apply(&missing.updates, &it).is_err());
        let mut twice = Expr::new();
        twice.set("lease", s("a")).remove("lease");
        assert!(
            apply(&twice.updates, &it).is_err(),
            "DynamoDB refuses it too"
        );
    }
}
