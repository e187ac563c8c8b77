//! The charge endpoints: create, retrieve, update, list, search, capture. (A charge's
//! refunds, `/v1/charges/{id}/refund` and `/v1/charges/{id}/refunds…`, are the refunds'.)

use crate::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/charges", |p, c| p.create_charge(c.params, c.attempt)),
    Endpoint::get("/v1/charges", |p, c| p.list_charges(c.params)),
    Endpoint::get("/v1/charges/search", |p, c| p.search_charges(c.params)),
    Endpoint::get("/v1/charges/{id}", |p, c| p.retrieve_charge(c.id)),
    Endpoint::post("/v1/charges/{id}", |p, c| p.update_charge(c.id, c.params, c.attempt)),
    Endpoint::post("/v1/charges/{id}/capture", |p, c| {
        p.capture_charge(c.id, c.params, c.attempt)
    }),
];
