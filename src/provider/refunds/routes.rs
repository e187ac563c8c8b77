//! The refund endpoints: create, retrieve, list.

use crate::provider::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/refunds", |p, c| p.create_refund(c.params, c.attempt)),
    Endpoint::get("/v1/refunds", |p, c| p.list_refunds(c.params)),
    Endpoint::get("/v1/refunds/{id}", |p, c| p.retrieve_refund(c.id)),
];
