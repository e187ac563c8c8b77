//! The setup intent endpoints: create, list, retrieve, update, confirm, cancel.

use crate::resources::endpoint::{Endpoint, Publishable, Secured};

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/setup_intents", |p, c| p.create_setup_intent(c.params, c.attempt)).reads(&[
        "confirm",
        "customer",
        "description",
        "expand",
        "metadata",
        "payment_method",
        "payment_method_data",
        "payment_method_types",
        "return_url",
        "usage",
    ]),
    Endpoint::get("/v1/setup_intents", |p, c| p.list_setup_intents(c.params)).reads(&[
        "created",
        "customer",
        "ending_before",
        "expand",
        "limit",
        "payment_method",
        "starting_after",
    ]),
    Endpoint::get("/v1/setup_intents/{id}", |p, c| p.retrieve_setup_intent(c.id))
        .reads(&["client_secret", "expand"])
        .publishable(Publishable::WithClientSecret(Secured::SetupIntent)),
    Endpoint::post("/v1/setup_intents/{id}", |p, c| p.update_setup_intent(c.id, c.params)).reads(&[
        "customer",
        "description",
        "expand",
        "metadata",
        "payment_method",
        "payment_method_data",
        "payment_method_types",
    ]),
    Endpoint::post("/v1/setup_intents/{id}/confirm", |p, c| {
        p.confirm_setup_intent(c.id, c.params, c.attempt)
    })
    .reads(&[
        "client_secret",
        "expand",
        "payment_method",
        "payment_method_data",
        "return_url",
    ])
    .publishable(Publishable::WithClientSecret(Secured::SetupIntent)),
    Endpoint::post("/v1/setup_intents/{id}/cancel", |p, c| {
        p.cancel_setup_intent(c.id, c.params, c.attempt)
    })
    .reads(&["cancellation_reason", "expand"]),
];
