//! The example storefront (`examples/storefront/`), served by a reference merchant: the
//! shop's pages (embedded), their `config.js` (where fauxpay is, the publishable key,
//! the price), and the two ways its browser pays: `POST /api/payment-intents` (a
//! Payment Element confirms the intent in the browser) and `POST /api/checkout-sessions`
//! (the customer pays on the provider's Checkout page). Each takes a new order through the
//! strategy (so naive, lock-only and idempotent keep it as they keep a checkout's), then
//! opens the payment at the provider with the merchant's secret key; the order is
//! fulfilled by its `payment_intent.succeeded` webhook, as every order is: on every
//! delivery by naive and lock-only, once by idempotent. The same pages run against the
//! example's own Node server (`examples/storefront/server.mjs`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rand::Rng;
use serde_json::json;

use super::checkout::CheckoutRequest;
use super::gateway::{Completion, Gateway, OpenPayment};
use super::order::{Amount, Currency, OrderId, PaymentMethod};
use super::strategy::CheckoutService;

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
            .with_state(self)
    }

    /// Takes a new order: its id, or the reason it could not.
    async fn new_order(&self) -> Result<OrderId, Response> {
        let id: u64 = rand::rng().random();
        let order_id = OrderId::parse(&format!("shop-{id:016x}")).map_err(|e| failed(&e.to_string()))?;
        let req = CheckoutRequest {
            order_id: order_id.clone(),
            amount: Amount::new(AMOUNT).map_err(|e| failed(&e.to_string()))?,
            currency: Currency::parse(CURRENCY).map_err(|e| failed(&e.to_string()))?,
            payment_method: PaymentMethod::parse("browser").map_err(|e| failed(&e.to_string()))?,
        };
        self.service.open_order(&req).await.map_err(|e| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, HeaderValue::from(1u64))],
                Json(json!({"error": "store_unavailable", "message": e.to_string()})),
            )
                .into_response()
        })?;
        Ok(order_id)
    }

    async fn open(
        &self,
        order_id: &OrderId,
        completion: Completion,
    ) -> Result<super::gateway::OpenedPayment, Response> {
        let open = OpenPayment {
            order_id: order_id.clone(),
            amount: Amount::new(AMOUNT).map_err(|e| failed(&e.to_string()))?,
            currency: Currency::parse(CURRENCY).map_err(|e| failed(&e.to_string()))?,
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

fn failed(message: &str) -> Response {
    (
        StatusCode::BAD_GATEWAY,
        Json(json!({"error": "provider_unavailable", "message": message})),
    )
        .into_response()
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

async fn open_intent(State(shop): State<Arc<Storefront>>) -> Response {
    let order = match shop.new_order().await {
        Ok(o) => o,
        Err(resp) => return resp,
    };
    match shop.open(&order, Completion::Intent).await {
        Ok(opened) => Json(json!({"order": order, "clientSecret": opened.client_secret})).into_response(),
        Err(resp) => resp,
    }
}

async fn open_session(State(shop): State<Arc<Storefront>>, headers: HeaderMap) -> Response {
    let order = match shop.new_order().await {
        Ok(o) => o,
        Err(resp) => return resp,
    };
    let origin = origin(&headers);
    let completion = Completion::Session {
        name: PRODUCT.to_string(),
        success_url: format!("{origin}/done.html?session_id={{CHECKOUT_SESSION_ID}}&order={order}"),
        cancel_url: format!("{origin}/"),
    };
    match shop.open(&order, completion).await {
        Ok(opened) => Json(json!({"order": order, "id": opened.id, "url": opened.url})).into_response(),
        Err(resp) => resp,
    }
}
