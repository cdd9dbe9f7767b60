//! The ledger's items, as DynamoDB holds them but without its SDK: [`Value`] has DynamoDB's
//! attribute types, so a store renders an item for DynamoDB value by value and the memory
//! store keeps the same items. Reading and writing them attribute by attribute: items come
//! from outside (anyone with table access can write one), so every read is checked and a
//! bad one becomes `STORE_MALFORMED_ITEM` naming the item's keys and the attribute, never a
//! panic.

use std::collections::HashMap;
use std::fmt::Display;
use std::str::FromStr;

use chrono::{DateTime, NaiveDate, Utc};
use cronledger_core::window::utc_text;
use serde::de::DeserializeOwned;

use crate::error::StoreError;
use crate::keys::{PK, SK};

/// One attribute's value, by DynamoDB's types. Numbers are kept as their text (DynamoDB's
/// own form), so no precision is lost on the way through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    S(String),
    N(String),
    B(Vec<u8>),
    Bool(bool),
    Null,
    L(Vec<Value>),
    M(HashMap<String, Value>),
    Ss(Vec<String>),
    Ns(Vec<String>),
    Bs(Vec<Vec<u8>>),
}

impl Value {
    /// The string, or the value itself when it is not one (as the SDK's `as_s`).
    pub fn as_s(&self) -> Result<&String, &Value> {
        match self {
            Value::S(s) => Ok(s),
            other => Err(other),
        }
    }

    /// The number's text, or the value itself when it is not one.
    pub fn as_n(&self) -> Result<&String, &Value> {
        match self {
            Value::N(n) => Ok(n),
            other => Err(other),
        }
    }
}

pub type Item = HashMap<String, Value>;

/// Typed access to one item, for error messages that say which item and which attribute.
pub struct ItemReader<'a> {
    item: &'a Item,
    pk: String,
    sk: String,
}

impl<'a> ItemReader<'a> {
    pub fn new(item: &'a Item) -> ItemReader<'a> {
        let key = |name: &str| match item.get(name) {
            Some(Value::S(s)) => s.clone(),
            Some(_) => format!("<{name} not a string>"),
            None => format!("<no {name}>"),
        };
        ItemReader {
            item,
            pk: key(PK),
            sk: key(SK),
        }
    }

    pub fn pk(&self) -> &str {
        &self.pk
    }

    pub fn sk(&self) -> &str {
        &self.sk
    }

    pub fn malformed(&self, attribute: &str, problem: impl Display) -> StoreError {
        StoreError::Malformed {
            pk: self.pk.clone(),
            sk: self.sk.clone(),
            attribute: attribute.to_string(),
            problem: problem.to_string(),
        }
    }

    /// Checks the item's kind attribute (`type`), so a run is never read as a schedule.
    pub fn expect_type(&self, name: &str, wanted: &str) -> Result<(), StoreError> {
        let found = self.s(name)?;
        if found == wanted {
            Ok(())
        } else {
            Err(self.malformed(name, format!("is `{found}`, not `{wanted}`")))
        }
    }

    pub fn s(&self, name: &str) -> Result<&'a str, StoreError> {
        self.opt_s(name)?
            .ok_or_else(|| self.malformed(name, "is missing"))
    }

    /// Absent and NULL both read as `None`; any other type is an error.
    pub fn opt_s(&self, name: &str) -> Result<Option<&'a str>, StoreError> {
        match self.item.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::S(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(self.malformed(name, format!("is {}, not a string", kind(other)))),
        }
    }

    pub fn opt_n<T: FromStr>(&self, name: &str) -> Result<Option<T>, StoreError>
    where
        T::Err: Display,
    {
        match self.item.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::N(n)) => n
                .parse()
                .map(Some)
                .map_err(|e| self.malformed(name, format!("is not a valid number `{n}`: {e}"))),
            Some(other) => Err(self.malformed(name, format!("is {}, not a number", kind(other)))),
        }
    }

    pub fn n<T: FromStr>(&self, name: &str) -> Result<T, StoreError>
    where
        T::Err: Display,
    {
        self.opt_n(name)?
            .ok_or_else(|| self.malformed(name, "is missing"))
    }

    pub fn bool(&self, name: &str) -> Result<bool, StoreError> {
        match self.item.get(name) {
            Some(Value::Bool(b)) => Ok(*b),
            None => Err(self.malformed(name, "is missing")),
            Some(other) => Err(self.malformed(name, format!("is {}, not a boolean", kind(other)))),
        }
    }

    /// Absent and NULL both read as `None`.
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, StoreError> {
        match self.item.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.malformed(name, format!("is {}, not a boolean", kind(other)))),
        }
    }

    /// A string attribute parsed with `FromStr` (status names, enums, dates).
    pub fn opt_parsed<T: FromStr>(&self, name: &str) -> Result<Option<T>, StoreError>
    where
        T::Err: Display,
    {
        self.opt_s(name)?
            .map(|s| {
                s.parse()
                    .map_err(|e| self.malformed(name, format!("`{s}` does not parse: {e}")))
            })
            .transpose()
    }

    pub fn parsed<T: FromStr>(&self, name: &str) -> Result<T, StoreError>
    where
        T::Err: Display,
    {
        self.opt_parsed(name)?
            .ok_or_else(|| self.malformed(name, "is missing"))
    }

    pub fn time(&self, name: &str) -> Result<DateTime<Utc>, StoreError> {
        self.parsed(name)
    }

    pub fn opt_time(&self, name: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.opt_parsed(name)
    }

    pub fn date(&self, name: &str) -> Result<NaiveDate, StoreError> {
        self.parsed(name)
    }

    /// A string attribute holding a JSON document.
    pub fn json<T: DeserializeOwned>(&self, name: &str) -> Result<T, StoreError> {
        let text = self.s(name)?;
        serde_json::from_str(text).map_err(|e| self.malformed(name, format!("is not valid: {e}")))
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::S(_) => "a string",
        Value::N(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::B(_) => "binary",
        Value::L(_) => "a list",
        Value::M(_) => "a map",
        Value::Null => "null",
        Value::Ss(_) | Value::Ns(_) | Value::Bs(_) => "a set",
    }
}

/// Builds an item; `None` values are left out so absent means "not set".
#[derive(Debug, Default)]
pub struct ItemWriter(pub Item);

impl ItemWriter {
    pub fn new() -> ItemWriter {
        ItemWriter::default()
    }

    pub fn s(mut self, name: &str, value: impl Into<String>) -> Self {
        self.0.insert(name.to_string(), s(value));
        self
    }

    pub fn opt_s(self, name: &str, value: Option<impl Into<String>>) -> Self {
        match value {
            Some(v) => self.s(name, v),
            None => self,
        }
    }

    pub fn n(mut self, name: &str, value: impl ToString) -> Self {
        self.0.insert(name.to_string(), n(value));
        self
    }

    pub fn opt_n(self, name: &str, value: Option<impl ToString>) -> Self {
        match value {
            Some(v) => self.n(name, v),
            None => self,
        }
    }

    pub fn bool(mut self, name: &str, value: bool) -> Self {
        self.0.insert(name.to_string(), Value::Bool(value));
        self
    }

    pub fn time(self, name: &str, value: DateTime<Utc>) -> Self {
        self.s(name, utc_text(value))
    }

    pub fn opt_time(self, name: &str, value: Option<DateTime<Utc>>) -> Self {
        self.opt_s(name, value.map(utc_text))
    }

    pub fn build(self) -> Item {
        self.0
    }
}

pub fn s(value: impl Into<String>) -> Value {
    Value::S(value.into())
}

/// An instant as stored: RFC3339 UTC text.
pub fn time(value: DateTime<Utc>) -> Value {
    s(utc_text(value))
}

pub fn n(value: impl ToString) -> Value {
    Value::N(value.to_string())
}

pub fn key(pk: String, sk: impl Into<String>) -> Item {
    HashMap::from([(PK.to_string(), s(pk)), (SK.to_string(), s(sk))])
}

/// The table key (PK, SK) of an item, an index entry or a key.
pub fn table_key(item: &Item) -> Result<(String, String), StoreError> {
    let r = ItemReader::new(item);
    Ok((r.s(PK)?.to_string(), r.s(SK)?.to_string()))
}
