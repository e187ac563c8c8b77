//! The three checkout strategies and the service interface the HTTP layer drives.
//!
//! [`Strategy`] names them (`naive`, `lock-only`, `idempotent`: the values of `fauxpay
//! merchant --strategy`); each is a [`CheckoutService`] in its own module. The trait is
//! plain Rust — a validated request and an optional key in, an [`Answer`] out — so every
//! strategy is tested without HTTP, and the handlers stay thin.

use std::fmt;

use async_trait::async_trait;
use serde::Serialize;

use super::checkout::{Answer, CheckoutRequest};
use super::idempotency_record::IdempotencyKey;
use super::order::{Order, OrderId};
use super::store::StoreError;

/// How a reference merchant protects a payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
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

    /// The order row (`GET /orders/{id}`).
    async fn order(&self, id: &OrderId) -> Result<Option<Order>, StoreError>;

    async fn health(&self) -> Health;
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn strategies_have_their_cli_names() {
        for s in [Strategy::Naive, Strategy::LockOnly, Strategy::Idempotent] {
            assert_eq!(Strategy::from_str(s.as_str(), false), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert!(Strategy::from_str("lock_only", false).is_err());
    }
}
