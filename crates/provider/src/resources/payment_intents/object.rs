//! A payment intent: its state, and its Stripe JSON (written straight to bytes on the
//! hot path, and through `Serialize` for `to_json`; a test holds the two to the same bytes).

use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::resources::setup_intents::object::Usage;
use crate::resources::three_ds::action::NextAction;
use crate::state::clock::UnixSeconds;
use crate::state::rare;
use crate::state::table::Keyed;
use crate::stripe::cards::{CardRef, Decline, TestCard};
use crate::stripe::ids::{ChargeId, CheckoutSessionId, CorrelationId, PaymentIntentId, PaymentMethodId, Token};
use crate::stripe::money::{Currency, StoredAmount};

use crate::stripe::json::{write, Metadata, Null, CLIENT_SECRET};

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

/// The error left on a payment intent by its last failed attempt: a decline (with the
/// failed charge), or a failed 3-D Secure authentication (no charge was made).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastPaymentError {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charge: Option<ChargeId>,
    pub code: std::borrow::Cow<'static, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decline_code: Option<std::borrow::Cow<'static, str>>,
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
            decline_code: Some(d.decline_code.clone()),
            message: d.message.clone(),
            charge: Some(charge),
            doc_url: format!("https://stripe.com/docs/error-codes/{}", d.code.replace('_', "-")),
        }
    }

    /// The customer failed the 3-D Secure authentication.
    pub fn authentication_failure() -> Self {
        Self {
            kind: "invalid_request_error",
            code: "payment_intent_authentication_failure".into(),
            decline_code: None,
            message: "The provided PaymentMethod has failed authentication. You can provide payment_method_data or a new PaymentMethod to attempt to fulfill this PaymentIntent again.".into(),
            charge: None,
            doc_url: "https://stripe.com/docs/error-codes/payment-intent-authentication-failure".into(),
        }
    }
}

/// What most payment intents lack, kept out of line: the free texts, the Checkout
/// Session, when it was canceled, the last payment error, the next action and the
/// capturable amount (so that the intent, with its `Arc`'s counts, fits a 128-byte
/// block).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntentText {
    pub customer: Option<Box<str>>,
    pub description: Option<Box<str>>,
    pub receipt_email: Option<Box<str>>,
    pub statement_descriptor: Option<Box<str>>,
    pub statement_descriptor_suffix: Option<Box<str>>,
    pub transfer_group: Option<Box<str>>,
    /// The Checkout Session the intent was made for (kept here, boxed with the texts,
    /// so that intents made directly pay nothing for it).
    pub checkout_session: Option<CheckoutSessionId>,
    /// `canceled_at`: Unix seconds, once canceled.
    pub canceled_at: Option<i64>,
    /// Why the last confirmation failed (a decline, a failed authentication).
    pub last_payment_error: Option<Box<LastPaymentError>>,
    /// What the customer must do (`requires_action`: authenticate with 3-D Secure).
    pub next_action: Option<Box<NextAction>>,
    /// `amount_capturable`: what a manual capture may take (0 but in `requires_capture`).
    pub amount_capturable: u64,
}

impl IntentText {
    /// `None` when every field is empty.
    pub fn boxed(self) -> Option<Box<Self>> {
        rare::boxed(self)
    }
}

#[derive(Debug, Clone)]
pub struct PaymentIntent {
    pub id: PaymentIntentId,
    pub amount: u64,
    pub amount_received: StoredAmount,
    /// `automatic_payment_methods[enabled]`, when the client sent it.
    pub automatic_payment_methods: Option<bool>,
    pub cancellation_reason: Option<CancellationReason>,
    pub capture_method: CaptureMethod,
    /// `confirmation_method=manual`: only a secret key may confirm it.
    pub manual_confirmation: bool,
    pub created: UnixSeconds,
    pub currency: Currency,
    /// What most intents lack (texts, an error, an action, a capturable amount): boxed,
    /// so that a plain intent does not carry their room.
    pub text: Option<Box<IntentText>>,
    pub latest_charge: Option<ChargeId>,
    pub metadata: Metadata,
    pub payment_method: Option<PaymentMethodId>,
    pub setup_future_usage: Option<Usage>,
    pub status: IntentStatus,
    /// The card chosen for this intent (not part of Stripe's JSON), in one byte: read it
    /// with [`PaymentIntent::card`].
    pub card: Option<CardRef>,
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

    /// Stripe's `confirmation_method`.
    pub fn confirmation_method(&self) -> &'static str {
        if self.manual_confirmation {
            "manual"
        } else {
            "automatic"
        }
    }

    /// The card chosen for this intent.
    pub fn card(&self) -> Option<&'static TestCard> {
        self.card.map(CardRef::card)
    }

    /// Chooses `card` for this intent (a card outside [`CARDS`](crate::stripe::cards::CARDS)
    /// is none).
    pub fn set_card(&mut self, card: Option<&'static TestCard>) {
        self.card = card.and_then(CardRef::of);
        debug_assert_eq!(card.is_some(), self.card.is_some(), "a card outside CARDS");
    }

    /// `canceled_at`: Unix seconds, once canceled.
    pub fn canceled_at(&self) -> Option<i64> {
        self.text.as_deref().and_then(|t| t.canceled_at)
    }

    /// Marks the intent canceled at `at` (Unix seconds).
    pub fn set_canceled_at(&mut self, at: i64) {
        rare::change(&mut self.text, |t| t.canceled_at = Some(at));
    }

    /// `amount_capturable`.
    pub fn amount_capturable(&self) -> u64 {
        self.text.as_deref().map_or(0, |t| t.amount_capturable)
    }

    pub fn set_amount_capturable(&mut self, amount: u64) {
        rare::change(&mut self.text, |t| t.amount_capturable = amount);
    }

    /// `last_payment_error`.
    pub fn last_payment_error(&self) -> Option<&LastPaymentError> {
        self.text.as_deref().and_then(|t| t.last_payment_error.as_deref())
    }

    pub fn set_last_payment_error(&mut self, error: Option<LastPaymentError>) {
        rare::change(&mut self.text, |t| t.last_payment_error = error.map(Box::new));
    }

    /// `next_action`.
    pub fn next_action(&self) -> Option<&NextAction> {
        self.text.as_deref().and_then(|t| t.next_action.as_deref())
    }

    pub fn set_next_action(&mut self, action: Option<NextAction>) {
        rare::change(&mut self.text, |t| t.next_action = action.map(Box::new));
    }

    /// The Checkout Session the intent was made for.
    pub fn checkout_session(&self) -> Option<CheckoutSessionId> {
        self.text.as_deref().and_then(|t| t.checkout_session)
    }

    pub fn description(&self) -> Option<&str> {
        text_field(&self.text, |t| &t.description)
    }

    /// The intent as it was created, before the confirmation that the request creating
    /// it (`confirm=true`) went on to: what `payment_intent.created` shows. A
    /// confirmation changes only these fields (`PaymentIntents::confirm_locked` and
    /// `charge_locked`); the create path checks, in debug builds, that this gives back
    /// the intent it created.
    pub fn as_created(&self) -> PaymentIntent {
        let mut created = PaymentIntent {
            amount_received: StoredAmount::default(),
            latest_charge: None,
            status: match self.card {
                Some(_) => IntentStatus::RequiresConfirmation,
                None => IntentStatus::RequiresPaymentMethod,
            },
            ..self.clone()
        };
        if created.text.is_some() {
            rare::change(&mut created.text, |t| {
                t.amount_capturable = 0;
                t.last_payment_error = None;
                t.next_action = None;
            });
        }
        created
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
        int(out, self.amount_capturable());
        raw(out, ",\"amount_received\":");
        int(out, self.amount_received.get());
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
        opt_int(out, self.canceled_at());
        raw(out, ",\"cancellation_reason\":");
        opt_plain(out, self.cancellation_reason.map(CancellationReason::as_str));
        raw(out, ",\"capture_method\":");
        plain(out, self.capture_method.as_str());
        raw(out, ",\"client_secret\":\"");
        raw(out, &id);
        raw(out, "_secret_");
        raw(out, &self.client_secret().text());
        raw(out, "\",\"confirmation_method\":\"");
        raw(out, self.confirmation_method());
        raw(out, "\",\"created\":");
        int(out, self.created.get());
        raw(out, ",\"currency\":");
        plain(out, self.currency.code());
        raw(out, ",\"customer\":");
        opt_text(out, text_of(|t| &t.customer));
        raw(out, ",\"description\":");
        opt_text(out, text_of(|t| &t.description));
        raw(out, ",\"invoice\":null,\"last_payment_error\":");
        let _ = serde_json::to_writer(&mut *out, &self.last_payment_error());
        raw(out, ",\"latest_charge\":");
        opt_plain(out, self.latest_charge.map(|c| c.as_str()).as_deref());
        raw(out, ",\"livemode\":false,\"metadata\":");
        metadata(out, &self.metadata);
        raw(out, ",\"next_action\":");
        match self.next_action() {
            None => raw(out, "null"),
            Some(action) => {
                let _ = serde_json::to_writer(&mut *out, action);
            }
        }
        raw(out, ",\"on_behalf_of\":null,\"payment_method\":");
        opt_plain(out, self.payment_method.map(|p| p.as_str()).as_deref());
        raw(
            out,
            ",\"payment_method_options\":{\"card\":{\"installments\":null,\"mandate_options\":null,\"network\":null,\"request_three_d_secure\":\"automatic\"}},\"payment_method_types\":[\"card\"],\"processing\":null,\"receipt_email\":",
        );
        opt_text(out, text_of(|t| &t.receipt_email));
        raw(out, ",\"review\":null,\"setup_future_usage\":");
        opt_plain(out, self.setup_future_usage.map(Usage::as_str));
        raw(out, ",\"shipping\":null,\"statement_descriptor\":");
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
        let mut o = s.serialize_struct("PaymentIntent", 37)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "payment_intent")?;
        o.serialize_field("amount", &self.amount)?;
        o.serialize_field("amount_capturable", &self.amount_capturable())?;
        o.serialize_field("amount_received", &self.amount_received)?;
        o.serialize_field("application", &Null)?;
        o.serialize_field("application_fee_amount", &Null)?;
        o.serialize_field(
            "automatic_payment_methods",
            &self.automatic_payment_methods.map(|enabled| Enabled { enabled }),
        )?;
        o.serialize_field("canceled_at", &self.canceled_at())?;
        o.serialize_field(
            "cancellation_reason",
            &self.cancellation_reason.map(CancellationReason::as_str),
        )?;
        o.serialize_field("capture_method", &self.capture_method)?;
        o.serialize_field("client_secret", &ClientSecret(&self.id, &self.client_secret()))?;
        o.serialize_field("confirmation_method", self.confirmation_method())?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("currency", &self.currency)?;
        o.serialize_field("customer", &text(|t| &t.customer))?;
        o.serialize_field("description", &text(|t| &t.description))?;
        o.serialize_field("invoice", &Null)?;
        o.serialize_field("last_payment_error", &self.last_payment_error())?;
        o.serialize_field("latest_charge", &self.latest_charge)?;
        o.serialize_field("livemode", &false)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("next_action", &self.next_action())?;
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
        o.serialize_field("setup_future_usage", &self.setup_future_usage.map(Usage::as_str))?;
        o.serialize_field("shipping", &Null)?;
        o.serialize_field("statement_descriptor", &text(|t| &t.statement_descriptor))?;
        o.serialize_field("statement_descriptor_suffix", &text(|t| &t.statement_descriptor_suffix))?;
        o.serialize_field("status", &self.status)?;
        o.serialize_field("transfer_data", &Null)?;
        o.serialize_field("transfer_group", &text(|t| &t.transfer_group))?;
        o.end()
    }
}

impl Keyed for Arc<PaymentIntent> {
    type Key = PaymentIntentId;
    fn key(&self) -> PaymentIntentId {
        self.id
    }
    /// Kept in the shard its id's group names: drawn in the making thread's part
    /// ([`crate::state::shard::weighted_group`]).
    fn shard_of(id: &PaymentIntentId) -> Option<usize> {
        Some(id.token().group())
    }
}

#[cfg(test)]
impl PaymentIntent {
    /// A plain intent for tests: 50.00 USD, captured by hand, waiting for its capture.
    pub fn example() -> Self {
        PaymentIntent {
            manual_confirmation: false,
            id: PaymentIntentId::generate(),
            amount: 5000,
            amount_received: StoredAmount::default(),
            automatic_payment_methods: None,
            cancellation_reason: None,
            capture_method: CaptureMethod::Manual,
            created: UnixSeconds::from_unix(1_700_000_000),
            currency: Currency::parse("usd").unwrap(),
            text: None,
            latest_charge: None,
            metadata: Metadata::new(),
            payment_method: None,
            setup_future_usage: None,
            status: IntentStatus::RequiresCapture,
            card: None,
            correlation_id: None,
        }
    }
}

#[cfg(test)]
mod size {
    use super::*;

    /// With its `Arc`'s counts an intent fits a 112-byte block (mimalloc's next is 128):
    /// what only some intents have (texts, an error, an action, a capturable amount) is
    /// boxed in [`IntentText`], its card is one byte, its metadata one word, its time
    /// and received amount four bytes.
    #[test]
    fn an_intent_fits_a_112_byte_block_and_keeps_its_rare_fields() {
        let n = std::mem::size_of::<PaymentIntent>();
        assert!(n <= 96, "PaymentIntent is {n} bytes");
        let mut text = IntentText {
            description: Some("d".into()),
            ..IntentText::default()
        };
        assert!(IntentText::default().boxed().is_none());
        text.canceled_at = Some(5);
        assert_eq!(text.boxed().and_then(|t| t.canceled_at), Some(5));
        let mut pi = PaymentIntent::example();
        assert!(pi.text.is_none());
        pi.set_amount_capturable(5000);
        pi.set_next_action(Some(NextAction::new(None, "pi_1", None)));
        assert_eq!((pi.amount_capturable(), pi.next_action().is_some()), (5000, true));
        let created = pi.as_created();
        assert_eq!(
            (created.amount_capturable(), created.next_action().is_none()),
            (0, true)
        );
        assert!(created.text.is_none(), "emptied: the box is gone");
        pi.set_amount_capturable(0);
        pi.set_next_action(None);
        assert!(pi.text.is_none());
    }
}
