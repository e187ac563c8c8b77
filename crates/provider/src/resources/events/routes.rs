//! The event endpoints: list and retrieve.

use crate::resources::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::get("/v1/events", |p, c| p.list_events(c.params)).reads(&[
        "created",
        "delivery_success",
        "ending_before",
        "expand",
        "limit",
        "starting_after",
        "type",
        "types",
    ]),
    Endpoint::get("/v1/events/{id}", |p, c| p.retrieve_event(c.id)).reads(&["expand"]),
];
