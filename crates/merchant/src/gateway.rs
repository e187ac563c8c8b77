//! The payment provider as the merchant sees it: charge, find the charges of an order, and
//! open a payment the customer's browser completes (an intent to confirm, a Checkout
//! Session to pay).
//!
//! [`Gateway`] is what the strategies (and the storefront, to open a browser's payment)
//! call; `stripe_gateway` implements it over the
//! provider's HTTP API, and tests can substitute their own. The important part is the
//! classification of a charge's outcome ([`ChargeOutcome`]): a success or a decline is
//! definite; a refused request, a 429 or a refused connection definitely charged nothing;
//! everything else — a timeout, a connection lost mid-request, any 5xx, a 409 for a key in
//! use — leaves the outcome *unknown*, and only a search can say whether money moved.

use async_trait::async_trait;

use super::order::{Amount, Currency, OrderId, PaymentIntentId, PaymentMethod};

/// One charge: a payment intent created and confirmed at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeRequest {
    pub order_id: OrderId,
    pub amount: Amount,
    pub currency: Currency,
    pub payment_method: PaymentMethod,
    /// The provider idempotency key, if any.
    pub idempotency_key: Option<String>,
}

/// What a charge call established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeOutcome {
    /// The provider charged: this payment intent succeeded.
    Succeeded { payment_intent: PaymentIntentId },
    /// The provider declined the card: nothing was charged.
    Declined { decline_code: String, message: String },
    /// The provider refused the request as invalid (400): nothing was charged or stored.
    Rejected { param: Option<String>, message: String },
    /// Definitely nothing charged, but worth retrying (429, connection refused, 401…).
    NotCharged { reason: String },
    /// The provider may or may not have charged.
    Unknown { reason: String, timed_out: bool },
}

/// A payment intent found by a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundPayment {
    pub payment_intent: PaymentIntentId,
    /// The provider's status: `succeeded`, `requires_payment_method` (declined), …
    pub status: String,
    pub amount: u64,
    pub currency: String,
    /// Unix seconds.
    pub created: i64,
}

impl FoundPayment {
    pub fn succeeded(&self) -> bool {
        self.status == "succeeded"
    }

    /// Whether the intent is in a state that may still turn into a charge.
    pub fn unsettled(&self) -> bool {
        matches!(
            self.status.as_str(),
            "processing" | "requires_capture" | "requires_confirmation" | "requires_action"
        )
    }
}

/// A payment the customer's browser completes, opened by the merchant's server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenPayment {
    pub order_id: OrderId,
    pub amount: Amount,
    pub currency: Currency,
    pub completion: Completion,
}

/// How the browser completes an opened payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// A payment intent it confirms with the intent's `client_secret` (Payment Element).
    Intent,
    /// A Checkout Session the customer pays on the provider's page, then back to
    /// `success_url` (or `cancel_url`); `name` is the line item's.
    Session {
        name: String,
        success_url: String,
        cancel_url: String,
    },
}

/// What the browser needs to complete an opened payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedPayment {
    /// The intent's or the session's id.
    pub id: String,
    /// An intent's `client_secret`.
    pub client_secret: Option<String>,
    /// A session's page.
    pub url: Option<String>,
}

/// What the merchant reads of a Checkout Session when its customer comes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    /// `metadata.order_id`, when it is a valid order id.
    pub order_id: Option<OrderId>,
    /// Its intent's id, once it has one.
    pub payment_intent: Option<PaymentIntentId>,
    /// `payment_status` is `paid`.
    pub paid: bool,
}

/// A search (or an opening) that did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the provider call failed: {0}")]
pub struct GatewayError(pub String);

#[async_trait]
pub trait Gateway: Send + Sync + 'static {
    /// Creates and confirms a payment intent; never fails, it classifies.
    async fn charge(&self, req: &ChargeRequest) -> ChargeOutcome;

    /// The payment intents whose `metadata[order_id]` is `order` (a read: charges nothing).
    async fn find_payments(&self, order: &OrderId) -> Result<Vec<FoundPayment>, GatewayError>;

    /// Opens a payment the customer's browser completes (charges nothing). A gateway that
    /// cannot (a test's stand-in) says so.
    async fn open_payment(&self, open: &OpenPayment) -> Result<OpenedPayment, GatewayError> {
        Err(GatewayError(format!(
            "this gateway cannot open a browser payment (order {})",
            open.order_id
        )))
    }

    /// Reads Checkout Session `id` (a read: charges nothing); `None` when the provider
    /// has no such session.
    async fn checkout_session(&self, id: &str) -> Result<Option<SessionState>, GatewayError> {
        Err(GatewayError(format!("this gateway cannot read Checkout Session {id}")))
    }
}
