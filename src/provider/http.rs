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
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine;
use bytes::Bytes;
use serde_json::Value;
use tower_http::catch_panic::CatchPanicLayer;

use super::error::{ApiError, ErrorType};
use super::extract::ApiRequest;
use super::idempotency::{Begin, Fingerprint, Mode, StoredResponse};
use super::ids::{ApiKey, RequestId};
use super::ledger::Attempt;
use super::metrics::Metrics;
use super::payments::Payments;
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

/// Runs `op` under Stripe's idempotency semantics and turns its result into a response.
fn execute(
    app: &Provider,
    req: ApiRequest,
    op: impl FnOnce(&Payments, &ApiRequest, &Attempt) -> Result<Value, ApiError>,
) -> Response {
    let attempt = Attempt {
        request_id: req.request_id.clone(),
        idempotency_key: req.idempotency_key.clone(),
        fault: None,
    };
    let Some(key) = req.idempotency_key.clone() else {
        return json_result(op(&app.payments, &req, &attempt));
    };
    let fingerprint = Fingerprint::of(req.method.as_str(), &req.path, &req.params);
    let claim = match app.idempotency.begin(&req.api_key, &key, fingerprint, Instant::now()) {
        Begin::Proceed(claim) => claim,
        Begin::Replay(stored) => {
            Metrics::bump(&app.metrics.replays);
            return stored_response(&stored, Some(key.as_str()), true);
        }
        Begin::InUse => {
            Metrics::bump(&app.metrics.in_flight_conflicts);
            let e = ApiError::new(
                StatusCode::CONFLICT,
                ErrorType::IdempotencyError,
                "There is currently another in-progress request using this Idempotency Key (probably means you sent two requests at once). Try again later.",
            )
            .with_code("idempotency_key_in_use")
            .retry_hint(true);
            return error_response(&e);
        }
        Begin::Mismatch => {
            Metrics::bump(&app.metrics.key_mismatches);
            let status = match app.config.idempotency {
                Mode::Stripe => StatusCode::BAD_REQUEST,
                Mode::Ietf => StatusCode::UNPROCESSABLE_ENTITY,
            };
            let e = ApiError::new(
                status,
                ErrorType::IdempotencyError,
                format!(
                    "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '{}' if you meant to execute a different request.",
                    key.as_str()
                ),
            )
            .retry_hint(false);
            return error_response(&e);
        }
    };
    match op(&app.payments, &req, &attempt) {
        // Validation failures are not stored: dropping the claim frees the key.
        Err(e) if !e.executed => error_response(&e),
        result => {
            let stored = Arc::new(to_stored(result, &req.request_id));
            claim.complete(stored.clone());
            stored_response(&stored, Some(key.as_str()), false)
        }
    }
}

fn to_stored(result: Result<Value, ApiError>, request_id: &RequestId) -> StoredResponse {
    let (status, body, should_retry) = match result {
        Ok(v) => (200, v, None),
        Err(e) => (e.status.as_u16(), e.body(), e.should_retry),
    };
    StoredResponse {
        status,
        body: Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
        request_id: request_id.clone(),
        should_retry,
    }
}

fn stored_response(stored: &StoredResponse, key: Option<&str>, replayed: bool) -> Response {
    let mut resp = Response::new(Body::from(stored.body.clone()));
    *resp.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(k) = key.and_then(|k| HeaderValue::from_str(k).ok()) {
        h.insert("idempotency-key", k);
    }
    if let Some(retry) = stored.should_retry {
        h.insert(
            "stripe-should-retry",
            HeaderValue::from_static(if retry { "true" } else { "false" }),
        );
    }
    if replayed {
        h.insert("idempotent-replayed", HeaderValue::from_static("true"));
        if let Ok(v) = HeaderValue::from_str(stored.request_id.as_str()) {
            h.insert("original-request", v);
        }
    }
    resp
}

fn json_result(result: Result<Value, ApiError>) -> Response {
    match result {
        Ok(v) => (StatusCode::OK, axum::Json(v)).into_response(),
        Err(e) => error_response(&e),
    }
}

/// A Stripe-shaped error response (with `Stripe-Should-Retry` when the error has a hint).
pub fn error_response(e: &ApiError) -> Response {
    let mut resp = (e.status, axum::Json(e.body())).into_response();
    if let Some(retry) = e.should_retry {
        resp.headers_mut().insert(
            "stripe-should-retry",
            HeaderValue::from_static(if retry { "true" } else { "false" }),
        );
    }
    resp
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

// ---- handlers: one line each, over `Payments` ----

async fn create_intent(State(app): State<AppState>, req: ApiRequest) -> Response {
    execute(&app, req, |p, r, a| p.create_intent(&r.params, a))
}

async fn confirm_intent(State(app): State<AppState>, Path(id): Path<String>, req: ApiRequest) -> Response {
    execute(&app, req, |p, r, a| p.confirm_intent(&id, &r.params, a))
}

async fn capture_intent(State(app): State<AppState>, Path(id): Path<String>, req: ApiRequest) -> Response {
    execute(&app, req, |p, r, a| p.capture_intent(&id, &r.params, a))
}

async fn cancel_intent(State(app): State<AppState>, Path(id): Path<String>, req: ApiRequest) -> Response {
    execute(&app, req, |p, r, _| p.cancel_intent(&id, &r.params))
}

async fn retrieve_intent(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    json_result(app.payments.retrieve_intent(&id))
}

async fn list_intents(State(app): State<AppState>, req: ApiRequest) -> Response {
    json_result(app.payments.list_intents(&req.params))
}

async fn search_intents(State(app): State<AppState>, req: ApiRequest) -> Response {
    json_result(app.payments.search_intents(&req.params))
}

async fn create_charge(State(app): State<AppState>, req: ApiRequest) -> Response {
    execute(&app, req, |p, r, a| p.create_charge(&r.params, a))
}

async fn capture_charge(State(app): State<AppState>, Path(id): Path<String>, req: ApiRequest) -> Response {
    execute(&app, req, |p, r, a| p.capture_charge(&id, &r.params, a))
}

async fn retrieve_charge(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    json_result(app.payments.retrieve_charge(&id))
}

async fn list_charges(State(app): State<AppState>, req: ApiRequest) -> Response {
    json_result(app.payments.list_charges(&req.params))
}

async fn search_charges(State(app): State<AppState>, req: ApiRequest) -> Response {
    json_result(app.payments.search_charges(&req.params))
}

async fn create_refund(State(app): State<AppState>, req: ApiRequest) -> Response {
    execute(&app, req, |p, r, a| p.create_refund(&r.params, a))
}

async fn retrieve_refund(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    json_result(app.payments.retrieve_refund(&id))
}

async fn list_refunds(State(app): State<AppState>, req: ApiRequest) -> Response {
    json_result(app.payments.list_refunds(&req.params))
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
