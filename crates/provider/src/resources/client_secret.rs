//! What a publishable key (`pk_test_…`, the customer's browser) may do and see, as at
//! Stripe: reach a payment or setup intent only with its `client_secret`, and see only
//! the fields Stripe.js's types list (not the merchant's `metadata`, `customer`,
//! `amount_received` and the like).

use serde_json::Value;

use crate::error::ApiError;
use crate::resources::endpoint::Secured;
use crate::state::payments::Payments;
use crate::stripe::ids::{PaymentIntentId, SetupIntentId};
use crate::stripe::params::Params;

/// The fields of a payment intent a publishable key sees.
const PAYMENT_INTENT_FIELDS: &[&str] = &[
    "id",
    "object",
    "amount",
    "canceled_at",
    "cancellation_reason",
    "capture_method",
    "client_secret",
    "confirmation_method",
    "created",
    "currency",
    "description",
    "last_payment_error",
    "livemode",
    "next_action",
    "payment_method",
    "payment_method_types",
    "receipt_email",
    "setup_future_usage",
    "shipping",
    "status",
];

/// The fields of a setup intent a publishable key sees.
const SETUP_INTENT_FIELDS: &[&str] = &[
    "id",
    "object",
    "cancellation_reason",
    "client_secret",
    "created",
    "description",
    "last_setup_error",
    "livemode",
    "next_action",
    "payment_method",
    "payment_method_types",
    "status",
    "usage",
];

impl Payments {
    /// The `client_secret` a publishable key must send for the intent `raw`; `None` when
    /// there is no such intent (the operation then answers its own 404).
    fn client_secret_of(&self, secured: Secured, raw: &str) -> Option<String> {
        match secured {
            Secured::PaymentIntent => PaymentIntentId::parse(raw)
                .and_then(|id| self.intents.get(&id))
                .map(|pi| format!("{raw}_secret_{}", &*pi.client_secret().text())),
            Secured::SetupIntent => SetupIntentId::parse(raw)
                .and_then(|id| self.setup_intents.get(&id))
                .map(|si| si.client_secret()),
        }
    }

    /// Checks the `client_secret` a publishable key sent for intent `raw`.
    pub fn check_client_secret(&self, secured: Secured, raw: &str, p: &Params) -> Result<(), ApiError> {
        let kind = match secured {
            Secured::PaymentIntent => "PaymentIntent",
            Secured::SetupIntent => "SetupIntent",
        };
        let Some(expected) = self.client_secret_of(secured, raw) else {
            return Ok(());
        };
        match p.opt_str("client_secret")? {
            None => Err(ApiError::invalid_request(
                format!("A publishable key can reach a {kind} only with its client_secret: send client_secret (the {kind}'s client_secret, from your server)."),
                Some("client_secret".into()),
            )),
            Some(sent) if sent == expected => Ok(()),
            Some(_) => Err(ApiError::invalid_request(
                format!("The client_secret provided does not match any associated {kind} on this account. Ensure the publishable key used belongs to the same account that created the {kind}."),
                Some("client_secret".into()),
            )),
        }
    }
}

/// `object` as a publishable key sees it: a payment or setup intent keeps only the
/// fields Stripe shows there; anything else is left as it is.
pub fn as_seen_by_publishable_key(object: &mut Value) {
    let keep = match object.get("object").and_then(Value::as_str) {
        Some("payment_intent") => PAYMENT_INTENT_FIELDS,
        Some("setup_intent") => SETUP_INTENT_FIELDS,
        _ => return,
    };
    if let Some(fields) = object.as_object_mut() {
        fields.retain(|k, _| keep.contains(&k.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{attempt, form, payments};

    #[test]
    fn an_intent_is_reached_with_its_client_secret_and_shows_less() {
        let p = payments();
        let pi = p
            .create_intent(&form("amount=500&currency=usd&metadata[order_id]=o1"), &attempt())
            .unwrap()
            .json();
        let id = pi["id"].as_str().unwrap();
        let secret = pi["client_secret"].as_str().unwrap();
        let check = |body: &str| p.check_client_secret(Secured::PaymentIntent, id, &form(body));
        assert!(check(&format!("client_secret={secret}")).is_ok());
        for body in ["", "client_secret=pi_x_secret_y"] {
            let e = check(body).unwrap_err();
            assert_eq!(
                (e.status.code(), e.param.as_deref()),
                (400, Some("client_secret")),
                "{body}"
            );
        }
        let mut seen = pi.clone();
        as_seen_by_publishable_key(&mut seen);
        assert_eq!(seen["client_secret"], secret);
        assert!(seen.get("metadata").is_none() && seen.get("amount_received").is_none());
        assert_eq!(seen["amount"], 500);
    }
}
