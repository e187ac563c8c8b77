//! The HTTP surface of Stripe's `/v1` API, and the idempotency layer around it.
//!
//! Handlers are thin: each extracts an [`ApiRequest`] and calls one method of
//! `Payments`. [`execute`] wraps every POST in Stripe's idempotency semantics (claim,
//! run, store, replay with `Idempotent-Replayed: true`, 409 while in flight, 400/422 on
//! a reused key with other parameters) and leaves validation failures unstored. Every
//! handler authenticates its API key first; the layer here gives every response a
//! `Request-Id`, logs one line per request at debug level, counts requests for
//! `/metrics`, and turns a panic into a Stripe-shaped 500.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, Method, Request, StatusCode};
use axum::response::Response;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use base64::Engine;
use tower_service::Service;

use super::error::{ApiError, ErrorType};
use super::execute::{error_response, execute, Access};
use super::extract::{ApiRequest, Authenticated};
use super::ids::{ApiKey, RequestId};
use super::{admin, Provider};

type AppState = Arc<Provider>;

/// The `/v1` routes.
fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/v1/payment_intents", get(list_intents).post(create_intent)),
        ("/v1/payment_intents/search", get(search_intents)),
        ("/v1/payment_intents/{id}", get(retrieve_intent)),
        ("/v1/payment_intents/{id}/confirm", post(confirm_intent)),
        ("/v1/payment_intents/{id}/capture", post(capture_intent)),
        ("/v1/payment_intents/{id}/cancel", post(cancel_intent)),
        ("/v1/charges", get(list_charges).post(create_charge)),
        ("/v1/charges/search", get(search_charges)),
        ("/v1/charges/{id}", get(retrieve_charge)),
        ("/v1/charges/{id}/capture", post(capture_charge)),
        ("/v1/refunds", get(list_refunds).post(create_refund)),
        ("/v1/refunds/{id}", get(retrieve_refund)),
    ]
}

/// The whole provider (`/v1`, `/__fauxpay/`, `/metrics`): the router, wrapped once (not
/// per route) in [`Observe`]. Every `/v1` handler authenticates first (`Authenticated`).
pub fn router(provider: AppState) -> Observe<Router> {
    let mut api = Router::new();
    let mut labels = matchit::Router::new();
    for (path, route) in routes().into_iter().chain(admin::routes(provider.clone())) {
        labels.insert(path, path).expect("route paths are distinct");
        api = api.route(path, route);
    }
    let api = api
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(provider.clone());
    Observe {
        inner: api,
        app: provider,
        labels: Arc::new(labels),
    }
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

/// A panic in a handler: a Stripe-shaped 500, and the server lives on.
fn panic_response() -> Response {
    error_response(&ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        ErrorType::ApiError,
        "An unexpected error occurred in fauxpay; this is a bug, please report it.",
    ))
}

/// Around the whole router: gives every request a `Request-Id`, times it, counts it by
/// route (the route pattern, e.g. `/v1/payment_intents/{id}`), logs it, and turns a
/// panic into a Stripe-shaped 500. One plain service rather than per-route middleware:
/// nothing is boxed or cloned per request.
#[derive(Clone)]
pub struct Observe<S> {
    inner: S,
    app: AppState,
    /// Route patterns, to label requests as the router matches them.
    labels: Arc<matchit::Router<&'static str>>,
}

/// What [`Observe`] keeps while the request runs.
struct Observed {
    app: AppState,
    started: Instant,
    request_id: RequestId,
    route: &'static str,
    method: Method,
    /// Only when debug logging is on.
    path: Option<String>,
}

impl<S, B> Service<Request<B>> for Observe<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ObserveFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let request_id = RequestId::generate();
        req.extensions_mut().insert(request_id);
        let observed = Observed {
            app: self.app.clone(),
            started: Instant::now(),
            request_id,
            route: self.labels.at(req.uri().path()).map_or("unmatched", |m| *m.value),
            method: req.method().clone(),
            path: tracing::enabled!(tracing::Level::DEBUG).then(|| req.uri().path().to_string()),
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(req))) {
            Ok(inner) => ObserveFuture {
                inner: Some(inner),
                observed: Some(observed),
            },
            Err(_) => ObserveFuture {
                inner: None,
                observed: None,
            },
        }
    }
}

pin_project_lite::pin_project! {
    pub struct ObserveFuture<F> {
        #[pin]
        inner: Option<F>,
        observed: Option<Observed>,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for ObserveFuture<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(inner) = this.inner.as_pin_mut() else {
            // The router itself panicked.
            return Poll::Ready(Ok(panic_response()));
        };
        let mut resp = match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(Ok(resp))) => resp,
            // A panicking request is answered, but neither counted nor given a Request-Id.
            Err(_) => return Poll::Ready(Ok(panic_response())),
        };
        if let Some(o) = this.observed.take() {
            if let Ok(v) = HeaderValue::from_str(&o.request_id.as_str()) {
                resp.headers_mut().insert(super::headers::REQUEST_ID.clone(), v);
            }
            let elapsed = o.started.elapsed();
            let status = resp.status().as_u16();
            o.app
                .metrics
                .observe_request(o.route, o.method.as_str(), status, elapsed);
            if let Some(path) = o.path {
                let (method, request_id) = (o.method, o.request_id);
                tracing::debug!(%method, %path, status, ms = elapsed.as_secs_f64() * 1e3, %request_id, "request");
            }
        }
        Poll::Ready(Ok(resp))
    }
}

/// The API key a request presents, checked against `required` (or any test key).
pub fn api_key(header: Option<&HeaderValue>, required: Option<&str>) -> Result<ApiKey, ApiError> {
    let missing = || {
        ApiError::unauthorized("You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer sk_test_…').")
    };
    let value = header.and_then(|h| h.to_str().ok()).ok_or_else(missing)?;
    let decoded: String;
    let key: &str = if let Some(token) = value.strip_prefix("Bearer ") {
        token.trim()
    } else if let Some(b64) = value.strip_prefix("Basic ") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|_| missing())?;
        decoded = String::from_utf8(bytes).map_err(|_| missing())?;
        decoded.split(':').next().unwrap_or("")
    } else {
        return Err(missing());
    };
    if key.is_empty() {
        return Err(missing());
    }
    // Only for the error messages: the first 8 characters, an ellipsis, the last 4.
    let masked = || {
        let count = key.chars().count();
        key.chars()
            .take(8)
            .chain(['…'])
            .chain(key.chars().skip(count.saturating_sub(4)))
            .collect::<String>()
    };
    match required {
        Some(r) if r == key => Ok(ApiKey::interned(key)),
        Some(_) => Err(ApiError::unauthorized(format!(
            "Invalid API Key provided: {}",
            masked()
        ))),
        None if key.starts_with("sk_test_") || key.starts_with("rk_test_") => Ok(ApiKey::interned(key)),
        None if key.starts_with("sk_live_") || key.starts_with("rk_live_") => Err(ApiError::unauthorized(
            "fauxpay is a test-mode provider: live keys are refused. Use an sk_test_ key.",
        )),
        None => Err(ApiError::unauthorized(format!(
            "Invalid API Key provided: {}. Use an sk_test_ key.",
            masked()
        ))),
    }
}

/// Declares thin handlers: each runs one `Payments` method through [`execute`].
macro_rules! handlers {
    ($($name:ident($($id:ident)?) => $access:ident |$p:ident, $r:ident, $a:ident| $body:expr;)*) => {$(
        async fn $name(State(app): State<AppState>, auth: Authenticated, $(Path($id): Path<String>,)? mut req: ApiRequest) -> Response {
            req.api_key = auth.0;
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
