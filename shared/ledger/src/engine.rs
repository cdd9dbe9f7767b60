//! The requests a ledger store is made of, on items: what the DynamoDB store sends and the
//! memory store answers on its own item table, each charged where it is made. Every store
//! subject is written once over an [`ItemEngine`] (see [`crate::subjects`]), so both stores
//! send the same requests, with the same conditions, on the same items, by construction.

use async_trait::async_trait;

use crate::cursor;
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::Item;

/// One conditional write, alone or in a transaction.
#[derive(Debug, Clone)]
pub enum Write {
    /// Puts `item` (replacing any item at its key) if `cond`'s conditions hold.
    Put { item: Item, cond: Expr },
    /// Applies `expr`'s updates to the item at `key` (made from the key when absent) if its
    /// conditions hold.
    Update { key: Item, expr: Expr },
    /// Deletes the item at `key` if `cond`'s conditions hold (none: whether or not there is
    /// one).
    Delete { key: Item, cond: Expr },
}

/// What an applied write answers (DynamoDB's `ReturnValues`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returning {
    Nothing,
    /// The whole item as written.
    AllNew,
    /// The attributes the update set or added, as written.
    UpdatedNew,
}

/// A conditional write's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// Applied: the item as [`Returning`] asked (`None` for nothing, or nothing there).
    Applied(Option<Item>),
    /// Its condition failed and nothing was written: the item as it was, when asked for
    /// (`ALL_OLD` on a failed condition) and there was one.
    Refused(Option<Item>),
}

impl Written {
    pub fn applied(&self) -> bool {
        matches!(self, Written::Applied(_))
    }
}

/// One page a Query read: its items (after the filter) and where it stopped, if before the
/// end (`LastEvaluatedKey`: the key of the last item read, filtered or not).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryPage {
    pub items: Vec<Item>,
    pub last_key: Option<Item>,
}

#[async_trait]
pub trait ItemEngine: Send + Sync {
    /// How many ways the `due` and `active` indexes are sharded.
    fn shards(&self) -> u32;

    /// A strongly consistent read of the item at `key`.
    async fn get_item(&self, key: Item) -> Result<Option<Item>, StoreError>;

    /// One conditional write, answering what `returning` asks when it applied and, with
    /// `old_on_refusal`, the stored item when its condition failed.
    async fn write(
        &self,
        write: Write,
        returning: Returning,
        old_on_refusal: bool,
    ) -> Result<Written, StoreError>;

    /// All of `writes` or none (one `TransactWriteItems`, at twice each write's units):
    /// `false` when a condition failed.
    async fn transact(&self, writes: Vec<Write>) -> Result<bool, StoreError>;

    /// One Query on the table or `index`: `expr`'s conditions are the key condition, its
    /// filters the filter; `limit` items read (filtered or not) from after `start`, in
    /// sort-key order or reversed. The table is read strongly consistent, an index
    /// eventually (as fresh as the index itself).
    async fn query(
        &self,
        index: Option<&str>,
        expr: &Expr,
        limit: u32,
        start: Option<Item>,
        forward: bool,
    ) -> Result<QueryPage, StoreError>;

    /// The items (eventually consistent) that index `entries` name, in the entries' order;
    /// those gone meanwhile are left out.
    async fn fetch_items(&self, entries: &[Item]) -> Result<Vec<Item>, StoreError>;

    /// A put of `item` conditioned on `cond`'s conditions: `false` when they failed (and
    /// nothing was written).
    async fn put_if(&self, item: Item, cond: &Expr) -> Result<bool, StoreError> {
        let put = Write::Put {
            item,
            cond: cond.clone(),
        };
        Ok(self.write(put, Returning::Nothing, false).await?.applied())
    }

    /// An update of the item at `key` (made from the key when absent) conditioned on
    /// `expr`'s conditions: `false` when they failed.
    async fn update_if(&self, key: Item, expr: &Expr) -> Result<bool, StoreError> {
        let update = Write::Update {
            key,
            expr: expr.clone(),
        };
        Ok(self
            .write(update, Returning::Nothing, false)
            .await?
            .applied())
    }

    /// Deletes the item at `key`, if there is one.
    async fn delete_item(&self, key: Item) -> Result<(), StoreError> {
        let delete = Write::Delete {
            key,
            cond: Expr::new(),
        };
        self.write(delete, Returning::Nothing, false).await?;
        Ok(())
    }

    /// One page of a query (see [`ItemEngine::query`]) from after `cursor`, and the cursor
    /// of the next page.
    async fn query_page(
        &self,
        index: Option<&str>,
        expr: &Expr,
        limit: u32,
        cursor: Option<&str>,
        forward: bool,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        let start = cursor::decode(cursor)?;
        let page = self.query(index, expr, limit, start, forward).await?;
        Ok((page.items, cursor::encode(page.last_key.as_ref())))
    }
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
