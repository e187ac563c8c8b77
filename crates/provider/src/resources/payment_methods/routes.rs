//! The payment method endpoints: create, list, retrieve, update, attach, detach.

use crate::resources::endpoint::{Endpoint, Publishable};

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/payment_methods", |p, c| p.create_payment_method(c.params))
        .publishable(Publishable::Allowed)
        .reads(&[
            "billing_details",
            "card[cvc]",
            "card[exp_month]",
            "card[exp_year]",
            "card[number]",
            "card[token]",
            "expand",
            "metadata",
            "type",
        ]),
    Endpoint::get("/v1/payment_methods", |p, c| p.list_payment_methods(c.params)).reads(&[
        "customer",
        "ending_before",
        "expand",
        "limit",
        "starting_after",
        "type",
    ]),
    Endpoint::get("/v1/payment_methods/{id}", |p, c| p.retrieve_payment_method(c.id)).reads(&["expand"]),
    Endpoint::post("/v1/payment_methods/{id}", |p, c| {
        p.update_payment_method(c.id, c.params)
    })
    .reads(&[
        "billing_details",
        "card[exp_month]",
        "card[exp_year]",
        "expand",
        "metadata",
    ]),
    Endpoint::post("/v1/payment_methods/{id}/attach", |p, c| {
        p.attach_payment_method(c.id, c.params, c.attempt)
    })
    .reads(&["customer", "expand"]),
    Endpoint::post("/v1/payment_methods/{id}/detach", |p, c| {
        p.detach_payment_method(c.id, c.attempt)
    })
    .reads(&["expand"]),
];
