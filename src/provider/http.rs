//! The HTTP surface of Stripe's `/v1` API, and the idempotency layer around it.
//!
//! Handlers are thin: each extracts an [`ApiRequest`] and calls one method of
//! `Payments`. [`execute`] wraps every POST in Stripe's idempotency semantics (claim,
//! run, store, replay with `Idempotent-Replayed: true`, 409 while in flight, 400/422 on
//! a reused key with other parameters) and leaves validation failures unstored. The
//! middleware here gives every response a `Request-Id`, authenticates API keys, logs one
//! line per request at debug level, counts requests for `/metrics` and turns a panic
//! into a Stripe-shaped 500.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Path, State};
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use base64::Engine;
use tower_http::catch_panic::CatchPanicLayer;

use super::error::{ApiError, ErrorType};
use super::execute::{error_response, execute, Access};
use super::extract::ApiRequest;
use super::ids::{ApiKey, RequestId};
use super::{admin, Provider};

type AppState = Arc<Provider>;

/// The whole provider's router: `/v1`, `/__fauxpay/`, `/metrics`.
pub fn router(provider: AppState) -> Router {
    let v1 = Router::new()
        .route("/payment_intents", get(list_intents).post(create_intent))
        .route("/payment_intents/search", get(search_intents))
        .route("/payment_intents/{id}", get(retrieve_intent))
        .route("/payment_intents/{id}/confirm", post(confirm_intent))
        .route("/payment_intents/{id}/capture", post(capture_intent))
        .route("/payment_intents/{id}/cancel", post(cancel_intent))
        .route("/charges", get(list_charges).post(create_charge))
        .route("/charges/search", get(search_charges))
        .route("/charges/{id}", get(retrieve_charge))
        .route("/charges/{id}/capture", post(capture_charge))
        .route("/refunds", get(list_refunds).post(create_refund))
        .route("/refunds/{id}", get(retrieve_refund))
        .route_layer(middleware::from_fn_with_state(provider.clone(), authenticate));
    Router::new()
        .nest("/v1", v1)
        .merge(admin::router(provider.clone()))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(provider.clone(), observe))
        .layer(CatchPanicLayer::custom(|_| {
            error_response(&ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorType::ApiError,
                "An unexpected error occurred in fauxpay; this is a bug, please report it.",
            ))
        }))
        .with_state(provider)
}

async fn not_found(req: Request<Body>) -> Response {
    let e = ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorType::InvalidRequestError,
        format!(
            "Unrecognized request URL ({}: {}). fauxpay implements payment_intents, charges and refunds under /v1.",
            req.method(),
            req.uri().path()
        ),
    );
    error_response(&e)
}

async fn method_not_allowed(req: Request<Body>) -> Response {
    let e = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorType::InvalidRequestError,
        format!("Method {} is not allowed on {}.", req.method(), req.uri().path()),
    );
    error_response(&e)
}

/// Gives the request a `Request-Id`, times it, counts it and logs it.
async fn observe(State(app): State<AppState>, mut req: Request<Body>, next: Next) -> Response {
    let started = Instant::now();
    let request_id = RequestId::generate();
    req.extensions_mut().insert(request_id.clone());
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
        .to_string();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let mut resp = next.run(req).await;
    if let Ok(v) = HeaderValue::from_str(request_id.as_str()) {
        resp.headers_mut().insert("request-id", v);
    }
    let elapsed = started.elapsed();
    app.metrics
        .observe_request(&route, method.as_str(), resp.status().as_u16(), elapsed);
    tracing::debug!(%method, %path, status = resp.status().as_u16(), ms = elapsed.as_secs_f64() * 1e3, request_id = %request_id, "request");
    resp
}

/// Checks `Authorization` (Bearer, or Basic with the key as user name).
async fn authenticate(State(app): State<AppState>, mut req: Request<Body>, next: Next) -> Response {
    match api_key(req.headers().get(header::AUTHORIZATION), app.config.api_key.as_deref()) {
        Ok(key) => {
            req.extensions_mut().insert(key);
            next.run(req).await
        }
        Err(e) => error_response(&e),
    }
}

/// The API key a request presents, checked against `required` (or any test key).
pub fn api_key(header: Option<&HeaderValue>, required: Option<&str>) -> Result<ApiKey, ApiError> {
    let missing = || {
        ApiError::unauthorized("You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer sk_test_…').")
    };
    let value = header.and_then(|h| h.to_str().ok()).ok_or_else(missing)?;
    let key = if let Some(token) = value.strip_prefix("Bearer ") {
        token.trim().to_string()
    } else if let Some(b64) = value.strip_prefix("Basic ") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|_| missing())?;
        let text = String::from_utf8(decoded).map_err(|_| missing())?;
        text.split(':').next().unwrap_or("").to_string()
    } else {
        return Err(missing());
    };
    if key.is_empty() {
        return Err(missing());
    }
    let chars: Vec<char> = key.chars().collect();
    let masked: String = chars
        .iter()
        .take(8)
        .chain(['…'].iter())
        .chain(chars.iter().skip(chars.len().saturating_sub(4)))
        .collect();
    match required {
        Some(r) if r == key => Ok(ApiKey::new(&key)),
        Some(_) => Err(ApiError::unauthorized(format!("Invalid API Key provided: {masked}"))),
        None if key.starts_with("sk_test_") || key.starts_with("rk_test_") => Ok(ApiKey::new(&key)),
        None if key.starts_with("sk_live_") || key.starts_with("rk_live_") => Err(ApiError::unauthorized(
            "fauxpay is a test-mode provider: live keys are refused. Use an sk_test_ key.",
        )),
        None => Err(ApiError::unauthorized(format!(
            "Invalid API Key provided: {masked}. Use an sk_test_ key."
        ))),
    }
}

/// Declares thin handlers: each runs one `Payments` method through [`execute`].
macro_rules! handlers {
    ($($name:ident($($id:ident)?) => $access:ident |$p:ident, $r:ident, $a:ident| $body:expr;)*) => {$(
        async fn $name(State(app): State<AppState>, $(Path($id): Path<String>,)? req: ApiRequest) -> Response {
            execute(&app, req, Access::$access, |$p, $r, $a| $body).await
        }
    )*};
}

handlers! {
    create_intent() => Write |p, r, a| p.create_intent(&r.params, a);
    confirm_intent(id) => Write |p, r, a| p.confirm_intent(&id, &r.params, a);
    capture_intent(id) => Write |p, r, a| p.capture_intent(&id, &r.params, a);
    cancel_intent(id) => Write |p, r, _a| p.cancel_intent(&id, &r.params);
    retrieve_intent(id) => Read |p, _r, _a| p.retrieve_intent(&id);
    list_intents() => Read |p, r, _a| p.list_intents(&r.params);
    search_intents() => Read |p, r, _a| p.search_intents(&r.params);
    create_charge() => Write |p, r, a| p.create_charge(&r.params, a);
    capture_charge(id) => Write |p, r, a| p.capture_charge(&id, &r.params, a);
    retrieve_charge(id) => Read |p, _r, _a| p.retrieve_charge(&id);
    list_charges() => Read |p, r, _a| p.list_charges(&r.params);
    search_charges() => Read |p, r, _a| p.search_charges(&r.params);
    create_refund() => Write |p, r, a| p.create_refund(&r.params, a);
    retrieve_refund(id) => Read |p, _r, _a| p.retrieve_refund(&id);
    list_refunds() => Read |p, r, _a| p.list_refunds(&r.params);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys_by_bearer_or_basic() {
        let bearer = HeaderValue::from_static("Bearer sk_test_abc");
        assert_eq!(api_key(Some(&bearer), None).unwrap().as_str(), "sk_test_abc");
        let basic = HeaderValue::from_str(&format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("sk_test_abc:")
        ))
        .unwrap();
        assert_eq!(api_key(Some(&basic), None).unwrap().as_str(), "sk_test_abc");
        assert_eq!(api_key(None, None).unwrap_err().status, StatusCode::UNAUTHORIZED);
        assert!(api_key(Some(&HeaderValue::from_static("Bearer sk_live_x")), None).is_err());
        assert!(api_key(Some(&bearer), Some("sk_test_other")).is_err());
        assert!(api_key(Some(&bearer), Some("sk_test_abc")).is_ok());
    }
}
