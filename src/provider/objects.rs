//! The Stripe objects fauxpay keeps: payment intents, charges and refunds.
//!
//! Each struct serialises to the JSON Stripe returns for that object, with the same
//! field names, id prefixes, `object` tag, `livemode: false` and `null` for what fauxpay
//! does not model, so Stripe's SDKs deserialise them unchanged. The structs hold state
//! only; the rules that move it live in `payments`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use super::cards::{Decline, TestCard};
use super::ids::{ChargeId, CorrelationId, PaymentIntentId, PaymentMethodId, RefundId};

pub type Metadata = BTreeMap<String, String>;

/// Seconds since the Unix epoch.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureMethod {
    Automatic,
    AutomaticAsync,
    Manual,
}

/// The card error left on a payment intent by its last failed attempt.
#[derive(Debug, Clone, Serialize)]
pub struct LastPaymentError {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub code: Cow<'static, str>,
    pub decline_code: Cow<'static, str>,
    pub message: Cow<'static, str>,
    pub charge: ChargeId,
    pub doc_url: String,
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

#[derive(Debug, Clone, Serialize)]
pub struct PaymentIntent {
    pub id: PaymentIntentId,
    pub object: &'static str,
    pub amount: u64,
    pub amount_capturable: u64,
    pub amount_received: u64,
    pub application: Option<String>,
    pub application_fee_amount: Option<u64>,
    pub automatic_payment_methods: Option<Value>,
    pub canceled_at: Option<i64>,
    pub cancellation_reason: Option<String>,
    pub capture_method: CaptureMethod,
    pub client_secret: String,
    pub confirmation_method: &'static str,
    pub created: i64,
    pub currency: &'static str,
    pub customer: Option<String>,
    pub description: Option<String>,
    pub last_payment_error: Option<LastPaymentError>,
    pub latest_charge: Option<ChargeId>,
    pub livemode: bool,
    pub metadata: Metadata,
    pub next_action: Option<Value>,
    pub on_behalf_of: Option<String>,
    pub payment_method: Option<PaymentMethodId>,
    pub payment_method_options: Value,
    pub payment_method_types: Vec<&'static str>,
    pub processing: Option<Value>,
    pub receipt_email: Option<String>,
    pub review: Option<String>,
    pub setup_future_usage: Option<String>,
    pub shipping: Option<Value>,
    pub statement_descriptor: Option<String>,
    pub statement_descriptor_suffix: Option<String>,
    pub status: IntentStatus,
    pub transfer_data: Option<Value>,
    pub transfer_group: Option<String>,
    /// The card chosen for this intent (not part of Stripe's JSON).
    #[serde(skip)]
    pub card: Option<&'static TestCard>,
    /// Which logical payment this intent belongs to (not part of Stripe's JSON).
    #[serde(skip)]
    pub correlation_id: Option<CorrelationId>,
}

impl PaymentIntent {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeStatus {
    Succeeded,
    Pending,
    Failed,
}

#[derive(Debug, Clone, Serialize)]
pub struct Charge {
    pub id: ChargeId,
    pub object: &'static str,
    pub amount: u64,
    pub amount_captured: u64,
    pub amount_refunded: u64,
    pub application: Option<String>,
    pub application_fee: Option<String>,
    pub application_fee_amount: Option<u64>,
    pub balance_transaction: Option<String>,
    pub billing_details: Value,
    pub calculated_statement_descriptor: &'static str,
    pub captured: bool,
    pub created: i64,
    pub currency: &'static str,
    pub customer: Option<String>,
    pub description: Option<String>,
    pub disputed: bool,
    pub failure_balance_transaction: Option<String>,
    pub failure_code: Option<Cow<'static, str>>,
    pub failure_message: Option<Cow<'static, str>>,
    pub fraud_details: Value,
    pub livemode: bool,
    pub metadata: Metadata,
    pub on_behalf_of: Option<String>,
    pub outcome: Value,
    pub paid: bool,
    pub payment_intent: Option<PaymentIntentId>,
    pub payment_method: Option<PaymentMethodId>,
    pub payment_method_details: Value,
    pub receipt_email: Option<String>,
    pub receipt_number: Option<String>,
    pub receipt_url: Option<String>,
    pub refunded: bool,
    pub review: Option<String>,
    pub shipping: Option<Value>,
    pub source_transfer: Option<String>,
    pub statement_descriptor: Option<String>,
    pub statement_descriptor_suffix: Option<String>,
    pub status: ChargeStatus,
    pub transfer_data: Option<Value>,
    pub transfer_group: Option<String>,
    #[serde(skip)]
    pub correlation_id: Option<CorrelationId>,
}

/// What a new charge is made of.
pub struct NewCharge<'a> {
    pub amount: u64,
    pub currency: &'static str,
    pub card: &'static TestCard,
    /// Why the issuer declines, if it does (the card's own decline, or a forced one).
    pub decline: Option<Decline>,
    pub capture: bool,
    pub payment_intent: Option<PaymentIntentId>,
    pub payment_method: Option<PaymentMethodId>,
    pub description: Option<String>,
    pub metadata: &'a Metadata,
    pub correlation_id: Option<CorrelationId>,
}

impl Charge {
    /// A charge for `new`: succeeded (captured or only authorised) or failed.
    pub fn new(new: NewCharge<'_>) -> Self {
        let decline = new.decline;
        let ok = decline.is_none();
        let captured = ok && new.capture;
        let card = new.card;
        Self {
            id: ChargeId::generate(),
            object: "charge",
            amount: new.amount,
            amount_captured: if captured { new.amount } else { 0 },
            amount_refunded: 0,
            application: None,
            application_fee: None,
            application_fee_amount: None,
            balance_transaction: captured.then(|| format!("txn_{}", &ChargeId::generate().as_str()[3..])),
            billing_details: json!({"address": {"city": null, "country": null, "line1": null, "line2": null, "postal_code": null, "state": null}, "email": null, "name": null, "phone": null}),
            calculated_statement_descriptor: "FAUXPAY",
            captured,
            created: now_unix(),
            currency: new.currency,
            customer: None,
            description: new.description,
            disputed: false,
            failure_balance_transaction: None,
            failure_code: decline.as_ref().map(|d| d.code.clone()),
            failure_message: decline.as_ref().map(|d| d.message.clone()),
            fraud_details: json!({}),
            livemode: false,
            metadata: new.metadata.clone(),
            on_behalf_of: None,
            outcome: match decline {
                None => {
                    json!({"network_status": "approved_by_network", "reason": null, "risk_level": "normal", "risk_score": 20, "seller_message": "Payment complete.", "type": "authorized"})
                }
                Some(d) => {
                    json!({"network_status": "declined_by_network", "reason": d.decline_code, "risk_level": "normal", "risk_score": 20, "seller_message": "The bank did not return any further details with this decline.", "type": "issuer_declined"})
                }
            },
            paid: ok,
            payment_intent: new.payment_intent,
            payment_method: new.payment_method,
            payment_method_details: json!({"type": "card", "card": {
                "brand": card.brand, "last4": card.last4(), "exp_month": 12, "exp_year": 2034,
                "funding": card.funding, "country": "US", "network": card.brand,
                "checks": {"address_line1_check": null, "address_postal_code_check": null, "cvc_check": "pass"},
                "three_d_secure": null, "wallet": null
            }}),
            receipt_email: None,
            receipt_number: None,
            receipt_url: None,
            refunded: false,
            review: None,
            shipping: None,
            source_transfer: None,
            statement_descriptor: None,
            statement_descriptor_suffix: None,
            status: if ok {
                ChargeStatus::Succeeded
            } else {
                ChargeStatus::Failed
            },
            transfer_data: None,
            transfer_group: None,
            correlation_id: new.correlation_id,
        }
    }

    /// What is left to refund.
    pub fn refundable(&self) -> u64 {
        self.amount_captured.saturating_sub(self.amount_refunded)
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Refund {
    pub id: RefundId,
    pub object: &'static str,
    pub amount: u64,
    pub balance_transaction: Option<String>,
    pub charge: ChargeId,
    pub created: i64,
    pub currency: &'static str,
    pub metadata: Metadata,
    pub payment_intent: Option<PaymentIntentId>,
    pub reason: Option<String>,
    pub receipt_number: Option<String>,
    pub source_transfer_reversal: Option<String>,
    pub status: &'static str,
    pub transfer_reversal: Option<String>,
}

impl Refund {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
