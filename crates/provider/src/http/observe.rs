//! The observe layer around the whole router: gives every request a `Request-Id`, times
//! it, counts it by route (the route pattern, e.g. `/v1/payment_intents/{id}`) for
//! `/metrics`, logs one line per request at debug level, refuses a `Host` fauxpay does
//! not answer to (`Config::allowed_hosts`), answers CORS for the API (`/v1`, as
//! api.stripe.com does: any origin, no credentials, so that a storefront's browser on
//! another origin can call it with a publishable key; to requests that carry `Origin`,
//! as a browser's cross-origin ones do), and turns a panic in a handler
//! into a Stripe-shaped 500 ([`panic_response`]), counted and given a Request-Id like any
//! other answer. The panic is caught here, by hand, rather than by tower-http's
//! `CatchPanicLayer` on the router (as the merchant does): measured with
//! `bench/callgrind.sh new`, the layer cost ~1,500 instructions per request (2.1%: a
//! boxed route and a boxed body per answer), this nothing measurable.
//!
//! Its one route lookup also dispatches: a `/v1` request whose path and verb name an
//! endpoint goes straight to that endpoint's handler ([`Direct`]), without a second
//! lookup in axum's router or the router's services around the handler (1,833
//! instructions a replay, 5%, `bench/callgrind.sh replay`). Anything else (another
//! method, a path parameter that is percent-encoded, the admin API and the pages) goes
//! through the router.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use tower_service::Service;

use super::headers;
use super::server::{ConnControl, ConnectionService};
use crate::app::Provider;
use crate::error::{ApiError, ErrorType, Status};
use crate::resources::endpoint::{Endpoint, Verb};
use crate::stripe::ids::RequestId;

type AppState = Arc<Provider>;

/// What a route pattern is: its label (the pattern, e.g. `/v1/payment_intents/{id}`) and
/// the `/v1` endpoints served there, by verb ([`Verb::index`]).
#[derive(Clone, Copy)]
pub struct Route {
    pub label: &'static str,
    pub endpoints: [Option<&'static Endpoint>; 3],
}

impl Route {
    /// A pattern that only labels (the admin API, the pages): the router serves it.
    pub fn label(label: &'static str) -> Self {
        Self {
            label,
            endpoints: [None; 3],
        }
    }

    fn endpoint(&self, method: &Method) -> Option<&'static Endpoint> {
        let verb = match *method {
            Method::GET => Verb::Get,
            Method::POST => Verb::Post,
            Method::DELETE => Verb::Delete,
            _ => return None,
        };
        self.endpoints[verb.index()]
    }
}

/// The object ids a `/v1` path names (`{id}`, `{sub}`), as sent: empty when absent.
#[derive(Debug, Default)]
pub struct PathValues {
    pub id: String,
    pub sub: String,
}

/// An endpoint's handler, called by [`Observe`] for a request it matched, with the
/// request's connection's control (none outside [`super::server`]).
pub type Direct = fn(
    AppState,
    &'static Endpoint,
    PathValues,
    RequestId,
    Option<Arc<ConnControl>>,
    Request<Body>,
) -> Pin<Box<dyn Future<Output = Response> + Send>>;

/// A panic in a handler: a Stripe-shaped 500, and the server lives on.
pub fn panic_response() -> Response {
    ApiError::new(
        Status::InternalServerError,
        ErrorType::ApiError,
        "An unexpected error occurred in fauxpay; this is a bug, please report it.",
    )
    .into_response()
}

/// Around the whole router: gives every request a `Request-Id`, times it, counts it by
/// route (the route pattern, e.g. `/v1/payment_intents/{id}`) and logs it. One plain
/// service rather than per-route middleware; a directly served request's handler is
/// boxed once, as the router's route boxes it.
#[derive(Clone)]
pub struct Observe<S> {
    inner: S,
    app: AppState,
    /// Route patterns, to label requests (and dispatch `/v1` ones) as the router would
    /// match them.
    routes: Arc<matchit::Router<Route>>,
    direct: Direct,
    /// The connection's control, when [`super::server`] serves it
    /// ([`ConnectionService::for_connection`]): handed to a directly served request's
    /// handler, and put in a routed request's extensions.
    connection: Option<Arc<ConnControl>>,
}

impl<S> Observe<S> {
    /// Wraps `inner`; `routes` are the route patterns it serves, and `direct` the handler
    /// of their endpoints.
    pub fn new(inner: S, app: AppState, routes: matchit::Router<Route>, direct: Direct) -> Self {
        Self {
            inner,
            app,
            routes: Arc::new(routes),
            direct,
            connection: None,
        }
    }
}

impl<S> ConnectionService for Observe<S>
where
    Observe<S>: Service<Request<Incoming>, Response = Response, Error = Infallible> + Clone + Send + 'static,
{
    fn for_connection(&self, control: &Arc<ConnControl>) -> Self {
        let mut service = self.clone();
        service.connection = Some(control.clone());
        service
    }
}

/// The endpoint `req` names and its path's ids, when it can be served directly: the
/// router would match it to that endpoint, and its ids need no percent-decoding.
fn direct_endpoint(
    matched: &matchit::Match<'_, '_, &Route>,
    method: &Method,
) -> Option<(&'static Endpoint, PathValues)> {
    let endpoint = matched.value.endpoint(method)?;
    let mut values = matched.params.iter().map(|(_, v)| v);
    let (id, sub) = (values.next().unwrap_or(""), values.next().unwrap_or(""));
    if id.contains('%') || sub.contains('%') {
        return None;
    }
    Some((
        endpoint,
        PathValues {
            id: id.to_string(),
            sub: sub.to_string(),
        },
    ))
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
    /// The API (`/v1`): its answers carry CORS headers.
    cors: bool,
}

impl<S, B> Service<Request<B>> for Observe<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
    B: axum::body::HttpBody<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ObserveFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let request_id = RequestId::generate();
        let matched = self.routes.at(req.uri().path()).ok();
        let route = matched.as_ref().map_or("unmatched", |m| m.value.label);
        let direct = matched.and_then(|m| direct_endpoint(&m, req.method()));
        // Only a browser's cross-origin call carries `Origin` and needs the headers: the
        // SDKs' calls pay nothing for them (two header inserts and a map growth cost
        // ~1,300 instructions a request, bench/callgrind.sh replay).
        let cors = route.starts_with("/v1/") && req.headers().contains_key(axum::http::header::ORIGIN);
        let observed = Observed {
            app: self.app.clone(),
            started: Instant::now(),
            request_id,
            route,
            method: req.method().clone(),
            path: tracing::enabled!(tracing::Level::DEBUG).then(|| req.uri().path().to_string()),
            cors,
        };
        // DNS rebinding: a name fauxpay does not answer to (when it listens on loopback)
        // is refused before any route sees the request.
        let (inner, early) = match super::guard::host_allowed(&self.app.config.allowed_hosts, req.headers()) {
            false => (None, Some(Early::Misdirected)),
            // A browser asks before a cross-origin call with an Authorization header.
            true if cors && req.method() == Method::OPTIONS => (None, Some(Early::Preflight)),
            true => match std::panic::catch_unwind(AssertUnwindSafe(|| match direct {
                Some((endpoint, ids)) => Inner::Direct {
                    future: (self.direct)(
                        self.app.clone(),
                        endpoint,
                        ids,
                        request_id,
                        self.connection.clone(),
                        req.map(Body::new),
                    ),
                },
                None => {
                    // The router's handlers read the id and the connection from the request.
                    req.extensions_mut().insert(request_id);
                    if let Some(control) = &self.connection {
                        req.extensions_mut().insert(control.clone());
                    }
                    Inner::Router {
                        future: self.inner.call(req),
                    }
                }
            })) {
                Ok(inner) => (Some(inner), None),
                // The router itself panicked.
                Err(_) => (None, Some(Early::Panicked)),
            },
        };
        ObserveFuture {
            inner,
            early,
            observed: Some(observed),
        }
    }
}

/// A request whose `Host` fauxpay does not answer to.
fn misdirected() -> Response {
    ApiError::new(
        Status::Forbidden,
        ErrorType::InvalidRequestError,
        "fauxpay does not answer to this Host: listening on loopback, it answers localhost, 127.0.0.1 and [::1] (and the names given with --allowed-host), so that a web page cannot reach it through DNS rebinding.",
    )
    .into_response()
}

/// An answer given without running the route.
#[derive(Clone, Copy)]
enum Early {
    Misdirected,
    Panicked,
    /// A CORS preflight of an API route.
    Preflight,
}

/// The answer to a CORS preflight of an API route: any origin, the methods and headers
/// Stripe's clients send, no credentials (the key travels in `Authorization`).
fn preflight() -> Response {
    let mut resp = axum::http::StatusCode::NO_CONTENT.into_response();
    let h = resp.headers_mut();
    h.insert(
        axum::http::header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE"),
    );
    h.insert(
        axum::http::header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "Authorization, Content-Type, Idempotency-Key, Stripe-Version, Stripe-Account, Fauxpay-Fault",
        ),
    );
    h.insert(
        axum::http::header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    resp
}

pin_project_lite::pin_project! {
    /// The request's handling: the router's, or an endpoint's called directly.
    #[project = InnerProj]
    enum Inner<F> {
        Router { #[pin] future: F },
        Direct { future: Pin<Box<dyn Future<Output = Response> + Send>> },
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Inner<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            InnerProj::Router { future } => future.poll(cx),
            InnerProj::Direct { future } => future.as_mut().poll(cx).map(Ok),
        }
    }
}

pin_project_lite::pin_project! {
    pub struct ObserveFuture<F> {
        #[pin]
        inner: Option<Inner<F>>,
        early: Option<Early>,
        observed: Option<Observed>,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for ObserveFuture<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut resp = match this.inner.as_pin_mut() {
            Some(inner) => match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
                Ok(Poll::Pending) => return Poll::Pending,
                Ok(Poll::Ready(Ok(resp))) => resp,
                // A handler panicked: answered, and counted like any other request.
                Err(_) => panic_response(),
            },
            None => match this.early {
                Some(Early::Misdirected) => misdirected(),
                Some(Early::Preflight) => preflight(),
                _ => panic_response(),
            },
        };
        if let Some(o) = this.observed.take() {
            if o.cors {
                let h = resp.headers_mut();
                h.insert(
                    axum::http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
                    HeaderValue::from_static("*"),
                );
                h.insert(
                    axum::http::header::ACCESS_CONTROL_EXPOSE_HEADERS,
                    HeaderValue::from_static(
                        "Request-Id, Idempotency-Key, Idempotent-Replayed, Original-Request, Stripe-Should-Retry, Retry-After",
                    ),
                );
            }
            if let Ok(v) = HeaderValue::from_str(&o.request_id.as_str()) {
                resp.headers_mut().insert(headers::REQUEST_ID.clone(), v);
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

#[cfg(test)]
mod tests {
    use axum::routing::get;
    use axum::Router;

    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_is_a_stripe_500_counted_and_given_a_request_id() {
        let app = Provider::new(crate::config::Config::default());
        let router: Router = Router::new().route("/boom", get(|| async { panic!("a bug") as &'static str }));
        let mut routes = matchit::Router::new();
        routes.insert("/boom", Route::label("/boom")).unwrap();
        let mut observe = Observe::new(router, app.clone(), routes, |_, _, _, _, _, _| {
            Box::pin(async { unreachable!("no endpoint is routed") })
        });
        let req = Request::builder().uri("/boom").body(axum::body::Body::empty()).unwrap();
        let resp = observe.call(req).await.unwrap();
        assert_eq!(resp.status(), 500);
        assert!(resp.headers().contains_key(headers::REQUEST_ID.clone()));
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["type"], "api_error");
        let metrics = app.metrics.render(&app.payments.ledger, &[]);
        assert!(
            metrics.contains("/boom"),
            "the panicking request was counted:\n{metrics}"
        );
    }
}
