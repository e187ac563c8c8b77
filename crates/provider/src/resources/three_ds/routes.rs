//! The authenticate endpoints under `/__fauxpay/`: run like `/v1` endpoints (through the
//! request pipeline, so faults, idempotency keys and the request log apply to them as to
//! a confirmation), served by the HTTP edge beside the page.

use crate::resources::endpoint::Endpoint;

/// `POST …/authenticate` with `outcome=succeed|fail`, for payment and setup intents.
pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/__fauxpay/payment_intents/{id}/authenticate", |p, c| {
        p.authenticate_intent(c.id, c.params, c.attempt)
    }),
    Endpoint::post("/__fauxpay/setup_intents/{id}/authenticate", |p, c| {
        p.authenticate_setup_intent(c.id, c.params, c.attempt)
    }),
];
