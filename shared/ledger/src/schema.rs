//! The items' schema version: every item a store writes carries [`SCHEMA_VERSION`] =
//! [`CURRENT`], stamped by [`Versioned`], the item engine every store subject is run on (see
//! [`crate::engine_subjects`]), so an item kind added later gets it without asking. An item
//! without the attribute was written before versions existed (release 0.1.0) and reads as
//! version 1, which it is: the versioned format only added the attribute.
//!
//! An item of a later version than this code knows is never misread and never changed: a
//! read of it answers `ITEM_SCHEMA_UNSUPPORTED` naming its keys and version, and every write
//! is conditioned on the stored item's version being one this code knows (a write that meets
//! a later item is refused by the store, and answers that error when the refused item came
//! back with the refusal).

use async_trait::async_trait;

use crate::engine::{ItemEngine, QueryPage, Returning, Write, Written};
use crate::error::StoreError;
use crate::expr::{Comparison, Cond, Expr, Operand, Update};
use crate::item::{Item, ItemReader, Value};

/// The attribute (short: it is on every item, so it is paid for in every item's size).
pub const SCHEMA_VERSION: &str = "sv";

/// The schema version this code writes, and the highest it reads.
pub const CURRENT: u64 = 1;

/// The version an item without [`SCHEMA_VERSION`] has: what 0.1.0 wrote.
pub const UNVERSIONED: u64 = 1;

fn current() -> Value {
    Value::N(CURRENT.to_string())
}

/// The item's schema version, checked: `ITEM_SCHEMA_UNSUPPORTED` past [`CURRENT`],
/// `STORE_MALFORMED_ITEM` when it is not a positive whole number.
pub fn check(item: &Item) -> Result<u64, StoreError> {
    let reader = ItemReader::new(item);
    let version = reader.opt_n::<u64>(SCHEMA_VERSION)?.unwrap_or(UNVERSIONED);
    if version == 0 {
        return Err(reader.malformed(SCHEMA_VERSION, "is 0; versions start at 1"));
    }
    if version > CURRENT {
        return Err(StoreError::SchemaUnsupported {
            pk: reader.pk().to_string(),
            sk: reader.sk().to_string(),
            version,
            current: CURRENT,
        });
    }
    Ok(version)
}

fn check_all(items: &[Item]) -> Result<(), StoreError> {
    items.iter().try_for_each(|item| check(item).map(drop))
}

/// The condition every write carries: no stored item, or one of a version this code knows.
fn known_version() -> Cond {
    Cond::Or(vec![
        Cond::NotExists(SCHEMA_VERSION.to_string()),
        Cond::Compare(SCHEMA_VERSION.to_string(), Comparison::Le, current()),
    ])
}

/// `write` as this code sends it: the item stamped with [`CURRENT`] and the stored one's
/// version checked.
pub fn stamp(write: Write) -> Write {
    let guard = |mut cond: Expr| {
        cond.conditions.push(known_version());
        cond
    };
    match write {
        Write::Put { mut item, cond } => {
            item.insert(SCHEMA_VERSION.to_string(), current());
            Write::Put {
                item,
                cond: guard(cond),
            }
        }
        Write::Update { key, mut expr } => {
            let stamp = Update::Set(SCHEMA_VERSION.to_string(), Operand::Value(current()));
            expr.updates.push(stamp);
            Write::Update {
                key,
                expr: guard(expr),
            }
        }
        Write::Delete { key, cond } => Write::Delete {
            key,
            cond: guard(cond),
        },
    }
}

/// An item engine whose writes are [`stamp`]ed and whose reads are [`check`]ed.
pub struct Versioned<'a, E: ?Sized>(pub &'a E);

#[async_trait]
impl<E: ItemEngine + ?Sized> ItemEngine for Versioned<'_, E> {
    fn shards(&self) -> u32 {
        self.0.shards()
    }

    async fn get_item(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let item = self.0.get_item(key).await?;
        if let Some(item) = &item {
            check(item)?;
        }
        Ok(item)
    }

    async fn write(
        &self,
        write: Write,
        returning: Returning,
        old_on_refusal: bool,
    ) -> Result<Written, StoreError> {
        let written = self
            .0
            .write(stamp(write), returning, old_on_refusal)
            .await?;
        if let Written::Refused(Some(old)) = &written {
            check(old)?;
        }
        Ok(written)
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<bool, StoreError> {
        self.0
            .transact(writes.into_iter().map(stamp).collect())
            .await
    }

    async fn query(
        &self,
        index: Option<&str>,
        expr: &Expr,
        limit: u32,
        start: Option<Item>,
        forward: bool,
    ) -> Result<QueryPage, StoreError> {
        let page = self.0.query(index, expr, limit, start, forward).await?;
        check_all(&page.items)?;
        Ok(page)
    }

    async fn fetch_items(&self, entries: &[Item]) -> Result<Vec<Item>, StoreError> {
        let items = self.0.fetch_items(entries).await?;
        check_all(&items)?;
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{key, n, s};

    fn item(version: Option<&str>) -> Item {
        let mut item = key("SCHED#a".into(), "SCHEDULE");
        if let Some(v) = version {
            item.insert(SCHEMA_VERSION.into(), n(v));
        }
        item
    }

    #[test]
    fn unversioned_items_are_version_one_and_later_ones_are_refused_by_name() {
        assert_eq!(check(&item(None)).unwrap(), 1);
        assert_eq!(check(&item(Some("1"))).unwrap(), 1);
        let err = check(&item(Some("2"))).unwrap_err();
        assert_eq!(err.code(), "ITEM_SCHEMA_UNSUPPORTED");
        let text = err.to_string();
        assert!(text.contains("SCHED#a") && text.contains("SCHEDULE") && text.contains(" 2"));
        for bad in ["0", "1.5", "-1"] {
            assert_eq!(
                check(&item(Some(bad))).unwrap_err().code(),
                "STORE_MALFORMED_ITEM"
            );
        }
        let mut text_version = item(None);
        text_version.insert(SCHEMA_VERSION.into(), s("1"));
        assert_eq!(
            check(&text_version).unwrap_err().code(),
            "STORE_MALFORMED_ITEM"
        );
    }

    #[test]
    fn every_write_is_stamped_and_guarded() {
        let put = stamp(Write::Put {
            item: item(None),
            cond: Expr::new(),
        });
        let Write::Put { item, cond } = put else {
            panic!("a put stays a put")
        };
        assert_eq!(item.get(SCHEMA_VERSION), Some(&current()));
        assert_eq!(cond.conditions, vec![known_version()]);

        let mut expr = Expr::new();
        expr.set("a", s("b")).exists("PK");
        let Write::Update { expr, .. } = stamp(Write::Update {
            key: key("P".into(), "S"),
            expr,
        }) else {
            panic!("an update stays an update")
        };
        assert!(expr.updates.contains(&Update::Set(
            SCHEMA_VERSION.into(),
            Operand::Value(current())
        )));
        assert_eq!(expr.conditions.len(), 2);

        let Write::Delete { cond, .. } = stamp(Write::Delete {
            key: key("P".into(), "S"),
            cond: Expr::new(),
        }) else {
            panic!("a delete stays a delete")
        };
        assert_eq!(cond.conditions, vec![known_version()]);
    }
}
