//! The example storefront (`examples/storefront/`), served by a reference merchant: the
//! shop's pages (embedded), their `config.js` (where fauxpay is, the publishable key,
//! the price), and the two ways its browser pays: `POST /api/payment-intents` (a
//! Payment Element confirms the intent in the browser) and `POST /api/checkout-sessions`
//! (the customer pays on the provider's Checkout page, then comes back to `GET
//! /checkout/success`). Each takes an order through the strategy (so naive, lock-only
//! and idempotent keep it as they keep a checkout's): a new one for the shop's own page,
//! or the one a JSON body names (`order_id`, `amount`, `currency`: a load test's), then
//! opens the payment at the provider with the merchant's secret key (keyed by the order:
//! one order opens one payment). What fulfils the order is the merchant's
//! [`CheckoutFlow`]: its webhook, and in the checkout-session flow also the success page
//! (each on every delivery or visit by naive and lock-only, once by idempotent). The same
//! pages run against the example's own Node server (`examples/storefront/server.mjs`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rand::Rng;
use serde_json::json;

use super::checkout::{CheckoutRequest, InvalidInput, Reply};
use super::checkout_flow::CheckoutFlow;
use super::gateway::{Completion, Gateway, OpenPayment};
use super::respond;
use super::strategy::CheckoutService;
use super::webhook::{EventId, PaymentSucceeded};

/// What the shop sells: one T-shirt.
const PRODUCT: &str = "T-shirt";
const AMOUNT: u64 = 1999;
const CURRENCY: &str = "usd";

/// The shop's pages, as the example ships them.
const PAGES: &[(&str, &str, &str)] = &[
    (
        "/",
        "text/html",
        include_str!("../../../examples/storefront/index.html"),
    ),
    (
        "/index.html",
        "text/html",
        include_str!("../../../examples/storefront/index.html"),
    ),
    (
        "/payment.html",
        "text/html",
        include_str!("../../../examples/storefront/payment.html"),
    ),
    (
        "/done.html",
        "text/html",
        include_str!("../../../examples/storefront/done.html"),
    ),
    (
        "/storefront.js",
        "application/javascript",
        include_str!("../../../examples/storefront/storefront.js"),
    ),
];

/// The storefront of one merchant.
pub struct Storefront {
    service: Arc<dyn CheckoutService>,
    gateway: Arc<dyn Gateway>,
    /// `window.STOREFRONT`: where the browser finds fauxpay, and the key it uses there.
    config_js: String,
    flow: CheckoutFlow,
}

/// How many times an opening is tried when the provider's answer is lost or a 5xx (with
/// the same idempotency key: one order still opens one payment).
const OPEN_TRIES: u32 = 3;

impl Storefront {
    /// A storefront over `service`, opening payments through `gateway`; the browser reaches
    /// the provider at `provider_url` (as the browser sees it) with `publishable_key`.
    pub fn new(
        service: Arc<dyn CheckoutService>,
        gateway: Arc<dyn Gateway>,
        provider_url: &str,
        publishable_key: &str,
        flow: CheckoutFlow,
    ) -> Self {
        let config = json!({
            "fauxpay": provider_url.trim_end_matches('/'),
            "publishableKey": publishable_key,
            "price": {"name": PRODUCT, "amount": AMOUNT, "currency": CURRENCY},
        });
        Self {
            service,
            gateway,
            config_js: format!("window.STOREFRONT = {config};\n"),
            flow,
        }
    }

    /// Its routes.
    pub fn router(self: Arc<Self>) -> Router {
        let mut router = Router::new();
        for (path, kind, body) in PAGES {
            router = router.route(path, get(move || async move { page(kind, body) }));
        }
        router
            .route(
                "/config.js",
                get(|State(s): State<Arc<Self>>| async move { page("application/javascript", &s.config_js) }),
            )
            .route("/api/payment-intents", post(open_intent))
            .route("/api/checkout-sessions", post(open_session))
            .route("/checkout/success", get(success))
            .with_state(self)
    }

    /// Takes the order: the body's (a load test's `order_id`, `amount` and `currency`),
    /// or without a body a new one at the shop's price.
    async fn take_order(&self, body: Result<Bytes, BytesRejection>) -> Result<CheckoutRequest, Response> {
        let body = body.map_err(|e| respond::error(e.status(), "invalid_body", e.body_text()))?;
        let req = order_request(&body).map_err(|e| respond::reply(Reply::Invalid(e)))?;
        self.service.open_order(&req).await.map_err(|e| store_unavailable(&e))?;
        // An order already taken keeps its price: a second opening for it at another
        // amount or currency is refused, not opened at the caller's price.
        match self.service.order(&req.order_id).await {
            Ok(Some(order)) if order.amount != req.amount || order.currency != req.currency => {
                return Err(respond::reply(Reply::OrderMismatch {
                    order_id: req.order_id.clone(),
                    message: format!(
                        "order {} is for {} {}, not {} {}",
                        order.id, order.amount, order.currency, req.amount, req.currency
                    ),
                }));
            }
            Ok(_) => {}
            Err(e) => return Err(store_unavailable(&e)),
        }
        Ok(req)
    }

    async fn open(
        &self,
        order: &CheckoutRequest,
        completion: Completion,
    ) -> Result<super::gateway::OpenedPayment, Response> {
        let open = OpenPayment {
            order_id: order.order_id.clone(),
            amount: order.amount,
            currency: order.currency.clone(),
            completion,
        };
        let mut last = None;
        for _ in 0..OPEN_TRIES {
            match self.gateway.open_payment(&open).await {
                Ok(opened) => return Ok(opened),
                Err(e) => last = Some(e),
            }
        }
        Err(failed(&last.map(|e| e.to_string()).unwrap_or_default()))
    }
}

fn page(kind: &'static str, body: &str) -> Response {
    let mut resp = body.to_string().into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("{kind}; charset=utf-8")) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// A 503 with `Retry-After`: the store could not be reached.
fn store_unavailable(e: &dyn std::fmt::Display) -> Response {
    respond::reply(Reply::unavailable(None, "store_unavailable", e.to_string()))
}

fn failed(message: &str) -> Response {
    respond::error(StatusCode::BAD_GATEWAY, "provider_unavailable", message)
}

/// `http://{Host}` of the request: where the customer comes back to.
fn origin(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b)))
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

/// The order a storefront call takes: the JSON body's, or (no body) a new one at the
/// shop's price. A bad body is a 400 naming the field.
fn order_request(body: &[u8]) -> Result<CheckoutRequest, InvalidInput> {
    let mut fields = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Map::new()
    } else {
        match serde_json::from_slice::<serde_json::Value>(body) {
            Ok(serde_json::Value::Object(fields)) => fields,
            _ => return Err(InvalidInput::new(None, "the body must be empty or a JSON object")),
        }
    };
    if !fields.contains_key("order_id") {
        let id: u64 = rand::rng().random();
        fields.insert("order_id".into(), json!(format!("shop-{id:016x}")));
    }
    fields.entry("amount").or_insert(json!(AMOUNT));
    fields.entry("currency").or_insert(json!(CURRENCY));
    // The browser brings the card.
    fields.insert("payment_method".into(), json!("browser"));
    let body = serde_json::Value::Object(fields).to_string();
    CheckoutRequest::from_json(body.as_bytes())
}

fn invalid(param: Option<&str>, message: &str) -> Response {
    respond::reply(Reply::Invalid(InvalidInput::new(param, message)))
}

async fn open_intent(State(shop): State<Arc<Storefront>>, body: Result<Bytes, BytesRejection>) -> Response {
    let order = match shop.take_order(body).await {
        Ok(o) => o,
        Err(resp) => return resp,
    };
    match shop.open(&order, Completion::Intent).await {
        Ok(opened) => Json(json!({
            "order": order.order_id,
            "payment_intent": opened.id,
            "clientSecret": opened.client_secret,
        }))
        .into_response(),
        Err(resp) => resp,
    }
}

async fn open_session(
    State(shop): State<Arc<Storefront>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let order = match shop.take_order(body).await {
        Ok(o) => o,
        Err(resp) => return resp,
    };
    let origin = origin(&headers);
    let completion = Completion::Session {
        name: PRODUCT.to_string(),
        success_url: format!("{origin}/checkout/success?session_id={{CHECKOUT_SESSION_ID}}"),
        cancel_url: format!("{origin}/"),
    };
    match shop.open(&order, completion).await {
        Ok(opened) => Json(json!({"order": order.order_id, "id": opened.id, "url": opened.url})).into_response(),
        Err(resp) => resp,
    }
}

/// A Checkout Session id as Stripe makes them: `cs_` and letters, digits, underscores.
fn session_id(query: Option<&str>) -> Option<String> {
    let query = query?;
    let id = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "session_id")
        .map(|(_, v)| v.into_owned())?;
    let ok = id.len() <= 255 && id.starts_with("cs_") && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    ok.then_some(id)
}

/// `GET /checkout/success?session_id=cs_…`: the customer back from the Checkout page.
/// The merchant reads the session at the provider; in the checkout-session flow a paid
/// session fulfils its order (on every visit by naive and lock-only, once by
/// idempotent). Then the customer goes on to the thank-you page.
async fn success(State(shop): State<Arc<Storefront>>, RawQuery(query): RawQuery) -> Response {
    let Some(id) = session_id(query.as_deref()) else {
        return invalid(
            Some("session_id"),
            "a Checkout Session id (cs_…) in the query: the success_url's {CHECKOUT_SESSION_ID}",
        );
    };
    let session = match shop.gateway.checkout_session(&id).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            let message = format!("no Checkout Session `{id}` at the provider");
            return respond::error(StatusCode::NOT_FOUND, "session_not_found", message);
        }
        Err(e) => return failed(&e.to_string()),
    };
    let mut done = format!("/done.html?session_id={id}");
    if let Some(order) = &session.order_id {
        done.push_str(&format!("&order={order}"));
    }
    if let (true, true, Some(order_id), Some(payment_intent)) = (
        shop.flow.success_page_fulfils(),
        session.paid,
        session.order_id,
        session.payment_intent,
    ) {
        let paid = PaymentSucceeded {
            event_id: match EventId::parse(&format!("success_page:{id}")) {
                Ok(e) => e,
                Err(e) => return invalid(Some("session_id"), &e.0),
            },
            kind: "success_page".into(),
            order_id,
            payment_intent,
        };
        // Like a webhook's, a fulfilment is finished even if the customer goes away.
        let service = shop.service.clone();
        match tokio::spawn(async move { service.fulfill(&paid).await }).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return store_unavailable(&e),
            Err(_) => return failed("the fulfilment failed unexpectedly"),
        }
    }
    let mut resp = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(&done) {
        resp.headers_mut().insert(header::LOCATION, location);
    }
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}
