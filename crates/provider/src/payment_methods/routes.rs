//! The payment method endpoints: create, list, retrieve, update, attach, detach.

use crate::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/payment_methods", |p, c| p.create_payment_method(c.params)),
    Endpoint::get("/v1/payment_methods", |p, c| p.list_payment_methods(c.params)),
    Endpoint::get("/v1/payment_methods/{id}", |p, c| p.retrieve_payment_method(c.id)),
    Endpoint::post("/v1/payment_methods/{id}", |p, c| {
        p.update_payment_method(c.id, c.params)
    }),
    Endpoint::post("/v1/payment_methods/{id}/attach", |p, c| {
        p.attach_payment_method(c.id, c.params, c.attempt)
    }),
    Endpoint::post("/v1/payment_methods/{id}/detach", |p, c| {
        p.detach_payment_method(c.id, c.attempt)
    }),
];
