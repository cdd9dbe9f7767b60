//! The port's [`Expr`] rendered as DynamoDB expressions, with placeholders for every name and
//! value, so reserved words (`status`, `count`, ...) never matter and values are never
//! spliced into text. Rendering is deterministic: each accessor renders the whole
//! expression the same way, so their placeholders agree.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::values::to_sdk;
pub use crate::expr::Expr;
use crate::expr::{Comparison, Cond, Operand, Update};
use crate::item::Value;

/// An expression's text and placeholders, rendered once per request.
#[derive(Debug, Default)]
pub struct Rendered {
    names: HashMap<String, String>,
    values: Vec<(String, Value)>,
    pub update: Option<String>,
    pub condition: Option<String>,
    /// The query filter: any of its alternatives.
    pub filter: Option<String>,
}

impl Rendered {
    fn name(&mut self, attr: &str) -> String {
        // Our attribute names are [A-Za-z0-9_], valid placeholder text as they are.
        let placeholder = format!("#{attr}");
        self.names.insert(placeholder.clone(), attr.to_string());
        placeholder
    }

    fn value(&mut self, value: &Value) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.push((placeholder.clone(), value.clone()));
        placeholder
    }

    fn operand(&mut self, op: &Operand) -> String {
        match op {
            Operand::Value(v) => self.value(v),
            Operand::Attr(attr) => self.name(attr),
            Operand::IfNotExists(attr, default) => {
                format!(
                    "if_not_exists({}, {})",
                    self.name(attr),
                    self.value(default)
                )
            }
            Operand::Plus(a, b) => format!("{} + {}", self.operand(a), self.operand(b)),
        }
    }

    fn cond(&mut self, cond: &Cond) -> String {
        match cond {
            Cond::Compare(attr, op, value) => {
                let op = match op {
                    Comparison::Eq => "=",
                    Comparison::Lt => "<",
                    Comparison::Le => "<=",
                };
                format!("{} {op} {}", self.name(attr), self.value(value))
            }
            Cond::Between(attr, low, high) => format!(
                "{} BETWEEN {} AND {}",
                self.name(attr),
                self.value(low),
                self.value(high)
            ),
            Cond::BeginsWith(attr, prefix) => {
                format!("begins_with({}, {})", self.name(attr), self.value(prefix))
            }
            Cond::Exists(attr) => format!("attribute_exists({})", self.name(attr)),
            Cond::NotExists(attr) => format!("attribute_not_exists({})", self.name(attr)),
            Cond::In(attr, values) => {
                let n = self.name(attr);
                let vs: Vec<String> = values.iter().map(|v| self.value(v)).collect();
                format!("{n} IN ({})", vs.join(", "))
            }
            Cond::Or(alternatives) => {
                let parts: Vec<String> = alternatives.iter().map(|c| self.cond(c)).collect();
                format!("({})", parts.join(" OR "))
            }
        }
    }

    pub fn of(expr: &Expr) -> Rendered {
        let mut r = Rendered::default();
        let (mut set, mut remove, mut add) = (Vec::new(), Vec::new(), Vec::new());
        for update in &expr.updates {
            match update {
                Update::Set(attr, op) => {
                    let text = format!("{} = {}", r.name(attr), r.operand(op));
                    set.push(text);
                }
                Update::Remove(attr) => remove.push(r.name(attr)),
                Update::Add(attr, by) => {
                    let text = format!("{} {}", r.name(attr), r.value(by));
                    add.push(text);
                }
            }
        }
        let mut parts = Vec::new();
        if !set.is_empty() {
            parts.push(format!("SET {}", set.join(", ")));
        }
        if !remove.is_empty() {
            parts.push(format!("REMOVE {}", remove.join(", ")));
        }
        if !add.is_empty() {
            parts.push(format!("ADD {}", add.join(", ")));
        }
        r.update = (!parts.is_empty()).then(|| parts.join(" "));
        let conditions: Vec<String> = expr.conditions.iter().map(|c| r.cond(c)).collect();
        r.condition = (!conditions.is_empty()).then(|| conditions.join(" AND "));
        let filters: Vec<String> = expr.filters.iter().map(|c| r.cond(c)).collect();
        r.filter = (!filters.is_empty()).then(|| filters.join(" OR "));
        r
    }
}

impl Rendered {
    /// The placeholders' names; DynamoDB rejects empty maps, hence `None` when there are
    /// none.
    pub fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    /// The placeholders' values (`None` when there are none).
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

    fn r(e: &Expr) -> Rendered {
        Rendered::of(e)
    }

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
            r(&e).update.unwrap(),
            "SET #status = :v0, #attempts = #attempts + :v1 REMOVE #GSI2PK"
        );
        assert_eq!(
            r(&e).condition.unwrap(),
            "#status = :v2 AND #lease_epoch = :v3 AND attribute_exists(#PK)"
        );
        assert_eq!(r(&e).names().unwrap().len(), 5);
        assert_eq!(r(&e).values().unwrap().len(), 4);
        assert_eq!(r(&Expr::new()).update, None);
    }

    #[test]
    fn increments_go_to_an_add_clause_beside_set() {
        let mut e = Expr::new();
        e.increment("failed", 2)
            .set_if_absent("expires_at", n(99))
            .increment("fresh", 1);
        assert_eq!(
            r(&e).update.unwrap(),
            "SET #expires_at = if_not_exists(#expires_at, :v1) ADD #failed :v0, #fresh :v2"
        );
    }

    #[test]
    fn a_filter_keeps_an_item_when_any_alternative_holds() {
        let mut e = Expr::new();
        e.eq("PK", s("SCHED#a"))
            .or_one_of("status", [s("QUEUED"), s("RUNNING")])
            .or_begins_with("scheduled_for", s("2026-03-01T10:05:00"));
        assert_eq!(r(&e).condition.unwrap(), "#PK = :v0");
        assert_eq!(
            r(&e).filter.unwrap(),
            "#status IN (:v1, :v2) OR begins_with(#scheduled_for, :v3)"
        );
        assert_eq!(r(&e).values().unwrap().len(), 4);
        assert_eq!(r(&Expr::new()).filter, None);
    }

    #[test]
    fn alternatives_render_in_parentheses() {
        let mut e = Expr::new();
        e.any(vec![
            Cond::NotExists("PK".into()),
            Cond::Compare("expires_at".into(), Comparison::Lt, n(5)),
        ]);
        assert_eq!(
            r(&e).condition.unwrap(),
            "(attribute_not_exists(#PK) OR #expires_at < :v0)"
        );
    }
}
