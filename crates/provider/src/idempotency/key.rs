//! The idempotency key: what a client may send in `Idempotency-Key` (1 to 255
//! characters, as Stripe), how the header is read in each [`Mode`] (Stripe's, or the
//! IETF draft's RFC 8941 strings), and the newtype that keeps keys apart from other
//! strings.

use serde::{Serialize, Serializer};

use crate::error::ApiError;
use crate::state::thin::ThinStr;

/// How strictly keys are treated: Stripe's behaviour, or the IETF
/// `Idempotency-Key` header draft's (422 on a mismatch, RFC 8941 string keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Stripe,
    Ietf,
}

/// Longest idempotency key accepted, as Stripe.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// A client-chosen idempotency key (1..=255 characters), shared by what a request stores
/// (one word wide).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(ThinStr);

impl IdempotencyKey {
    /// Validates a key; the error message names what was wrong.
    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() {
            return Err("Idempotency-Key must not be empty.".into());
        }
        if raw.len() > MAX_IDEMPOTENCY_KEY_LEN && raw.chars().count() > MAX_IDEMPOTENCY_KEY_LEN {
            return Err(format!(
                "Idempotency-Key is too long: keys may be at most {MAX_IDEMPOTENCY_KEY_LEN} characters."
            ));
        }
        Ok(Self(raw.into()))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The key's text, shared (no copy).
    pub fn shared(&self) -> &ThinStr {
        &self.0
    }
}

impl Serialize for IdempotencyKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl IdempotencyKey {
    /// Validates an `Idempotency-Key` header value; in ietf mode a quoted RFC 8941 string
    /// (`"abc"`) is unquoted first.
    pub fn from_header(raw: &str, mode: Mode) -> Result<IdempotencyKey, ApiError> {
        let bad = |msg: String| ApiError::invalid_request(msg, Some("Idempotency-Key".into()));
        // (A header that is not visible ASCII reaches here as U+FFFD: bytes 0xEF 0xBF 0xBD.)
        if raw.as_bytes().contains(&0xEF) && raw.contains('\u{fffd}') {
            return Err(bad("Idempotency-Key must be visible ASCII text.".into()));
        }
        if mode == Mode::Ietf && raw.starts_with('"') {
            let key =
                unquote_sf_string(raw).ok_or_else(|| bad("Idempotency-Key is not a valid RFC 8941 string.".into()))?;
            IdempotencyKey::parse(&key).map_err(bad)
        } else {
            IdempotencyKey::parse(raw.trim()).map_err(bad)
        }
    }
}

fn unquote_sf_string(raw: &str) -> Option<String> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                e @ ('"' | '\\') => out.push(e),
                _ => return None,
            },
            '"' => return None,
            c if (' '..='~').contains(&c) => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ietf_keys_may_be_quoted_strings() {
        assert_eq!(
            IdempotencyKey::from_header("\"abc\"", Mode::Ietf).unwrap().as_str(),
            "abc"
        );
        assert_eq!(
            IdempotencyKey::from_header("\"a\\\"b\"", Mode::Ietf).unwrap().as_str(),
            "a\"b"
        );
        assert!(IdempotencyKey::from_header("\"abc", Mode::Ietf).is_err());
        // Stripe mode takes the value as it is.
        assert_eq!(
            IdempotencyKey::from_header("\"abc\"", Mode::Stripe).unwrap().as_str(),
            "\"abc\""
        );
        assert_eq!(
            IdempotencyKey::from_header(&"k".repeat(256), Mode::Stripe)
                .unwrap_err()
                .param
                .as_deref(),
            Some("Idempotency-Key")
        );
    }

    #[test]
    fn idempotency_key_length_is_bounded() {
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
        assert!(IdempotencyKey::parse("").is_err());
    }
}
