//! The payment intent endpoints: create, retrieve, update, list, search, confirm,
//! capture, cancel.

use crate::resources::endpoint::{Endpoint, Publishable, Secured};

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/payment_intents", |p, c| p.create_intent(c.params, c.attempt)).reads(&[
        "amount",
        "automatic_payment_methods[enabled]",
        "capture_method",
        "confirm",
        "confirmation_method",
        "currency",
        "customer",
        "description",
        "expand",
        "metadata",
        "off_session",
        "payment_method",
        "payment_method_data[card][number]",
        "receipt_email",
        "return_url",
        "setup_future_usage",
        "statement_descriptor",
        "statement_descriptor_suffix",
        "transfer_group",
    ]),
    Endpoint::get("/v1/payment_intents", |p, c| p.list_intents(c.params)).reads(&[
        "customer",
        "ending_before",
        "expand",
        "limit",
        "starting_after",
    ]),
    Endpoint::get("/v1/payment_intents/search", |p, c| p.search_intents(c.params))
        .reads(&["expand", "limit", "page", "query"]),
    Endpoint::get("/v1/payment_intents/{id}", |p, c| p.retrieve_intent(c.id))
        .reads(&["client_secret", "expand"])
        .publishable(Publishable::WithClientSecret(Secured::PaymentIntent)),
    Endpoint::post("/v1/payment_intents/{id}", |p, c| {
        p.update_intent(c.id, c.params, c.attempt)
    })
    .reads(&[
        "amount",
        "capture_method",
        "currency",
        "customer",
        "description",
        "expand",
        "metadata",
        "payment_method",
        "receipt_email",
        "setup_future_usage",
        "statement_descriptor",
        "statement_descriptor_suffix",
        "transfer_group",
    ]),
    Endpoint::post("/v1/payment_intents/{id}/confirm", |p, c| {
        p.confirm_intent(c.id, c.params, c.attempt)
    })
    .publishable(Publishable::WithClientSecret(Secured::PaymentIntent))
    .reads(&[
        "capture_method",
        "client_secret",
        "expand",
        "off_session",
        "payment_method",
        "payment_method_data[card][number]",
        "return_url",
        "setup_future_usage",
    ]),
    Endpoint::post("/v1/payment_intents/{id}/capture", |p, c| {
        p.capture_intent(c.id, c.params, c.attempt)
    })
    .reads(&["amount_to_capture", "expand"]),
    Endpoint::post("/v1/payment_intents/{id}/cancel", |p, c| {
        p.cancel_intent(c.id, c.params, c.attempt)
    })
    .reads(&["cancellation_reason", "expand"]),
];
