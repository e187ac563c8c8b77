//! The lock-only merchant: a per-order lock around the provider call, nothing durable.
//!
//! Two overlapping requests for one order cannot both charge: the second finds the lock
//! held and gets a 409. But the lock is released when the first request ends, and
//! nothing records what it did, so a retry that arrives *after* it — the classic one:
//! the provider charged, the answer was lost, the client heard a 502 and tried again —
//! charges the customer a second time. The lock is in memory, or in Redis when a URL is
//! configured (then a Redis outage is a 503). This is the seeds' warning made runnable:
//! a lock is coordination, not idempotency. Its webhook receiver, like the naive one,
//! fulfils on every delivery: a lock around a redelivery would not help either.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::checkout::{Answer, CheckoutRequest, Reply};
use super::clock::SharedClock;
use super::gateway::Gateway;
use super::idempotency_record::IdempotencyKey;
use super::lock::OrderLock;
use super::naive::{pass_through, unguarded_charge};
use super::order::{Order, OrderId};
use super::order_book::OrderBook;
use super::store::StoreError;
use super::strategy::{CheckoutService, Health, Strategy};
use super::webhook::{Fulfillment, PaymentSucceeded};

pub struct LockOnly {
    gateway: Arc<dyn Gateway>,
    lock: Arc<dyn OrderLock>,
    lock_ttl: Duration,
    clock: SharedClock,
    book: OrderBook,
}

impl LockOnly {
    pub fn new(gateway: Arc<dyn Gateway>, lock: Arc<dyn OrderLock>, lock_ttl: Duration, clock: SharedClock) -> Self {
        Self {
            gateway,
            lock,
            lock_ttl,
            clock,
            book: OrderBook::new(),
        }
    }
}

#[async_trait]
impl CheckoutService for LockOnly {
    fn strategy(&self) -> Strategy {
        Strategy::LockOnly
    }

    async fn checkout(&self, req: CheckoutRequest, _key: Option<IdempotencyKey>) -> Answer {
        let lease = match self.lock.acquire(&req.order_id, self.lock_ttl).await {
            Ok(Some(lease)) => lease,
            Ok(None) => return Reply::InFlight { order_id: req.order_id }.into(),
            Err(e) => {
                tracing::warn!(order_id = %req.order_id, error = %e, "lock unavailable");
                return Reply::unavailable(Some(&req.order_id), "lock_unavailable", e.to_string()).into();
            }
        };
        self.book.open(&req, self.clock.now_ms());
        let outcome = self.gateway.charge(&unguarded_charge(&req)).await;
        self.book.record(&req, &outcome, self.clock.now_ms());
        if let Err(e) = self.lock.release(&lease).await {
            tracing::warn!(order_id = %req.order_id, error = %e, "lock release failed; it will expire");
        }
        pass_through(&req, outcome).into()
    }

    async fn open_order(&self, req: &CheckoutRequest) -> Result<(), StoreError> {
        self.book.open(req, self.clock.now_ms());
        Ok(())
    }

    async fn order(&self, id: &OrderId) -> Result<Option<Order>, StoreError> {
        Ok(self.book.get(id))
    }

    /// Ships on every delivery: a redelivered event, or the second charge of a double
    /// charge, ships the order again.
    async fn fulfill(&self, event: &PaymentSucceeded) -> Result<Fulfillment, StoreError> {
        Ok(self.book.fulfill(event, self.clock.now_ms()))
    }

    async fn health(&self) -> Health {
        let problem = self.lock.ping().await.err().map(|e| e.to_string());
        Health {
            status: if problem.is_none() { "ok" } else { "unavailable" },
            strategy: Strategy::LockOnly,
            store: "memory",
            lock: Some(self.lock.kind()),
            problem,
        }
    }
}
