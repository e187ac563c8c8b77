//! The route table: Stripe's `/v1` endpoints, as each resource declares them, and the
//! admin API, in one axum router wrapped once in [`Observe`].
//!
//! Every `/v1` endpoint has the same thin handler: authenticate (`Authenticated`, so a
//! request without a valid key gets its 401 before anything else is looked at), extract
//! the request ([`LaneRequest`]: a byte-identical retry's body may come from the replay
//! lane unparsed), run the pipeline, carry out its delivery. [`Observe`] calls it
//! directly ([`direct`]) for the GET, POST and DELETE requests it matches to an endpoint;
//! the router's route serves the rest (HEAD, a percent-encoded id). Adding a resource is
//! one line in [`RESOURCES`](crate::resources::RESOURCES).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequestParts, RawPathParams, State};
use axum::http::Request;
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;

use super::extract::{ApiRequest, Authenticated, LaneRequest};
use super::observe::{Observe, PathValues, Route};
use super::response::deliver;
use super::server::ConnControl;
use super::{admin, checkout, dashboard, stripe_js, three_ds};
use crate::app::Provider;
use crate::error::{ApiError, ErrorType, Status};
use crate::pipeline;
use crate::resources::endpoint::{Endpoint, PathIds, Publishable, Verb};
use crate::resources::endpoints;
use crate::stripe::ids::RequestId;

type AppState = Arc<Provider>;

/// The whole provider (`/v1`, `/__fauxpay/`, `/metrics`): the router, wrapped once (not
/// per route) in [`Observe`].
pub fn router(provider: AppState) -> Observe<Router> {
    let mut api = Router::new();
    let mut routes: Vec<Route> = Vec::new();
    let v1 = endpoints().map(|e| (e.path, handler(e)));
    for (path, route) in v1
        .chain(admin::routes(provider.clone()))
        .chain(dashboard::routes(provider.clone()))
        .chain(three_ds::routes())
        .chain(checkout::routes())
        .chain(stripe_js::routes())
    {
        // Several endpoints share a path (GET and POST /v1/charges): one route.
        if !routes.iter().any(|r| r.label == path) {
            routes.push(Route::label(path));
        }
        api = api.route(path, route);
    }
    for endpoint in endpoints() {
        if let Some(route) = routes.iter_mut().find(|r| r.label == endpoint.path) {
            route.endpoints[endpoint.verb.index()] = Some(endpoint);
        }
    }
    let mut table = matchit::Router::new();
    for route in routes {
        // The router above refused any pattern matchit would not take.
        let _ = table.insert(route.label, route);
    }
    let api = api
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(provider.clone());
    Observe::new(api, provider, table, direct)
}

/// An endpoint's handler for a request [`Observe`] matched to it: the extractors the
/// router's route runs, in its order (the key first, then the request).
fn direct(
    app: AppState,
    endpoint: &'static Endpoint,
    ids: PathValues,
    request_id: RequestId,
    connection: Option<Arc<ConnControl>>,
    req: Request<Body>,
) -> Pin<Box<dyn Future<Output = Response> + Send>> {
    Box::pin(async move {
        let (mut parts, body) = req.into_parts();
        let auth = match Authenticated::from_request_parts(&mut parts, &app).await {
            Ok(auth) => auth,
            Err(refused) => return refused.into_response(),
        };
        match LaneRequest::with_id(Request::from_parts(parts, body), &app, request_id, connection).await {
            Ok(LaneRequest(req)) => {
                serve(
                    &app,
                    endpoint,
                    auth,
                    PathIds {
                        id: &ids.id,
                        sub: &ids.sub,
                    },
                    req,
                )
                .await
            }
            Err(refused) => refused.into_response(),
        }
    })
}

/// The handler of one endpoint.
fn handler(endpoint: &'static Endpoint) -> MethodRouter<AppState> {
    let filter = match endpoint.verb {
        Verb::Get => MethodFilter::GET,
        Verb::Post => MethodFilter::POST,
        Verb::Delete => MethodFilter::DELETE,
    };
    on(
        filter,
        move |State(app): State<AppState>, auth: Authenticated, path: RawPathParams, req: LaneRequest| async move {
            let mut values = path.iter().map(|(_, v)| v);
            let ids = PathIds {
                id: values.next().unwrap_or(""),
                sub: values.next().unwrap_or(""),
            };
            serve(&app, endpoint, auth, ids, req.0).await
        },
    )
}

/// Serves an authenticated, extracted request to `endpoint`: refuses a publishable key
/// where the endpoint does, runs the pipeline, carries out its delivery.
async fn serve(
    app: &AppState,
    endpoint: &'static Endpoint,
    auth: Authenticated,
    ids: PathIds<'_>,
    mut req: ApiRequest,
) -> Response {
    if endpoint.publishable == Publishable::Refused && auth.0.as_str().starts_with("pk_") {
        return ApiError::new(
            Status::Forbidden,
            ErrorType::InvalidRequestError,
            "This API call cannot be made with a publishable API key. Please use a secret API key. You can find a list of your API keys at https://dashboard.stripe.com/account/apikeys.",
        )
        .into_response();
    }
    req.request.api_key = auth.0;
    let delivery = pipeline::run_body(app, req.request, req.body, endpoint, ids).await;
    deliver(delivery, req.key_header.as_ref(), req.connection).await
}

/// `payment_intents, charges, …, events and webhook_endpoints`: every resource served.
fn served_resources() -> &'static str {
    static LIST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LIST.get_or_init(|| match crate::resources::names().split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    })
}

async fn not_found(req: Request<Body>) -> Response {
    ApiError::new(
        Status::NotFound,
        ErrorType::InvalidRequestError,
        format!(
            "Unrecognized request URL ({}: {}). fauxpay implements {} under /v1.",
            req.method(),
            req.uri().path(),
            served_resources()
        ),
    )
    .into_response()
}

async fn method_not_allowed(req: Request<Body>) -> Response {
    ApiError::new(
        Status::MethodNotAllowed,
        ErrorType::InvalidRequestError,
        format!("Method {} is not allowed on {}.", req.method(), req.uri().path()),
    )
    .into_response()
}
