//! The names of the HTTP headers the provider reads and writes beyond the standard
//! ones, built once: looking a header up or inserting it by a `&str` name parses the
//! name on every request, which a replay paid for five times.

use axum::http::HeaderName;

pub static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub static IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
pub static ORIGINAL_REQUEST: HeaderName = HeaderName::from_static("original-request");
pub static REQUEST_ID: HeaderName = HeaderName::from_static("request-id");
pub static STRIPE_SHOULD_RETRY: HeaderName = HeaderName::from_static("stripe-should-retry");
pub static FAUXPAY_FAULT: HeaderName = HeaderName::from_static("fauxpay-fault");
