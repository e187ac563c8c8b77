//! The merchant's HTTP surface: `POST /checkout`, `GET /orders/{id}`, `GET /health`,
//! `POST /webhooks/stripe` (when a webhook secret is configured; otherwise a 404 that
//! says so), and the example storefront's pages and API (`storefront`).
//!
//! Handlers only translate: a JSON body and an `Idempotency-Key` header into a
//! [`CheckoutRequest`] and an [`IdempotencyKey`] (bad input is a 400 naming the
//! parameter), and an [`Answer`] back into a status, a JSON body, `Retry-After` and
//! `Idempotent-Replayed`. A checkout runs in its own task, so a client that hangs up
//! mid-payment cannot cut the merchant's bookkeeping short. Every error, including
//! unknown routes, wrong methods and oversized bodies, is JSON.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tower_http::catch_panic::CatchPanicLayer;

use super::checkout::{CheckoutRequest, InvalidInput, Reply};
use super::idempotency_record::IdempotencyKey;
use super::order::OrderId;
use super::respond::{answer, error};
use super::storefront::Storefront;
use super::strategy::CheckoutService;
use super::webhook_receiver::{WebhookReceiver, WebhookReply};

type Service = Arc<dyn CheckoutService>;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub service: Service,
    /// `None`: no webhook secret configured.
    pub webhooks: Option<Arc<WebhookReceiver>>,
}

/// Bodies above this size are refused (413).
const MAX_BODY: usize = 64 * 1024;

pub fn router(service: Service, webhooks: Option<Arc<WebhookReceiver>>, storefront: Option<Arc<Storefront>>) -> Router {
    let shop = storefront.map(Storefront::router).unwrap_or_default();
    Router::new()
        .route("/checkout", post(checkout))
        .route("/orders/{id}", get(order))
        .route("/health", get(health))
        .route("/webhooks/stripe", post(webhook))
        .with_state(AppState { service, webhooks })
        .merge(shop)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(CatchPanicLayer::custom(|_| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "the merchant failed unexpectedly",
            )
        }))
}

/// The `Idempotency-Key` header: absent, or a valid key.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, InvalidInput> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let bad = |message: String| InvalidInput::new(Some("Idempotency-Key"), message);
    let text = value
        .to_str()
        .map_err(|_| bad("Idempotency-Key must be printable ASCII".into()))?;
    IdempotencyKey::parse(text).map(Some).map_err(|e| bad(e.0))
}

async fn checkout(
    State(AppState { service, .. }): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(e) => return error(e.status(), "invalid_body", e.body_text()),
    };
    let req = match CheckoutRequest::from_json(&body) {
        Ok(req) => req,
        Err(e) => return answer(Reply::Invalid(e).into()),
    };
    let key = match idempotency_key(&headers) {
        Ok(key) => key,
        Err(e) => return answer(Reply::Invalid(e).into()),
    };
    // A payment, once started, is finished and recorded even if the client goes away.
    match tokio::spawn(async move { service.checkout(req, key).await }).await {
        Ok(a) => answer(a),
        Err(e) => {
            tracing::error!(error = %e, "checkout task failed");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "the checkout failed unexpectedly",
            )
        }
    }
}

async fn order(State(AppState { service, .. }): State<AppState>, Path(id): Path<String>) -> Response {
    let id = match OrderId::parse(&id) {
        Ok(id) => id,
        Err(e) => return answer(Reply::Invalid(InvalidInput::new(Some("id"), e.0)).into()),
    };
    match service.order(&id).await {
        Ok(Some(order)) => {
            let mut body = serde_json::to_value(&order).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut body {
                map.insert("order_id".into(), json!(order.id));
            }
            (StatusCode::OK, Json(body)).into_response()
        }
        Ok(None) => error(StatusCode::NOT_FOUND, "order_not_found", format!("no order `{id}`")),
        Err(e) => answer(Reply::unavailable(None, "store_unavailable", e.to_string()).into()),
    }
}

async fn health(State(AppState { service, .. }): State<AppState>) -> Response {
    let health = service.health().await;
    let status = if health.problem.is_none() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(health)).into_response()
}

async fn webhook(
    State(AppState { webhooks, .. }): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let Some(receiver) = webhooks else {
        return error(
            StatusCode::NOT_FOUND,
            "webhooks_not_configured",
            "this merchant has no webhook signing secret: start it with --webhook-secret whsec_…",
        );
    };
    let body = match body {
        Ok(body) => body,
        Err(e) => return error(e.status(), "invalid_body", e.body_text()),
    };
    let signature = headers
        .get("stripe-signature")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // Like a checkout, a fulfilment is finished even if the provider hangs up.
    match tokio::spawn(async move { receiver.receive(signature.as_deref(), &body).await }).await {
        Ok(WebhookReply {
            status,
            body,
            retry_after,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp = (status, Json(body)).into_response();
            if let Some(secs) = retry_after {
                resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            resp
        }
        Err(e) => {
            tracing::error!(error = %e, "webhook task failed");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "the webhook failed unexpectedly",
            )
        }
    }
}

async fn not_found(method: Method, uri: Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no route for {method} {}; the merchant serves POST /checkout, GET /orders/{{id}}, GET /health and POST /webhooks/stripe",
            uri.path()
        ),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}
