//! The checkout contract, free of HTTP: the validated request and every answer.
//!
//! [`CheckoutRequest::from_json`] turns a `POST /checkout` body into domain values or an
//! [`InvalidInput`] naming the bad parameter. Each strategy answers with a [`Reply`], which
//! knows its status code, JSON body and `Retry-After`; [`Answer`] is what the HTTP layer
//! writes (a reply, or a stored one replayed for an idempotency key). Status codes: 200
//! paid, 402 declined, 400 bad input, 422 key or order reused with another body, 409 in
//! flight, 503 retryable (with `Retry-After`), 502/504 provider failure or timeout.

use serde_json::{json, Map, Value};

use super::idempotency_record::{Fingerprint, StoredReply};
use super::order::{Amount, BadValue, Currency, Order, OrderId, OrderStatus, PaymentIntentId, PaymentMethod};

/// A validated `POST /checkout` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutRequest {
    pub order_id: OrderId,
    pub amount: Amount,
    pub currency: Currency,
    pub payment_method: PaymentMethod,
}

/// A request the merchant refuses before doing anything: 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidInput {
    pub param: Option<String>,
    pub message: String,
}

impl InvalidInput {
    pub fn new(param: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            param: param.map(str::to_string),
            message: message.into(),
        }
    }
}

fn bad(name: &'static str) -> impl Fn(BadValue) -> InvalidInput {
    move |e| InvalidInput::new(Some(name), e.0)
}

impl CheckoutRequest {
    /// Parses and validates a JSON body; unknown fields are ignored.
    pub fn from_json(body: &[u8]) -> Result<Self, InvalidInput> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| InvalidInput::new(None, format!("the body must be a JSON object: {e}")))?;
        let Value::Object(fields) = value else {
            return Err(InvalidInput::new(None, "the body must be a JSON object"));
        };
        let text = |name: &str| -> Result<&str, InvalidInput> {
            match fields.get(name) {
                None | Some(Value::Null) => Err(InvalidInput::new(
                    Some(name),
                    format!("missing required field `{name}`"),
                )),
                Some(Value::String(s)) => Ok(s),
                Some(_) => Err(InvalidInput::new(Some(name), format!("`{name}` must be a string"))),
            }
        };
        let order_id = OrderId::parse(text("order_id")?).map_err(bad("order_id"))?;
        let currency = Currency::parse(text("currency")?).map_err(bad("currency"))?;
        let payment_method = PaymentMethod::parse(text("payment_method")?).map_err(bad("payment_method"))?;
        let amount = match fields.get("amount") {
            None | Some(Value::Null) => {
                return Err(InvalidInput::new(Some("amount"), "missing required field `amount`"))
            }
            Some(Value::Number(n)) => n.as_u64().ok_or_else(|| {
                InvalidInput::new(
                    Some("amount"),
                    "amount must be a positive integer (smallest currency unit)",
                )
            })?,
            Some(_) => {
                return Err(InvalidInput::new(
                    Some("amount"),
                    "amount must be an integer, not a string",
                ))
            }
        };
        let amount = Amount::new(amount).map_err(bad("amount"))?;
        Ok(Self {
            order_id,
            amount,
            currency,
            payment_method,
        })
    }

    /// The request's idempotency fingerprint: its validated, normalised fields in a fixed
    /// order, so the same checkout in any JSON field order has one fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of_fields(&[
            self.order_id.as_str(),
            &self.amount.to_string(),
            self.currency.as_str(),
            self.payment_method.as_str(),
        ])
    }
}

/// Every answer a checkout can give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// 200: the payment succeeded; `payment_intent` is the provider's id.
    Paid {
        order_id: OrderId,
        payment_intent: PaymentIntentId,
        amount: Amount,
        currency: Currency,
    },
    /// 402: a definite decline.
    Declined {
        order_id: OrderId,
        decline_code: String,
        message: String,
    },
    /// 400: the request is invalid.
    Invalid(InvalidInput),
    /// 400: the provider refused the request as invalid (nothing was charged).
    ProviderRejected {
        order_id: OrderId,
        param: Option<String>,
        message: String,
    },
    /// 422: the idempotency key was first used with another request.
    KeyReused { order_id: OrderId },
    /// 422: the order exists with another amount, currency or payment method.
    OrderMismatch { order_id: OrderId, message: String },
    /// 409: a request for this order (or key) is in flight; retry later with the same key.
    InFlight { order_id: OrderId },
    /// 503 with `Retry-After`: retry with the same key. `status` is the order's, when known
    /// (`reconciling`: the provider's answer for an attempt is not known yet).
    Unavailable {
        order_id: Option<OrderId>,
        status: Option<OrderStatus>,
        code: &'static str,
        message: String,
    },
    /// 502: the provider failed (naive and lock-only pass this up).
    ProviderFailed { order_id: OrderId, message: String },
    /// 504: the provider did not answer in time (naive and lock-only pass this up).
    ProviderTimeout { order_id: OrderId, message: String },
}

/// Seconds a client should wait before retrying a 503.
pub const RETRY_AFTER_SECS: u64 = 1;

impl Reply {
    /// The reply for a paid order.
    pub fn paid(order: &Order, payment_intent: PaymentIntentId) -> Self {
        Reply::Paid {
            order_id: order.id.clone(),
            payment_intent,
            amount: order.amount,
            currency: order.currency.clone(),
        }
    }

    pub fn unavailable(order_id: Option<&OrderId>, code: &'static str, message: impl Into<String>) -> Self {
        Reply::Unavailable {
            order_id: order_id.cloned(),
            status: None,
            code,
            message: message.into(),
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            Reply::Paid { .. } => 200,
            Reply::Declined { .. } => 402,
            Reply::Invalid(_) | Reply::ProviderRejected { .. } => 400,
            Reply::KeyReused { .. } | Reply::OrderMismatch { .. } => 422,
            Reply::InFlight { .. } => 409,
            Reply::Unavailable { .. } => 503,
            Reply::ProviderFailed { .. } => 502,
            Reply::ProviderTimeout { .. } => 504,
        }
    }

    /// Whether this is a payment's final outcome, to be stored under the idempotency key.
    pub fn is_final(&self) -> bool {
        matches!(self, Reply::Paid { .. } | Reply::Declined { .. })
    }

    pub fn retry_after(&self) -> Option<u64> {
        matches!(self, Reply::Unavailable { .. } | Reply::InFlight { .. }).then_some(RETRY_AFTER_SECS)
    }

    pub fn body(&self) -> Value {
        fn error(code: &str, message: &str, order_id: Option<&OrderId>) -> Map<String, Value> {
            let mut m = Map::new();
            if let Some(id) = order_id {
                m.insert("order_id".into(), json!(id));
            }
            m.insert("error".into(), json!(code));
            m.insert("message".into(), json!(message));
            m
        }
        let map = match self {
            Reply::Paid {
                order_id,
                payment_intent,
                amount,
                currency,
            } => {
                return json!({
                    "order_id": order_id, "status": "paid", "payment_intent": payment_intent,
                    "amount": amount, "currency": currency,
                })
            }
            Reply::Declined {
                order_id,
                decline_code,
                message,
            } => {
                return json!({
                    "order_id": order_id, "status": "declined", "decline_code": decline_code, "message": message,
                })
            }
            Reply::Invalid(e) => {
                let mut m = error("invalid_request", &e.message, None);
                m.insert("param".into(), json!(e.param));
                m
            }
            Reply::ProviderRejected {
                order_id,
                param,
                message,
            } => {
                let mut m = error("provider_rejected", message, Some(order_id));
                m.insert("param".into(), json!(param));
                m
            }
            Reply::KeyReused { order_id } => error(
                "idempotency_key_reused",
                "this Idempotency-Key was first used with a different request body; use a new key for a new request",
                Some(order_id),
            ),
            Reply::OrderMismatch { order_id, message } => error("order_mismatch", message, Some(order_id)),
            Reply::InFlight { order_id } => error(
                "request_in_flight",
                "a request for this order is being processed; retry later with the same Idempotency-Key",
                Some(order_id),
            ),
            Reply::Unavailable {
                order_id,
                status,
                code,
                message,
            } => {
                let mut m = error(code, message, order_id.as_ref());
                if let Some(s) = status {
                    m.insert("status".into(), json!(s));
                }
                m
            }
            Reply::ProviderFailed { order_id, message } => error("provider_error", message, Some(order_id)),
            Reply::ProviderTimeout { order_id, message } => error("provider_timeout", message, Some(order_id)),
        };
        Value::Object(map)
    }

    /// The reply as it is stored under an idempotency key.
    pub fn to_stored(&self) -> StoredReply {
        StoredReply {
            status: self.status(),
            body: self.body(),
        }
    }
}

/// What the HTTP layer writes for a checkout.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub retry_after: Option<u64>,
    /// True when a stored response is replayed for an idempotency key.
    pub replayed: bool,
}

impl From<Reply> for Answer {
    fn from(reply: Reply) -> Self {
        Answer {
            status: reply.status(),
            body: reply.body(),
            retry_after: reply.retry_after(),
            replayed: false,
        }
    }
}

impl Answer {
    pub fn replay(stored: StoredReply) -> Self {
        Answer {
            status: stored.status,
            body: stored.body,
            retry_after: None,
            replayed: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<CheckoutRequest, InvalidInput> {
        CheckoutRequest::from_json(body.as_bytes())
    }

    #[test]
    fn a_valid_body_parses() {
        let r = parse(r#"{"order_id":"o-1","amount":2000,"currency":"usd","payment_method":"pm_card_visa","x":1}"#)
            .unwrap();
        assert_eq!(r.order_id.as_str(), "o-1");
        assert_eq!(r.amount.get(), 2000);
    }

    #[test]
    fn bad_bodies_name_the_parameter() {
        let cases = [
            (
                r#"{"amount":1,"currency":"usd","payment_method":"pm"}"#,
                Some("order_id"),
            ),
            (
                r#"{"order_id":"o","amount":"1","currency":"usd","payment_method":"pm"}"#,
                Some("amount"),
            ),
            (
                r#"{"order_id":"o","amount":-5,"currency":"usd","payment_method":"pm"}"#,
                Some("amount"),
            ),
            (
                r#"{"order_id":"o","amount":1.5,"currency":"usd","payment_method":"pm"}"#,
                Some("amount"),
            ),
            (
                r#"{"order_id":"o","amount":0,"currency":"usd","payment_method":"pm"}"#,
                Some("amount"),
            ),
            (
                r#"{"order_id":"o","amount":1,"currency":"dollars","payment_method":"pm"}"#,
                Some("currency"),
            ),
            (
                r#"{"order_id":"o","amount":1,"currency":"usd"}"#,
                Some("payment_method"),
            ),
            (
                r#"{"order_id":7,"amount":1,"currency":"usd","payment_method":"pm"}"#,
                Some("order_id"),
            ),
            (r#"[1,2]"#, None),
            (r#"{"order_id":"#, None),
        ];
        for (body, param) in cases {
            let e = parse(body).unwrap_err();
            assert_eq!(e.param.as_deref(), param, "{body}: {e}");
        }
    }

    #[test]
    fn fingerprints_ignore_field_order_and_see_every_field() {
        let req = |body: &str| parse(body).unwrap();
        let a = req(r#"{"order_id":"o1","amount":2000,"currency":"usd","payment_method":"pm_card_visa"}"#);
        let b = req(r#"{"payment_method":"pm_card_visa","currency":"USD","amount":2000,"order_id":"o1"}"#);
        let c = req(r#"{"order_id":"o1","amount":2001,"currency":"usd","payment_method":"pm_card_visa"}"#);
        let d = req(r#"{"order_id":"o1","amount":2000,"currency":"usd","payment_method":"pm_card_amex"}"#);
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_ne!(a.fingerprint(), d.fingerprint());
        assert_eq!(a.fingerprint().as_str().len(), 64);
        // Stored in PostgreSQL with the key record: the encoding must never change.
        assert_eq!(
            a.fingerprint().as_str(),
            "b648516c797a7cd4393c8feca457467b1920406fb9ff8e970fac850da61346a2"
        );
    }

    #[test]
    fn replies_have_the_contracted_shapes() {
        let order_id = OrderId::parse("o-1").unwrap();
        let paid = Reply::Paid {
            order_id: order_id.clone(),
            payment_intent: PaymentIntentId::new("pi_1"),
            amount: Amount::new(2000).unwrap(),
            currency: Currency::parse("usd").unwrap(),
        };
        assert_eq!(paid.status(), 200);
        assert_eq!(
            paid.body(),
            json!({"order_id":"o-1","status":"paid","payment_intent":"pi_1","amount":2000,"currency":"usd"})
        );
        assert!(paid.is_final());
        let declined = Reply::Declined {
            order_id: order_id.clone(),
            decline_code: "insufficient_funds".into(),
            message: "no".into(),
        };
        assert_eq!(declined.status(), 402);
        assert_eq!(declined.body()["decline_code"], "insufficient_funds");
        let busy = Reply::Unavailable {
            order_id: Some(order_id),
            status: Some(OrderStatus::Reconciling),
            code: "outcome_unknown",
            message: "later".into(),
        };
        assert_eq!((busy.status(), busy.retry_after()), (503, Some(1)));
        assert_eq!(busy.body()["status"], "reconciling");
        assert!(!busy.is_final());
        let invalid = Reply::Invalid(InvalidInput::new(Some("amount"), "bad"));
        assert_eq!(
            invalid.body(),
            json!({"error":"invalid_request","message":"bad","param":"amount"})
        );
    }
}
