//! The setup intent endpoints: create, list, retrieve, update, confirm, cancel.

use crate::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/setup_intents", |p, c| p.create_setup_intent(c.params, c.attempt)),
    Endpoint::get("/v1/setup_intents", |p, c| p.list_setup_intents(c.params)),
    Endpoint::get("/v1/setup_intents/{id}", |p, c| p.retrieve_setup_intent(c.id)),
    Endpoint::post("/v1/setup_intents/{id}", |p, c| p.update_setup_intent(c.id, c.params)),
    Endpoint::post("/v1/setup_intents/{id}/confirm", |p, c| {
        p.confirm_setup_intent(c.id, c.params, c.attempt)
    }),
    Endpoint::post("/v1/setup_intents/{id}/cancel", |p, c| {
        p.cancel_setup_intent(c.id, c.params, c.attempt)
    }),
];
