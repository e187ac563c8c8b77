//! The three checkout strategies and the service interface the HTTP layer drives.
//!
//! [`Strategy`] names them (`naive`, `lock-only`, `idempotent`: parsed by [`FromStr`],
//! and the values of `fauxpay merchant --strategy`, whose parser lives with the CLI);
//! each is a [`CheckoutService`] in its own module. The trait is plain Rust — a validated
//! request and an optional key in, an [`Answer`] out; a verified webhook event in, a
//! [`Fulfilment`] out — so every strategy is tested without HTTP, and the handlers stay
//! thin.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use serde::Serialize;

use super::checkout::{Answer, CheckoutRequest};
use super::idempotency_record::IdempotencyKey;
use super::order::{Order, OrderId};
use super::store::StoreError;
use super::webhook::{Fulfillment, PaymentSucceeded};

/// How a reference merchant protects a payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// No idempotency anywhere: every request charges (double-charges on client retries).
    Naive,
    /// A per-order lock around the provider call and nothing durable: still double-charges
    /// when a retry arrives after the lock is released.
    LockOnly,
    /// Key records, a lock, fenced order states, a stable provider key and reconciliation.
    Idempotent,
}

impl Strategy {
    pub const ALL: [Strategy; 3] = [Strategy::Naive, Strategy::LockOnly, Strategy::Idempotent];

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Naive => "naive",
            Strategy::LockOnly => "lock-only",
            Strategy::Idempotent => "idempotent",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of [`Strategy::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown strategy `{0}`: expected naive, lock-only or idempotent")]
pub struct UnknownStrategy(pub String);

impl FromStr for Strategy {
    type Err = UnknownStrategy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Strategy::ALL
            .into_iter()
            .find(|strategy| strategy.as_str() == s)
            .ok_or_else(|| UnknownStrategy(s.to_string()))
    }
}

/// The merchant's view of its own dependencies (`GET /health`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    pub status: &'static str,
    pub strategy: Strategy,
    pub store: &'static str,
    pub lock: Option<&'static str>,
    /// Why the merchant cannot take payments right now, if it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

#[async_trait]
pub trait CheckoutService: Send + Sync + 'static {
    fn strategy(&self) -> Strategy;

    /// Handles one `POST /checkout`.
    async fn checkout(&self, req: CheckoutRequest, key: Option<IdempotencyKey>) -> Answer;

    /// Takes `req`'s order before the customer's browser pays for it (the storefront's
    /// intents and sessions), so that its webhook finds it: kept as a checkout keeps it.
    async fn open_order(&self, req: &CheckoutRequest) -> Result<(), StoreError>;

    /// The order row (`GET /orders/{id}`).
    async fn order(&self, id: &OrderId) -> Result<Option<Order>, StoreError>;

    /// Fulfils the order a verified `payment_intent.succeeded` event names (`POST
    /// /webhooks/stripe`): naive and lock-only on every delivery, idempotent once.
    async fn fulfill(&self, event: &PaymentSucceeded) -> Result<Fulfillment, StoreError>;

    async fn health(&self) -> Health;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_have_their_cli_names() {
        for s in Strategy::ALL {
            assert_eq!(s.as_str().parse::<Strategy>(), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert!("lock_only".parse::<Strategy>().is_err());
    }
}
