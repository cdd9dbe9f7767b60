//! A run's attempt history, kept on the run item itself: `attempt_{n}` holds attempt n's
//! start and `attempt_{n}_end` its end, each a JSON document.
//!
//! Why on the run item and not as `ATTEMPT#{n}` items beside it: each half is written by the
//! very UpdateItem that opens or ends the attempt (START/RECLAIM, and the outcome write), so
//! the history is atomic with the transition (no crash can leave a run whose attempt is
//! unrecorded), costs no request of its own (the requests per fired run stay what they
//! were), and GET one run reads it with the run in one GetItem. Two top-level attributes
//! per attempt rather than one map, because a nested path cannot be set on an item that
//! lacks its parent (a run written before attempts were kept) and would fail the worker's
//! write. The price is a bound: the item must stay small (every later write of the run is
//! billed by its size), so only the last [`ATTEMPT_HISTORY`] attempts are kept; opening
//! attempt n removes attempt n - ATTEMPT_HISTORY. The run's `attempts` count stays exact.

use std::collections::BTreeMap;

use cronledger_core::{Attempt, AttemptEnd, AttemptStart};

use crate::error::StoreError;
use crate::item::{Item, ItemReader};

/// Attempts kept on a run item (worker retries are a handful; an operator's retries rarely
/// come close).
pub const ATTEMPT_HISTORY: u64 = 20;

const PREFIX: &str = "attempt_";
const END_SUFFIX: &str = "_end";

pub fn start_attribute(number: u64) -> String {
    format!("{PREFIX}{number}")
}

pub fn end_attribute(number: u64) -> String {
    format!("{PREFIX}{number}{END_SUFFIX}")
}

/// The attribute that falls out of the history when attempt `opening` starts.
pub fn dropped_by(opening: u64) -> Option<u64> {
    opening.checked_sub(ATTEMPT_HISTORY).filter(|n| *n > 0)
}

pub fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::InvalidRequest(e.to_string()))
}

/// Which attempt an attribute name records, and whether it is the end half.
fn parse_name(name: &str) -> Option<(u64, bool)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (digits, end) = match rest.strip_suffix(END_SUFFIX) {
        Some(digits) => (digits, true),
        None => (rest, false),
    };
    let number = digits.parse::<u64>().ok().filter(|n| *n > 0)?;
    // Only the canonical spelling (no `+`, no leading zeros) is ours.
    (number.to_string() == digits).then_some((number, end))
}

/// The attempts recorded on a run item, oldest first.
pub fn decode(item: &Item) -> Result<Vec<Attempt>, StoreError> {
    let r = ItemReader::new(item);
    let mut by_number: BTreeMap<u64, Attempt> = BTreeMap::new();
    for name in item.keys() {
        let Some((number, is_end)) = parse_name(name) else {
            continue;
        };
        let attempt = by_number.entry(number).or_insert(Attempt {
            number,
            start: None,
            end: None,
        });
        if is_end {
            attempt.end = Some(r.json::<AttemptEnd>(name)?);
        } else {
            attempt.start = Some(r.json::<AttemptStart>(name)?);
        }
    }
    Ok(by_number.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::s;

    #[test]
    fn names_round_trip_and_strangers_are_ignored() {
        assert_eq!(parse_name(&start_attribute(3)), Some((3, false)));
        assert_eq!(parse_name(&end_attribute(12)), Some((12, true)));
        for other in [
            "attempts",
            "attempt_",
            "attempt_0",
            "attempt_03",
            "attempt_x_end",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
        assert_eq!(dropped_by(ATTEMPT_HISTORY), None);
        assert_eq!(dropped_by(ATTEMPT_HISTORY + 1), Some(1));
    }

    #[test]
    fn decodes_halves_in_order_and_refuses_a_bad_document() {
        let mut item = Item::new();
        item.insert("attempts".into(), s("2"));
        item.insert(
            end_attribute(2),
            s(r#"{"finished_at":"2026-03-01T00:01:00Z","outcome":"SUCCESS","status":"SUCCESS"}"#),
        );
        item.insert(
            start_attribute(1),
            s(r#"{"started_at":"2026-03-01T00:00:00Z","worker":"w"}"#),
        );
        let attempts = decode(&item).expect("decoded");
        assert_eq!(
            attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
            [1, 2]
        );
        assert!(attempts[0].start.is_some() && attempts[0].end.is_none());
        assert!(attempts[1].start.is_none() && attempts[1].end.is_some());
        item.insert(start_attribute(3), s("{"));
        assert_eq!(decode(&item).unwrap_err().code(), "STORE_MALFORMED_ITEM");
    }
}
