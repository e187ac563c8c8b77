//! The store of every Stripe object the provider keeps (payment intents, charges,
//! refunds, customers, payment methods, setup intents, events, webhook endpoints,
//! products, prices and Checkout Sessions),
//! the ledger of money movements, the duplicate policy, and where a payment's
//! correlation id comes from.
//!
//! [`Payments`] is plain Rust, free of HTTP: each operation takes validated
//! [`Params`] and the [`Attempt`] it came from and returns the Stripe object as JSON or
//! an [`ApiError`]. Money moves only under the ledger entry of the payment's correlation
//! id, taken before the object's own lock (always in the order ledger → intent → charge
//! → refund), so a state check and the transition it guards are one atomic step and the
//! duplicate check cannot race the append.
//!
//! Each resource folder (`payment_intents`, `charges`, `refunds`, `customers`, `products`,
//! `prices`, `checkout_sessions`,
//! `payment_methods`, `setup_intents`, `events`, `webhook_endpoints`) adds its operations to
//! [`Payments`] in its `rules.rs`; each publishes an event for every state change it makes
//! (`events::store`), under the same locks as the change. This file holds the state they share, the duplicate policy and where a payment's correlation
//! id comes from.

use std::sync::Arc;

use crate::error::ApiError;
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::charges::object::Charge;
use crate::resources::checkout_sessions::object::CheckoutSession;
use crate::resources::customers::object::Customer;
use crate::resources::events::object::EventType;
use crate::resources::events::store::Events;
use crate::resources::payment_intents::object::PaymentIntent;
use crate::resources::payment_methods::object::{Attachment, PaymentMethod};
use crate::resources::prices::object::Price;
use crate::resources::products::object::Product;
use crate::resources::refunds::object::Refund;
use crate::resources::setup_intents::object::SetupIntent;
use crate::resources::webhook_endpoints::object::WebhookEndpoint;
use crate::state::ledger::Ledger;
use crate::state::table::{Keyed, Table};
use crate::stripe::ids::CorrelationId;
use crate::stripe::params::Params;

#[cfg(test)]
mod tests;

/// What to do with a new charge for a correlation id that already has a captured one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuplicatePolicy {
    /// Charge again and flag it, as a real provider would.
    Allow,
    /// Refuse with a 402 `duplicate_transaction` decline and count it as blocked.
    Reject,
}

/// The first segment of a correlation path that names a Checkout Session's parameter.
const CHECKOUT: &str = "checkout";

/// Where a payment's correlation id comes from: a dotted path into its parameters,
/// such as `metadata.order_id` (the default) or `description`, or into its Checkout
/// Session's (`checkout.client_reference_id`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CorrelationSource(Vec<String>);

impl CorrelationSource {
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts: Vec<String> = s.split('.').map(str::to_string).collect();
        let valid = parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        if !valid || parts.len() > 3 || (parts[0] == CHECKOUT && parts.len() < 2) {
            return Err(format!(
                "invalid correlation path '{s}': expected a dotted parameter path such as metadata.order_id"
            ));
        }
        Ok(Self(parts))
    }

    /// The correlation id of a payment intent's or a charge's parameters (none for a
    /// `checkout.…` path, which names a Checkout Session's).
    pub fn of(&self, params: &Params) -> Option<CorrelationId> {
        if self.0.first().is_some_and(|p| p == CHECKOUT) {
            return None;
        }
        params.lookup_text(&self.0).map(CorrelationId::new)
    }

    /// The correlation id of a Checkout Session's create parameters, which its payment
    /// then carries: `checkout.client_reference_id` (any `checkout.…` path) names the
    /// session's own parameter; any other path is read from the session's parameters,
    /// then from its `payment_intent_data` (so `metadata.order_id`, the default, is the
    /// session's `metadata[order_id]`, else `payment_intent_data[metadata][order_id]`).
    pub fn of_session(&self, params: &Params) -> Option<CorrelationId> {
        let found = match self.0.split_first() {
            Some((first, rest)) if first == CHECKOUT => params.lookup_text(rest),
            _ => params.lookup_text(&self.0).or_else(|| {
                let under: Vec<String> = std::iter::once("payment_intent_data".to_string())
                    .chain(self.0.iter().cloned())
                    .collect();
                params.lookup_text(&under)
            }),
        };
        found.map(CorrelationId::new)
    }
}

impl std::fmt::Display for CorrelationSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("."))
    }
}

/// All payment state and the rules that move it.
pub struct Payments {
    pub intents: Table<Arc<PaymentIntent>>,
    pub charges: Table<Arc<Charge>>,
    pub refunds: Table<Arc<Refund>>,
    pub customers: Table<Arc<Customer>>,
    pub payment_methods: Table<Arc<PaymentMethod>>,
    pub setup_intents: Table<Arc<SetupIntent>>,
    pub webhook_endpoints: Table<Arc<WebhookEndpoint>>,
    pub products: Table<Arc<Product>>,
    pub prices: Table<Arc<Price>>,
    pub checkout_sessions: Table<Arc<CheckoutSession>>,
    /// Every event, published by the rules at their commit points.
    pub events: Events,
    pub ledger: Ledger,
    pub policy: DuplicatePolicy,
    pub correlate: CorrelationSource,
}

impl Payments {
    pub fn new(policy: DuplicatePolicy, correlate: CorrelationSource) -> Self {
        Self {
            intents: Table::default(),
            charges: Table::default(),
            refunds: Table::default(),
            customers: Table::default(),
            payment_methods: Table::default(),
            setup_intents: Table::default(),
            webhook_endpoints: Table::default(),
            products: Table::default(),
            prices: Table::default(),
            checkout_sessions: Table::default(),
            events: Events::default(),
            ledger: Ledger::default(),
            policy,
            correlate,
        }
    }

    /// The `*.updated` shape every plain update shares: `edit` changes a copy of the row
    /// `id` of `table`, the copy takes its place, and `event` announces it with the row
    /// before as `previous_attributes`. `None` when there is no such row; an `Err` from
    /// `edit` leaves the row as it was.
    pub(crate) fn update_announced<T: Clone>(
        &self,
        table: &Table<Arc<T>>,
        id: &<Arc<T> as Keyed>::Key,
        event: EventType,
        reply: fn(Arc<T>) -> Reply,
        attempt: &Attempt,
        edit: impl FnOnce(&mut T) -> Result<(), ApiError>,
    ) -> Option<Result<Reply, ApiError>>
    where
        Arc<T>: Keyed,
    {
        table.update(id, |slot| {
            let mut row = (**slot).clone();
            edit(&mut row)?;
            let before = std::mem::replace(slot, Arc::new(row));
            self.events
                .emit(event, reply(slot.clone()), Some(reply(before)), attempt);
            Ok(reply(slot.clone()))
        })
    }

    /// The correlation id of a request, read once per request.
    pub(crate) fn correlation_id(&self, p: &Params, attempt: &Attempt) -> Option<CorrelationId> {
        attempt.correlation_id.clone().or_else(|| self.correlate.of(p))
    }

    /// Adds the key of every object and ledger record stored now to `live` (what the data
    /// dir's compaction keeps the writes of).
    pub fn live_keys(&self, live: &mut impl Extend<crate::state::trace::Touch>) {
        self.intents.live_keys(live);
        self.charges.live_keys(live);
        self.refunds.live_keys(live);
        self.customers.live_keys(live);
        self.payment_methods.live_keys(live);
        self.setup_intents.live_keys(live);
        self.webhook_endpoints.live_keys(live);
        self.products.live_keys(live);
        self.prices.live_keys(live);
        self.checkout_sessions.live_keys(live);
        self.events.table.live_keys(live);
        self.ledger.live_keys(live);
    }

    pub fn reset(&self) {
        self.intents.clear();
        self.charges.clear();
        self.refunds.clear();
        self.customers.clear();
        self.payment_methods.clear();
        self.setup_intents.clear();
        self.webhook_endpoints.clear();
        self.products.clear();
        self.prices.clear();
        self.checkout_sessions.clear();
        self.events.set_endpoints(Vec::new());
        self.events.clear();
        self.ledger.clear();
    }

    /// `--retain`: forgets what was created before `cutoff_ms` (Unix milliseconds):
    /// payment intents, charges, refunds, setup intents, Checkout Sessions, events,
    /// payment methods not saved to a customer, and ledger records but duplicate groups
    /// (the summary stays exact), and the prices and products a session made from its
    /// `price_data`. Customers, their saved cards, the merchant's products and prices, and
    /// webhook endpoints stay. Returns how many
    /// objects and records left.
    pub fn retire_before(&self, cutoff_ms: u64) -> usize {
        let cutoff = (cutoff_ms / 1000) as i64;
        self.intents.retain(|o| o.created.get() >= cutoff)
            + self.charges.retain(|o| o.created.get() >= cutoff)
            + self.refunds.retain(|o| o.created >= cutoff)
            + self.setup_intents.retain(|o| o.created >= cutoff)
            + self.checkout_sessions.retain(|o| o.created >= cutoff)
            // A session's `price_data` price and product go with it.
            + self.prices.retain(|o| !o.inline || o.created >= cutoff)
            + self.products.retain(|o| !o.inline || o.created >= cutoff)
            + self.events.table.retain(|e| e.created() >= cutoff)
            + self
                .payment_methods
                .retain(|pm| pm.created >= cutoff || matches!(pm.attachment, Attachment::Customer(_)))
            + self.ledger.retire_before(cutoff_ms)
    }
}
