//! The ledger's items ([`crate::item::Value`]) to and from the SDK's `AttributeValue`, at
//! the edge of every DynamoDB request: the rest of the store never names the SDK's type.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::item::{Item, Value};

pub type SdkItem = HashMap<String, AttributeValue>;

pub fn to_sdk(value: Value) -> AttributeValue {
    match value {
        Value::S(s) => AttributeValue::S(s),
        Value::N(n) => AttributeValue::N(n),
        Value::B(b) => AttributeValue::B(Blob::new(b)),
        Value::Bool(b) => AttributeValue::Bool(b),
        Value::Null => AttributeValue::Null(true),
        Value::L(list) => AttributeValue::L(list.into_iter().map(to_sdk).collect()),
        Value::M(map) => AttributeValue::M(item_to_sdk(map)),
        Value::Ss(set) => AttributeValue::Ss(set),
        Value::Ns(set) => AttributeValue::Ns(set),
        Value::Bs(set) => AttributeValue::Bs(set.into_iter().map(Blob::new).collect()),
    }
}

/// A type this SDK does not know yet reads as NULL: the item's reader then reports the
/// attribute as missing, with the item's keys.
pub fn from_sdk(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => Value::S(s.clone()),
        AttributeValue::N(n) => Value::N(n.clone()),
        AttributeValue::B(b) => Value::B(b.as_ref().to_vec()),
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::L(list) => Value::L(list.iter().map(from_sdk).collect()),
        AttributeValue::M(map) => Value::M(item_from_sdk(map)),
        AttributeValue::Ss(set) => Value::Ss(set.clone()),
        AttributeValue::Ns(set) => Value::Ns(set.clone()),
        AttributeValue::Bs(set) => Value::Bs(set.iter().map(|b| b.as_ref().to_vec()).collect()),
        _ => Value::Null,
    }
}

pub fn item_to_sdk(item: Item) -> SdkItem {
    item.into_iter().map(|(k, v)| (k, to_sdk(v))).collect()
}

pub fn item_from_sdk(item: &SdkItem) -> Item {
    item.iter().map(|(k, v)| (k.clone(), from_sdk(v))).collect()
}

pub fn items_from_sdk(items: &[SdkItem]) -> Vec<Item> {
    items.iter().map(item_from_sdk).collect()
}

/// An optional SDK item (a response's `item()`, `attributes()`), as the ledger's.
pub fn opt_item(item: Option<&SdkItem>) -> Option<Item> {
    item.map(item_from_sdk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips() {
        let item: Item = [
            ("s".to_string(), Value::S("x".into())),
            ("n".to_string(), Value::N("12.5".into())),
            ("b".to_string(), Value::B(vec![1, 2])),
            ("t".to_string(), Value::Bool(true)),
            ("z".to_string(), Value::Null),
            ("l".to_string(), Value::L(vec![Value::N("1".into())])),
            (
                "m".to_string(),
                Value::M([("k".to_string(), Value::S("v".into()))].into()),
            ),
            ("ss".to_string(), Value::Ss(vec!["a".into()])),
            ("ns".to_string(), Value::Ns(vec!["1".into()])),
            ("bs".to_string(), Value::Bs(vec![vec![3]])),
        ]
        .into();
        assert_eq!(item_from_sdk(&item_to_sdk(item.clone())), item);
    }
}
