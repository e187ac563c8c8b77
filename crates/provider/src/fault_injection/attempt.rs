//! The attempt: what the domain layer knows about the request an operation runs for.
//!
//! An [`Attempt`] carries the request id and idempotency key that the ledger records
//! with every money movement, the label of the fault injected into the request (so a
//! double charge can be explained after the fact), and a forced decline when a fault
//! profile chose one in place of the card's own outcome. It also carries the origin
//! the client reached fauxpay at (`http://` and its `Host`), so that a URL fauxpay
//! hands out (a 3-D Secure page) points back at fauxpay as the client sees it.

use std::sync::Arc;

use crate::idempotency::key::IdempotencyKey;
use crate::stripe::cards::Decline;
use crate::stripe::ids::{ApiKey, CheckoutSessionId, CorrelationId, RequestId};

#[derive(Debug, Clone)]
pub struct Attempt {
    pub request_id: RequestId,
    pub idempotency_key: Option<IdempotencyKey>,
    /// The request's correlation id, when already read from its parameters (the
    /// operation reads it itself otherwise).
    pub correlation_id: Option<CorrelationId>,
    /// The fault applied to the request, if any (e.g. `drop_response after_commit (rule 0)`).
    pub fault: Option<Arc<str>>,
    /// A decline forced by a fault, overriding the card's outcome.
    pub decline: Option<Decline>,
    /// `http://{Host}` of the request, when it had a well-formed `Host`.
    pub origin: Option<Arc<str>>,
    /// The kind of key the request was made with (the ledger records it).
    pub key: KeyKind,
    /// The Checkout Session the request pays for (set by the session's pay).
    pub checkout_session: Option<CheckoutSessionId>,
    /// How far the provider's clock has been moved forward, in seconds (0 in recovery:
    /// the offset is not kept across a restart).
    pub clock_offset: u64,
}

/// Who made a request, by the kind of key it presented: the ledger says which kind made
/// each charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    /// A secret (`sk_test_…`) or restricted (`rk_test_…`) key: the merchant's server.
    #[default]
    Secret,
    /// A publishable key (`pk_test_…`): the customer's browser (Stripe.js).
    Publishable,
    /// No key: fauxpay's hosted pages (Checkout, 3-D Secure) or a script standing in for
    /// the customer there.
    CheckoutPage,
}

impl KeyKind {
    /// The kind of `key` (an empty key is a hosted page's request).
    pub fn of(key: &ApiKey) -> Self {
        match key.as_bytes() {
            b"" => Self::CheckoutPage,
            k if k.starts_with(b"pk_") => Self::Publishable,
            _ => Self::Secret,
        }
    }
}

impl Attempt {
    /// An attempt with no fault acting on it.
    pub fn plain(request_id: RequestId, idempotency_key: Option<IdempotencyKey>) -> Self {
        Self {
            request_id,
            idempotency_key,
            correlation_id: None,
            fault: None,
            decline: None,
            origin: None,
            key: KeyKind::Secret,
            checkout_session: None,
            clock_offset: 0,
        }
    }
}
