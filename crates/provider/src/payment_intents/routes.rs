//! The payment intent endpoints: create, retrieve, update, list, search, confirm,
//! capture, cancel.

use crate::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/payment_intents", |p, c| p.create_intent(c.params, c.attempt)),
    Endpoint::get("/v1/payment_intents", |p, c| p.list_intents(c.params)),
    Endpoint::get("/v1/payment_intents/search", |p, c| p.search_intents(c.params)),
    Endpoint::get("/v1/payment_intents/{id}", |p, c| p.retrieve_intent(c.id)),
    Endpoint::post("/v1/payment_intents/{id}", |p, c| {
        p.update_intent(c.id, c.params, c.attempt)
    }),
    Endpoint::post("/v1/payment_intents/{id}/confirm", |p, c| {
        p.confirm_intent(c.id, c.params, c.attempt)
    }),
    Endpoint::post("/v1/payment_intents/{id}/capture", |p, c| {
        p.capture_intent(c.id, c.params, c.attempt)
    }),
    Endpoint::post("/v1/payment_intents/{id}/cancel", |p, c| {
        p.cancel_intent(c.id, c.params, c.attempt)
    }),
];
