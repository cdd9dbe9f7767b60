//! The items behind index entries. The `due`, `active` and `catalog` indexes project keys
//! only (an index entry is then rewritten only when its keys change, not at every write of
//! the item, and each index write is one unit): a reader that needs the whole item fetches
//! it with `BatchGetItem`, 100 keys a request, eventually consistent (half a read unit per
//! item up to 4 KB), as fresh as the index itself.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{KeysAndAttributes, ReturnConsumedCapacity};

use super::values::{item_from_sdk, item_to_sdk, items_from_sdk};
use super::DynamoStore;
use crate::error::StoreError;
use crate::item::{key, table_key, Item};

/// Keys DynamoDB takes in one `BatchGetItem`.
pub(crate) const BATCH_GET_KEYS: usize = 100;
/// Requests for the keys DynamoDB left unprocessed (throttling) before giving up.
const UNPROCESSED_TRIES: u32 = 8;

impl DynamoStore {
    /// The table's items for `entries` (index entries or anything with the table's keys), in
    /// their order; an item deleted meanwhile is left out.
    pub(crate) async fn fetch_items(&self, entries: &[Item]) -> Result<Vec<Item>, StoreError> {
        let keys = entries
            .iter()
            .map(table_key)
            .collect::<Result<Vec<_>, _>>()?;
        let mut found: HashMap<(String, String), Item> = HashMap::with_capacity(keys.len());
        for chunk in keys.chunks(BATCH_GET_KEYS) {
            let mut pending: Vec<Item> = chunk.iter().map(|(pk, sk)| key(pk.clone(), sk)).collect();
            let mut tries = 0;
            while !pending.is_empty() {
                tries += 1;
                if tries > UNPROCESSED_TRIES {
                    return Err(StoreError::Contention(format!(
                        "BatchGetItem left {} keys unprocessed after {UNPROCESSED_TRIES} requests",
                        pending.len()
                    )));
                }
                if tries > 1 {
                    tokio::time::sleep(super::jitter(tries)).await;
                }
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(pending.into_iter().map(item_to_sdk).collect()))
                    .build()
                    .map_err(|e| StoreError::InvalidRequest(e.to_string()))?;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, request)
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .send()
                    .await
                    .map_err(|e| crate::error::store_request("BatchGetItem", e))?;
                self.meter
                    .record_capacity("BatchGetItem", out.consumed_capacity());
                for item in out
                    .responses
                    .and_then(|mut r| r.remove(&self.table))
                    .unwrap_or_default()
                {
                    let item = item_from_sdk(&item);
                    found.insert(table_key(&item)?, item);
                }
                pending = out
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.table))
                    .map(|k| items_from_sdk(&k.keys))
                    .unwrap_or_default();
            }
        }
        Ok(keys.iter().filter_map(|k| found.remove(k)).collect())
    }
}
