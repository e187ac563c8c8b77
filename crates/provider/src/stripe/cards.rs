//! Test payment methods and the outcome each one decides.
//!
//! Like Stripe's test mode, the payment method alone decides whether a payment is
//! approved or declined and why: `pm_card_visa`, `tok_visa` and `4242424242424242` are
//! approved; `pm_card_chargeDeclined` and `4000000000000002` are declined with
//! `generic_decline`; and so on. [`TestCard::resolve`] maps anything a client may send
//! (a `pm_card_…` id, a `tok_…` token, a raw card number) to one row of [`CARDS`].
//!
//! A card also says whether its issuer asks for 3-D Secure ([`Authentication`]): the
//! authentication cards of Stripe's testing docs (`pm_card_authenticationRequired`,
//! `4000002500003155`, …) make a confirmation wait in `requires_action`, and their
//! decline, if any, comes after the authentication, when the card is charged.

use std::borrow::Cow;

/// Why a card is declined: Stripe's error `code`, `decline_code` and message (static
/// for the test cards, owned when a fault profile chooses them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decline {
    pub code: Cow<'static, str>,
    pub decline_code: Cow<'static, str>,
    pub message: Cow<'static, str>,
}

/// Whether a card's issuer asks for 3-D Secure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authentication {
    /// Never: the payment goes straight to the issuer.
    None,
    /// On every setup, and on every payment unless the card was set up for off-session
    /// use (a succeeded setup intent with `usage=off_session`, or a payment with
    /// `setup_future_usage=off_session`): Stripe's `4000002500003155`.
    UnlessSetUp,
    /// On every payment and every setup.
    Always,
}

/// The card error of an off-session payment the issuer wanted to authenticate.
pub const AUTHENTICATION_REQUIRED: Decline = Decline {
    code: Cow::Borrowed("authentication_required"),
    decline_code: Cow::Borrowed("authentication_required"),
    message: Cow::Borrowed("Your card was declined. This transaction requires authentication."),
};

/// One test card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCard {
    /// The `pm_card_…` name (without the prefix).
    pub name: &'static str,
    pub number: &'static str,
    pub brand: &'static str,
    pub funding: &'static str,
    /// Why a charge of this card is declined (after its authentication, if it asks for
    /// one).
    pub decline: Option<Decline>,
    /// Whether setting the card up (a setup intent) is declined too, with `decline`:
    /// true for the plain decline cards, false for those whose decline comes only
    /// when charged (`chargeCustomerFail`, the authenticate-then-decline cards).
    pub declines_setup: bool,
    pub authentication: Authentication,
}

/// A card of [`CARDS`] in one byte (its place there), for objects kept by the million: an
/// `Option<CardRef>` is one byte where an `Option<&TestCard>` is eight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CardRef(std::num::NonZeroU8);

impl CardRef {
    /// `card`'s place in [`CARDS`] (found by its address, else by its name); `None` for a
    /// card that is not one of them.
    pub fn of(card: &'static TestCard) -> Option<Self> {
        let size = std::mem::size_of::<TestCard>();
        let offset = (card as *const TestCard as usize).wrapping_sub(CARDS.as_ptr() as usize);
        let by_address = (offset % size == 0)
            .then_some(offset / size)
            .filter(|&i| CARDS.get(i).is_some_and(|c| std::ptr::eq(c, card)));
        let i = by_address.or_else(|| CARDS.iter().position(|c| c.name == card.name))?;
        u8::try_from(i + 1).ok().and_then(std::num::NonZeroU8::new).map(Self)
    }

    /// The first of [`CARDS`].
    pub const FIRST: CardRef = CardRef(std::num::NonZeroU8::MIN);

    pub fn card(self) -> &'static TestCard {
        &CARDS[usize::from(self.0.get()) - 1]
    }
}

const fn approved(name: &'static str, number: &'static str, brand: &'static str, funding: &'static str) -> TestCard {
    TestCard {
        name,
        number,
        brand,
        funding,
        decline: None,
        declines_setup: false,
        authentication: Authentication::None,
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
        declines_setup: true,
        authentication: Authentication::None,
    }
}

/// `card`, but setting it up succeeds (only charges are declined).
const fn sets_up(mut card: TestCard) -> TestCard {
    card.declines_setup = false;
    card
}

/// A Visa credit card whose issuer asks for 3-D Secure (`authentication`), then
/// charges it, or declines it with `decline` (setting it up never declines).
const fn authenticated(
    name: &'static str,
    number: &'static str,
    authentication: Authentication,
    decline: Option<Decline>,
) -> TestCard {
    TestCard {
        name,
        number,
        brand: "visa",
        funding: "credit",
        decline,
        declines_setup: false,
        authentication,
    }
}

const fn decline(code: &'static str, decline_code: &'static str, message: &'static str) -> Option<Decline> {
    Some(Decline {
        code: Cow::Borrowed(code),
        decline_code: Cow::Borrowed(decline_code),
        message: Cow::Borrowed(message),
    })
}

const DECLINED: &str = "Your card was declined.";

/// Every test card fauxpay knows, documented in docs/api.md's test card table.
pub static CARDS: &[TestCard] = &[
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
    // Attaching (setting up) this card succeeds; charging it fails.
    sets_up(declined(
        "chargeCustomerFail",
        "4000000000000341",
        "card_declined",
        "generic_decline",
        DECLINED,
    )),
    // 3-D Secure (Stripe's testing docs, "Authentication and setup" and "3D Secure").
    authenticated(
        "authenticationRequiredOnSetup",
        "4000002500003155",
        Authentication::UnlessSetUp,
        None,
    ),
    authenticated(
        "authenticationRequired",
        "4000002760003184",
        Authentication::Always,
        None,
    ),
    authenticated(
        "authenticationRequiredChargeDeclinedInsufficientFunds",
        "4000008260003178",
        Authentication::Always,
        decline(
            "card_declined",
            "insufficient_funds",
            "Your card has insufficient funds.",
        ),
    ),
    authenticated(
        "threeDSecure2Required",
        "4000000000003220",
        Authentication::Always,
        None,
    ),
    authenticated(
        "threeDSecureRequiredChargeDeclined",
        "4000008400001629",
        Authentication::Always,
        decline("card_declined", "generic_decline", DECLINED),
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
    fn authentication_cards_ask_for_3ds_and_decline_only_when_charged() {
        let on_setup = TestCard::resolve("pm_card_authenticationRequiredOnSetup").unwrap();
        assert_eq!(on_setup.number, "4000002500003155");
        assert_eq!(on_setup.authentication, Authentication::UnlessSetUp);
        for (name, number) in [
            ("authenticationRequired", "4000002760003184"),
            ("threeDSecure2Required", "4000000000003220"),
        ] {
            let card = TestCard::resolve(number).unwrap();
            assert_eq!((card.name, card.authentication), (name, Authentication::Always));
            assert!(card.decline.is_none());
        }
        let funds = TestCard::resolve("4000008260003178").unwrap();
        assert_eq!(
            funds.decline.as_ref().map(|d| &*d.decline_code),
            Some("insufficient_funds")
        );
        let declined = TestCard::resolve("4000008400001629").unwrap();
        assert_eq!(declined.decline.as_ref().map(|d| &*d.code), Some("card_declined"));
        for card in [funds, declined] {
            assert_eq!(card.authentication, Authentication::Always);
            assert!(!card.declines_setup, "{}", card.name);
        }
        assert!(TestCard::resolve("pm_card_chargeDeclined").unwrap().declines_setup);
        assert!(!TestCard::resolve("pm_card_chargeCustomerFail").unwrap().declines_setup);
        assert!(CARDS.iter().filter(|c| c.decline.is_none()).all(|c| !c.declines_setup));
    }

    #[test]
    fn unknown_references_do_not_resolve() {
        assert!(TestCard::resolve("pm_card_nope").is_none());
        assert!(TestCard::resolve("4111").is_none());
    }

    #[test]
    fn every_card_is_one_byte_and_back() {
        for card in CARDS {
            assert!(std::ptr::eq(CardRef::of(card).unwrap().card(), card), "{}", card.name);
        }
        // A copy (not one of CARDS' own rows) is found by its name.
        let copy: &'static TestCard = Box::leak(Box::new(CARDS[3].clone()));
        assert!(std::ptr::eq(CardRef::of(copy).unwrap().card(), &CARDS[3]));
        assert_eq!(std::mem::size_of::<Option<CardRef>>(), 1);
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
