//! The merchant's webhook receiver: a signed delivery in, a fulfilment (or a refusal) out.
//!
//! [`WebhookReceiver::receive`] is what `POST /webhooks/stripe` runs, free of HTTP: it
//! verifies the `Stripe-Signature` against the configured secret (400 on a missing,
//! forged or stale one, before the body is even read as JSON), reads the event, and hands
//! the event its checkout flow fulfils on (`payment_intent.succeeded`, or a paid
//! `checkout.session.completed` in the checkout-session flow) for a known order to the
//! strategy's [`CheckoutService::fulfil`]. Every other event type, and events for orders
//! the merchant does not know, are acknowledged with a 200 and ignored (Stripe retries
//! anything else).
//! A store failure is a 503, so the provider delivers the event again later.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::checkout_flow::CheckoutFlow;
use super::clock::SharedClock;
use super::strategy::CheckoutService;
use super::webhook::{verify, Event, WebhookSecret};

/// The receiver's answer: a status and a JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookReply {
    pub status: u16,
    pub body: Value,
    /// Seconds, on a 503.
    pub retry_after: Option<u64>,
}

impl WebhookReply {
    fn ok(body: Value) -> Self {
        Self {
            status: 200,
            body,
            retry_after: None,
        }
    }

    fn error(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            body: json!({"error": code, "message": message.into()}),
            retry_after: (status == 503).then_some(1),
        }
    }
}

pub struct WebhookReceiver {
    secret: WebhookSecret,
    tolerance: Duration,
    clock: SharedClock,
    service: Arc<dyn CheckoutService>,
    flow: CheckoutFlow,
}

impl WebhookReceiver {
    pub fn new(
        secret: WebhookSecret,
        tolerance: Duration,
        clock: SharedClock,
        service: Arc<dyn CheckoutService>,
        flow: CheckoutFlow,
    ) -> Self {
        Self {
            secret,
            tolerance,
            clock,
            service,
            flow,
        }
    }

    /// Handles one delivery: `signature` is the `Stripe-Signature` header, `body` the raw
    /// body it signs.
    pub async fn receive(&self, signature: Option<&str>, body: &[u8]) -> WebhookReply {
        let now_secs = self.clock.now_ms().div_euclid(1000);
        if let Err(e) = verify(&self.secret, signature, body, now_secs, self.tolerance) {
            tracing::warn!(error = %e, "webhook refused: bad signature");
            return WebhookReply::error(400, "invalid_signature", e.to_string());
        }
        let event = match Event::from_json(body) {
            Ok(event) => event,
            Err(e) => return WebhookReply::error(400, "invalid_event", e.0),
        };
        let on = self.flow.fulfils_on();
        let Some(payment) = event.paid(on) else {
            let why = if event.kind == on {
                format!("the {} names no valid metadata.order_id, or is not paid", event.kind)
            } else {
                format!("the merchant ({} flow) acts only on {on}", self.flow)
            };
            return WebhookReply::ok(json!({
                "received": true, "event": event.id, "type": event.kind, "result": "ignored", "message": why,
            }));
        };
        match self.service.fulfill(&payment).await {
            Ok(f) => {
                tracing::debug!(event = %payment.event_id, order_id = %payment.order_id, result = f.as_str(), "webhook");
                WebhookReply::ok(json!({
                    "received": true,
                    "event": event.id,
                    "type": event.kind,
                    "order_id": payment.order_id,
                    "result": f.as_str(),
                    "fulfillments": f.fulfillments(),
                }))
            }
            Err(e) => {
                tracing::warn!(event = %payment.event_id, order_id = %payment.order_id, error = %e, "webhook not processed");
                WebhookReply::error(503, "store_unavailable", e.to_string())
            }
        }
    }
}
