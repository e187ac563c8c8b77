//! Checkout Sessions (`/v1/checkout/sessions`): a payment page fauxpay hosts. The object
//! and its JSON (`object`: the session and its line items), what each operation does
//! (`rules`: create, retrieve, list, expire, the line items; the customer's pay
//! on the hosted page or its scripted stand-in; expiry when `expires_at` passes), the
//! hosted page (`page`, HTML without scripts), and the endpoints (`routes`: Stripe's under
//! `/v1`, and fauxpay's own under `/__fauxpay/`).

pub mod object;
pub mod page;
pub mod routes;
pub mod rules;
