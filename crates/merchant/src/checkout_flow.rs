//! How a reference merchant's customers pay, and so what tells it an order is paid
//! (`fauxpay merchant --flow`):
//! - `server-confirm` (the default): `POST /checkout` confirms the payment on the server;
//!   a `payment_intent.succeeded` webhook fulfils the order;
//! - `payment-element`: the storefront API opens an intent and the customer's browser
//!   confirms it with the publishable key; `payment_intent.succeeded` fulfils;
//! - `checkout-session`: the storefront API opens a Checkout Session the customer pays on
//!   the provider's page; a `checkout.session.completed` webhook fulfils, and so does the
//!   customer's visit to the success page, as Stripe's guide has it (whichever comes
//!   first). Fulfilling on both is where the naive and lock-only merchants ship twice.
//!
//! Every flow serves every route; the flow decides only which signals fulfil.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// The event type a `payment_intent`'s success is announced by.
pub const PAYMENT_INTENT_SUCCEEDED: &str = "payment_intent.succeeded";
/// The event type a Checkout Session's completion is announced by.
pub const CHECKOUT_SESSION_COMPLETED: &str = "checkout.session.completed";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckoutFlow {
    #[default]
    ServerConfirm,
    PaymentElement,
    CheckoutSession,
}

impl CheckoutFlow {
    pub const ALL: [CheckoutFlow; 3] = [
        CheckoutFlow::ServerConfirm,
        CheckoutFlow::PaymentElement,
        CheckoutFlow::CheckoutSession,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CheckoutFlow::ServerConfirm => "server-confirm",
            CheckoutFlow::PaymentElement => "payment-element",
            CheckoutFlow::CheckoutSession => "checkout-session",
        }
    }

    /// The webhook event type that fulfils an order.
    pub fn fulfils_on(self) -> &'static str {
        match self {
            CheckoutFlow::ServerConfirm | CheckoutFlow::PaymentElement => PAYMENT_INTENT_SUCCEEDED,
            CheckoutFlow::CheckoutSession => CHECKOUT_SESSION_COMPLETED,
        }
    }

    /// Whether the customer's visit to the success page fulfils a paid order.
    pub fn success_page_fulfils(self) -> bool {
        self == CheckoutFlow::CheckoutSession
    }
}

impl fmt::Display for CheckoutFlow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of [`CheckoutFlow::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown flow `{0}`: expected server-confirm, payment-element or checkout-session")]
pub struct UnknownFlow(pub String);

impl FromStr for CheckoutFlow {
    type Err = UnknownFlow;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CheckoutFlow::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| UnknownFlow(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_have_names_and_say_what_fulfils() {
        for f in CheckoutFlow::ALL {
            assert_eq!(f.as_str().parse::<CheckoutFlow>(), Ok(f));
        }
        assert!("session".parse::<CheckoutFlow>().is_err());
        assert_eq!(CheckoutFlow::default().fulfils_on(), "payment_intent.succeeded");
        assert_eq!(CheckoutFlow::CheckoutSession.fulfils_on(), "checkout.session.completed");
        assert!(CheckoutFlow::CheckoutSession.success_page_fulfils());
        assert!(!CheckoutFlow::PaymentElement.success_page_fulfils());
    }
}
