//! Test payment methods and the outcome each one decides.
//!
//! Like Stripe's test mode, the payment method alone decides whether a payment is
//! approved or declined and why: `pm_card_visa`, `tok_visa` and `4242424242424242` are
//! approved; `pm_card_chargeDeclined` and `4000000000000002` are declined with
//! `generic_decline`; and so on. [`TestCard::resolve`] maps anything a client may send
//! (a `pm_card_…` id, a `tok_…` token, a raw card number) to one row of [`CARDS`].

use std::borrow::Cow;

/// Why a card is declined: Stripe's error `code`, `decline_code` and message (static
/// for the test cards, owned when a fault profile chooses them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decline {
    pub code: Cow<'static, str>,
    pub decline_code: Cow<'static, str>,
    pub message: Cow<'static, str>,
}

/// One test card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCard {
    /// The `pm_card_…` name (without the prefix).
    pub name: &'static str,
    pub number: &'static str,
    pub brand: &'static str,
    pub funding: &'static str,
    pub decline: Option<Decline>,
}

const fn approved(name: &'static str, number: &'static str, brand: &'static str, funding: &'static str) -> TestCard {
    TestCard {
        name,
        number,
        brand,
        funding,
        decline: None,
    }
}

const fn declined(
    name: &'static str,
    number: &'static str,
    code: &'static str,
    decline_code: &'static str,
    message: &'static str,
) -> TestCard {
    TestCard {
        name,
        number,
        brand: "visa",
        funding: "credit",
        decline: Some(Decline {
            code: Cow::Borrowed(code),
            decline_code: Cow::Borrowed(decline_code),
            message: Cow::Borrowed(message),
        }),
    }
}

const DECLINED: &str = "Your card was declined.";

/// Every test card fauxpay knows, documented in README's test card table.
pub const CARDS: &[TestCard] = &[
    approved("visa", "4242424242424242", "visa", "credit"),
    approved("visa_debit", "4000056655665556", "visa", "debit"),
    approved("mastercard", "5555555555554444", "mastercard", "credit"),
    approved("mastercard_debit", "5200828282828210", "mastercard", "debit"),
    approved("amex", "378282246310005", "amex", "credit"),
    approved("discover", "6011111111111117", "discover", "credit"),
    declined(
        "chargeDeclined",
        "4000000000000002",
        "card_declined",
        "generic_decline",
        DECLINED,
    ),
    declined(
        "chargeDeclinedInsufficientFunds",
        "4000000000009995",
        "card_declined",
        "insufficient_funds",
        "Your card has insufficient funds.",
    ),
    declined(
        "chargeDeclinedLostCard",
        "4000000000009987",
        "card_declined",
        "lost_card",
        DECLINED,
    ),
    declined(
        "chargeDeclinedStolenCard",
        "4000000000009979",
        "card_declined",
        "stolen_card",
        DECLINED,
    ),
    declined(
        "chargeDeclinedExpiredCard",
        "4000000000000069",
        "expired_card",
        "expired_card",
        "Your card has expired.",
    ),
    declined(
        "chargeDeclinedIncorrectCvc",
        "4000000000000127",
        "incorrect_cvc",
        "incorrect_cvc",
        "Your card's security code is incorrect.",
    ),
    declined(
        "chargeDeclinedProcessingError",
        "4000000000000119",
        "processing_error",
        "processing_error",
        "An error occurred while processing your card. Try again in a little bit.",
    ),
    declined(
        "chargeDeclinedVelocityLimitExceeded",
        "4000000000006975",
        "card_declined",
        "card_velocity_exceeded",
        DECLINED,
    ),
    declined(
        "chargeDeclinedFraudulent",
        "4100000000000019",
        "card_declined",
        "fraudulent",
        DECLINED,
    ),
    declined(
        "chargeCustomerFail",
        "4000000000000341",
        "card_declined",
        "generic_decline",
        DECLINED,
    ),
];

impl TestCard {
    /// Finds the card behind a payment method id, token or raw number.
    pub fn resolve(reference: &str) -> Option<&'static TestCard> {
        let reference = reference.trim();
        let name = reference
            .strip_prefix("pm_card_")
            .or_else(|| reference.strip_prefix("tok_"));
        match name {
            Some(name) => CARDS.iter().find(|c| c.name == name),
            None => {
                let digits: String = reference.chars().filter(|c| !matches!(c, ' ' | '-')).collect();
                CARDS.iter().find(|c| c.number == digits)
            }
        }
    }

    pub fn last4(&self) -> &'static str {
        &self.number[self.number.len() - 4..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_tokens_and_numbers_resolve_to_one_card() {
        let a = TestCard::resolve("pm_card_visa").unwrap();
        assert_eq!(a, TestCard::resolve("tok_visa").unwrap());
        assert_eq!(a, TestCard::resolve("4242 4242 4242 4242").unwrap());
        assert!(a.decline.is_none());
        assert_eq!(a.last4(), "4242");
    }

    #[test]
    fn declines_carry_stripe_codes() {
        let d = TestCard::resolve("pm_card_chargeDeclinedInsufficientFunds")
            .unwrap()
            .decline
            .clone()
            .unwrap();
        assert_eq!((&*d.code, &*d.decline_code), ("card_declined", "insufficient_funds"));
        let d = TestCard::resolve("4000000000000002").unwrap().decline.clone().unwrap();
        assert_eq!(d.decline_code, "generic_decline");
        let d = TestCard::resolve("pm_card_chargeDeclinedExpiredCard")
            .unwrap()
            .decline
            .clone()
            .unwrap();
        assert_eq!(d.code, "expired_card");
    }

    #[test]
    fn unknown_references_do_not_resolve() {
        assert!(TestCard::resolve("pm_card_nope").is_none());
        assert!(TestCard::resolve("4111").is_none());
    }

    #[test]
    fn numbers_are_unique() {
        for (i, a) in CARDS.iter().enumerate() {
            for b in &CARDS[i + 1..] {
                assert_ne!(a.number, b.number);
                assert_ne!(a.name, b.name);
            }
        }
    }
}
