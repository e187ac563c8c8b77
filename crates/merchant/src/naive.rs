//! The naive merchant: every request charges, with no idempotency anywhere.
//!
//! This is the checkout most tutorials show: validate, call the provider, answer. It
//! sends no idempotency key, keeps no key records and takes no lock, so every client
//! retry is a new charge: a retry after an answer lost on the way back (the money moved,
//! the client heard a 502 or a 504) charges the customer again. And it fulfils an order on
//! every `payment_intent.succeeded` delivery it receives, so a redelivered event (Stripe
//! delivers at least once) or a double charge ships the goods twice. The load generator
//! must catch both; that is what it is for.

use std::sync::Arc;

use async_trait::async_trait;

use super::checkout::{Answer, CheckoutRequest, Reply};
use super::clock::SharedClock;
use super::gateway::{ChargeOutcome, ChargeRequest, Gateway};
use super::idempotency_record::IdempotencyKey;
use super::order::{Order, OrderId};
use super::order_book::OrderBook;
use super::store::StoreError;
use super::strategy::{CheckoutService, Health, Strategy};
use super::webhook::{Fulfillment, PaymentSucceeded};

pub struct Naive {
    gateway: Arc<dyn Gateway>,
    clock: SharedClock,
    book: OrderBook,
}

impl Naive {
    pub fn new(gateway: Arc<dyn Gateway>, clock: SharedClock) -> Self {
        Self {
            gateway,
            clock,
            book: OrderBook::new(),
        }
    }
}

/// The charge request the naive and lock-only merchants send: no idempotency key.
pub fn unguarded_charge(req: &CheckoutRequest) -> ChargeRequest {
    ChargeRequest {
        order_id: req.order_id.clone(),
        amount: req.amount,
        currency: req.currency.clone(),
        payment_method: req.payment_method.clone(),
        idempotency_key: None,
    }
}

/// Passes the provider's outcome straight up: 200, 402, 400, or 502/504 for anything else.
pub fn pass_through(req: &CheckoutRequest, outcome: ChargeOutcome) -> Reply {
    let order_id = req.order_id.clone();
    match outcome {
        ChargeOutcome::Succeeded { payment_intent } => Reply::Paid {
            order_id,
            payment_intent,
            amount: req.amount,
            currency: req.currency.clone(),
        },
        ChargeOutcome::Declined { decline_code, message } => Reply::Declined {
            order_id,
            decline_code,
            message,
        },
        ChargeOutcome::Rejected { param, message } => Reply::ProviderRejected {
            order_id,
            param,
            message,
        },
        ChargeOutcome::Unknown {
            reason,
            timed_out: true,
        } => Reply::ProviderTimeout {
            order_id,
            message: reason,
        },
        ChargeOutcome::Unknown { reason, .. } | ChargeOutcome::NotCharged { reason } => Reply::ProviderFailed {
            order_id,
            message: reason,
        },
    }
}

#[async_trait]
impl CheckoutService for Naive {
    fn strategy(&self) -> Strategy {
        Strategy::Naive
    }

    async fn checkout(&self, req: CheckoutRequest, _key: Option<IdempotencyKey>) -> Answer {
        self.book.open(&req, self.clock.now_ms());
        let outcome = self.gateway.charge(&unguarded_charge(&req)).await;
        self.book.record(&req, &outcome, self.clock.now_ms());
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
        Health {
            status: "ok",
            strategy: Strategy::Naive,
            store: "memory",
            lock: None,
            problem: None,
        }
    }
}
