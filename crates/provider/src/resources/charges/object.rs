//! A charge: its state, what a new one is made of, and its Stripe JSON (written
//! straight to bytes, and through `Serialize`; a test holds the two to the same bytes).

use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::state::rare;
use crate::state::shard;
use crate::state::table::Keyed;
use crate::stripe::cards::{CardRef, Decline, TestCard};
use crate::stripe::ids::{ChargeId, CorrelationId, CustomerId, PaymentIntentId, PaymentMethodId, Token};
use crate::stripe::money::{Currency, StoredAmount};

use crate::state::clock::UnixSeconds;
use crate::stripe::json::{write, Metadata, Null, Prefixed, BALANCE_TRANSACTION};

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
    pub amount_captured: StoredAmount,
    /// Captured (money moved; `balance_transaction` is then derived from the id).
    pub captured: bool,
    pub created: UnixSeconds,
    pub currency: Currency,
    pub metadata: Metadata,
    pub payment_intent: Option<PaymentIntentId>,
    pub payment_method: Option<PaymentMethodId>,
    pub refunded: bool,
    pub status: ChargeStatus,
    /// The card charged (its place in `CARDS`, one byte; [`Charge::card`]):
    /// `payment_method_details` is written from it.
    card: CardRef,
    /// Its customer, description, decline and refunded amount, which most charges have
    /// none of: boxed, so that a plain charge does not carry their room.
    rare: Option<Box<Rare>>,
    pub correlation_id: Option<CorrelationId>,
}

/// A charge's fields that most charges leave empty.
#[derive(Debug, Clone, Default, PartialEq)]
struct Rare {
    customer: Option<CustomerId>,
    description: Option<Box<str>>,
    decline: Option<Decline>,
    amount_refunded: u64,
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
            id: ChargeId::generate_in(shard::weighted_group),
            amount: new.amount,
            amount_captured: StoredAmount::new(if captured { new.amount } else { 0 }),
            captured,
            created: UnixSeconds::now(),
            currency: new.currency,
            metadata: new.metadata.clone(),
            payment_intent: new.payment_intent,
            payment_method: new.payment_method,
            refunded: false,
            status: if ok {
                ChargeStatus::Succeeded
            } else {
                ChargeStatus::Failed
            },
            card: CardRef::of(new.card).unwrap_or_else(|| {
                debug_assert!(false, "a card outside CARDS: {}", new.card.name);
                CardRef::FIRST
            }),
            rare: None,
            correlation_id: new.correlation_id,
        }
        .with_rare(|r| {
            r.description = new.description;
            r.decline = new.decline;
        })
    }

    /// A captured charge of `amount` USD on the Visa test card, for tests.
    #[cfg(test)]
    pub fn example(amount: u64) -> Self {
        Self::new(NewCharge {
            amount,
            currency: Currency::parse("usd").expect("usd"),
            card: TestCard::resolve("pm_card_visa").expect("the Visa test card"),
            decline: None,
            capture: true,
            payment_intent: None,
            payment_method: None,
            description: None,
            metadata: &Metadata::new(),
            correlation_id: None,
        })
    }

    /// The charge with its rare fields changed by `f`.
    fn with_rare(mut self, f: impl FnOnce(&mut Rare)) -> Self {
        self.change_rare(f);
        self
    }

    fn change_rare(&mut self, f: impl FnOnce(&mut Rare)) {
        rare::change(&mut self.rare, f);
    }

    /// The customer of the payment intent it was made for, if it has one.
    pub fn customer(&self) -> Option<CustomerId> {
        self.rare.as_ref().and_then(|r| r.customer)
    }

    pub fn set_customer(&mut self, customer: Option<CustomerId>) {
        self.change_rare(|r| r.customer = customer);
    }

    pub fn description(&self) -> Option<&str> {
        self.rare.as_ref().and_then(|r| r.description.as_deref())
    }

    pub fn set_description(&mut self, description: Option<Box<str>>) {
        self.change_rare(|r| r.description = description);
    }

    /// Why the issuer declined, if it did: `failure_code`, `failure_message`, `outcome`.
    pub fn decline(&self) -> Option<&Decline> {
        self.rare.as_ref().and_then(|r| r.decline.as_ref())
    }

    /// The random part of `balance_transaction` (`txn_…`), once money moved.
    pub fn balance_transaction(&self) -> Option<Token> {
        self.captured.then(|| self.id.token().derived(BALANCE_TRANSACTION))
    }

    /// What is left to refund.
    pub fn refundable(&self) -> u64 {
        self.amount_captured.get().saturating_sub(self.amount_refunded())
    }

    /// `amount_refunded`.
    pub fn amount_refunded(&self) -> u64 {
        self.rare.as_ref().map_or(0, |r| r.amount_refunded)
    }

    /// Sets `amount_refunded` and `refunded` (all that was captured is refunded).
    pub fn set_amount_refunded(&mut self, amount: u64) {
        self.change_rare(|r| r.amount_refunded = amount);
        self.refunded = amount == self.amount_captured.get();
    }

    /// The card charged.
    pub fn card(&self) -> &'static TestCard {
        self.card.card()
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Appends this charge's JSON (the bytes `serde_json::to_vec` would give).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        use write::*;
        let decline = self.decline();
        let card = self.card();
        raw(out, "{\"id\":");
        plain(out, &self.id.as_str());
        raw(out, ",\"object\":\"charge\",\"amount\":");
        int(out, self.amount);
        raw(out, ",\"amount_captured\":");
        int(out, self.amount_captured.get());
        raw(out, ",\"amount_refunded\":");
        int(out, self.amount_refunded());
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
        int(out, self.created.get());
        raw(out, ",\"currency\":");
        plain(out, self.currency.code());
        raw(out, ",\"customer\":");
        opt_plain(out, self.customer().map(|c| c.as_str()).as_deref());
        raw(out, ",\"description\":");
        opt_text(out, self.description());
        raw(
            out,
            ",\"disputed\":false,\"failure_balance_transaction\":null,\"failure_code\":",
        );
        opt_text(out, decline.map(|d| &*d.code));
        raw(out, ",\"failure_message\":");
        opt_text(out, decline.map(|d| &*d.message));
        raw(
            out,
            ",\"fraud_details\":{},\"invoice\":null,\"livemode\":false,\"metadata\":",
        );
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
            ",\"checks\":{\"address_line1_check\":null,\"address_postal_code_check\":null,\"cvc_check\":\"pass\"},\"country\":\"US\",\"exp_month\":12,\"exp_year\":2034,\"fingerprint\":null,\"funding\":",
        );
        plain(out, card.funding);
        raw(out, ",\"installments\":null,\"last4\":");
        plain(out, card.last4());
        raw(out, ",\"mandate\":null,\"network\":");
        plain(out, card.brand);
        raw(
            out,
            ",\"network_token\":{\"used\":false},\"three_d_secure\":null,\"wallet\":null},\"type\":\"card\"},\"receipt_email\":null,\"receipt_number\":null,\"receipt_url\":null,\"refunded\":",
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
    fingerprint: Null,
    funding: &'static str,
    installments: Null,
    last4: &'static str,
    mandate: Null,
    network: &'static str,
    network_token: NetworkToken,
    three_d_secure: Null,
    wallet: Null,
}

#[derive(Serialize)]
struct NetworkToken {
    used: bool,
}

#[derive(Serialize)]
struct Checks {
    address_line1_check: Null,
    address_postal_code_check: Null,
    cvc_check: &'static str,
}

impl Serialize for Charge {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let decline = self.decline();
        let card = self.card();
        let mut o = s.serialize_struct("Charge", 42)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "charge")?;
        o.serialize_field("amount", &self.amount)?;
        o.serialize_field("amount_captured", &self.amount_captured)?;
        o.serialize_field("amount_refunded", &self.amount_refunded())?;
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
        o.serialize_field("customer", &self.customer())?;
        o.serialize_field("description", &self.description())?;
        o.serialize_field("disputed", &false)?;
        o.serialize_field("failure_balance_transaction", &Null)?;
        o.serialize_field("failure_code", &decline.map(|d| &*d.code))?;
        o.serialize_field("failure_message", &decline.map(|d| &*d.message))?;
        o.serialize_field("fraud_details", &Empty {})?;
        o.serialize_field("invoice", &Null)?;
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
                    fingerprint: Null,
                    funding: card.funding,
                    installments: Null,
                    last4: card.last4(),
                    mandate: Null,
                    network: card.brand,
                    network_token: NetworkToken { used: false },
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

impl Keyed for Arc<Charge> {
    type Key = ChargeId;
    fn key(&self) -> ChargeId {
        self.id
    }
    /// Kept in the shard its id's group names: drawn in the making thread's part
    /// ([`crate::state::shard::weighted_group`]).
    fn shard_of(id: &ChargeId) -> Option<usize> {
        Some(id.token().group())
    }
}

#[cfg(test)]
mod size {
    use super::*;

    /// A plain charge carries no room for a customer, description, decline or refund:
    /// with its `Arc`'s counts it fits a 112-byte block (the allocator's classes go 96,
    /// 112, 128): its metadata is one word, its time and captured amount four bytes.
    #[test]
    fn a_charge_is_compact_and_keeps_its_rare_fields() {
        let n = std::mem::size_of::<Charge>();
        assert!(n <= 96, "Charge is {n} bytes");
        let mut c = Charge::new(NewCharge {
            amount: 100,
            currency: Currency::parse("usd").unwrap(),
            card: &crate::stripe::cards::CARDS[0],
            decline: None,
            capture: true,
            payment_intent: None,
            payment_method: None,
            description: Some("d".into()),
            metadata: &Metadata::new(),
            correlation_id: None,
        });
        assert_eq!(
            (c.description(), c.customer(), c.decline().is_some()),
            (Some("d"), None, false)
        );
        let customer = CustomerId::generate();
        c.set_customer(Some(customer));
        c.set_description(None);
        assert_eq!((c.description(), c.customer()), (None, Some(customer)));
        c.set_customer(None);
        assert!(c.rare.is_none(), "emptied: the box is gone");
        assert_eq!((c.amount_refunded(), c.refunded, c.refundable()), (0, false, 100));
        c.set_amount_refunded(40);
        assert_eq!((c.amount_refunded(), c.refunded, c.refundable()), (40, false, 60));
        c.set_amount_refunded(100);
        assert_eq!((c.amount_refunded(), c.refunded, c.refundable()), (100, true, 0));
        assert_eq!(c.card().name, crate::stripe::cards::CARDS[0].name);
    }
}
