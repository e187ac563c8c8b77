//! Checkout at the edge: `GET /__fauxpay/checkout/{id}`, the hosted page (HTML from
//! [`page`](crate::resources::checkout_sessions::page), served with the 3-D Secure page's
//! content security policy: no script, no external asset), and
//! `POST /__fauxpay/checkout/sessions/{id}/pay`, the customer's pay, which runs through
//! the request pipeline like a `/v1` endpoint (faults, idempotency keys and the request
//! log apply) and answers JSON, or, for the page's own form (`redirect=true`), a `303` to
//! where the customer goes next: the `success_url` once paid, the 3-D Secure page when
//! the card asks for it, or the page again with the decline shown.
//!
//! These routes need no key and ignore `--admin-token`: a customer's browser follows
//! them, as it follows Stripe's hosted page. An API key, when sent, scopes the
//! idempotency keys as on `/v1`.

use std::sync::Arc;

use axum::extract::{RawPathParams, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use serde_json::Value;

use super::extract::{api_key, ApiRequest};
use super::response::deliver;
use super::three_ds::html;
use crate::app::Provider;
use crate::pipeline::{self, Answer, Delivery};
use crate::resources::checkout_sessions::object::{SessionStatus, PAGE_PATH};
use crate::resources::checkout_sessions::page;
use crate::resources::checkout_sessions::routes::PAY;
use crate::resources::endpoint::PathIds;
use crate::stripe::ids::ApiKey;

type AppState = Arc<Provider>;

/// The page's route and the pay endpoint.
pub fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    debug_assert_eq!(PAGE_PATH, "/__fauxpay/checkout/");
    vec![("/__fauxpay/checkout/{id}", get(show)), (PAY.path, post(pay))]
}

fn path_id(path: &RawPathParams) -> String {
    path.iter().next().map_or("", |(_, v)| v).to_owned()
}

fn see_other(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(location) => {
            let mut resp = StatusCode::SEE_OTHER.into_response();
            resp.headers_mut().insert(header::LOCATION, location);
            resp.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            resp
        }
        Err(_) => html(StatusCode::OK, page::not_found("(a URL that cannot be redirected to)")),
    }
}

/// The page. Back from the 3-D Secure page (`redirect_status` in the query) with the
/// session paid, the customer goes on to the `success_url`.
async fn show(State(app): State<AppState>, path: RawPathParams, RawQuery(query): RawQuery) -> Response {
    let id = path_id(&path);
    let Some(session) = app.payments.checkout_session(&id) else {
        return html(StatusCode::NOT_FOUND, page::not_found(&id));
    };
    let returning = query
        .as_deref()
        .is_some_and(|q| form_urlencoded::parse(q.as_bytes()).any(|(k, _)| k == "redirect_status"));
    if returning && session.status == SessionStatus::Complete {
        if let Some(url) = session.success_url() {
            return see_other(&url);
        }
    }
    let error = returning
        .then(|| {
            session
                .payment_intent
                .and_then(|pi| app.payments.intents.get(&pi))
                .and_then(|pi| pi.last_payment_error().map(|e| e.message.to_string()))
        })
        .flatten();
    html(StatusCode::OK, page::render(&session, error.as_deref()))
}

async fn pay(State(app): State<AppState>, headers: HeaderMap, path: RawPathParams, mut req: ApiRequest) -> Response {
    req.request.api_key = api_key(headers.get(header::AUTHORIZATION), &app.config).unwrap_or_else(|_| ApiKey::none());
    let id = path_id(&path);
    let from_page = req.request.params.opt_bool("redirect").ok().flatten() == Some(true);
    match pipeline::run(&app, req.request, &PAY, PathIds { id: &id, sub: "" }).await {
        Delivery::Send(answer) if from_page => after_page(&app, &id, &answer),
        delivery => deliver(delivery, req.key_header.as_ref(), req.connection).await,
    }
}

/// Where the page's form sends the customer: on to the `success_url` once paid, to the
/// 3-D Secure page when the card asks for it, else the page again with what went wrong.
fn after_page(app: &Provider, id: &str, answer: &Answer) -> Response {
    let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    if answer.status == 200 {
        if body["status"] == "complete" {
            if let Some(url) = app.payments.checkout_session(id).and_then(|s| s.success_url()) {
                return see_other(&url);
            }
        }
        let intent = if body["payment_intent"].is_object() {
            &body["payment_intent"]
        } else {
            &body["setup_intent"]
        };
        if let Some(url) = intent["next_action"]["redirect_to_url"]["url"].as_str() {
            return see_other(url);
        }
    }
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or("The payment could not be made.")
        .to_string();
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match app.payments.checkout_session(id) {
        Some(session) => html(status, page::render(&session, Some(&message))),
        None => html(StatusCode::NOT_FOUND, page::not_found(id)),
    }
}
