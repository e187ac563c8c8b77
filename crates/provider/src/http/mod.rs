//! The provider's HTTP edge: everything that knows axum or hyper.
//!
//! `server` runs connections (and ends them abruptly when a fault says so), `observe`
//! wraps every request (request id, metrics, panic → 500) and dispatches `/v1` ones to
//! their endpoint's handler, `extract` turns a request
//! into the pipeline's [`Request`](crate::pipeline::Request), `response`
//! writes answers and carries out the pipeline's [`Delivery`](crate::pipeline::Delivery),
//! `routes` is the `/v1` route table built from each resource's endpoints, `admin` the
//! `/__fauxpay/` API, `dashboard` the HTML pages at `/__fauxpay/`, `three_ds` the 3-D Secure page and authenticate endpoints, `checkout` the hosted Checkout page and the customer's pay, `stripe_js` the Stripe.js stand-in script,
//! `lifecycle` the provider's life cycle (start, serve, drain, stop), and `webhook_client` the one outbound side: the
//! client that POSTs webhook deliveries (the delivery engine in `webhooks` calls it).

pub mod admin;
pub mod checkout;
pub mod dashboard;
pub mod extract;
pub mod guard;
pub mod headers;
pub mod lifecycle;
pub mod observe;
pub mod response;
pub mod rounds;
pub mod routes;
pub mod server;
pub mod stripe_js;
pub mod three_ds;
pub mod webhook_client;
