//! The Stripe.js stand-in at the edge: `GET /v3/` (and `/js.stripe.com/v3/`, so that a
//! host alias for js.stripe.com works too) serves the script embedded in the binary
//! (`assets/stripe-v3.js`), which defines `window.Stripe` and talks to the fauxpay that
//! served it. Any origin may load it, as any page loads Stripe's.

use std::sync::Arc;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};

use crate::app::Provider;

/// The script.
pub const SCRIPT: &str = include_str!("../../assets/stripe-v3.js");

/// Where it is served.
pub const PATHS: &[&str] = &["/v3/", "/v3", "/js.stripe.com/v3/", "/js.stripe.com/v3"];

pub fn routes() -> Vec<(&'static str, MethodRouter<Arc<Provider>>)> {
    PATHS.iter().map(|p| (*p, get(script))).collect()
}

async fn script() -> Response {
    let mut resp = SCRIPT.into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/javascript; charset=utf-8"),
    );
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    resp
}
