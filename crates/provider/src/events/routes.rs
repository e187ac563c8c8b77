//! The event endpoints: list and retrieve.

use crate::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::get("/v1/events", |p, c| p.list_events(c.params)),
    Endpoint::get("/v1/events/{id}", |p, c| p.retrieve_event(c.id)),
];
