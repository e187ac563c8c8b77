//! 3-D Secure at the edge: `GET /__fauxpay/3ds/{id}`, the page that stands in for the
//! card issuer's (HTML from [`page`](crate::resources::three_ds::page), served with a
//! content security policy that allows no script and no external asset), and
//! (`?frame=1` when a script shows it in a frame: its buttons then answer JSON rather than
//! redirect the frame), and
//! `POST /__fauxpay/{payment_intents|setup_intents}/{id}/authenticate`, which runs
//! through the request pipeline like a `/v1` endpoint (faults, idempotency keys and the
//! request log apply) and answers JSON, or, for the page's own form (`redirect=true`), a
//! `303` to the intent's `return_url` with Stripe's query parameters, or a result page.
//!
//! These routes need no key and ignore `--admin-token`: a customer's browser follows
//! them, as it follows the issuer's page at Stripe. An API key, when sent, scopes the
//! idempotency keys as on `/v1`.

use std::sync::Arc;

use axum::extract::{RawPathParams, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use serde_json::Value;

use super::extract::{api_key, ApiRequest};
use super::response::deliver;
use crate::app::Provider;
use crate::pipeline::{self, Answer, Delivery};
use crate::resources::endpoint::{Endpoint, PathIds};
use crate::resources::three_ds::action::PAGE_PATH;
use crate::resources::three_ds::page;
use crate::resources::three_ds::routes::ENDPOINTS;
use crate::stripe::ids::ApiKey;

type AppState = Arc<Provider>;

/// The page's route and the authenticate endpoints.
pub fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    debug_assert_eq!(PAGE_PATH, "/__fauxpay/3ds/");
    let mut routes = vec![("/__fauxpay/3ds/{id}", get(show))];
    routes.extend(ENDPOINTS.iter().map(|e| (e.path, authenticate(e))));
    routes
}

/// An HTML response: no scripts, no external assets, not cached.
pub(super) fn html(status: StatusCode, body: String) -> Response {
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'"),
    );
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    resp
}

fn path_id(path: &RawPathParams) -> String {
    path.iter().next().map_or("", |(_, v)| v).to_owned()
}

async fn show(State(app): State<AppState>, path: RawPathParams, RawQuery(query): RawQuery) -> Response {
    let id = path_id(&path);
    let in_frame = query
        .as_deref()
        .is_some_and(|q| form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "frame" && v == "1"));
    match app.payments.three_ds_page(&id) {
        Some(p) => html(StatusCode::OK, page::render(&page::Page { in_frame, ..p })),
        None => html(StatusCode::NOT_FOUND, page::not_found(&id)),
    }
}

fn authenticate(endpoint: &'static Endpoint) -> MethodRouter<AppState> {
    post(
        move |State(app): State<AppState>, headers: HeaderMap, path: RawPathParams, mut req: ApiRequest| async move {
            req.request.api_key =
                api_key(headers.get(header::AUTHORIZATION), &app.config).unwrap_or_else(|_| ApiKey::none());
            let id = path_id(&path);
            let from_page = req.request.params.opt_bool("redirect").ok().flatten() == Some(true);
            // Read before the authentication clears the intent's next action.
            let back = from_page.then(|| app.payments.pending_return_url(&id)).flatten();
            match pipeline::run(&app, req.request, endpoint, PathIds { id: &id, sub: "" }).await {
                Delivery::Send(answer) if from_page => after_page(&app, &id, back, &answer),
                delivery => deliver(delivery, req.key_header.as_ref(), req.connection).await,
            }
        },
    )
}

/// What the page's form gets back: the customer is sent to the `return_url` once the
/// authentication was recorded (whether the payment then succeeded or was declined),
/// else shown what happened.
fn after_page(app: &Provider, id: &str, back: Option<String>, answer: &Answer) -> Response {
    if matches!(answer.status, 200 | 402) {
        if let Some(url) = back {
            let target = app.payments.return_after_authentication(id, &url);
            if let Ok(location) = HeaderValue::from_str(&target) {
                let mut resp = StatusCode::SEE_OTHER.into_response();
                resp.headers_mut().insert(header::LOCATION, location);
                resp.headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                return resp;
            }
        }
    }
    let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    let message = match (&body["status"], &body["error"]["message"]) {
        (Value::String(status), _) => format!("Authentication recorded. Status: {status}."),
        (_, Value::String(error)) => error.clone(),
        _ => "The authentication could not be recorded.".to_string(),
    };
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    html(status, page::result(id, &message))
}
