//! The order: the merchant's durable record of one logical payment, and its state machine.
//!
//! An order is keyed by the client's `order_id` and fixes the amount and currency of the
//! payment. Its status moves `pending → processing → paid | declined`, with `reconciling`
//! for an attempt whose outcome is unknown (a provider timeout, a dropped answer, a 5xx):
//! only a search of the provider, never another charge, takes it out of there. Every
//! change goes through [`Order::apply`], which checks the status the change starts from and
//! bumps the [`Version`]; stores write the result only if the version they hold is still
//! the one the change was computed from (`fencing` does that write). A declined order may
//! be paid again with a new *generation*, which gives the provider a new idempotency key.
//! Plain values only: this module uses nothing else of the merchant.

use std::fmt;

use serde::Serialize;

/// Defines a validated string newtype with `as_str`, `Display` and `Serialize`.
macro_rules! text_newtype {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

text_newtype!(
    /// The client's order id: 1 to 128 characters of `A-Z a-z 0-9 _ . : -` (so it can be
    /// quoted safely in a provider search query and in Redis keys).
    OrderId
);
text_newtype!(
    /// An ISO currency code, lowercase (`usd`).
    Currency
);
text_newtype!(
    /// The payment method, forwarded to the provider unchanged (`pm_card_visa`, `pm_fault_…`).
    PaymentMethod
);
text_newtype!(
    /// The provider's payment intent id (`pi_…`).
    PaymentIntentId
);

/// Why a value was refused; the message names what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadValue(pub String);

impl OrderId {
    pub const MAX_LEN: usize = 128;

    pub fn parse(s: &str) -> Result<Self, BadValue> {
        if s.is_empty() || s.len() > Self::MAX_LEN {
            return Err(BadValue(format!(
                "order_id must be 1 to {} characters long",
                Self::MAX_LEN
            )));
        }
        if !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
        {
            return Err(BadValue(
                "order_id may contain only letters, digits and `_ . : -`".to_string(),
            ));
        }
        Ok(Self(s.to_string()))
    }
}

impl Currency {
    pub fn parse(s: &str) -> Result<Self, BadValue> {
        if s.len() != 3 || !s.chars().all(|c| c.is_ascii_alphabetic()) {
            return Err(BadValue(format!("currency must be a three-letter ISO code, got `{s}`")));
        }
        Ok(Self(s.to_ascii_lowercase()))
    }
}

impl PaymentMethod {
    pub const MAX_LEN: usize = 255;

    pub fn parse(s: &str) -> Result<Self, BadValue> {
        if s.is_empty() || s.len() > Self::MAX_LEN || !s.chars().all(|c| c.is_ascii_graphic()) {
            return Err(BadValue(format!(
                "payment_method must be 1 to {} printable ASCII characters",
                Self::MAX_LEN
            )));
        }
        Ok(Self(s.to_string()))
    }
}

impl PaymentIntentId {
    /// Wraps an id the provider returned (not validated: the provider owns its ids).
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }
}

/// An amount in the currency's smallest unit (cents), between 1 and 99,999,999.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Amount(u64);

impl Amount {
    pub const MAX: u64 = 99_999_999;

    pub fn new(value: u64) -> Result<Self, BadValue> {
        if value == 0 || value > Self::MAX {
            return Err(BadValue(format!(
                "amount must be an integer between 1 and {}",
                Self::MAX
            )));
        }
        Ok(Self(value))
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An order's version: starts at 1, bumped by every change. It is the fencing token: a
/// store replaces an order only while it still holds the version the change was computed
/// from, so a stale worker's late write changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Version(u64);

impl Version {
    pub const FIRST: Version = Version(1);

    pub fn new(v: u64) -> Self {
        Self(v)
    }

    pub fn get(self) -> u64 {
        self.0
    }

    pub fn next(self) -> Self {
        Self(self.0 + 1)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where an order stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// Not paid, and no attempt is running: a request may claim it.
    Pending,
    /// A worker holds the claim (until `lease_until_ms`) and is calling the provider.
    Processing,
    /// The provider charged it: `payment_intent` is set. Final.
    Paid,
    /// The provider declined the current generation; a new request may try again.
    Declined,
    /// An attempt's outcome is unknown; only a provider search resolves it.
    Reconciling,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Pending => "pending",
            OrderStatus::Processing => "processing",
            OrderStatus::Paid => "paid",
            OrderStatus::Declined => "declined",
            OrderStatus::Reconciling => "reconciling",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => OrderStatus::Pending,
            "processing" => OrderStatus::Processing,
            "paid" => OrderStatus::Paid,
            "declined" => OrderStatus::Declined,
            "reconciling" => OrderStatus::Reconciling,
            _ => return None,
        })
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One order row. Serialized as the body of `GET /orders/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Order {
    pub id: OrderId,
    pub amount: Amount,
    pub currency: Currency,
    /// The payment method of the current generation.
    pub payment_method: PaymentMethod,
    pub status: OrderStatus,
    /// Bumped by every change: the fencing token.
    pub version: Version,
    /// Bumped when a declined order is paid again; part of the provider idempotency key.
    pub generation: u32,
    /// Provider calls made for this order, in all generations.
    pub attempts: u32,
    /// Provider calls made in the current generation.
    pub generation_attempts: u32,
    pub payment_intent: Option<PaymentIntentId>,
    pub decline_code: Option<String>,
    pub decline_message: Option<String>,
    /// Why the last attempt left the order pending or reconciling.
    pub last_error: Option<String>,
    /// While `processing`: when the claim lapses (Unix ms).
    pub lease_until_ms: i64,
    /// When the last provider call started (Unix ms).
    pub last_attempt_ms: i64,
    /// Times the order was fulfilled (on a `payment_intent.succeeded` webhook): at most 1
    /// for the idempotent merchant; the naive ones count every delivery.
    pub fulfillments: u32,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// A change to an order; [`Order::apply`] says whether it is allowed from the order's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// `pending → processing` (same generation) or `declined → processing` (next
    /// generation): the caller owns the order until `lease_until_ms`.
    Claim {
        payment_method: PaymentMethod,
        lease_until_ms: i64,
    },
    /// `processing | reconciling | pending → paid`: the provider charged it.
    Pay { payment_intent: PaymentIntentId },
    /// `processing → declined`: a definite decline of the current generation.
    Decline { decline_code: String, message: String },
    /// `processing → pending`: the provider definitely did not charge (429, refused request).
    Release { reason: String },
    /// `processing → reconciling`: the outcome is unknown (timeout, dropped answer, 5xx,
    /// or a claim whose lease lapsed).
    Suspect { reason: String },
    /// `reconciling → pending`: a search proved that no charge exists.
    Reopen,
    /// Any status, once: the provider says `payment_intent` succeeded (a webhook), so the
    /// order is paid (if it was not yet) and its goods are shipped: `fulfillments` 0 → 1.
    Fulfill { payment_intent: PaymentIntentId },
}

impl Transition {
    fn name(&self) -> &'static str {
        match self {
            Transition::Claim { .. } => "claim",
            Transition::Pay { .. } => "pay",
            Transition::Decline { .. } => "decline",
            Transition::Release { .. } => "release",
            Transition::Suspect { .. } => "suspect",
            Transition::Reopen => "reopen",
            Transition::Fulfill { .. } => "fulfil",
        }
    }
}

/// A transition that the order's status does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("cannot {transition} an order that is {from}")]
    NotAllowed {
        transition: &'static str,
        from: OrderStatus,
    },
    #[error("the order was already attempted with payment method `{0}`; a new one is accepted only after a decline")]
    PaymentMethodLocked(PaymentMethod),
    #[error("the order was already fulfilled")]
    AlreadyFulfilled,
}

impl Order {
    /// A new pending order for a checkout (version 1, generation 0, no attempt yet).
    pub fn new(id: OrderId, amount: Amount, currency: Currency, payment_method: PaymentMethod, now_ms: i64) -> Self {
        Self {
            id,
            amount,
            currency,
            payment_method,
            status: OrderStatus::Pending,
            version: Version::FIRST,
            generation: 0,
            attempts: 0,
            generation_attempts: 0,
            payment_intent: None,
            decline_code: None,
            decline_message: None,
            last_error: None,
            lease_until_ms: 0,
            last_attempt_ms: 0,
            fulfillments: 0,
            created_ms: now_ms,
            updated_ms: now_ms,
        }
    }

    /// The provider idempotency key of the current generation: stable across every retry
    /// of the order, so the provider itself refuses to charge it twice.
    pub fn provider_key(&self) -> String {
        if self.generation == 0 {
            format!("order-{}", self.id)
        } else {
            format!("order-{}-g{}", self.id, self.generation)
        }
    }

    /// Whether the claim of a `processing` order has lapsed (its worker is stale or dead).
    pub fn lease_expired(&self, now_ms: i64) -> bool {
        self.status == OrderStatus::Processing && now_ms >= self.lease_until_ms
    }

    /// Whether a claim with `payment_method` may start from this order.
    pub fn accepts_payment_method(&self, payment_method: &PaymentMethod) -> bool {
        self.status == OrderStatus::Declined || self.generation_attempts == 0 || self.payment_method == *payment_method
    }

    /// The order after `transition`, with the version bumped; the order itself is unchanged.
    pub fn apply(&self, transition: Transition, now_ms: i64) -> Result<Order, TransitionError> {
        use OrderStatus::*;
        let name = transition.name();
        let mut next = self.clone();
        match (transition, self.status) {
            (
                Transition::Claim {
                    payment_method,
                    lease_until_ms,
                },
                Pending | Declined,
            ) => {
                if !self.accepts_payment_method(&payment_method) {
                    return Err(TransitionError::PaymentMethodLocked(self.payment_method.clone()));
                }
                if self.status == Declined {
                    next.generation += 1;
                    next.generation_attempts = 0;
                    next.decline_code = None;
                    next.decline_message = None;
                }
                next.payment_method = payment_method;
                next.lease_until_ms = lease_until_ms;
                next.status = Processing;
                next.attempts += 1;
                next.generation_attempts += 1;
                next.last_attempt_ms = now_ms;
                next.last_error = None;
            }
            (Transition::Pay { payment_intent }, Processing | Reconciling | Pending) => {
                next.payment_intent = Some(payment_intent);
                next.status = Paid;
                next.last_error = None;
                next.lease_until_ms = 0;
            }
            (Transition::Decline { decline_code, message }, Processing) => {
                next.decline_code = Some(decline_code);
                next.decline_message = Some(message);
                next.status = Declined;
                next.lease_until_ms = 0;
            }
            (Transition::Release { reason }, Processing) => {
                next.last_error = Some(reason);
                next.status = Pending;
                next.lease_until_ms = 0;
            }
            (Transition::Suspect { reason }, Processing) => {
                next.last_error = Some(reason);
                next.status = Reconciling;
                next.lease_until_ms = 0;
            }
            (Transition::Reopen, Reconciling) => {
                next.status = Pending;
            }
            (Transition::Fulfill { payment_intent }, _) => {
                if self.fulfillments > 0 {
                    return Err(TransitionError::AlreadyFulfilled);
                }
                next.fulfillments = 1;
                if self.status != Paid {
                    // The provider's word that the money moved settles an unknown outcome
                    // (a checkout still waiting for its answer is fenced and re-reads this).
                    next.payment_intent = Some(payment_intent);
                    next.status = Paid;
                    next.last_error = None;
                    next.lease_until_ms = 0;
                }
            }
            (_, from) => return Err(TransitionError::NotAllowed { transition: name, from }),
        }
        next.version = self.version.next();
        next.updated_ms = now_ms;
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order() -> Order {
        Order::new(
            OrderId::parse("o-1").unwrap(),
            Amount::new(2000).unwrap(),
            Currency::parse("usd").unwrap(),
            PaymentMethod::parse("pm_card_visa").unwrap(),
            1,
        )
    }

    fn claim(pm: &str) -> Transition {
        Transition::Claim {
            payment_method: PaymentMethod::parse(pm).unwrap(),
            lease_until_ms: 100,
        }
    }

    #[test]
    fn values_are_validated() {
        assert!(OrderId::parse("ord-42_a.b:c").is_ok());
        assert!(OrderId::parse("").is_err());
        assert!(OrderId::parse("o'1").is_err());
        assert!(OrderId::parse(&"x".repeat(129)).is_err());
        assert_eq!(Currency::parse("USD").unwrap().as_str(), "usd");
        assert!(Currency::parse("us").is_err());
        assert!(Currency::parse("u$d").is_err());
        assert!(Amount::new(0).is_err());
        assert!(Amount::new(100_000_000).is_err());
        assert!(PaymentMethod::parse("pm card").is_err());
    }

    #[test]
    fn the_happy_path_bumps_the_version_each_step() {
        let o = order();
        let claimed = o.apply(claim("pm_card_visa"), 10).unwrap();
        assert_eq!(claimed.status, OrderStatus::Processing);
        assert_eq!(claimed.version, o.version.next());
        assert_eq!((claimed.attempts, claimed.generation_attempts), (1, 1));
        assert_eq!(claimed.last_attempt_ms, 10);
        let paid = claimed
            .apply(
                Transition::Pay {
                    payment_intent: PaymentIntentId::new("pi_1"),
                },
                11,
            )
            .unwrap();
        assert_eq!(paid.status, OrderStatus::Paid);
        assert_eq!(paid.version, claimed.version.next());
        assert_eq!(paid.payment_intent.as_ref().unwrap().as_str(), "pi_1");
    }

    #[test]
    fn paid_is_final() {
        let paid = order()
            .apply(claim("pm_card_visa"), 1)
            .unwrap()
            .apply(
                Transition::Pay {
                    payment_intent: PaymentIntentId::new("pi_1"),
                },
                2,
            )
            .unwrap();
        for t in [
            claim("pm_card_visa"),
            Transition::Reopen,
            Transition::Suspect { reason: "x".into() },
        ] {
            assert!(matches!(paid.apply(t, 3), Err(TransitionError::NotAllowed { .. })));
        }
    }

    #[test]
    fn an_unknown_outcome_only_leaves_reconciling_by_search() {
        let suspect = order()
            .apply(claim("pm_card_visa"), 1)
            .unwrap()
            .apply(
                Transition::Suspect {
                    reason: "timeout".into(),
                },
                2,
            )
            .unwrap();
        assert_eq!(suspect.status, OrderStatus::Reconciling);
        assert!(suspect.apply(claim("pm_card_visa"), 3).is_err());
        let reopened = suspect.apply(Transition::Reopen, 3).unwrap();
        assert_eq!(reopened.status, OrderStatus::Pending);
        // The same generation: the provider key does not change.
        assert_eq!(reopened.provider_key(), "order-o-1");
        // And the payment method is locked to the one already sent under that key.
        assert!(matches!(
            reopened.apply(claim("pm_card_mastercard"), 4),
            Err(TransitionError::PaymentMethodLocked(_))
        ));
    }

    #[test]
    fn a_decline_opens_a_new_generation_with_a_new_provider_key() {
        let declined = order()
            .apply(claim("pm_card_chargeDeclined"), 1)
            .unwrap()
            .apply(
                Transition::Decline {
                    decline_code: "generic_decline".into(),
                    message: "declined".into(),
                },
                2,
            )
            .unwrap();
        assert_eq!(declined.provider_key(), "order-o-1");
        let again = declined.apply(claim("pm_card_visa"), 3).unwrap();
        assert_eq!(again.generation, 1);
        assert_eq!(again.generation_attempts, 1);
        assert_eq!(again.attempts, 2);
        assert_eq!(again.decline_code, None);
        assert_eq!(again.payment_method.as_str(), "pm_card_visa");
        assert_eq!(again.provider_key(), "order-o-1-g1");
    }

    #[test]
    fn an_order_is_fulfilled_once_from_any_status() {
        let pi = || Transition::Fulfill {
            payment_intent: PaymentIntentId::new("pi_w"),
        };
        // The webhook may overtake the checkout's own answer: processing → paid.
        let claimed = order().apply(claim("pm_card_visa"), 1).unwrap();
        let fulfilled = claimed.apply(pi(), 2).unwrap();
        assert_eq!(fulfilled.status, OrderStatus::Paid);
        assert_eq!(fulfilled.fulfillments, 1);
        assert_eq!(fulfilled.payment_intent.as_ref().unwrap().as_str(), "pi_w");
        assert_eq!(fulfilled.version, claimed.version.next());
        assert_eq!(fulfilled.apply(pi(), 3), Err(TransitionError::AlreadyFulfilled));
        // A paid order keeps its payment intent.
        let paid = claimed
            .apply(
                Transition::Pay {
                    payment_intent: PaymentIntentId::new("pi_1"),
                },
                2,
            )
            .unwrap();
        let shipped = paid.apply(pi(), 3).unwrap();
        assert_eq!(shipped.payment_intent.as_ref().unwrap().as_str(), "pi_1");
        assert_eq!(shipped.fulfillments, 1);
    }

    #[test]
    fn lease_expiry_is_only_for_processing_orders() {
        let claimed = order().apply(claim("pm_card_visa"), 1).unwrap();
        assert!(!claimed.lease_expired(99));
        assert!(claimed.lease_expired(100));
        assert!(!order().lease_expired(1_000));
    }
}
