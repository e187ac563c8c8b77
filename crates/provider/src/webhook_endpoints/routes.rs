//! The webhook endpoint endpoints: create, list, retrieve, update, delete.

use crate::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/webhook_endpoints", |p, c| {
        p.create_webhook_endpoint(c.params, c.attempt)
    }),
    Endpoint::get("/v1/webhook_endpoints", |p, c| p.list_webhook_endpoints(c.params)),
    Endpoint::get("/v1/webhook_endpoints/{id}", |p, c| p.retrieve_webhook_endpoint(c.id)),
    Endpoint::post("/v1/webhook_endpoints/{id}", |p, c| {
        p.update_webhook_endpoint(c.id, c.params, c.attempt)
    }),
    Endpoint::delete("/v1/webhook_endpoints/{id}", |p, c| p.delete_webhook_endpoint(c.id)),
];
