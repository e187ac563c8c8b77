//! A Checkout Session: its line items (each a price and a quantity, their amounts fixed
//! when the session is made), where the customer goes after paying or cancelling, what
//! the payment intent it makes will carry (`payment_intent_data`), its state (`open`,
//! `complete` or `expired`; `unpaid` or `paid`), and its Stripe JSON
//! (`checkout.session`, and `item` for a line item).

use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

use crate::resources::prices::object::Price;
use crate::state::table::Keyed;
use crate::stripe::ids::{CheckoutSessionId, CorrelationId, CustomerId, LineItemId, PaymentIntentId, SetupIntentId};
use crate::stripe::json::{Metadata, Null};
use crate::stripe::money::Currency;

/// The path of the hosted page, before the session's id.
pub const PAGE_PATH: &str = "/__fauxpay/checkout/";

/// Stripe's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Open,
    Complete,
    Expired,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Complete => "complete",
            Self::Expired => "expired",
        }
    }
}

/// Stripe's `mode` (fauxpay models `payment` and `setup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionMode {
    Payment,
    Setup,
}

impl SessionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Payment => "payment",
            Self::Setup => "setup",
        }
    }
}

/// One line item: a price (snapshot at creation, as Stripe keeps it) and a quantity.
#[derive(Debug, Clone)]
pub struct LineItem {
    pub id: LineItemId,
    pub price: Arc<Price>,
    /// The product's name when the session was made (Stripe's `description`).
    pub description: Box<str>,
    pub quantity: u64,
}

impl LineItem {
    pub fn amount(&self) -> u64 {
        self.price.unit_amount.saturating_mul(self.quantity)
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for LineItem {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let amount = self.amount();
        let mut o = s.serialize_struct("Item", 10)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "item")?;
        o.serialize_field("amount_discount", &0)?;
        o.serialize_field("amount_subtotal", &amount)?;
        o.serialize_field("amount_tax", &0)?;
        o.serialize_field("amount_total", &amount)?;
        o.serialize_field("currency", &self.price.currency)?;
        o.serialize_field("description", &self.description)?;
        o.serialize_field("price", &*self.price)?;
        o.serialize_field("quantity", &self.quantity)?;
        o.end()
    }
}

/// What the session's payment intent will carry (`payment_intent_data`).
#[derive(Debug, Clone, Default)]
pub struct IntentData {
    pub description: Option<Box<str>>,
    pub metadata: Metadata,
    /// `manual` to authorise only.
    pub manual_capture: bool,
    /// `on_session` or `off_session`: save the card to the customer.
    pub setup_future_usage: Option<&'static str>,
}

#[derive(Debug, Clone)]
pub struct CheckoutSession {
    pub id: CheckoutSessionId,
    pub created: i64,
    pub expires_at: i64,
    pub mode: SessionMode,
    pub status: SessionStatus,
    pub currency: Option<Currency>,
    pub line_items: Box<[LineItem]>,
    pub success_url: Option<Box<str>>,
    pub cancel_url: Option<Box<str>>,
    pub client_reference_id: Option<Box<str>>,
    pub customer: Option<CustomerId>,
    pub customer_email: Option<Box<str>>,
    pub customer_creation: Option<&'static str>,
    pub metadata: Metadata,
    pub payment_method_types: Box<[Box<str>]>,
    pub intent_data: IntentData,
    /// Set when the customer first tries to pay (null before, as at Stripe).
    pub payment_intent: Option<PaymentIntentId>,
    pub setup_intent: Option<SetupIntentId>,
    /// The email the customer paid with (`customer_details.email`).
    pub paid_email: Option<Box<str>>,
    /// Which logical payment the session's charge belongs to (`--correlate`).
    pub correlation_id: Option<CorrelationId>,
    /// `http://{Host}` the session was created through: where its `url` points.
    pub origin: Option<Arc<str>>,
    /// How far the provider's clock had been moved forward (`POST /__fauxpay/clock`,
    /// seconds) when the session was made: `expires_at` is on the wall clock, and expiry
    /// compares the provider's time with it moved as far.
    pub clock_offset: u64,
}

impl CheckoutSession {
    /// Whether the session is due to expire at the provider's time `now` (the wall clock
    /// plus how far the provider's clock has been moved forward).
    pub fn due(&self, now: i64) -> bool {
        self.expires_at.saturating_add(self.clock_offset as i64) <= now
    }

    /// The sum of the line items.
    pub fn amount_total(&self) -> u64 {
        self.line_items
            .iter()
            .map(LineItem::amount)
            .fold(0, u64::saturating_add)
    }

    /// The hosted page's URL (while the session can still be paid, as at Stripe).
    pub fn url(&self) -> Option<String> {
        (self.status == SessionStatus::Open)
            .then(|| format!("{}{PAGE_PATH}{}", self.origin.as_deref().unwrap_or(""), self.id))
    }

    /// `success_url` with `{CHECKOUT_SESSION_ID}` filled in.
    pub fn success_url(&self) -> Option<String> {
        self.success_url
            .as_deref()
            .map(|u| u.replace("{CHECKOUT_SESSION_ID}", &self.id.as_str()))
    }

    pub fn payment_status(&self) -> &'static str {
        match (self.mode, self.status) {
            (SessionMode::Setup, _) => "no_payment_required",
            (_, SessionStatus::Complete) => "paid",
            _ => "unpaid",
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for CheckoutSession {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let payment = self.mode == SessionMode::Payment;
        let total = payment.then(|| self.amount_total());
        let details = (self.status == SessionStatus::Complete).then(|| {
            json!({
                "address": null,
                "email": self.paid_email.as_deref().or(self.customer_email.as_deref()),
                "name": null,
                "phone": null,
                "tax_exempt": "none",
                "tax_ids": [],
            })
        });
        let mut o = s.serialize_struct("CheckoutSession", 48)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "checkout.session")?;
        o.serialize_field("after_expiration", &Null)?;
        o.serialize_field("allow_promotion_codes", &Null)?;
        o.serialize_field("amount_subtotal", &total)?;
        o.serialize_field("amount_total", &total)?;
        o.serialize_field("automatic_tax", &json!({"enabled": false, "status": null}))?;
        o.serialize_field("billing_address_collection", &Null)?;
        o.serialize_field("cancel_url", &self.cancel_url)?;
        o.serialize_field("client_reference_id", &self.client_reference_id)?;
        o.serialize_field("consent", &Null)?;
        o.serialize_field("consent_collection", &Null)?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("currency", &self.currency)?;
        o.serialize_field("currency_conversion", &Null)?;
        o.serialize_field("custom_fields", &[] as &[Value])?;
        o.serialize_field("custom_text", &json!({"shipping_address": null, "submit": null}))?;
        o.serialize_field("customer", &self.customer)?;
        o.serialize_field("customer_creation", &self.customer_creation)?;
        o.serialize_field("customer_details", &details)?;
        o.serialize_field("customer_email", &self.customer_email)?;
        o.serialize_field("expires_at", &self.expires_at)?;
        o.serialize_field("invoice", &Null)?;
        o.serialize_field("invoice_creation", &Null)?;
        o.serialize_field("livemode", &false)?;
        o.serialize_field("locale", &Null)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("mode", &self.mode)?;
        o.serialize_field("payment_intent", &self.payment_intent)?;
        o.serialize_field("payment_link", &Null)?;
        o.serialize_field("payment_method_collection", &Null)?;
        o.serialize_field("payment_method_options", &json!({}))?;
        o.serialize_field("payment_method_types", &self.payment_method_types)?;
        o.serialize_field("payment_status", self.payment_status())?;
        o.serialize_field("phone_number_collection", &json!({"enabled": false}))?;
        o.serialize_field("recovered_from", &Null)?;
        o.serialize_field("setup_intent", &self.setup_intent)?;
        o.serialize_field("shipping_address_collection", &Null)?;
        o.serialize_field("shipping_cost", &Null)?;
        o.serialize_field("shipping_details", &Null)?;
        o.serialize_field("shipping_options", &[] as &[Value])?;
        o.serialize_field("status", &self.status)?;
        o.serialize_field("submit_type", &Null)?;
        o.serialize_field("subscription", &Null)?;
        o.serialize_field("success_url", &self.success_url)?;
        o.serialize_field("tax_id_collection", &json!({"enabled": false}))?;
        o.serialize_field(
            "total_details",
            &payment.then(|| json!({"amount_discount": 0, "amount_shipping": 0, "amount_tax": 0})),
        )?;
        o.serialize_field("url", &self.url())?;
        o.end()
    }
}

impl Keyed for Arc<CheckoutSession> {
    type Key = CheckoutSessionId;
    fn key(&self) -> CheckoutSessionId {
        self.id
    }
}
