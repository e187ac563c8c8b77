//! Idempotency-key records: what the merchant remembers about each client key.
//!
//! A record is created (under a unique constraint on the key) the first time a key is
//! seen, with the SHA-256 [`Fingerprint`] of the request it came with and the order it
//! is for. Once the request reaches a final payment outcome (paid, or declined) the
//! response is stored in the record and every later request with that key gets it back
//! unchanged; a request with the same key and another body is refused (422). Retryable
//! outcomes (503: the outcome is unknown, a dependency is down) are not stored, so the
//! client's retry runs the checkout again — safely, because the order row, not the key,
//! decides whether money moves. Records expire after the key TTL and are pruned.

use std::fmt;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::order::{BadValue, OrderId};

/// A client's `Idempotency-Key`: 1 to 255 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub const MAX_LEN: usize = 255;

    pub fn parse(s: &str) -> Result<Self, BadValue> {
        if s.is_empty() || s.len() > Self::MAX_LEN || !s.chars().all(|c| c.is_ascii_graphic() || c == ' ') {
            return Err(BadValue(format!(
                "Idempotency-Key must be 1 to {} printable ASCII characters",
                Self::MAX_LEN
            )));
        }
        Ok(Self(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// SHA-256 over a request's canonical form (validated, normalised fields in a fixed
/// order), hex-encoded: the same checkout in any JSON field order has one fingerprint.
/// `CheckoutRequest::fingerprint` (in `checkout`) chooses the fields.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint(String);

impl Fingerprint {
    /// The fingerprint of `fields`, in this order.
    pub fn of_fields(fields: &[&str]) -> Self {
        let mut h = Sha256::new();
        for field in fields {
            // Length-prefixed, so no two field lists share an encoding.
            h.update((field.len() as u64).to_be_bytes());
            h.update(field.as_bytes());
        }
        Self(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Wraps a stored hex fingerprint.
    pub fn from_hex(hex: String) -> Self {
        Self(hex)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A final response stored under a key and replayed for it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReply {
    pub status: u16,
    pub body: Value,
}

/// One key's record.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRecord {
    pub key: IdempotencyKey,
    pub order_id: OrderId,
    pub fingerprint: Fingerprint,
    /// The final response, once there is one.
    pub reply: Option<StoredReply>,
    pub created_ms: i64,
    pub expires_ms: i64,
}

/// What `Store::begin_key` found.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyBegin {
    /// The key was unknown (or its record had expired): this record is now stored.
    Fresh,
    /// The key's live record.
    Existing(KeyRecord),
}

/// What a request with a known key may do.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyCheck {
    /// Run the checkout (the key is new, or its earlier request ended retryably).
    Proceed,
    /// Answer the stored response.
    Replay(StoredReply),
    /// The key was first used with another request: 422.
    Mismatch,
}

impl KeyRecord {
    pub fn is_expired(&self, now_ms: i64) -> bool {
        now_ms >= self.expires_ms
    }

    /// Decides what a request with `fingerprint` may do with this record.
    pub fn check(&self, fingerprint: &Fingerprint) -> KeyCheck {
        if self.fingerprint != *fingerprint {
            KeyCheck::Mismatch
        } else if let Some(reply) = &self.reply {
            KeyCheck::Replay(reply.clone())
        } else {
            KeyCheck::Proceed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_length_prefixed_sha256() {
        let a = Fingerprint::of_fields(&["ab", "c"]);
        assert_ne!(a, Fingerprint::of_fields(&["a", "bc"]));
        assert_eq!(a, Fingerprint::of_fields(&["ab", "c"]));
        assert_eq!(a.as_str().len(), 64);
    }

    #[test]
    fn a_record_replays_mismatches_or_proceeds() {
        let a = Fingerprint::of_fields(&["o1", "2000", "usd", "pm_card_visa"]);
        let other = Fingerprint::of_fields(&["o1", "10", "usd", "pm_card_visa"]);
        let mut rec = KeyRecord {
            key: IdempotencyKey::parse("k").unwrap(),
            order_id: OrderId::parse("o1").unwrap(),
            fingerprint: a.clone(),
            reply: None,
            created_ms: 0,
            expires_ms: 10,
        };
        assert_eq!(rec.check(&a), KeyCheck::Proceed);
        assert_eq!(rec.check(&other), KeyCheck::Mismatch);
        let stored = StoredReply {
            status: 402,
            body: serde_json::json!({"status": "declined"}),
        };
        rec.reply = Some(stored.clone());
        assert_eq!(rec.check(&a), KeyCheck::Replay(stored));
        assert!(!rec.is_expired(9));
        assert!(rec.is_expired(10));
    }

    #[test]
    fn keys_are_validated() {
        assert!(IdempotencyKey::parse("7b9e2890-4e31").is_ok());
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
        assert!(IdempotencyKey::parse("k\u{e9}").is_err());
    }
}
