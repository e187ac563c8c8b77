//! A saved card payment method: what fauxpay keeps of it (the test card it stands for,
//! its expiry, billing details, metadata, the customer it is attached to) and its
//! Stripe JSON. The card's details (brand, last4, funding, country, fingerprint,
//! networks) are not stored: they are written from the test card, so a payment method
//! costs a few dozen bytes beyond its billing details and metadata.

use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::state::clock::now_unix;
use crate::state::table::Keyed;
use crate::stripe::cards::TestCard;
use crate::stripe::ids::{CustomerId, PaymentMethodId};
use crate::stripe::json::{Metadata, Null};

/// Where a payment method stands with customers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attachment {
    /// Never attached: usable once, or attachable.
    Unattached,
    Customer(CustomerId),
    /// Detached from its customer: Stripe refuses to use or attach it again.
    Detached,
}

/// A postal address; every field optional, as Stripe's `address`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Address {
    pub city: Option<Box<str>>,
    pub country: Option<Box<str>>,
    pub line1: Option<Box<str>>,
    pub line2: Option<Box<str>>,
    pub postal_code: Option<Box<str>>,
    pub state: Option<Box<str>>,
}

/// Stripe's `billing_details`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BillingDetails {
    pub address: Address,
    pub email: Option<Box<str>>,
    pub name: Option<Box<str>>,
    pub phone: Option<Box<str>>,
}

#[derive(Debug, Clone)]
pub struct PaymentMethod {
    pub id: PaymentMethodId,
    pub created: i64,
    /// The test card this payment method stands for: it decides every payment's outcome.
    pub card: &'static TestCard,
    pub exp_month: u8,
    pub exp_year: u16,
    /// Whether a CVC was given (`card.checks.cvc_check` is then `unchecked`).
    pub cvc: bool,
    pub attachment: Attachment,
    /// Set up for off-session use (a succeeded setup intent with `usage=off_session`,
    /// or a payment with `setup_future_usage=off_session`): a card that asks for 3-D
    /// Secure "unless set up" then pays without it. Not part of Stripe's JSON.
    pub off_session: bool,
    /// `None` when every field is empty (most payment methods).
    pub billing_details: Option<Box<BillingDetails>>,
    pub metadata: Metadata,
}

impl PaymentMethod {
    /// A new, unattached payment method for `card`, with the expiry Stripe's test tokens
    /// carry when none is given (December, three years ahead).
    pub fn new(card: &'static TestCard) -> Self {
        Self {
            id: PaymentMethodId::generate(),
            created: now_unix(),
            card,
            exp_month: 12,
            exp_year: (year_month(now_unix()).0 + 3) as u16,
            cvc: false,
            attachment: Attachment::Unattached,
            off_session: false,
            billing_details: None,
            metadata: Metadata::new(),
        }
    }

    pub fn customer(&self) -> Option<CustomerId> {
        match self.attachment {
            Attachment::Customer(c) => Some(c),
            _ => None,
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The JSON of a magic test payment method (`pm_card_visa`…): what retrieving it
    /// answers, under its own name.
    pub fn test_json(card: &'static TestCard) -> Value {
        let mut json = Self::new(card).to_json();
        json["id"] = Value::String(format!("pm_card_{}", card.name));
        json
    }
}

/// The card networks a brand runs on.
fn network(brand: &str) -> &str {
    match brand {
        "amex" | "discover" | "mastercard" | "visa" => brand,
        _ => "unknown",
    }
}

/// Stripe's card `fingerprint`: 16 alphanumerics, the same for every payment method with
/// the same card number.
pub fn fingerprint(number: &str) -> String {
    const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    // FNV-1a, then splitmix64's finaliser to spread it.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in number.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut out = String::with_capacity(16);
    for round in 0..2u64 {
        let mut z = h ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        for _ in 0..8 {
            out.push(ALPHABET[(z % 62) as usize] as char);
            z /= 62;
        }
    }
    out
}

/// The civil year and month (1–12) of a Unix time, in UTC.
pub fn year_month(unix: i64) -> (i32, u8) {
    // Howard Hinnant's civil_from_days.
    let z = unix.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year as i32, month as u8)
}

#[derive(Serialize)]
struct Checks {
    address_line1_check: Null,
    address_postal_code_check: Null,
    cvc_check: Option<&'static str>,
}

#[derive(Serialize)]
struct Networks<'a> {
    available: [&'a str; 1],
    preferred: Null,
}

#[derive(Serialize)]
struct ThreeDSecureUsage {
    supported: bool,
}

#[derive(Serialize)]
struct Card<'a> {
    brand: &'a str,
    checks: Checks,
    country: &'a str,
    exp_month: u8,
    exp_year: u16,
    fingerprint: String,
    funding: &'a str,
    generated_from: Null,
    last4: &'a str,
    networks: Networks<'a>,
    three_d_secure_usage: ThreeDSecureUsage,
    wallet: Null,
}

impl Serialize for PaymentMethod {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let card = self.card;
        let mut o = s.serialize_struct("PaymentMethod", 9)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "payment_method")?;
        match &self.billing_details {
            Some(b) => o.serialize_field("billing_details", &**b)?,
            None => o.serialize_field("billing_details", &BillingDetails::default())?,
        }
        o.serialize_field(
            "card",
            &Card {
                brand: card.brand,
                checks: Checks {
                    address_line1_check: Null,
                    address_postal_code_check: Null,
                    cvc_check: self.cvc.then_some("unchecked"),
                },
                country: "US",
                exp_month: self.exp_month,
                exp_year: self.exp_year,
                fingerprint: fingerprint(card.number),
                funding: card.funding,
                generated_from: Null,
                last4: card.last4(),
                networks: Networks {
                    available: [network(card.brand)],
                    preferred: Null,
                },
                three_d_secure_usage: ThreeDSecureUsage { supported: true },
                wallet: Null,
            },
        )?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("customer", &self.customer())?;
        o.serialize_field("livemode", &false)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("type", "card")?;
        o.end()
    }
}

impl Keyed for Arc<PaymentMethod> {
    type Key = PaymentMethodId;
    fn key(&self) -> PaymentMethodId {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visa() -> &'static TestCard {
        TestCard::resolve("pm_card_visa").unwrap()
    }

    #[test]
    fn json_carries_the_cards_details() {
        let mut pm = PaymentMethod::new(visa());
        let j = pm.to_json();
        assert_eq!(j["object"], "payment_method");
        assert_eq!(j["type"], "card");
        assert_eq!(j["card"]["brand"], "visa");
        assert_eq!(j["card"]["last4"], "4242");
        assert_eq!(j["card"]["funding"], "credit");
        assert_eq!(j["card"]["country"], "US");
        assert_eq!(j["card"]["exp_month"], 12);
        assert_eq!(j["card"]["networks"]["available"], serde_json::json!(["visa"]));
        assert_eq!(j["card"]["checks"]["cvc_check"], Value::Null);
        assert_eq!(j["customer"], Value::Null);
        assert_eq!(j["billing_details"]["address"]["city"], Value::Null);
        assert_eq!(j["billing_details"]["name"], Value::Null);
        assert_eq!(j["metadata"], serde_json::json!({}));
        let customer = CustomerId::generate();
        pm.attachment = Attachment::Customer(customer);
        pm.cvc = true;
        pm.billing_details = Some(Box::new(BillingDetails {
            name: Some("Jenny".into()),
            address: Address {
                postal_code: Some("94107".into()),
                ..Address::default()
            },
            ..BillingDetails::default()
        }));
        let j = pm.to_json();
        assert_eq!(j["customer"], customer.to_string());
        assert_eq!(j["card"]["checks"]["cvc_check"], "unchecked");
        assert_eq!(j["billing_details"]["name"], "Jenny");
        assert_eq!(j["billing_details"]["address"]["postal_code"], "94107");
    }

    #[test]
    fn fingerprints_follow_the_card_number() {
        let a = fingerprint("4242424242424242");
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(a, fingerprint("4242424242424242"));
        assert_ne!(a, fingerprint("5555555555554444"));
        assert_eq!(
            PaymentMethod::new(visa()).to_json()["card"]["fingerprint"],
            PaymentMethod::new(visa()).to_json()["card"]["fingerprint"]
        );
    }

    #[test]
    fn test_payment_methods_answer_under_their_own_name() {
        let j = PaymentMethod::test_json(TestCard::resolve("pm_card_mastercard").unwrap());
        assert_eq!(j["id"], "pm_card_mastercard");
        assert_eq!(j["card"]["brand"], "mastercard");
        assert_eq!(j["card"]["last4"], "4444");
    }

    #[test]
    fn a_payment_method_stays_small() {
        // Card details are written from the test card, billing details are boxed and
        // usually absent: a saved method is its id, a few numbers and two pointers.
        assert!(
            std::mem::size_of::<PaymentMethod>() <= 96,
            "{}",
            std::mem::size_of::<PaymentMethod>()
        );
    }

    #[test]
    fn civil_dates() {
        assert_eq!(year_month(0), (1970, 1));
        assert_eq!(year_month(951_782_400), (2000, 2)); // 2000-02-29
        assert_eq!(year_month(1_704_067_199), (2023, 12)); // 2023-12-31T23:59:59
        assert_eq!(year_month(1_704_067_200), (2024, 1));
    }
}
