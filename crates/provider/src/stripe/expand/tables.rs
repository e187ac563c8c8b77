//! What `expand[]` may name on each object type, and what each name becomes: one table
//! per object type ([`Expandable`]), kept to Stripe's spec by a unit test (every name is
//! in the schema's `x-expandableFields`, every field fauxpay expands is an id reference
//! there, and no reference to an object fauxpay keeps is left unexpanded); and how an
//! object of each [`Kind`] is found by its id.
//!
//! Adding an object type: a [`Kind`] variant (its resource's path segment and its schema
//! in the spec), its table, and its arm in [`resolve`]; a field of an existing object
//! that now names one: move it from `accepted` to `fields`.

use serde_json::{json, Value};

use crate::resources::payment_methods::object::PaymentMethod;
use crate::resources::payment_methods::rules::test_card;
use crate::state::payments::Payments;
use crate::state::table::Cursor;
use crate::stripe::ids::{ChargeId, CustomerId, PaymentIntentId, PaymentMethodId, ProductId, RefundId, SetupIntentId};

/// The object types fauxpay keeps, as expansion names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    PaymentIntent,
    Charge,
    Refund,
    Customer,
    PaymentMethod,
    /// Setup intents: a setup-mode Checkout Session names one.
    SetupIntent,
    /// Events: nothing names one; nothing in one expands.
    Event,
    /// Webhook endpoints: nothing names one; nothing in one expands.
    WebhookEndpoint,
    Product,
    Price,
    /// Checkout Sessions (`/v1/checkout/sessions`).
    CheckoutSession,
    /// A Checkout Session's line items (`item`).
    LineItem,
}

impl Kind {
    pub const ALL: &'static [Kind] = &[
        Kind::PaymentIntent,
        Kind::Charge,
        Kind::Refund,
        Kind::Customer,
        Kind::PaymentMethod,
        Kind::SetupIntent,
        Kind::Event,
        Kind::WebhookEndpoint,
        Kind::Product,
        Kind::Price,
        Kind::CheckoutSession,
        Kind::LineItem,
    ];

    /// The path segment of its endpoints (`/v1/payment_intents…`).
    pub fn resource(self) -> &'static str {
        match self {
            Kind::PaymentIntent => "payment_intents",
            Kind::Charge => "charges",
            Kind::Refund => "refunds",
            Kind::Customer => "customers",
            Kind::PaymentMethod => "payment_methods",
            Kind::SetupIntent => "setup_intents",
            Kind::Event => "events",
            Kind::WebhookEndpoint => "webhook_endpoints",
            Kind::Product => "products",
            Kind::Price => "prices",
            Kind::CheckoutSession => "sessions",
            Kind::LineItem => "line_items",
        }
    }

    /// Its schema in Stripe's spec (`components.schemas`).
    pub fn schema(self) -> &'static str {
        match self {
            Kind::PaymentIntent => "payment_intent",
            Kind::Charge => "charge",
            Kind::Refund => "refund",
            Kind::Customer => "customer",
            Kind::PaymentMethod => "payment_method",
            Kind::SetupIntent => "setup_intent",
            Kind::Event => "event",
            Kind::WebhookEndpoint => "webhook_endpoint",
            Kind::Product => "product",
            Kind::Price => "price",
            Kind::CheckoutSession => "checkout.session",
            Kind::LineItem => "item",
        }
    }

    /// What `expand[]` may name on it.
    pub fn expandable(self) -> &'static Expandable {
        match self {
            Kind::PaymentIntent => &PAYMENT_INTENT,
            Kind::Charge => &CHARGE,
            Kind::Refund => &REFUND,
            Kind::Customer => &CUSTOMER,
            Kind::PaymentMethod => &PAYMENT_METHOD,
            Kind::SetupIntent => &SETUP_INTENT,
            Kind::Event => &EVENT,
            Kind::WebhookEndpoint => &NOTHING,
            Kind::Product => &PRODUCT,
            Kind::Price => &PRICE,
            Kind::CheckoutSession => &CHECKOUT_SESSION,
            Kind::LineItem => &LINE_ITEM,
        }
    }

    /// The kind whose endpoints live under `/v1/{segment}`.
    pub fn of_resource(segment: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.resource() == segment)
    }
}

/// The expandable fields of an object (or of a hash inside one).
#[derive(Debug)]
pub struct Expandable {
    /// The fields fauxpay expands, and what each becomes.
    pub fields: &'static [(&'static str, Target)],
    /// Stripe's other expandable fields: an id of an object fauxpay does not keep (always
    /// `null` in fauxpay's objects, or an id such as `balance_transaction`), a hash with
    /// nothing fauxpay expands inside, or a field Stripe sends only when expanded that
    /// fauxpay does not model. Accepted, and left as they are; so is whatever a path
    /// names below them.
    pub accepted: &'static [&'static str],
}

impl Expandable {
    /// What `name` becomes: `Some(None)` for an accepted field with nothing to expand,
    /// `None` for a field that cannot be expanded.
    pub fn target(&self, name: &str) -> Option<Option<Target>> {
        match self.fields.iter().find(|(n, _)| *n == name) {
            Some((_, target)) => Some(Some(*target)),
            None => self.accepted.contains(&name).then_some(None),
        }
    }
}

/// What an expandable field becomes.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// An id: replaced by the object of this kind.
    Object(Kind),
    /// A hash inside the object, with expandable fields of its own.
    Inner(&'static Expandable),
    /// A list Stripe sends only when it is expanded, of objects of this kind.
    Included(Included),
}

/// The lists Stripe includes in an object only when `expand[]` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Included {
    /// A charge's `refunds` (left out of charges since API version 2022-11-15).
    ChargeRefunds,
    /// A Checkout Session's `line_items`.
    SessionLineItems,
}

impl Included {
    /// The kind of the list's objects.
    pub fn kind(self) -> Kind {
        match self {
            Included::ChargeRefunds => Kind::Refund,
            Included::SessionLineItems => Kind::LineItem,
        }
    }
}

/// `event`: its `data` and `request` are hashes with nothing fauxpay expands.
static EVENT: Expandable = Expandable {
    fields: &[],
    accepted: &["data", "request"],
};

/// An object with nothing to expand (webhook endpoints).
static NOTHING: Expandable = Expandable {
    fields: &[],
    accepted: &[],
};

/// `payment_intent`: its customer, latest charge and payment method.
const PAYMENT_INTENT: Expandable = Expandable {
    fields: &[
        ("customer", Target::Object(Kind::Customer)),
        ("latest_charge", Target::Object(Kind::Charge)),
        ("payment_method", Target::Object(Kind::PaymentMethod)),
    ],
    accepted: &[
        "amount_details",
        "application",
        "automatic_payment_methods",
        "invoice",
        "last_payment_error",
        "next_action",
        "on_behalf_of",
        "payment_method_options",
        "processing",
        "review",
        "shipping",
        "transfer_data",
    ],
};

/// `charge`: its customer and payment intent, and its refunds (a list).
const CHARGE: Expandable = Expandable {
    fields: &[
        ("customer", Target::Object(Kind::Customer)),
        ("payment_intent", Target::Object(Kind::PaymentIntent)),
        ("refunds", Target::Included(Included::ChargeRefunds)),
    ],
    accepted: &[
        "application",
        "application_fee",
        "balance_transaction",
        "billing_details",
        "failure_balance_transaction",
        "fraud_details",
        "invoice",
        "on_behalf_of",
        "outcome",
        "payment_method_details",
        "radar_options",
        "review",
        "shipping",
        "source_transfer",
        "transfer",
        "transfer_data",
    ],
};

/// `refund`: its charge and payment intent.
const REFUND: Expandable = Expandable {
    fields: &[
        ("charge", Target::Object(Kind::Charge)),
        ("payment_intent", Target::Object(Kind::PaymentIntent)),
    ],
    accepted: &[
        "balance_transaction",
        "failure_balance_transaction",
        "next_action",
        "source_transfer_reversal",
        "transfer_reversal",
    ],
};

/// `customer`: `invoice_settings.default_payment_method`.
const CUSTOMER: Expandable = Expandable {
    fields: &[("invoice_settings", Target::Inner(&INVOICE_SETTINGS))],
    accepted: &[
        "address",
        "cash_balance",
        "default_source",
        "discount",
        "shipping",
        "sources",
        "subscriptions",
        "tax",
        "tax_ids",
        "test_clock",
    ],
};

/// A customer's `invoice_settings` (`invoice_setting_customer_setting`).
const INVOICE_SETTINGS: Expandable = Expandable {
    fields: &[("default_payment_method", Target::Object(Kind::PaymentMethod))],
    accepted: &["custom_fields", "rendering_options"],
};

/// `payment_method`: its customer.
const PAYMENT_METHOD: Expandable = Expandable {
    fields: &[("customer", Target::Object(Kind::Customer))],
    accepted: &[
        "acss_debit",
        "affirm",
        "afterpay_clearpay",
        "alipay",
        "au_becs_debit",
        "bacs_debit",
        "bancontact",
        "billing_details",
        "blik",
        "boleto",
        "card",
        "card_present",
        "cashapp",
        "customer_balance",
        "eps",
        "fpx",
        "giropay",
        "grabpay",
        "ideal",
        "interac_present",
        "klarna",
        "konbini",
        "link",
        "oxxo",
        "p24",
        "paynow",
        "paypal",
        "pix",
        "promptpay",
        "radar_options",
        "sepa_debit",
        "sofort",
        "us_bank_account",
        "wechat_pay",
        "zip",
    ],
};

/// `setup_intent`: its customer and payment method.
const SETUP_INTENT: Expandable = Expandable {
    fields: &[
        ("customer", Target::Object(Kind::Customer)),
        ("payment_method", Target::Object(Kind::PaymentMethod)),
    ],
    accepted: &[
        "application",
        "automatic_payment_methods",
        "last_setup_error",
        "latest_attempt",
        "mandate",
        "next_action",
        "on_behalf_of",
        "payment_method_options",
        "single_use_mandate",
    ],
};

/// `product`: its default price.
const PRODUCT: Expandable = Expandable {
    fields: &[("default_price", Target::Object(Kind::Price))],
    accepted: &["features", "package_dimensions", "tax_code"],
};

/// `price`: its product.
const PRICE: Expandable = Expandable {
    fields: &[("product", Target::Object(Kind::Product))],
    accepted: &[
        "currency_options",
        "custom_unit_amount",
        "recurring",
        "tiers",
        "transform_quantity",
    ],
};

/// `checkout.session`: its customer, payment or setup intent, and its line items (a list).
const CHECKOUT_SESSION: Expandable = Expandable {
    fields: &[
        ("customer", Target::Object(Kind::Customer)),
        ("line_items", Target::Included(Included::SessionLineItems)),
        ("payment_intent", Target::Object(Kind::PaymentIntent)),
        ("setup_intent", Target::Object(Kind::SetupIntent)),
    ],
    accepted: &[
        "after_expiration",
        "automatic_tax",
        "consent",
        "consent_collection",
        "currency_conversion",
        "custom_fields",
        "custom_text",
        "customer_details",
        "invoice",
        "invoice_creation",
        "payment_link",
        "payment_method_options",
        "phone_number_collection",
        "shipping_address_collection",
        "shipping_cost",
        "shipping_details",
        "shipping_options",
        "subscription",
        "tax_id_collection",
        "total_details",
    ],
};

/// `item` (a session's line item): its price is always embedded.
const LINE_ITEM: Expandable = Expandable {
    fields: &[],
    accepted: &["discounts", "price", "taxes"],
};

/// The object of `kind` with this `id`, as its retrieve answers it (a deleted customer
/// as Stripe's deleted object); `owner` is the object that names it, by kind and id.
/// `None` when fauxpay has no such object: the id is then left as it is.
pub fn resolve(p: &Payments, kind: Kind, id: &str, owner: Option<(Kind, &str)>) -> Option<Value> {
    match kind {
        Kind::PaymentIntent => PaymentIntentId::parse(id)
            .and_then(|id| p.intents.get(&id))
            .map(|o| o.to_json()),
        Kind::Charge => ChargeId::parse(id)
            .and_then(|id| p.charges.get(&id))
            .map(|o| o.to_json()),
        Kind::Refund => RefundId::parse(id)
            .and_then(|id| p.refunds.get(&id))
            .map(|o| o.to_json()),
        Kind::Customer => CustomerId::parse(id)
            .and_then(|id| p.customers.get(&id))
            .map(|o| o.to_json()),
        Kind::PaymentMethod => payment_method(p, id, owner),
        Kind::SetupIntent => SetupIntentId::parse(id)
            .and_then(|id| p.setup_intents.get(&id))
            .map(|o| o.to_json()),
        Kind::Product => ProductId::parse(id)
            .and_then(|id| p.products.get(&id))
            .map(|o| o.to_json()),
        Kind::Price => p.price(id).map(|o| o.to_json()),
        Kind::CheckoutSession => p.checkout_session(id).map(|o| o.to_json()),
        Kind::Event | Kind::WebhookEndpoint | Kind::LineItem => None,
    }
}

/// A payment method: a saved one, a magic test id (`pm_card_visa`) under its own name,
/// or the `pm_…` a payment intent paid with when it was given a test id directly. Stripe
/// makes that one an object of its own; fauxpay keeps only its card on the intent, and
/// writes the object from it (created with the intent, attached to no customer).
fn payment_method(p: &Payments, id: &str, owner: Option<(Kind, &str)>) -> Option<Value> {
    if let Some(card) = test_card(id) {
        return Some(PaymentMethod::test_json(card));
    }
    let pm_id = PaymentMethodId::parse(id)?;
    if let Some(pm) = p.payment_methods.get(&pm_id) {
        return Some(pm.to_json());
    }
    let (Kind::PaymentIntent, intent) = owner? else {
        return None;
    };
    let pi = p.intents.get(&PaymentIntentId::parse(intent)?)?;
    if pi.payment_method != Some(pm_id) {
        return None;
    }
    let mut pm = PaymentMethod::new(pi.card()?);
    pm.id = pm_id;
    pm.created = pi.created.get();
    Some(pm.to_json())
}

/// The list `included` adds to the object `owner` (its id), as Stripe embeds it: the
/// first page (ten, newest first), with `has_more` and the list's own URL.
pub fn include(p: &Payments, included: Included, owner: &str) -> Option<Value> {
    match included {
        Included::ChargeRefunds => {
            let charge = ChargeId::parse(owner)?;
            let page = p.refunds.page(Cursor::Start, 10, |r| r.charge == charge);
            let data: Vec<Value> = page.items.iter().map(|r| r.to_json()).collect();
            Some(json!({
                "object": "list",
                "data": data,
                "has_more": page.has_more,
                "url": format!("/v1/charges/{owner}/refunds"),
            }))
        }
        Included::SessionLineItems => {
            let session = p.checkout_session(owner)?;
            let data: Vec<Value> = session.line_items.iter().take(10).map(|l| l.to_json()).collect();
            Some(json!({
                "object": "list",
                "data": data,
                "has_more": session.line_items.len() > 10,
                "url": format!("/v1/checkout/sessions/{owner}/line_items"),
            }))
        }
    }
}
