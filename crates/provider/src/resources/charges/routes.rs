//! The charge endpoints: create, retrieve, update, list, search, capture. (A charge's
//! refunds, `/v1/charges/{id}/refund` and `/v1/charges/{id}/refunds…`, are the refunds'.)

use crate::resources::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/charges", |p, c| p.create_charge(c.params, c.attempt)).reads(&[
        "amount",
        "capture",
        "currency",
        "description",
        "expand",
        "metadata",
        "source",
    ]),
    Endpoint::get("/v1/charges", |p, c| p.list_charges(c.params)).reads(&[
        "ending_before",
        "expand",
        "limit",
        "payment_intent",
        "starting_after",
    ]),
    Endpoint::get("/v1/charges/search", |p, c| p.search_charges(c.params)).reads(&["expand", "limit", "page", "query"]),
    Endpoint::get("/v1/charges/{id}", |p, c| p.retrieve_charge(c.id)).reads(&["expand"]),
    Endpoint::post("/v1/charges/{id}", |p, c| p.update_charge(c.id, c.params, c.attempt)).reads(&[
        "description",
        "expand",
        "metadata",
    ]),
    Endpoint::post("/v1/charges/{id}/capture", |p, c| {
        p.capture_charge(c.id, c.params, c.attempt)
    })
    .reads(&["amount", "expand"]),
];
