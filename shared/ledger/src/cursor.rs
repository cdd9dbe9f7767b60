//! Opaque pagination cursors: DynamoDB's `LastEvaluatedKey` (string attributes only, which is
//! all our keys are) as hex-encoded JSON, so callers cannot depend on its shape.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::error::StoreError;
use crate::item::{Item, Value};

pub fn encode(last_key: Option<&Item>) -> Option<String> {
    let key = last_key?;
    let plain: BTreeMap<&str, &str> = key
        .iter()
        .filter_map(|(k, v)| v.as_s().ok().map(|s| (k.as_str(), s.as_str())))
        .collect();
    let json = serde_json::to_string(&plain).ok()?;
    let mut hex = String::with_capacity(json.len() * 2);
    for byte in json.bytes() {
        // Writing to a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
    }
    Some(hex)
}

pub fn decode(cursor: Option<&str>) -> Result<Option<Item>, StoreError> {
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    if cursor.len() % 2 != 0 {
        return Err(StoreError::BadCursor);
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|i| {
            cursor
                .get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or(StoreError::BadCursor)
        })
        .collect::<Result<Vec<u8>, _>>()?;
    let plain: BTreeMap<String, String> =
        serde_json::from_slice(&bytes).map_err(|_| StoreError::BadCursor)?;
    Ok(Some(
        plain.into_iter().map(|(k, v)| (k, Value::S(v))).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let key: Item = [("PK".to_string(), Value::S("SCHED#a".into()))].into();
        let cursor = encode(Some(&key)).unwrap();
        assert_eq!(decode(Some(&cursor)).unwrap(), Some(key));
        assert!(matches!(decode(Some("zz")), Err(StoreError::BadCursor)));
        assert!(matches!(decode(Some("abc")), Err(StoreError::BadCursor)));
        assert_eq!(decode(None).unwrap(), None);
    }
}
