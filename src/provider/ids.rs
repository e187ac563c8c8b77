//! Identifiers: Stripe-style object ids, request ids, idempotency keys, correlation ids.
//!
//! Each kind of id is its own newtype so a charge id can never be passed where a
//! payment intent id or an idempotency key is expected. Object ids carry Stripe's
//! prefixes (`pi_`, `ch_`, `re_`, `pm_`, `req_`) followed by 24 random alphanumerics.

use std::fmt;
use std::sync::Arc;

use rand::distr::Alphanumeric;
use rand::Rng;
use serde::{Serialize, Serializer};

fn random_suffix() -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(24)
        .map(char::from)
        .collect()
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Arc<str>);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A fresh random id with this kind's prefix.
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, random_suffix()).into())
            }

            /// Wraps an id received from a client (it may be unknown to the store).
            pub fn from_client(s: &str) -> Self {
                Self(s.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
    };
}

id_type!(
    /// A payment intent's id (`pi_…`).
    PaymentIntentId, "pi_"
);
id_type!(
    /// A charge's id (`ch_…`).
    ChargeId, "ch_"
);
id_type!(
    /// A refund's id (`re_…`).
    RefundId, "re_"
);
id_type!(
    /// A payment method's id (`pm_…`), minted when a test payment method is used.
    PaymentMethodId, "pm_"
);
id_type!(
    /// The id of one HTTP request (`req_…`), sent back in the `Request-Id` header.
    RequestId, "req_"
);

/// Longest idempotency key accepted, as Stripe.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// A client-chosen idempotency key (1..=255 characters).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(Arc<str>);

impl IdempotencyKey {
    /// Validates a key; the error message names what was wrong.
    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() {
            return Err("Idempotency-Key must not be empty.".into());
        }
        if raw.chars().count() > MAX_IDEMPOTENCY_KEY_LEN {
            return Err(format!(
                "Idempotency-Key is too long: keys may be at most {MAX_IDEMPOTENCY_KEY_LEN} characters."
            ));
        }
        Ok(Self(raw.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Serialize for IdempotencyKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// Which logical payment a money movement belongs to (by default `metadata[order_id]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CorrelationId(Arc<str>);

impl CorrelationId {
    pub fn new(s: &str) -> Self {
        Self(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Serialize for CorrelationId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// The API key a request authenticated with: idempotency keys are scoped to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiKey(Arc<str>);

impl ApiKey {
    pub fn new(s: &str) -> Self {
        Self(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_carry_prefix_and_differ() {
        let a = PaymentIntentId::generate();
        let b = PaymentIntentId::generate();
        assert!(a.as_str().starts_with("pi_"));
        assert_eq!(a.as_str().len(), 27);
        assert_ne!(a, b);
        assert!(ChargeId::generate().as_str().starts_with("ch_"));
    }

    #[test]
    fn idempotency_key_length_is_bounded() {
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
        assert!(IdempotencyKey::parse("").is_err());
    }
}
