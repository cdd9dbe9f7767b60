//! Pages of every list the api answers with: at most `limit` items and at most
//! [`PAGE_BUDGET_BYTES`] of them, so no answer nears the 1 MB bound
//! ([`super::request::RESPONSE_MAX_BYTES`]) whatever the items hold. A page that stops early
//! says where the next one starts (`next`, a cursor bound to its query: [`super::cursor`]).

use std::future::Future;

use cronledger_aws::StoreError;
use cronledger_ledger::ledger::Page;
use serde::Serialize;

/// Bytes of items one page carries at most (the rest of an answer is small and fixed).
pub const PAGE_BUDGET_BYTES: usize = 768 * 1024;

/// How many of `items`, in order, fit in a page's byte budget (at least one, so a page
/// always moves on).
pub fn fitting<V: Serialize>(items: &[V]) -> usize {
    let mut used = 0usize;
    for (i, item) in items.iter().enumerate() {
        used += serde_json::to_vec(item).map(|b| b.len() + 1).unwrap_or(0);
        if used > PAGE_BUDGET_BYTES {
            return i.max(1);
        }
    }
    items.len()
}

/// One page of a list the api computed whole: up to `limit` items from `offset` that fit the
/// budget, and the offset of the next page when there are more.
pub fn offset_page<T, V: Serialize>(
    all: &[T],
    offset: usize,
    limit: usize,
    view: impl Fn(&T) -> V,
) -> (Vec<V>, Option<usize>) {
    let rest = all.get(offset..).unwrap_or(&[]);
    let mut items: Vec<V> = rest.iter().take(limit).map(view).collect();
    items.truncate(fitting(&items));
    let end = offset + items.len();
    let next = (end < all.len()).then_some(end);
    (items, next)
}

/// One page of a store listing: `read(limit, start)` from `start`, as `view` shows each item.
/// When the items pass the byte budget the store is read again up to the last one that fits,
/// so its cursor resumes right after it.
pub async fn store_page<T, V: Serialize, Fut>(
    limit: u32,
    start: Option<String>,
    read: impl Fn(u32, Option<String>) -> Fut,
    view: impl Fn(&T) -> V,
) -> Result<(Vec<V>, Option<String>), StoreError>
where
    Fut: Future<Output = Result<Page<T>, StoreError>>,
{
    let page = read(limit, start.clone()).await?;
    let items: Vec<V> = page.items.iter().map(&view).collect();
    let fit = fitting(&items);
    if fit == items.len() {
        return Ok((items, page.next));
    }
    let page = read(fit as u32, start).await?;
    Ok((page.items.iter().map(&view).collect(), page.next))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pages_stop_at_their_limit_or_their_byte_budget() {
        let small: Vec<u32> = (0..10).collect();
        let (items, next) = offset_page(&small, 4, 3, |n| json!(n));
        assert_eq!((items, next), (vec![json!(4), json!(5), json!(6)], Some(7)));
        let (items, next) = offset_page(&small, 8, 3, |n| json!(n));
        assert_eq!((items.len(), next), (2, None));
        assert_eq!(offset_page(&small, 99, 3, |n| json!(n)).0.len(), 0);

        let big = "x".repeat(100 * 1024);
        let large: Vec<&str> = vec![big.as_str(); 40];
        let (items, next) = offset_page(&large, 0, 200, |s| json!(s));
        let bytes = serde_json::to_vec(&items).unwrap().len();
        assert!(bytes <= PAGE_BUDGET_BYTES, "{bytes}");
        assert_eq!(next, Some(items.len()));
        let huge = vec!["y".repeat(2 * PAGE_BUDGET_BYTES)];
        assert_eq!(offset_page(&huge, 0, 10, |s| json!(s)).0.len(), 1);
    }
}
