//! The requests a ledger store is made of, on items: what the DynamoDB store sends and the
//! memory store answers on its own item table, each charged where it is made. A subject
//! written over an [`ItemEngine`] is written once for both stores (see [`crate::subjects`]).

use async_trait::async_trait;

use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::Item;

#[async_trait]
pub trait ItemEngine: Send + Sync {
    /// A strongly consistent read of the item at `key`.
    async fn get_item(&self, key: Item) -> Result<Option<Item>, StoreError>;

    /// A put of `item` conditioned on `cond`'s conditions: `false` when they failed (and
    /// nothing was written).
    async fn put_if(&self, item: Item, cond: &Expr) -> Result<bool, StoreError>;

    /// One page of a query on the table or `index`: `expr`'s conditions are the key
    /// condition, its filters the filter; `limit` items read (filtered or not) from after
    /// `cursor`, in sort-key order or reversed; and the cursor of the next page.
    async fn query_page(
        &self,
        index: Option<&str>,
        expr: &Expr,
        limit: u32,
        cursor: Option<&str>,
        forward: bool,
    ) -> Result<(Vec<Item>, Option<String>), StoreError>;

    /// An update of the item at `key` (made from the key when absent) conditioned on
    /// `expr`'s conditions: `false` when they failed.
    async fn update_if(&self, key: Item, expr: &Expr) -> Result<bool, StoreError>;

    /// Deletes the item at `key`, if there is one.
    async fn delete_item(&self, key: Item) -> Result<(), StoreError>;

    /// The items (eventually consistent) that index `entries` name, in the entries' order;
    /// those gone meanwhile are left out.
    async fn fetch_items(&self, entries: &[Item]) -> Result<Vec<Item>, StoreError>;
}

/// Every item of a query on the table or `index`, following the pages.
pub async fn query_all<E: ItemEngine + ?Sized>(
    engine: &E,
    index: Option<&str>,
    expr: &Expr,
) -> Result<Vec<Item>, StoreError> {
    let mut items = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let (mut page, cursor) = engine
            .query_page(index, expr, 1000, next.as_deref(), true)
            .await?;
        items.append(&mut page);
        match cursor {
            Some(c) => next = Some(c),
            None => return Ok(items),
        }
    }
}
