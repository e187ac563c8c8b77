//! The refund endpoints: create, retrieve, update, list; and the same under a charge
//! (`/v1/charges/{id}/refunds`, `/v1/charges/{id}/refunds/{sub}`), with Stripe's oldest
//! form, `POST /v1/charges/{id}/refund`, which answers the charge.

use crate::resources::endpoint::Endpoint;

/// What a refund made under its charge's path reads (both of Stripe's forms).
const CHARGE_REFUND: &[&str] = &["amount", "expand", "metadata", "payment_intent", "reason"];

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/refunds", |p, c| p.create_refund(c.params, c.attempt)).reads(&[
        "amount",
        "charge",
        "expand",
        "metadata",
        "payment_intent",
        "reason",
    ]),
    Endpoint::get("/v1/refunds", |p, c| p.list_refunds(c.params)).reads(&[
        "charge",
        "ending_before",
        "expand",
        "limit",
        "payment_intent",
        "starting_after",
    ]),
    Endpoint::get("/v1/refunds/{id}", |p, c| p.retrieve_refund(c.id)).reads(&["expand"]),
    Endpoint::post("/v1/refunds/{id}", |p, c| p.update_refund(c.id, c.params, c.attempt))
        .reads(&["expand", "metadata"]),
    Endpoint::post("/v1/charges/{id}/refund", |p, c| {
        p.refund_charge(c.id, c.params, c.attempt)
    })
    .reads(CHARGE_REFUND),
    Endpoint::post("/v1/charges/{id}/refunds", |p, c| {
        p.create_charge_refund(c.id, c.params, c.attempt)
    })
    .reads(CHARGE_REFUND),
    Endpoint::get("/v1/charges/{id}/refunds", |p, c| p.list_charge_refunds(c.id, c.params)).reads(&[
        "ending_before",
        "expand",
        "limit",
        "starting_after",
    ]),
    Endpoint::get("/v1/charges/{id}/refunds/{sub}", |p, c| {
        p.retrieve_charge_refund(c.id, c.sub)
    })
    .reads(&["expand"]),
    Endpoint::post("/v1/charges/{id}/refunds/{sub}", |p, c| {
        p.update_charge_refund(c.id, c.sub, c.params, c.attempt)
    })
    .reads(&["expand", "metadata"]),
];
