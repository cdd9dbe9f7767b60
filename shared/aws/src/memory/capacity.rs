//! Consumed capacity of the in-memory store's requests, by DynamoDB's published rules, so
//! the request meter counts the same calls and units on both stores: an item's size is the
//! sum of its attribute names' and values' lengths; a write costs one unit per started KB of
//! the larger of the item before and after, in the table and again in every index the item
//! enters, leaves or changes in (a changed index key: a delete and a put); a read costs one
//! unit per started 4 KB (of each item for a get, of the sum for a query), half for an
//! eventually consistent read; a transactional request costs twice. A write whose condition
//! fails still consumes the write units of the item it was checked against.

use super::MemoryStore;
use crate::item::Item;

/// Whether a request ran inside a transaction (DynamoDB charges its units twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Standard,
    Transactional,
}

impl MemoryStore {
    /// Counts one call (and one attempt) of a DynamoDB operation, e.g. `"PutItem"`, under the
    /// current metered scope, as the SDK interceptor does for the DynamoDB store.
    pub(crate) fn charge_call(&self, operation: &'static str) {
        let _ = operation;
        // Filled in with the capacity model.
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
        let _ = (operation, before, after, request);
        // Filled in with the capacity model.
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
        let _ = (operation, index, items, consistent, request);
        // Filled in with the capacity model.
    }
}
