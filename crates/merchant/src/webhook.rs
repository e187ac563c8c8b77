//! Stripe webhooks as a merchant receives them: the `Stripe-Signature` check, and the few
//! fields of an event a merchant acts on.
//!
//! Stripe signs each delivery with the endpoint's secret (`whsec_…`): the header reads
//! `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>` (more than one `v1`
//! while a secret is rolled). [`verify`] accepts a delivery only when one `v1` matches —
//! compared in constant time — and the timestamp is at most the tolerance (300 s by
//! default, as Stripe's libraries) old, exactly what `stripe.Webhook.construct_event`
//! does. [`Event::from_json`] reads the event id, its type and, for a payment intent or a
//! Checkout Session, its id, `metadata.order_id` and (a session's) intent and payment
//! status. Plain values only: this module uses nothing of the merchant but `order`'s and
//! `checkout_flow`'s.

use std::fmt;
use std::time::Duration;

use hmac::Mac;
use serde::Deserialize;

use super::checkout_flow::CHECKOUT_SESSION_COMPLETED;
use super::order::{BadValue, OrderId, PaymentIntentId};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// How old a signature's timestamp may be (Stripe's libraries' default).
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// The id of an expandable field: the id as it is, or the expanded object's `id`.
pub fn expandable_id(v: &serde_json::Value) -> Option<&str> {
    v.as_str().or_else(|| v["id"].as_str())
}

/// An endpoint's signing secret, `whsec_…`. Never printed: `Debug` shows only the prefix.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    pub const MAX_LEN: usize = 255;

    pub fn parse(s: &str) -> Result<Self, BadValue> {
        let ok = s.len() > "whsec_".len()
            && s.len() <= Self::MAX_LEN
            && s.starts_with("whsec_")
            && s.bytes().all(|b| b.is_ascii_graphic());
        if !ok {
            return Err(BadValue(format!(
                "a webhook signing secret is `whsec_` followed by 1 to {} printable ASCII characters",
                Self::MAX_LEN - "whsec_".len()
            )));
        }
        Ok(Self(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The `Stripe-Signature` header value for `body` at `timestamp` (what a provider
    /// sends; the merchant's own tests and tools use it).
    pub fn sign(&self, timestamp: i64, body: &[u8]) -> String {
        let tag = self.mac(timestamp, body).finalize().into_bytes();
        let mut header = format!("t={timestamp},v1=");
        for b in tag.iter() {
            header.push_str(&format!("{b:02x}"));
        }
        header
    }

    fn mac(&self, timestamp: i64, body: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(self.0.as_bytes()).expect("HMAC takes keys of any length");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(whsec_…)")
    }
}

/// Why a delivery's signature was refused (the merchant answers 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("no Stripe-Signature header")]
    Missing,
    #[error("unable to extract a timestamp and v1 signatures from the Stripe-Signature header")]
    Malformed,
    #[error("no v1 signature matches the expected signature for this payload")]
    Mismatch,
    #[error("the signature's timestamp is {age_secs} s old, outside the tolerance of {tolerance_secs} s")]
    Stale { age_secs: i64, tolerance_secs: u64 },
}

/// The header's parts: the timestamp and every `v1` signature, hex-decoded (a `v1` that is
/// not 64 hex digits can match nothing and is dropped).
fn parse_header(header: &str) -> Result<(i64, Vec<[u8; 32]>), SignatureError> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        let Some((k, v)) = part.trim().split_once('=') else {
            continue;
        };
        match k {
            "t" => timestamp = v.parse::<i64>().ok(),
            "v1" => signatures.extend(hex32(v)),
            _ => {}
        }
        if signatures.len() > 8 {
            // More than a secret roll ever produces: refuse rather than do unbounded work.
            return Err(SignatureError::Malformed);
        }
    }
    match timestamp {
        Some(t) if !signatures.is_empty() => Ok((t, signatures)),
        _ => Err(SignatureError::Malformed),
    }
}

fn hex32(s: &str) -> Option<[u8; 32]> {
    let bytes = s.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let nibble = |c: u8| -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    };
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

/// Checks a delivery as Stripe's libraries do: one `v1` matching the HMAC of
/// `"<t>.<body>"` (constant-time), then a timestamp no older than `tolerance` at
/// `now_secs`. Returns the timestamp.
pub fn verify(
    secret: &WebhookSecret,
    header: Option<&str>,
    body: &[u8],
    now_secs: i64,
    tolerance: Duration,
) -> Result<i64, SignatureError> {
    let (timestamp, signatures) = parse_header(header.ok_or(SignatureError::Missing)?)?;
    let mac = secret.mac(timestamp, body);
    // `verify_slice` compares in constant time; every candidate is checked.
    let matched = signatures
        .iter()
        .fold(false, |found, sig| mac.clone().verify_slice(sig).is_ok() | found);
    if !matched {
        return Err(SignatureError::Mismatch);
    }
    let age_secs = now_secs.saturating_sub(timestamp);
    if age_secs > tolerance.as_secs() as i64 {
        return Err(SignatureError::Stale {
            age_secs,
            tolerance_secs: tolerance.as_secs(),
        });
    }
    Ok(timestamp)
}

/// An event id (`evt_…`): 1 to 255 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct EventId(String);

impl EventId {
    pub const MAX_LEN: usize = 255;

    pub fn parse(s: &str) -> Result<Self, BadValue> {
        if s.is_empty() || s.len() > Self::MAX_LEN || !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(BadValue(format!(
                "an event id is 1 to {} printable ASCII characters",
                Self::MAX_LEN
            )));
        }
        Ok(Self(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a merchant reads of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub id: EventId,
    /// `payment_intent.succeeded`, `charge.refunded`, …
    pub kind: String,
    /// `data.object.id`.
    pub object_id: Option<String>,
    /// `data.object.metadata.order_id`, when it is a valid order id.
    pub order_id: Option<OrderId>,
    /// A Checkout Session's `payment_intent` (its id).
    pub payment_intent: Option<String>,
    /// A Checkout Session's `payment_status` (`paid`, `unpaid`, …).
    pub payment_status: Option<String>,
}

/// A processed event, as the idempotent merchant stores it (its id under a unique
/// constraint) until `expires_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub id: EventId,
    pub kind: String,
    pub order_id: OrderId,
    pub received_ms: i64,
    pub expires_ms: i64,
}

/// What a merchant did with a `payment_intent.succeeded` delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fulfillment {
    /// This delivery fulfilled the order; `fulfillments` is its count now.
    Fulfilled { fulfillments: u32 },
    /// The event id was processed before (a redelivery): nothing done.
    DuplicateEvent { fulfillments: u32 },
    /// The order was already fulfilled (by another event): nothing done.
    AlreadyFulfilled { fulfillments: u32 },
    /// The merchant has no such order: ignored.
    UnknownOrder,
}

impl Fulfillment {
    /// The word the receiver answers with (`"result"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Fulfillment::Fulfilled { .. } => "fulfilled",
            Fulfillment::DuplicateEvent { .. } => "duplicate_event",
            Fulfillment::AlreadyFulfilled { .. } => "already_fulfilled",
            Fulfillment::UnknownOrder => "unknown_order",
        }
    }

    /// The order's fulfilment count after the delivery, if the order is known.
    pub fn fulfillments(self) -> Option<u32> {
        match self {
            Fulfillment::Fulfilled { fulfillments }
            | Fulfillment::DuplicateEvent { fulfillments }
            | Fulfillment::AlreadyFulfilled { fulfillments } => Some(fulfillments),
            Fulfillment::UnknownOrder => None,
        }
    }
}

/// The word that one of the merchant's orders is paid: a `payment_intent.succeeded` or
/// `checkout.session.completed` event, or the customer back on the success page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentSucceeded {
    /// The event's id (the success page's: `success_page:` and the session's id).
    pub event_id: EventId,
    /// The event's type, or `success_page`.
    pub kind: String,
    pub order_id: OrderId,
    pub payment_intent: PaymentIntentId,
}

impl Event {
    /// Reads an event body (Stripe's `event` object); unknown fields are ignored.
    pub fn from_json(body: &[u8]) -> Result<Self, BadValue> {
        #[derive(Deserialize)]
        struct Raw<'a> {
            #[serde(borrow)]
            id: std::borrow::Cow<'a, str>,
            #[serde(rename = "type", borrow)]
            kind: std::borrow::Cow<'a, str>,
            #[serde(default)]
            data: Option<Data>,
        }
        #[derive(Deserialize)]
        struct Data {
            #[serde(default)]
            object: Option<Object>,
        }
        #[derive(Deserialize)]
        struct Object {
            #[serde(default)]
            id: Option<String>,
            #[serde(default)]
            metadata: Option<std::collections::HashMap<String, serde_json::Value>>,
            /// A Checkout Session's intent: its id, or the object when expanded.
            #[serde(default)]
            payment_intent: Option<serde_json::Value>,
            #[serde(default)]
            payment_status: Option<String>,
        }
        let raw: Raw = serde_json::from_slice(body)
            .map_err(|e| BadValue(format!("the body must be a Stripe event (with `id` and `type`): {e}")))?;
        let object = raw.data.and_then(|d| d.object);
        let order_id = object
            .as_ref()
            .and_then(|o| o.metadata.as_ref())
            .and_then(|m| m.get("order_id"))
            .and_then(|v| v.as_str())
            .and_then(|s| OrderId::parse(s).ok());
        let payment_intent = object
            .as_ref()
            .and_then(|o| o.payment_intent.as_ref())
            .and_then(expandable_id)
            .map(str::to_string);
        let payment_status = object.as_ref().and_then(|o| o.payment_status.clone());
        Ok(Self {
            id: EventId::parse(&raw.id)?,
            kind: raw.kind.into_owned(),
            object_id: object.and_then(|o| o.id),
            order_id,
            payment_intent,
            payment_status,
        })
    }

    /// The order this event says is paid, when it is an event of type `on` that says so:
    /// a `payment_intent.succeeded`, or a `checkout.session.completed` whose
    /// `payment_status` is `paid` (a delayed payment method completes it unpaid).
    pub fn paid(&self, on: &str) -> Option<PaymentSucceeded> {
        if self.kind != on {
            return None;
        }
        let payment_intent = match on {
            CHECKOUT_SESSION_COMPLETED => {
                if self.payment_status.as_deref() != Some("paid") {
                    return None;
                }
                self.payment_intent.clone()?
            }
            _ => self.object_id.clone()?,
        };
        Some(PaymentSucceeded {
            event_id: self.id.clone(),
            kind: self.kind.clone(),
            order_id: self.order_id.clone()?,
            payment_intent: PaymentIntentId::new(payment_intent),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkout_flow::PAYMENT_INTENT_SUCCEEDED;

    fn secret() -> WebhookSecret {
        WebhookSecret::parse("whsec_test_secret").unwrap()
    }

    #[test]
    fn secrets_are_validated_and_never_printed() {
        assert!(WebhookSecret::parse("whsec_").is_err());
        assert!(WebhookSecret::parse("sk_test_x").is_err());
        assert!(WebhookSecret::parse("whsec_a b").is_err());
        assert_eq!(format!("{:?}", secret()), "WebhookSecret(whsec_…)");
    }

    #[test]
    fn a_known_signature_verifies() {
        // HMAC-SHA256("whsec_test_secret", "1700000000.{}"), computed independently
        // (python3 -c 'import hmac,hashlib;print(hmac.new(b"whsec_test_secret",b"1700000000.{}",hashlib.sha256).hexdigest())').
        let expected = "t=1700000000,v1=ceb8863f7208fa249a6cd8f951e993c7563412aca65866f6272283debe143ab3";
        assert_eq!(secret().sign(1_700_000_000, b"{}"), expected);
        assert_eq!(
            verify(&secret(), Some(expected), b"{}", 1_700_000_000, DEFAULT_TOLERANCE),
            Ok(1_700_000_000)
        );
        let upper = expected.to_ascii_uppercase().replace("T=", "t=").replace("V1=", "v1=");
        assert_eq!(
            verify(&secret(), Some(&upper), b"{}", 1_700_000_000, DEFAULT_TOLERANCE),
            Ok(1_700_000_000)
        );
    }

    #[test]
    fn forged_stale_and_malformed_signatures_are_refused() {
        let s = secret();
        let body = br#"{"id":"evt_1"}"#;
        let now = 1_700_000_000;
        let good = s.sign(now, body);
        let v = |h: Option<&str>, b: &[u8], now: i64| verify(&s, h, b, now, DEFAULT_TOLERANCE);
        assert_eq!(v(Some(&good), body, now + 300), Ok(now));
        assert_eq!(v(None, body, now), Err(SignatureError::Missing));
        assert_eq!(v(Some("garbage"), body, now), Err(SignatureError::Malformed));
        assert_eq!(v(Some("t=1,v0=ab"), body, now), Err(SignatureError::Malformed));
        assert_eq!(v(Some(&good), br#"{"id":"evt_2"}"#, now), Err(SignatureError::Mismatch));
        let other = WebhookSecret::parse("whsec_other").unwrap().sign(now, body);
        assert_eq!(v(Some(&other), body, now), Err(SignatureError::Mismatch));
        assert_eq!(
            v(Some(&good), body, now + 301),
            Err(SignatureError::Stale {
                age_secs: 301,
                tolerance_secs: 300
            })
        );
        // A rolled secret: the header carries two v1, one of them good.
        let (_, sig) = good.split_once(",v1=").unwrap();
        let rolled = format!("t={now},v1={},v1={sig}", "0".repeat(64));
        assert_eq!(v(Some(&rolled), body, now), Ok(now));
        // The timestamp is signed: moving it breaks the signature.
        let moved = format!("t={},v1={sig}", now + 1);
        assert_eq!(v(Some(&moved), body, now), Err(SignatureError::Mismatch));
        let many = format!("t={now}") + &format!(",v1={}", "1".repeat(64)).repeat(9);
        assert_eq!(v(Some(&many), body, now), Err(SignatureError::Malformed));
    }

    #[test]
    fn a_completed_session_says_its_order_is_paid_only_when_it_is() {
        let session = |status: &str| {
            Event::from_json(
                format!(
                    r#"{{"id":"evt_9","type":"checkout.session.completed","data":{{"object":{{"id":"cs_1","object":"checkout.session","payment_status":"{status}","payment_intent":"pi_7","metadata":{{"order_id":"o-2"}}}}}}}}"#
                )
                .as_bytes(),
            )
            .unwrap()
        };
        let on = crate::checkout_flow::CHECKOUT_SESSION_COMPLETED;
        let paid = session("paid").paid(on).unwrap();
        assert_eq!(paid.order_id.as_str(), "o-2");
        assert_eq!(paid.payment_intent.as_str(), "pi_7");
        assert_eq!(paid.kind, on);
        assert_eq!(session("unpaid").paid(on), None);
        // Not what this flow fulfils on.
        assert_eq!(session("paid").paid(PAYMENT_INTENT_SUCCEEDED), None);
    }

    #[test]
    fn events_are_read_leniently() {
        let e = Event::from_json(
            br#"{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","metadata":{"order_id":"o-1","x":"y"}}}}"#,
        )
        .unwrap();
        let p = e.paid(PAYMENT_INTENT_SUCCEEDED).unwrap();
        assert_eq!(
            (p.event_id.as_str(), p.order_id.as_str(), p.payment_intent.as_str()),
            ("evt_1", "o-1", "pi_1")
        );
        let charge =
            Event::from_json(br#"{"id":"evt_2","type":"charge.succeeded","data":{"object":{"id":"ch_1"}}}"#).unwrap();
        assert_eq!(charge.paid(PAYMENT_INTENT_SUCCEEDED), None);
        let no_order = Event::from_json(
            br#"{"id":"evt_3","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3","metadata":{}}}}"#,
        )
        .unwrap();
        assert_eq!(no_order.paid(PAYMENT_INTENT_SUCCEEDED), None);
        assert!(Event::from_json(br#"{"type":"x"}"#).is_err());
        assert!(Event::from_json(b"not json").is_err());
    }
}
