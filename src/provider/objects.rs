//! The Stripe objects fauxpay keeps: payment intents, charges and refunds.
//!
//! Each struct serialises to the JSON Stripe returns for that object, with the same
//! field names, id prefixes, `object` tag, `livemode: false` and `null` for what fauxpay
//! does not model, so Stripe's SDKs deserialise them unchanged (`id` first, as Stripe
//! sends it). The structs hold state only, compactly: what is constant or derived (the
//! always-null fields, a card's details, a charge's outcome, `client_secret`) is written
//! at serialisation time instead of being stored with every object, so a million stored
//! payments stay small. Intents and charges, the objects of the hot path, also write
//! their JSON straight to bytes ([`PaymentIntent::write_json`]): the same bytes as their
//! `Serialize` impls (a test holds them to it), with the constant parts written as
//! literals and only client-given text escaped. The rules that move state live in
//! `payments`.

use std::sync::Arc;

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::cards::{Decline, TestCard};
use super::ids::{ChargeId, CorrelationId, PaymentIntentId, PaymentMethodId, RefundId, Token};
use super::money::Currency;

/// Seconds since the Unix epoch.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// An object's metadata: string keys and values, sorted by key, in one shared
/// allocation (a payment intent and its charge share it). Each entry is stored as
/// `key length (u16 LE), value length (u16 LE), key, value`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata(Option<Arc<[u8]>>);

impl Metadata {
    pub fn new() -> Self {
        Self(None)
    }

    /// From entries sorted by key, with unique keys (keys ≤ 40 and values ≤ 500
    /// characters, as validated).
    pub fn from_sorted<K: AsRef<str>, V: AsRef<str>>(entries: &[(K, V)]) -> Self {
        if entries.is_empty() {
            return Self(None);
        }
        let size: usize = entries
            .iter()
            .map(|(k, v)| 4 + k.as_ref().len() + v.as_ref().len())
            .sum();
        let mut buf = Vec::with_capacity(size);
        for (k, v) in entries {
            let (k, v) = (k.as_ref().as_bytes(), v.as_ref().as_bytes());
            buf.extend_from_slice(&(k.len() as u16).to_le_bytes());
            buf.extend_from_slice(&(v.len() as u16).to_le_bytes());
            buf.extend_from_slice(k);
            buf.extend_from_slice(v);
        }
        Self(Some(buf.into()))
    }

    pub fn iter(&self) -> MetadataIter<'_> {
        MetadataIter(self.0.as_deref().unwrap_or(&[]))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

pub struct MetadataIter<'a>(&'a [u8]);

impl<'a> Iterator for MetadataIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.len() < 4 {
            return None;
        }
        let kl = u16::from_le_bytes([self.0[0], self.0[1]]) as usize;
        let vl = u16::from_le_bytes([self.0[2], self.0[3]]) as usize;
        let (k, rest) = self.0[4..].split_at(kl);
        let (v, rest) = rest.split_at(vl);
        self.0 = rest;
        // Both were `str`s when stored.
        Some((
            std::str::from_utf8(k).unwrap_or(""),
            std::str::from_utf8(v).unwrap_or(""),
        ))
    }
}

impl Serialize for Metadata {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.iter() {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// `null`, for the many fields Stripe sends that fauxpay does not model.
struct Null;

impl Serialize for Null {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_none()
    }
}

/// `prefix` followed by a token's 24 characters, e.g. `txn_…`.
struct Prefixed<'a>(&'static str, &'a Token);

impl Serialize for Prefixed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 40];
        let n = self.0.len();
        buf[..n].copy_from_slice(self.0.as_bytes());
        buf[n..n + 24].copy_from_slice(self.1.text().as_bytes());
        s.serialize_str(std::str::from_utf8(&buf[..n + 24]).unwrap_or(""))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentStatus {
    RequiresPaymentMethod,
    RequiresConfirmation,
    RequiresAction,
    Processing,
    RequiresCapture,
    Canceled,
    Succeeded,
}

impl IntentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RequiresPaymentMethod => "requires_payment_method",
            Self::RequiresConfirmation => "requires_confirmation",
            Self::RequiresAction => "requires_action",
            Self::Processing => "processing",
            Self::RequiresCapture => "requires_capture",
            Self::Canceled => "canceled",
            Self::Succeeded => "succeeded",
        }
    }
}

/// Why a payment intent was canceled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancellationReason {
    Duplicate,
    Fraudulent,
    RequestedByCustomer,
    Abandoned,
}

impl CancellationReason {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "duplicate" => Self::Duplicate,
            "fraudulent" => Self::Fraudulent,
            "requested_by_customer" => Self::RequestedByCustomer,
            "abandoned" => Self::Abandoned,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Duplicate => "duplicate",
            Self::Fraudulent => "fraudulent",
            Self::RequestedByCustomer => "requested_by_customer",
            Self::Abandoned => "abandoned",
        }
    }
}

/// Salts of the tokens derived from an object's id.
const CLIENT_SECRET: u64 = 0x7365_6372_6574_0001;
const BALANCE_TRANSACTION: u64 = 0x7478_6e00_0000_0002;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureMethod {
    Automatic,
    AutomaticAsync,
    Manual,
}

impl CaptureMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Automatic => "automatic",
            Self::AutomaticAsync => "automatic_async",
            Self::Manual => "manual",
        }
    }
}

/// Writing JSON by hand for the hot path: literals, numbers, and strings that need no
/// escaping (ids, enum names, currency codes) go straight in; client text is escaped.
mod write {
    pub fn raw(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(s.as_bytes());
    }

    /// A string known to need no escaping.
    pub fn plain(out: &mut Vec<u8>, s: &str) {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }

    pub fn opt_plain(out: &mut Vec<u8>, s: Option<&str>) {
        match s {
            Some(s) => plain(out, s),
            None => raw(out, "null"),
        }
    }

    /// Client text, escaped.
    pub fn text(out: &mut Vec<u8>, s: &str) {
        let _ = serde_json::to_writer(&mut *out, s);
    }

    pub fn opt_text(out: &mut Vec<u8>, s: Option<&str>) {
        match s {
            Some(s) => text(out, s),
            None => raw(out, "null"),
        }
    }

    pub fn int(out: &mut Vec<u8>, n: impl itoa::Integer) {
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }

    pub fn opt_int(out: &mut Vec<u8>, n: Option<impl itoa::Integer>) {
        match n {
            Some(n) => int(out, n),
            None => raw(out, "null"),
        }
    }

    pub fn bool(out: &mut Vec<u8>, b: bool) {
        raw(out, if b { "true" } else { "false" });
    }

    pub fn metadata(out: &mut Vec<u8>, m: &super::Metadata) {
        out.push(b'{');
        for (i, (k, v)) in m.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            text(out, k);
            out.push(b':');
            text(out, v);
        }
        out.push(b'}');
    }
}

/// The card error left on a payment intent by its last failed attempt.
#[derive(Debug, Clone, Serialize)]
pub struct LastPaymentError {
    pub charge: ChargeId,
    pub code: std::borrow::Cow<'static, str>,
    pub decline_code: std::borrow::Cow<'static, str>,
    pub doc_url: String,
    pub message: std::borrow::Cow<'static, str>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

impl LastPaymentError {
    pub fn from_decline(d: &Decline, charge: ChargeId) -> Self {
        Self {
            kind: "card_error",
            code: d.code.clone(),
            decline_code: d.decline_code.clone(),
            message: d.message.clone(),
            charge,
            doc_url: format!("https://stripe.com/docs/error-codes/{}", d.code.replace('_', "-")),
        }
    }
}

/// The free-text fields of a payment intent, kept out of line: most intents have none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntentText {
    pub customer: Option<Box<str>>,
    pub description: Option<Box<str>>,
    pub receipt_email: Option<Box<str>>,
    pub statement_descriptor: Option<Box<str>>,
    pub statement_descriptor_suffix: Option<Box<str>>,
    pub transfer_group: Option<Box<str>>,
}

impl IntentText {
    /// `None` when every field is empty.
    pub fn boxed(self) -> Option<Box<Self>> {
        (self != Self::default()).then(|| Box::new(self))
    }
}

#[derive(Debug, Clone)]
pub struct PaymentIntent {
    pub id: PaymentIntentId,
    pub amount: u64,
    pub amount_capturable: u64,
    pub amount_received: u64,
    /// `automatic_payment_methods[enabled]`, when the client sent it.
    pub automatic_payment_methods: Option<bool>,
    pub canceled_at: Option<i64>,
    pub cancellation_reason: Option<CancellationReason>,
    pub capture_method: CaptureMethod,
    pub created: i64,
    pub currency: Currency,
    pub text: Option<Box<IntentText>>,
    pub last_payment_error: Option<Box<LastPaymentError>>,
    pub latest_charge: Option<ChargeId>,
    pub metadata: Metadata,
    pub payment_method: Option<PaymentMethodId>,
    pub status: IntentStatus,
    /// The card chosen for this intent (not part of Stripe's JSON).
    pub card: Option<&'static TestCard>,
    /// Which logical payment this intent belongs to (not part of Stripe's JSON).
    pub correlation_id: Option<CorrelationId>,
}

fn text_field(text: &Option<Box<IntentText>>, f: impl Fn(&IntentText) -> &Option<Box<str>>) -> Option<&str> {
    text.as_deref().and_then(|t| f(t).as_deref())
}

impl PaymentIntent {
    pub fn customer(&self) -> Option<&str> {
        text_field(&self.text, |t| &t.customer)
    }

    pub fn description(&self) -> Option<&str> {
        text_field(&self.text, |t| &t.description)
    }

    /// The random part of `client_secret` (`{id}_secret_{…}`), derived from the id.
    pub fn client_secret(&self) -> Token {
        self.id.token().derived(CLIENT_SECRET)
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Appends this intent's JSON (the bytes `serde_json::to_vec` would give).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        use write::*;
        let text_of = |f: fn(&IntentText) -> &Option<Box<str>>| text_field(&self.text, f);
        let id = self.id.as_str();
        raw(out, "{\"id\":");
        plain(out, &id);
        raw(out, ",\"object\":\"payment_intent\",\"amount\":");
        int(out, self.amount);
        raw(out, ",\"amount_capturable\":");
        int(out, self.amount_capturable);
        raw(out, ",\"amount_received\":");
        int(out, self.amount_received);
        raw(
            out,
            ",\"application\":null,\"application_fee_amount\":null,\"automatic_payment_methods\":",
        );
        match self.automatic_payment_methods {
            Some(true) => raw(out, "{\"enabled\":true}"),
            Some(false) => raw(out, "{\"enabled\":false}"),
            None => raw(out, "null"),
        }
        raw(out, ",\"canceled_at\":");
        opt_int(out, self.canceled_at);
        raw(out, ",\"cancellation_reason\":");
        opt_plain(out, self.cancellation_reason.map(CancellationReason::as_str));
        raw(out, ",\"capture_method\":");
        plain(out, self.capture_method.as_str());
        raw(out, ",\"client_secret\":\"");
        raw(out, &id);
        raw(out, "_secret_");
        raw(out, &self.client_secret().text());
        raw(out, "\",\"confirmation_method\":\"automatic\",\"created\":");
        int(out, self.created);
        raw(out, ",\"currency\":");
        plain(out, self.currency.code());
        raw(out, ",\"customer\":");
        opt_text(out, text_of(|t| &t.customer));
        raw(out, ",\"description\":");
        opt_text(out, text_of(|t| &t.description));
        raw(out, ",\"last_payment_error\":");
        let _ = serde_json::to_writer(&mut *out, &self.last_payment_error);
        raw(out, ",\"latest_charge\":");
        opt_plain(out, self.latest_charge.map(|c| c.as_str()).as_deref());
        raw(out, ",\"livemode\":false,\"metadata\":");
        metadata(out, &self.metadata);
        raw(out, ",\"next_action\":null,\"on_behalf_of\":null,\"payment_method\":");
        opt_plain(out, self.payment_method.map(|p| p.as_str()).as_deref());
        raw(
            out,
            ",\"payment_method_options\":{\"card\":{\"installments\":null,\"mandate_options\":null,\"network\":null,\"request_three_d_secure\":\"automatic\"}},\"payment_method_types\":[\"card\"],\"processing\":null,\"receipt_email\":",
        );
        opt_text(out, text_of(|t| &t.receipt_email));
        raw(
            out,
            ",\"review\":null,\"setup_future_usage\":null,\"shipping\":null,\"statement_descriptor\":",
        );
        opt_text(out, text_of(|t| &t.statement_descriptor));
        raw(out, ",\"statement_descriptor_suffix\":");
        opt_text(out, text_of(|t| &t.statement_descriptor_suffix));
        raw(out, ",\"status\":");
        plain(out, self.status.as_str());
        raw(out, ",\"transfer_data\":null,\"transfer_group\":");
        opt_text(out, text_of(|t| &t.transfer_group));
        out.push(b'}');
    }
}

#[derive(Serialize)]
struct Enabled {
    enabled: bool,
}

#[derive(Serialize)]
struct PaymentMethodOptions {
    card: CardOptions,
}

#[derive(Serialize)]
struct CardOptions {
    installments: Null,
    mandate_options: Null,
    network: Null,
    request_three_d_secure: &'static str,
}

/// `{id}_secret_{token}`.
struct ClientSecret<'a>(&'a PaymentIntentId, &'a Token);

impl Serialize for ClientSecret<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 64];
        let id = self.0.as_str();
        let mut n = 0;
        for part in [id.as_bytes(), b"_secret_", self.1.text().as_bytes()] {
            buf[n..n + part.len()].copy_from_slice(part);
            n += part.len();
        }
        s.serialize_str(std::str::from_utf8(&buf[..n]).unwrap_or(""))
    }
}

impl Serialize for PaymentIntent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = |f: fn(&IntentText) -> &Option<Box<str>>| text_field(&self.text, f);
        let mut o = s.serialize_struct("PaymentIntent", 36)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "payment_intent")?;
        o.serialize_field("amount", &self.amount)?;
        o.serialize_field("amount_capturable", &self.amount_capturable)?;
        o.serialize_field("amount_received", &self.amount_received)?;
        o.serialize_field("application", &Null)?;
        o.serialize_field("application_fee_amount", &Null)?;
        o.serialize_field(
            "automatic_payment_methods",
            &self.automatic_payment_methods.map(|enabled| Enabled { enabled }),
        )?;
        o.serialize_field("canceled_at", &self.canceled_at)?;
        o.serialize_field(
            "cancellation_reason",
            &self.cancellation_reason.map(CancellationReason::as_str),
        )?;
        o.serialize_field("capture_method", &self.capture_method)?;
        o.serialize_field("client_secret", &ClientSecret(&self.id, &self.client_secret()))?;
        o.serialize_field("confirmation_method", "automatic")?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("currency", &self.currency)?;
        o.serialize_field("customer", &text(|t| &t.customer))?;
        o.serialize_field("description", &text(|t| &t.description))?;
        o.serialize_field("last_payment_error", &self.last_payment_error)?;
        o.serialize_field("latest_charge", &self.latest_charge)?;
        o.serialize_field("livemode", &false)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("next_action", &Null)?;
        o.serialize_field("on_behalf_of", &Null)?;
        o.serialize_field("payment_method", &self.payment_method)?;
        o.serialize_field(
            "payment_method_options",
            &PaymentMethodOptions {
                card: CardOptions {
                    installments: Null,
                    mandate_options: Null,
                    network: Null,
                    request_three_d_secure: "automatic",
                },
            },
        )?;
        o.serialize_field("payment_method_types", &["card"])?;
        o.serialize_field("processing", &Null)?;
        o.serialize_field("receipt_email", &text(|t| &t.receipt_email))?;
        o.serialize_field("review", &Null)?;
        o.serialize_field("setup_future_usage", &Null)?;
        o.serialize_field("shipping", &Null)?;
        o.serialize_field("statement_descriptor", &text(|t| &t.statement_descriptor))?;
        o.serialize_field("statement_descriptor_suffix", &text(|t| &t.statement_descriptor_suffix))?;
        o.serialize_field("status", &self.status)?;
        o.serialize_field("transfer_data", &Null)?;
        o.serialize_field("transfer_group", &text(|t| &t.transfer_group))?;
        o.end()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeStatus {
    Succeeded,
    Pending,
    Failed,
}

#[derive(Debug, Clone)]
pub struct Charge {
    pub id: ChargeId,
    pub amount: u64,
    pub amount_captured: u64,
    pub amount_refunded: u64,
    /// Captured (money moved; `balance_transaction` is then derived from the id).
    pub captured: bool,
    pub created: i64,
    pub currency: Currency,
    pub description: Option<Box<str>>,
    pub metadata: Metadata,
    pub payment_intent: Option<PaymentIntentId>,
    pub payment_method: Option<PaymentMethodId>,
    pub refunded: bool,
    pub status: ChargeStatus,
    /// The card charged: `payment_method_details` is written from it.
    pub card: &'static TestCard,
    /// Why the issuer declined, if it did: `failure_code`, `failure_message`, `outcome`.
    pub decline: Option<Box<Decline>>,
    pub correlation_id: Option<CorrelationId>,
}

/// What a new charge is made of.
pub struct NewCharge<'a> {
    pub amount: u64,
    pub currency: Currency,
    pub card: &'static TestCard,
    /// Why the issuer declines, if it does (the card's own decline, or a forced one).
    pub decline: Option<Decline>,
    pub capture: bool,
    pub payment_intent: Option<PaymentIntentId>,
    pub payment_method: Option<PaymentMethodId>,
    pub description: Option<Box<str>>,
    pub metadata: &'a Metadata,
    pub correlation_id: Option<CorrelationId>,
}

impl Charge {
    /// A charge for `new`: succeeded (captured or only authorised) or failed.
    pub fn new(new: NewCharge<'_>) -> Self {
        let ok = new.decline.is_none();
        let captured = ok && new.capture;
        Self {
            id: ChargeId::generate(),
            amount: new.amount,
            amount_captured: if captured { new.amount } else { 0 },
            amount_refunded: 0,
            captured,
            created: now_unix(),
            currency: new.currency,
            description: new.description,
            metadata: new.metadata.clone(),
            payment_intent: new.payment_intent,
            payment_method: new.payment_method,
            refunded: false,
            status: if ok {
                ChargeStatus::Succeeded
            } else {
                ChargeStatus::Failed
            },
            card: new.card,
            decline: new.decline.map(Box::new),
            correlation_id: new.correlation_id,
        }
    }

    /// The random part of `balance_transaction` (`txn_…`), once money moved.
    pub fn balance_transaction(&self) -> Option<Token> {
        self.captured.then(|| self.id.token().derived(BALANCE_TRANSACTION))
    }

    /// What is left to refund.
    pub fn refundable(&self) -> u64 {
        self.amount_captured.saturating_sub(self.amount_refunded)
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Appends this charge's JSON (the bytes `serde_json::to_vec` would give).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        use write::*;
        let decline = self.decline.as_deref();
        let card = self.card;
        raw(out, "{\"id\":");
        plain(out, &self.id.as_str());
        raw(out, ",\"object\":\"charge\",\"amount\":");
        int(out, self.amount);
        raw(out, ",\"amount_captured\":");
        int(out, self.amount_captured);
        raw(out, ",\"amount_refunded\":");
        int(out, self.amount_refunded);
        raw(
            out,
            ",\"application\":null,\"application_fee\":null,\"application_fee_amount\":null,\"balance_transaction\":",
        );
        match &self.balance_transaction() {
            Some(t) => {
                raw(out, "\"txn_");
                raw(out, &t.text());
                out.push(b'"');
            }
            None => raw(out, "null"),
        }
        raw(
            out,
            ",\"billing_details\":{\"address\":{\"city\":null,\"country\":null,\"line1\":null,\"line2\":null,\"postal_code\":null,\"state\":null},\"email\":null,\"name\":null,\"phone\":null},\"calculated_statement_descriptor\":\"FAUXPAY\",\"captured\":",
        );
        bool(out, self.captured);
        raw(out, ",\"created\":");
        int(out, self.created);
        raw(out, ",\"currency\":");
        plain(out, self.currency.code());
        raw(out, ",\"customer\":null,\"description\":");
        opt_text(out, self.description.as_deref());
        raw(
            out,
            ",\"disputed\":false,\"failure_balance_transaction\":null,\"failure_code\":",
        );
        opt_text(out, decline.map(|d| &*d.code));
        raw(out, ",\"failure_message\":");
        opt_text(out, decline.map(|d| &*d.message));
        raw(out, ",\"fraud_details\":{},\"livemode\":false,\"metadata\":");
        metadata(out, &self.metadata);
        raw(out, ",\"on_behalf_of\":null,\"outcome\":");
        match decline {
            None => raw(
                out,
                "{\"network_status\":\"approved_by_network\",\"reason\":null,\"risk_level\":\"normal\",\"risk_score\":20,\"seller_message\":\"Payment complete.\",\"type\":\"authorized\"}",
            ),
            Some(d) => {
                raw(out, "{\"network_status\":\"declined_by_network\",\"reason\":");
                text(out, &d.decline_code);
                raw(
                    out,
                    ",\"risk_level\":\"normal\",\"risk_score\":20,\"seller_message\":\"The bank did not return any further details with this decline.\",\"type\":\"issuer_declined\"}",
                );
            }
        }
        raw(out, ",\"paid\":");
        bool(out, decline.is_none());
        raw(out, ",\"payment_intent\":");
        opt_plain(out, self.payment_intent.map(|p| p.as_str()).as_deref());
        raw(out, ",\"payment_method\":");
        opt_plain(out, self.payment_method.map(|p| p.as_str()).as_deref());
        raw(out, ",\"payment_method_details\":{\"card\":{\"brand\":");
        plain(out, card.brand);
        raw(
            out,
            ",\"checks\":{\"address_line1_check\":null,\"address_postal_code_check\":null,\"cvc_check\":\"pass\"},\"country\":\"US\",\"exp_month\":12,\"exp_year\":2034,\"funding\":",
        );
        plain(out, card.funding);
        raw(out, ",\"last4\":");
        plain(out, card.last4());
        raw(out, ",\"network\":");
        plain(out, card.brand);
        raw(
            out,
            ",\"three_d_secure\":null,\"wallet\":null},\"type\":\"card\"},\"receipt_email\":null,\"receipt_number\":null,\"receipt_url\":null,\"refunded\":",
        );
        bool(out, self.refunded);
        raw(
            out,
            ",\"review\":null,\"shipping\":null,\"source_transfer\":null,\"statement_descriptor\":null,\"statement_descriptor_suffix\":null,\"status\":",
        );
        plain(
            out,
            match self.status {
                ChargeStatus::Succeeded => "succeeded",
                ChargeStatus::Pending => "pending",
                ChargeStatus::Failed => "failed",
            },
        );
        raw(out, ",\"transfer_data\":null,\"transfer_group\":null}");
    }
}

#[derive(Serialize)]
struct BillingDetails {
    address: Address,
    email: Null,
    name: Null,
    phone: Null,
}

#[derive(Serialize)]
struct Address {
    city: Null,
    country: Null,
    line1: Null,
    line2: Null,
    postal_code: Null,
    state: Null,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct Outcome<'a> {
    network_status: &'static str,
    reason: Option<&'a str>,
    risk_level: &'static str,
    risk_score: u32,
    seller_message: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct PaymentMethodDetails {
    card: CardDetails,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct CardDetails {
    brand: &'static str,
    checks: Checks,
    country: &'static str,
    exp_month: u32,
    exp_year: u32,
    funding: &'static str,
    last4: &'static str,
    network: &'static str,
    three_d_secure: Null,
    wallet: Null,
}

#[derive(Serialize)]
struct Checks {
    address_line1_check: Null,
    address_postal_code_check: Null,
    cvc_check: &'static str,
}

impl Serialize for Charge {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let decline = self.decline.as_deref();
        let card = self.card;
        let mut o = s.serialize_struct("Charge", 41)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "charge")?;
        o.serialize_field("amount", &self.amount)?;
        o.serialize_field("amount_captured", &self.amount_captured)?;
        o.serialize_field("amount_refunded", &self.amount_refunded)?;
        o.serialize_field("application", &Null)?;
        o.serialize_field("application_fee", &Null)?;
        o.serialize_field("application_fee_amount", &Null)?;
        o.serialize_field(
            "balance_transaction",
            &self.balance_transaction().as_ref().map(|t| Prefixed("txn_", t)),
        )?;
        o.serialize_field(
            "billing_details",
            &BillingDetails {
                address: Address {
                    city: Null,
                    country: Null,
                    line1: Null,
                    line2: Null,
                    postal_code: Null,
                    state: Null,
                },
                email: Null,
                name: Null,
                phone: Null,
            },
        )?;
        o.serialize_field("calculated_statement_descriptor", "FAUXPAY")?;
        o.serialize_field("captured", &self.captured)?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("currency", &self.currency)?;
        o.serialize_field("customer", &Null)?;
        o.serialize_field("description", &self.description)?;
        o.serialize_field("disputed", &false)?;
        o.serialize_field("failure_balance_transaction", &Null)?;
        o.serialize_field("failure_code", &decline.map(|d| &*d.code))?;
        o.serialize_field("failure_message", &decline.map(|d| &*d.message))?;
        o.serialize_field("fraud_details", &Empty {})?;
        o.serialize_field("livemode", &false)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("on_behalf_of", &Null)?;
        o.serialize_field(
            "outcome",
            &match decline {
                None => Outcome {
                    network_status: "approved_by_network",
                    reason: None,
                    risk_level: "normal",
                    risk_score: 20,
                    seller_message: "Payment complete.",
                    kind: "authorized",
                },
                Some(d) => Outcome {
                    network_status: "declined_by_network",
                    reason: Some(&d.decline_code),
                    risk_level: "normal",
                    risk_score: 20,
                    seller_message: "The bank did not return any further details with this decline.",
                    kind: "issuer_declined",
                },
            },
        )?;
        o.serialize_field("paid", &decline.is_none())?;
        o.serialize_field("payment_intent", &self.payment_intent)?;
        o.serialize_field("payment_method", &self.payment_method)?;
        o.serialize_field(
            "payment_method_details",
            &PaymentMethodDetails {
                card: CardDetails {
                    brand: card.brand,
                    checks: Checks {
                        address_line1_check: Null,
                        address_postal_code_check: Null,
                        cvc_check: "pass",
                    },
                    country: "US",
                    exp_month: 12,
                    exp_year: 2034,
                    funding: card.funding,
                    last4: card.last4(),
                    network: card.brand,
                    three_d_secure: Null,
                    wallet: Null,
                },
                kind: "card",
            },
        )?;
        o.serialize_field("receipt_email", &Null)?;
        o.serialize_field("receipt_number", &Null)?;
        o.serialize_field("receipt_url", &Null)?;
        o.serialize_field("refunded", &self.refunded)?;
        o.serialize_field("review", &Null)?;
        o.serialize_field("shipping", &Null)?;
        o.serialize_field("source_transfer", &Null)?;
        o.serialize_field("statement_descriptor", &Null)?;
        o.serialize_field("statement_descriptor_suffix", &Null)?;
        o.serialize_field("status", &self.status)?;
        o.serialize_field("transfer_data", &Null)?;
        o.serialize_field("transfer_group", &Null)?;
        o.end()
    }
}

#[derive(Debug, Clone)]
pub struct Refund {
    pub id: RefundId,
    pub amount: u64,
    /// The random part of `balance_transaction` (`txn_…`).
    pub balance_transaction: Token,
    pub charge: ChargeId,
    pub created: i64,
    pub currency: Currency,
    pub metadata: Metadata,
    pub payment_intent: Option<PaymentIntentId>,
    pub reason: Option<&'static str>,
}

impl Refund {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for Refund {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Refund", 14)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "refund")?;
        o.serialize_field("amount", &self.amount)?;
        o.serialize_field("balance_transaction", &Prefixed("txn_", &self.balance_transaction))?;
        o.serialize_field("charge", &self.charge)?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("currency", &self.currency)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("payment_intent", &self.payment_intent)?;
        o.serialize_field("reason", &self.reason)?;
        o.serialize_field("receipt_number", &Null)?;
        o.serialize_field("source_transfer_reversal", &Null)?;
        o.serialize_field("status", "succeeded")?;
        o.serialize_field("transfer_reversal", &Null)?;
        o.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_keeps_sorted_entries_in_one_allocation() {
        let m = Metadata::from_sorted(&[("a", "1"), ("order_id", "o-42")]);
        assert_eq!(m.get("order_id"), Some("o-42"));
        assert_eq!(m.get("b"), None);
        assert_eq!(m.len(), 2);
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"a":"1","order_id":"o-42"}"#);
        assert!(Metadata::from_sorted::<&str, &str>(&[]).is_empty());
        assert_eq!(serde_json::to_string(&Metadata::new()).unwrap(), "{}");
    }

    #[test]
    fn objects_serialise_stripe_fields_with_id_first() {
        let card = TestCard::resolve("pm_card_visa").unwrap();
        let charge = Charge::new(NewCharge {
            amount: 2000,
            currency: Currency::parse("usd").unwrap(),
            card,
            decline: None,
            capture: true,
            payment_intent: None,
            payment_method: Some(PaymentMethodId::generate()),
            description: None,
            metadata: &Metadata::from_sorted(&[("order_id", "o-1")]),
            correlation_id: None,
        });
        let text = serde_json::to_string(&charge).unwrap();
        assert!(text.starts_with(&format!(r#"{{"id":"{}","object":"charge""#, charge.id)));
        let v = charge.to_json();
        assert_eq!(v["payment_method_details"]["card"]["last4"], "4242");
        assert_eq!(v["outcome"]["type"], "authorized");
        assert_eq!(v["paid"], true);
        assert!(v["balance_transaction"].as_str().unwrap().starts_with("txn_"));
        assert_eq!(v["billing_details"]["address"]["city"], Value::Null);
        assert_eq!(v.as_object().unwrap().len(), 41);
    }

    #[test]
    fn written_json_is_exactly_the_serialised_json() {
        let visa = TestCard::resolve("pm_card_visa").unwrap();
        let declined = TestCard::resolve("pm_card_chargeDeclinedInsufficientFunds").unwrap();
        let metadata = Metadata::from_sorted(&[("note", "a \"quoted\" \\ line\n"), ("order_id", "o-1")]);
        for (card, capture, description) in [
            (visa, true, None),
            (visa, false, Some("tea & \"cake\" \u{1F600}")),
            (declined, true, None),
        ] {
            let mut charge = Charge::new(NewCharge {
                amount: 2000,
                currency: Currency::parse("eur").unwrap(),
                card,
                decline: card.decline.clone(),
                capture,
                payment_intent: Some(PaymentIntentId::generate()),
                payment_method: Some(PaymentMethodId::generate()),
                description: description.map(Box::from),
                metadata: &metadata,
                correlation_id: None,
            });
            let mut out = Vec::new();
            charge.write_json(&mut out);
            assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&charge).unwrap());
            charge.refunded = true;
            charge.payment_intent = None;
            let mut out = Vec::new();
            charge.write_json(&mut out);
            assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&charge).unwrap());
        }
        let mut pi = PaymentIntent {
            id: PaymentIntentId::generate(),
            amount: 5000,
            amount_capturable: 5000,
            amount_received: 0,
            automatic_payment_methods: None,
            canceled_at: None,
            cancellation_reason: None,
            capture_method: CaptureMethod::Manual,
            created: now_unix(),
            currency: Currency::parse("usd").unwrap(),
            text: None,
            last_payment_error: None,
            latest_charge: None,
            metadata: Metadata::new(),
            payment_method: None,
            status: IntentStatus::RequiresCapture,
            card: Some(visa),
            correlation_id: None,
        };
        let check = |pi: &PaymentIntent| {
            let mut out = Vec::new();
            pi.write_json(&mut out);
            assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(pi).unwrap());
        };
        check(&pi);
        pi.automatic_payment_methods = Some(false);
        pi.canceled_at = Some(1_700_000_000);
        pi.cancellation_reason = Some(CancellationReason::Abandoned);
        pi.latest_charge = Some(ChargeId::generate());
        pi.payment_method = Some(PaymentMethodId::generate());
        pi.metadata = metadata.clone();
        pi.text = IntentText {
            customer: Some("cus_1".into()),
            description: Some("line\tbreak \"q\"".into()),
            receipt_email: Some("a@b.c".into()),
            statement_descriptor: Some("ACME".into()),
            statement_descriptor_suffix: Some("X".into()),
            transfer_group: Some("g".into()),
        }
        .boxed();
        pi.last_payment_error = Some(Box::new(LastPaymentError::from_decline(
            declined.decline.as_ref().unwrap(),
            ChargeId::generate(),
        )));
        pi.status = IntentStatus::Canceled;
        check(&pi);
        pi.automatic_payment_methods = Some(true);
        check(&pi);
    }
}
