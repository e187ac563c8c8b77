//! The Checkout Session endpoints: Stripe's under `/v1` (create, list, retrieve,
//! expire, line items: the spec of API version 2023-08-16 has no update), and fauxpay's own under `/__fauxpay/` that run through the
//! request pipeline like them: the customer's pay (the hosted page's form, or a script),
//! and the expiry sweep's lapse (the provider's own, not routed).

use crate::resources::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/checkout/sessions", |p, c| {
        p.create_checkout_session(c.params, c.attempt)
    })
    .reads(&[
        "cancel_url",
        "client_reference_id",
        "currency",
        "customer",
        "customer_creation",
        "customer_email",
        "expand",
        "expires_at",
        "line_items",
        "metadata",
        "mode",
        "payment_intent_data[capture_method]",
        "payment_intent_data[description]",
        "payment_intent_data[metadata]",
        "payment_intent_data[setup_future_usage]",
        "payment_method_types",
        "success_url",
        "ui_mode",
    ]),
    Endpoint::get("/v1/checkout/sessions", |p, c| p.list_checkout_sessions(c.params)).reads(&[
        "customer",
        "customer_details[email]",
        "ending_before",
        "expand",
        "limit",
        "payment_intent",
        "starting_after",
    ]),
    Endpoint::get("/v1/checkout/sessions/{id}", |p, c| p.retrieve_checkout_session(c.id)).reads(&["expand"]),
    Endpoint::post("/v1/checkout/sessions/{id}/expire", |p, c| {
        p.expire_checkout_session(c.id, c.attempt)
    })
    .reads(&["expand"]),
    Endpoint::get("/v1/checkout/sessions/{id}/line_items", |p, c| {
        p.list_line_items(c.id, c.params)
    })
    .reads(&["ending_before", "expand", "limit", "starting_after"]),
];

/// The customer's pay: `payment_method`, `email`, and `redirect=true` from the page.
pub const PAY: Endpoint = Endpoint::post("/__fauxpay/checkout/sessions/{id}/pay", |p, c| {
    p.pay_checkout_session(c.id, c.params, c.attempt)
});

/// The expiry sweep's lapse of one session (`now`: the provider's time).
pub const LAPSE: Endpoint = Endpoint::post("/__fauxpay/checkout/sessions/{id}/lapse", |p, c| {
    p.lapse_checkout_session(c.id, c.params, c.attempt)
});

/// fauxpay's own endpoints, as recovery finds them.
pub const FAUXPAY_ENDPOINTS: &[Endpoint] = &[PAY, LAPSE];
