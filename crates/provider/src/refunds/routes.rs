//! The refund endpoints: create, retrieve, update, list; and the same under a charge
//! (`/v1/charges/{id}/refunds`, `/v1/charges/{id}/refunds/{sub}`), with Stripe's oldest
//! form, `POST /v1/charges/{id}/refund`, which answers the charge.

use crate::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/refunds", |p, c| p.create_refund(c.params, c.attempt)),
    Endpoint::get("/v1/refunds", |p, c| p.list_refunds(c.params)),
    Endpoint::get("/v1/refunds/{id}", |p, c| p.retrieve_refund(c.id)),
    Endpoint::post("/v1/refunds/{id}", |p, c| p.update_refund(c.id, c.params, c.attempt)),
    Endpoint::post("/v1/charges/{id}/refund", |p, c| {
        p.refund_charge(c.id, c.params, c.attempt)
    }),
    Endpoint::post("/v1/charges/{id}/refunds", |p, c| {
        p.create_charge_refund(c.id, c.params, c.attempt)
    }),
    Endpoint::get("/v1/charges/{id}/refunds", |p, c| p.list_charge_refunds(c.id, c.params)),
    Endpoint::get("/v1/charges/{id}/refunds/{sub}", |p, c| {
        p.retrieve_charge_refund(c.id, c.sub)
    }),
    Endpoint::post("/v1/charges/{id}/refunds/{sub}", |p, c| {
        p.update_charge_refund(c.id, c.sub, c.params, c.attempt)
    }),
];
