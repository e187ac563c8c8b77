//! The order book of the naive and lock-only merchants: a record, not a guard.
//!
//! These strategies decide nothing from stored state (that is their flaw), but `GET
//! /orders/{id}` should still show what happened. The book keeps, per order id and in
//! process memory, the latest request's amount and payment method, how many provider
//! calls were made, and the last outcome — once an order has been paid it stays paid,
//! showing the latest payment intent, so repeated charges are visible as `attempts`.
//! An order is in the book from the moment its first charge starts (a webhook can
//! overtake the charge's answer), and [`OrderBook::fulfill`] counts every word that it
//! is paid (each webhook delivery, each visit to the success page) as a fulfilment: the
//! classic webhook bug. That word also marks an order paid in the browser as paid.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::checkout::CheckoutRequest;
use super::gateway::ChargeOutcome;
use super::order::{Order, OrderId, OrderStatus};
use super::webhook::{Fulfillment, PaymentSucceeded};

#[derive(Default)]
pub struct OrderBook {
    orders: Mutex<HashMap<OrderId, Order>>,
}

impl OrderBook {
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts `req`'s order in the book (pending) unless it is there: called before the
    /// provider is, so that the order is known when its webhook arrives.
    pub fn open(&self, req: &CheckoutRequest, now_ms: i64) {
        self.orders
            .lock()
            .entry(req.order_id.clone())
            .or_insert_with(|| Self::fresh(req, now_ms));
    }

    fn fresh(req: &CheckoutRequest, now_ms: i64) -> Order {
        Order::new(
            req.order_id.clone(),
            req.amount,
            req.currency.clone(),
            req.payment_method.clone(),
            now_ms,
        )
    }

    /// Ships the order again, on every word that it is paid, whatever happened before
    /// (the bug these merchants exist to show).
    pub fn fulfill(&self, paid: &PaymentSucceeded, now_ms: i64) -> Fulfillment {
        let mut orders = self.orders.lock();
        let Some(order) = orders.get_mut(&paid.order_id) else {
            return Fulfillment::UnknownOrder;
        };
        order.fulfillments = order.fulfillments.saturating_add(1);
        // The provider's word that the money moved: an order paid in the customer's
        // browser (an intent or a session) reads paid from now on.
        if order.status != OrderStatus::Paid {
            order.status = OrderStatus::Paid;
            order.payment_intent = Some(paid.payment_intent.clone());
            order.last_error = None;
        }
        order.updated_ms = now_ms;
        Fulfillment::Fulfilled {
            fulfillments: order.fulfillments,
        }
    }

    /// Records one provider call for `req` and its outcome.
    pub fn record(&self, req: &CheckoutRequest, outcome: &ChargeOutcome, now_ms: i64) {
        let mut orders = self.orders.lock();
        let order = orders
            .entry(req.order_id.clone())
            .or_insert_with(|| Self::fresh(req, now_ms));
        order.amount = req.amount;
        order.currency = req.currency.clone();
        order.payment_method = req.payment_method.clone();
        order.attempts += 1;
        order.generation_attempts += 1;
        order.last_attempt_ms = now_ms;
        order.updated_ms = now_ms;
        order.version = order.version.next();
        let paid = order.status == OrderStatus::Paid;
        match outcome {
            ChargeOutcome::Succeeded { payment_intent } => {
                order.status = OrderStatus::Paid;
                order.payment_intent = Some(payment_intent.clone());
                order.last_error = None;
            }
            ChargeOutcome::Declined { decline_code, message } if !paid => {
                order.status = OrderStatus::Declined;
                order.decline_code = Some(decline_code.clone());
                order.decline_message = Some(message.clone());
            }
            ChargeOutcome::Rejected { message: reason, .. }
            | ChargeOutcome::NotCharged { reason }
            | ChargeOutcome::Unknown { reason, .. } => {
                if !paid {
                    order.status = OrderStatus::Pending;
                }
                order.last_error = Some(reason.clone());
            }
            ChargeOutcome::Declined { .. } => {}
        }
    }

    pub fn get(&self, id: &OrderId) -> Option<Order> {
        self.orders.lock().get(id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::PaymentIntentId;

    #[test]
    fn a_paid_order_stays_paid_and_counts_attempts() {
        let book = OrderBook::new();
        let req = CheckoutRequest::from_json(
            br#"{"order_id":"o1","amount":2000,"currency":"usd","payment_method":"pm_card_visa"}"#,
        )
        .unwrap();
        let paid = ChargeOutcome::Succeeded {
            payment_intent: PaymentIntentId::new("pi_1"),
        };
        book.record(&req, &paid, 1);
        book.record(
            &req,
            &ChargeOutcome::Unknown {
                reason: "lost".into(),
                timed_out: false,
            },
            2,
        );
        let o = book.get(&req.order_id).unwrap();
        assert_eq!(o.status, OrderStatus::Paid);
        assert_eq!(o.attempts, 2);
        assert_eq!(o.last_error.as_deref(), Some("lost"));
    }

    #[test]
    fn every_delivery_fulfills_again_once_the_order_is_known() {
        let book = OrderBook::new();
        let req = CheckoutRequest::from_json(
            br#"{"order_id":"o1","amount":2000,"currency":"usd","payment_method":"pm_card_visa"}"#,
        )
        .unwrap();
        let paid = |pi: &str| PaymentSucceeded {
            event_id: crate::webhook::EventId::parse("evt_1").unwrap(),
            kind: "payment_intent.succeeded".into(),
            order_id: req.order_id.clone(),
            payment_intent: PaymentIntentId::new(pi),
        };
        let pi = PaymentIntentId::new("pi_b");
        assert_eq!(book.fulfill(&paid("pi_b"), 1), Fulfillment::UnknownOrder);
        book.open(&req, 1);
        assert_eq!(book.get(&req.order_id).unwrap().status, OrderStatus::Pending);
        assert_eq!(
            book.fulfill(&paid("pi_b"), 2),
            Fulfillment::Fulfilled { fulfillments: 1 }
        );
        assert_eq!(
            book.fulfill(&paid("pi_c"), 3),
            Fulfillment::Fulfilled { fulfillments: 2 }
        );
        book.open(&req, 4);
        let order = book.get(&req.order_id).unwrap();
        assert_eq!(order.fulfillments, 2);
        // Paid in the browser: the book reads paid, with the first intent that said so.
        assert_eq!(order.status, OrderStatus::Paid);
        assert_eq!(order.payment_intent, Some(pi));
    }
}
