//! The `Cronledger-Signature` header of an http job with `auth: {type: hmac}`:
//! `t=<unix seconds>,v1=<hex HMAC-SHA256(key, "<t>.<body>")>`, one `v1` per signing key (two
//! while a rotation is under way). Signing and verifying live here once: the worker signs,
//! the local receiver and the tests verify. Time is a value passed in.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header's name.
pub const SIGNATURE_HEADER: &str = "Cronledger-Signature";

/// How far a signature's timestamp may be from the receiver's clock, either way.
pub const DEFAULT_TOLERANCE_SECONDS: i64 = 300;

/// Why a receiver refuses a call; each has a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRejected {
    #[error("no Cronledger-Signature header")]
    Missing,
    #[error("the Cronledger-Signature header is not `t=<seconds>,v1=<hex>`")]
    Malformed,
    #[error("the signature's timestamp is {age} s old, past the tolerance")]
    TooOld { age: i64 },
    #[error("the signature's timestamp is {ahead} s in the future, past the tolerance")]
    InFuture { ahead: i64 },
    #[error("no v1 signature matches the body with this key")]
    Mismatch,
}

impl SignatureRejected {
    pub fn code(&self) -> &'static str {
        match self {
            SignatureRejected::Missing => "SIGNATURE_MISSING",
            SignatureRejected::Malformed => "SIGNATURE_MALFORMED",
            SignatureRejected::TooOld { .. } => "SIGNATURE_TOO_OLD",
            SignatureRejected::InFuture { .. } => "SIGNATURE_IN_FUTURE",
            SignatureRejected::Mismatch => "SIGNATURE_MISMATCH",
        }
    }
}

fn mac(key: &[u8], timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The header's value for `body` sent at `timestamp` (unix seconds), one `v1` per key in
/// the order given.
pub fn signature_header<K: AsRef<[u8]>>(keys: &[K], timestamp: i64, body: &[u8]) -> String {
    let mut header = format!("t={timestamp}");
    for key in keys {
        let tag = mac(key.as_ref(), timestamp, body).finalize().into_bytes();
        header.push_str(",v1=");
        for byte in tag {
            header.push_str(&format!("{byte:02x}"));
        }
    }
    header
}

/// Checks `header` against `body` with the receiver's `keys` (one, or the old and the new
/// while it rotates) at `now` (unix seconds): the timestamp within `tolerance` seconds either
/// way, and some `v1` the HMAC of `"<t>.<body>"` under some key (compared in constant time).
/// Unknown schemes (`v0=...`) are ignored.
pub fn verify<K: AsRef<[u8]>>(
    header: Option<&str>,
    keys: &[K],
    body: &[u8],
    now: i64,
    tolerance: i64,
) -> Result<(), SignatureRejected> {
    let header = header.ok_or(SignatureRejected::Missing)?;
    let mut timestamp = None;
    let mut candidates = Vec::new();
    for part in header.split(',') {
        let (scheme, value) = part
            .trim()
            .split_once('=')
            .ok_or(SignatureRejected::Malformed)?;
        match scheme {
            "t" if timestamp.is_none() => {
                timestamp = Some(
                    value
                        .parse::<i64>()
                        .map_err(|_| SignatureRejected::Malformed)?,
                )
            }
            "t" => return Err(SignatureRejected::Malformed),
            "v1" => candidates.push(decode_hex(value).ok_or(SignatureRejected::Malformed)?),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureRejected::Malformed)?;
    if candidates.is_empty() {
        return Err(SignatureRejected::Malformed);
    }
    let age = now.saturating_sub(timestamp);
    if age > tolerance {
        return Err(SignatureRejected::TooOld { age });
    }
    if -age > tolerance {
        return Err(SignatureRejected::InFuture { ahead: -age });
    }
    let signed_by = |key: &K| {
        let expected = mac(key.as_ref(), timestamp, body);
        candidates
            .iter()
            .any(|candidate| expected.clone().verify_slice(candidate).is_ok())
    };
    keys.iter()
        .any(signed_by)
        .then_some(())
        .ok_or(SignatureRejected::Mismatch)
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const NOW: i64 = 1_780_000_000;

    #[test]
    fn the_header_is_the_documented_hmac_of_t_dot_body() {
        // HMAC-SHA256("secret", "1780000000.{}") computed independently (openssl dgst).
        assert_eq!(
            signature_header(&["secret"], NOW, b"{}"),
            format!("t={NOW},v1={}", KNOWN_TAG)
        );
    }

    const KNOWN_TAG: &str = "f2dadf9ad78978e9a3a09f360d82463bb247403b8a15405e9a194ed17a4d5357";

    proptest! {
        #[test]
        fn a_signed_body_verifies_and_any_change_to_it_or_the_key_does_not(
            body in proptest::collection::vec(any::<u8>(), 0..200),
            flip in any::<usize>(),
            age in -DEFAULT_TOLERANCE_SECONDS..=DEFAULT_TOLERANCE_SECONDS,
        ) {
            let header = signature_header(&[b"key-a"], NOW - age, &body);
            prop_assert_eq!(verify(Some(&header), &[b"key-a"], &body, NOW, DEFAULT_TOLERANCE_SECONDS), Ok(()));
            prop_assert_eq!(
                verify(Some(&header), &[b"key-b"], &body, NOW, DEFAULT_TOLERANCE_SECONDS),
                Err(SignatureRejected::Mismatch)
            );
            let mut forged = body.clone();
            if forged.is_empty() {
                forged.push(b'x');
            } else {
                let at = flip % forged.len();
                forged[at] ^= 1;
            }
            prop_assert_eq!(
                verify(Some(&header), &[b"key-a"], &forged, NOW, DEFAULT_TOLERANCE_SECONDS),
                Err(SignatureRejected::Mismatch)
            );
        }
    }

    #[test]
    fn malformed_headers_are_refused_as_such() {
        for header in [
            "",
            "t=1",
            "v1=00",
            "t=x,v1=00",
            "t=1,v1=0g",
            "t=1,t=2,v1=00",
            "junk",
        ] {
            assert_eq!(
                verify(Some(header), &[b"k"], b"", 1, 300),
                Err(SignatureRejected::Malformed),
                "{header}"
            );
        }
        assert_eq!(
            verify(None, &[b"k"], b"", 1, 300),
            Err(SignatureRejected::Missing)
        );
    }
}
