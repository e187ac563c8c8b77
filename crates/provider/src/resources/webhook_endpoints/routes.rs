//! The webhook endpoint endpoints: create, list, retrieve, update, delete.

use crate::resources::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/webhook_endpoints", |p, c| {
        p.create_webhook_endpoint(c.params, c.attempt)
    })
    .reads(&["connect", "description", "enabled_events", "expand", "metadata", "url"]),
    Endpoint::get("/v1/webhook_endpoints", |p, c| p.list_webhook_endpoints(c.params)).reads(&[
        "ending_before",
        "expand",
        "limit",
        "starting_after",
    ]),
    Endpoint::get("/v1/webhook_endpoints/{id}", |p, c| p.retrieve_webhook_endpoint(c.id)).reads(&["expand"]),
    Endpoint::post("/v1/webhook_endpoints/{id}", |p, c| {
        p.update_webhook_endpoint(c.id, c.params, c.attempt)
    })
    .reads(&["description", "disabled", "enabled_events", "expand", "metadata", "url"]),
    Endpoint::delete("/v1/webhook_endpoints/{id}", |p, c| p.delete_webhook_endpoint(c.id)).reads(&[]),
];
