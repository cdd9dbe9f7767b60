//! The cursors the api's listings hand out: opaque, and bound to the query that issued them.
//!
//! A cursor is `{position}.{tag}` in base64url: the position where the next page starts (the
//! store's own cursor, or an offset into a computed list) and an HMAC-SHA256 over the query's
//! identity (route, path ids, filters) and that position. A cursor used with another query
//! (another schedule, another filter, another route) or altered in any way is refused with
//! 400 `CURSOR_INVALID` before the store sees it: a store never gets a key that is not one of
//! its own for that very query.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use super::error::ApiError;

/// The environment variable with the cursor key (any text; a deployment's functions share
/// it). Without it the key derives from the table name.
pub const CURSOR_KEY_ENV: &str = "CRONLEDGER_CURSOR_KEY";

/// Bytes of the tag a cursor carries (a truncated HMAC-SHA256).
const TAG_BYTES: usize = 16;
/// Longest cursor read: anything longer is not one the api issued.
const CURSOR_MAX: usize = 4096;

/// The key cursors are signed with.
#[derive(Clone, PartialEq, Eq)]
pub struct CursorKey([u8; 32]);

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(..)")
    }
}

impl CursorKey {
    /// A key from a secret of any length.
    pub fn from_secret(secret: &[u8]) -> CursorKey {
        CursorKey(Sha256::digest(secret).into())
    }

    /// The deployment's key: `CRONLEDGER_CURSOR_KEY` when set, else one derived from the
    /// table name, so every instance of a deployment accepts the others' cursors.
    pub fn from_env(table: &str) -> CursorKey {
        match std::env::var(CURSOR_KEY_ENV) {
            Ok(secret) if !secret.is_empty() => CursorKey::from_secret(secret.as_bytes()),
            _ => CursorKey::for_table(table),
        }
    }

    /// The key derived from a table name.
    pub fn for_table(table: &str) -> CursorKey {
        CursorKey::from_secret(format!("cronledger-cursor:{table}").as_bytes())
    }

    fn tag(&self, scope: &str, position: &str) -> Hmac<Sha256> {
        // new_from_slice takes any key length for HMAC; 32 bytes is always fine.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts a 32-byte key"));
        mac.update(&(scope.len() as u64).to_be_bytes());
        mac.update(scope.as_bytes());
        mac.update(position.as_bytes());
        mac
    }

    /// The cursor for `position` in the listing `scope`.
    pub fn seal(&self, scope: &str, position: &str) -> String {
        let tag = self.tag(scope, position).finalize().into_bytes();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(position),
            URL_SAFE_NO_PAD.encode(&tag[..TAG_BYTES])
        )
    }

    /// The position a cursor of the listing `scope` stands for; `CURSOR_INVALID` when the
    /// cursor is another listing's or not one the api issued.
    pub fn open(&self, scope: &str, cursor: &str) -> Result<String, ApiError> {
        let invalid = ApiError::cursor_invalid;
        if cursor.len() > CURSOR_MAX {
            return Err(invalid());
        }
        let (position, tag) = cursor.split_once('.').ok_or_else(invalid)?;
        let position = URL_SAFE_NO_PAD.decode(position).map_err(|_| invalid())?;
        let position = String::from_utf8(position).map_err(|_| invalid())?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| invalid())?;
        if tag.len() != TAG_BYTES {
            return Err(invalid());
        }
        self.tag(scope, &position)
            .verify_truncated_left(&tag)
            .map_err(|_| invalid())?;
        Ok(position)
    }

    /// [`CursorKey::seal`] of an optional position.
    pub fn seal_next(&self, scope: &str, position: Option<String>) -> Option<String> {
        position.map(|p| self.seal(scope, &p))
    }

    /// [`CursorKey::open`] of an optional cursor.
    pub fn open_given(
        &self,
        scope: &str,
        cursor: Option<&str>,
    ) -> Result<Option<String>, ApiError> {
        cursor.map(|c| self.open(scope, c)).transpose()
    }

    /// The offset into a computed list a cursor stands for (0 without one).
    pub fn open_offset(&self, scope: &str, cursor: Option<&str>) -> Result<usize, ApiError> {
        match self.open_given(scope, cursor)? {
            None => Ok(0),
            Some(p) => p.parse().map_err(|_| ApiError::cursor_invalid()),
        }
    }
}

impl Default for CursorKey {
    /// The key of a deployment without a table name (tests, the simulator).
    fn default() -> CursorKey {
        CursorKey::for_table("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_opens_only_for_its_own_query() {
        let key = CursorKey::for_table("t");
        let cursor = key.seal("runs|a", "7b22504b227d");
        assert_eq!(key.open("runs|a", &cursor).unwrap(), "7b22504b227d");
        for (scope, cursor) in [
            ("runs|b", cursor.clone()),
            ("runs|a|status=FAILED", cursor.clone()),
            ("runs|a", cursor.replacen('.', "A.", 1)),
            ("runs|a", format!("{cursor}A")),
            ("runs|a", "7b22504b227d".to_string()),
            ("runs|a", "..".to_string()),
            ("runs|a", "x".repeat(5000)),
        ] {
            let e = key.open(scope, &cursor).unwrap_err();
            assert_eq!(
                (e.status.as_u16(), e.code.as_str()),
                (400, "CURSOR_INVALID")
            );
        }
        let other = CursorKey::for_table("other");
        assert!(other.open("runs|a", &cursor).is_err());
        let offset = key.seal("verify|b1", "2000");
        assert_eq!(key.open_offset("verify|b1", Some(&offset)).unwrap(), 2000);
        assert_eq!(key.open_offset("verify|b1", None).unwrap(), 0);
    }
}
